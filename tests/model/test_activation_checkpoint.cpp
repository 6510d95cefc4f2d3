// Activation checkpointing gives the gradients of the plain backward.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/utils.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/precision.h"

namespace hotloop::model {
namespace {

// The gradient of every parameter after one forward/backward in `mode`.
std::vector<at::Tensor> gradients(
    Model& m,
    Checkpointing mode,
    const at::Tensor& x,
    const at::Tensor& y) {
  m.set_checkpointing(mode);
  m.zero_grad();
  at::cross_entropy_loss(m.forward(x), y).backward();
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) {
    out.push_back(p.grad().clone());
  }
  return out;
}

} // namespace

TEST(ActivationCheckpointing, StagesAllAndBlocksGiveThePlainGradients) {
  // BasicBlock (resnet18: every mode) and Bottleneck (resnet50: the mode
  // that calls the blocks one by one; small inputs, it is a big model).
  struct Case {
    const char* name;
    std::int64_t size;
    std::vector<Checkpointing> modes;
  };
  for (const Case& c :
       {Case{
            "resnet18-small",
            16,
            {Checkpointing::Stages, Checkpointing::All, Checkpointing::Blocks}},
        Case{"resnet50-small", 8, {Checkpointing::Blocks}}}) {
    const char* name = c.name;
    torch::manual_seed(0);
    const auto m = make_model(
        ModelOptions().set_name(name).set_in_channels(1).set_num_classes(10));
    const at::Tensor x = at::randn({2, 1, c.size, c.size});
    const at::Tensor y = at::randint(10, {2});
    const auto plain = gradients(*m, Checkpointing::None, x, y);
    for (const Checkpointing mode : c.modes) {
      const auto recomputed = gradients(*m, mode, x, y);
      ASSERT_EQ(recomputed.size(), plain.size());
      for (std::size_t i = 0; i < plain.size(); ++i) {
        // The recompute runs the same kernels on the same inputs (train-mode
        // BatchNorm normalizes with the batch's statistics, which the
        // running statistics do not affect): equal up to float32 summation
        // order.
        EXPECT_TRUE(at::allclose(recomputed[i], plain[i], 1e-5, 1e-7))
            << name << " " << to_string(mode) << " parameter " << i;
      }
    }
  }
}

// One thread that runs what it is given, in order: the backward pass on a
// thread of its own, as autograd's device thread runs it on CUDA.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    run({});
    thread_.join();
  }
  void run(std::function<void()> f) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = std::move(f);
    done_ = false;
    wake_.notify_all();
    wake_.wait(lock, [this] { return done_; });
  }

 private:
  void loop() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return !done_; });
      const bool last = !job_;
      if (!last) {
        job_();
      }
      done_ = true;
      wake_.notify_all();
      if (last) {
        return;
      }
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::function<void()> job_;
  bool done_ = true;
  std::thread thread_;
};

// The recompute under bf16 autocast is a region of its own: what it casts is
// dropped when it ends. Before, the casts of the weights it made stayed in
// autocast's cache, outside any region, so the next step's forward used the
// weights from before the optimizer's update. Each model trains 3 steps on
// its own (another model's region in between would clear the cache and hide
// it), backward on a thread of its own as on CUDA (autograd's device
// thread); the checkpointed model's gradients must be the plain model's at
// every step.
TEST(ActivationCheckpointing, ARecomputeLeavesNoStaleCastsForTheNextStep) {
  const at::Tensor x = at::randn({4, 1, 16, 16});
  const at::Tensor y = at::randint(10, {4});
  auto train = [&](Checkpointing mode) {
    torch::manual_seed(0);
    auto m = make_model(ModelOptions()
                            .set_name("resnet18-small")
                            .set_in_channels(1)
                            .set_num_classes(10));
    m->set_checkpointing(mode);
    Worker backward_thread;
    std::vector<std::vector<at::Tensor>> grads;
    for (int step = 0; step < 3; ++step) {
      m->zero_grad();
      at::Tensor logits;
      {
        const train::AutocastScope bf16(
            train::Precision::Bf16, c10::Device(c10::kCPU));
        logits = m->forward(x);
      }
      const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), y);
      backward_thread.run([&] { loss.backward(); });
      grads.emplace_back();
      at::NoGradGuard no_grad;
      for (auto& p : m->parameters()) {
        grads.back().push_back(p.grad().clone());
        p.sub_(p.grad() * 0.5); // a large update: stale casts show
      }
    }
    return grads;
  };
  const auto plain = train(Checkpointing::None);
  const auto recomputed = train(Checkpointing::Stages);
  for (std::size_t step = 0; step < plain.size(); ++step) {
    for (std::size_t i = 0; i < plain[step].size(); ++i) {
      // The same kernels on the same bf16 casts: equal up to summation
      // order in the recompute's backward.
      ASSERT_TRUE(at::allclose(recomputed[step][i], plain[step][i], 1e-5, 1e-7))
          << "step " << step << ", parameter " << i;
    }
  }
}

TEST(ActivationCheckpointing, ModelsWithoutStagesRefuseIt) {
  const auto m = make_model(ModelOptions().set_name("cnn-small"));
  EXPECT_NO_THROW(m->set_checkpointing(Checkpointing::None));
  EXPECT_THROW(m->set_checkpointing(Checkpointing::Stages), UsageError);
  EXPECT_EQ(parse_checkpointing("all"), Checkpointing::All);
  EXPECT_EQ(parse_checkpointing("blocks"), Checkpointing::Blocks);
  EXPECT_THROW(parse_checkpointing("some"), UsageError);
}

} // namespace hotloop::model
