// hotloop's multi-tensor SGD and AdamW against LibTorch's own per-tensor
// torch::optim implementations of the same math.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/train/optimizer.h"

namespace hotloop::train {
namespace {

// Two copies of the same parameters, gradients set to the same random values
// each step.
struct Twin {
  std::vector<at::Tensor> ours, theirs;
  Twin() {
    torch::manual_seed(3);
    for (const auto& shape :
         {std::vector<std::int64_t>{4, 3}, {5}, {2, 2, 3}}) {
      const at::Tensor p = at::randn(shape);
      ours.push_back(p.clone().set_requires_grad(true));
      theirs.push_back(p.clone().set_requires_grad(true));
    }
  }
  void set_grads(int step) {
    torch::manual_seed(100 + step);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const at::Tensor g = at::randn(ours[i].sizes());
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
    }
  }
  bool close() const {
    for (std::size_t i = 0; i < ours.size(); ++i) {
      // float32, a few steps: the two orders of operations differ by rounding.
      if (!at::allclose(ours[i], theirs[i], 1e-5, 1e-6)) {
        return false;
      }
    }
    return true;
  }
};

} // namespace

TEST(Optimizer, SgdWithMomentumNesterovAndWeightDecayMatchesTorchOptim) {
  for (const bool nesterov : {false, true}) {
    Twin t;
    OptimizerOptions o;
    o.kind = OptimizerKind::Sgd;
    o.momentum = 0.9;
    o.nesterov = nesterov;
    o.weight_decay = 1e-2;
    Optimizer ours({{"all", t.ours, 1.0}}, o);
    torch::optim::SGD theirs(
        t.theirs,
        torch::optim::SGDOptions(0.05)
            .momentum(0.9)
            .nesterov(nesterov)
            .weight_decay(1e-2));
    for (int step = 0; step < 5; ++step) {
      t.set_grads(step);
      ours.step(0.05);
      theirs.step();
    }
    EXPECT_TRUE(t.close()) << "nesterov " << nesterov;
  }
}

TEST(Optimizer, AdamWMatchesTorchOptim) {
  Twin t;
  OptimizerOptions o;
  o.kind = OptimizerKind::AdamW;
  o.weight_decay = 0.05;
  Optimizer ours({{"all", t.ours, 1.0}}, o);
  torch::optim::AdamW theirs(
      t.theirs, torch::optim::AdamWOptions(1e-2).weight_decay(0.05));
  for (int step = 0; step < 5; ++step) {
    t.set_grads(step);
    ours.step(1e-2);
    theirs.step();
  }
  EXPECT_TRUE(t.close());
}

TEST(Optimizer, GroupScaleSetsEachGroupsLearningRate) {
  const at::Tensor a = at::zeros({2}).set_requires_grad(true);
  const at::Tensor b = at::zeros({2}).set_requires_grad(true);
  OptimizerOptions o;
  o.momentum = 0;
  Optimizer opt({{"backbone", {a}, 1.0}, {"head", {b}, 10.0}}, o);
  a.mutable_grad() = at::ones({2});
  b.mutable_grad() = at::ones({2});
  opt.step(0.1);
  EXPECT_FLOAT_EQ(a[0].item<float>(), -0.1f);
  EXPECT_FLOAT_EQ(b[0].item<float>(), -1.0f);
}

TEST(Optimizer, AGroupWithoutDecayIsNotDecayedEagerOrOnTheDevice) {
  for (const auto kind : {OptimizerKind::Sgd, OptimizerKind::AdamW}) {
    for (const bool on_device : {false, true}) {
      const at::Tensor a = at::ones({2}).set_requires_grad(true);
      const at::Tensor b = at::ones({2}).set_requires_grad(true);
      OptimizerOptions o;
      o.kind = kind;
      o.momentum = 0;
      o.weight_decay = 0.5;
      Optimizer opt({{"all", {a}, 1.0}, {"no_decay", {b}, 1.0, false}}, o);
      // Zero gradients: only weight decay moves a parameter.
      a.mutable_grad() = at::zeros({2});
      b.mutable_grad() = at::zeros({2});
      if (on_device) {
        opt.set_device_scalars(0.1);
        opt.step_on_device();
      } else {
        opt.step(0.1);
      }
      EXPECT_FLOAT_EQ(a[0].item<float>(), 0.95f) << on_device;
      EXPECT_FLOAT_EQ(b[0].item<float>(), 1.0f) << on_device;
    }
  }
}

TEST(Optimizer, StateRoundTripsAndResumesTheSameTrajectory) {
  Twin t;
  OptimizerOptions o;
  o.kind = OptimizerKind::AdamW;
  Optimizer first({{"all", t.ours, 1.0}}, o);
  t.set_grads(0);
  first.step(1e-2);
  const auto state = first.state();
  // A second optimizer over copies of the parameters, restored from the state.
  std::vector<at::Tensor> copies;
  for (const auto& p : t.ours) {
    copies.push_back(p.detach().clone().set_requires_grad(true));
  }
  Optimizer second({{"all", copies, 1.0}}, o);
  second.load_state(state);
  EXPECT_EQ(second.steps(), 1);
  t.set_grads(1);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    copies[i].mutable_grad() = t.ours[i].grad().clone();
  }
  first.step(1e-2);
  second.step(1e-2);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    EXPECT_TRUE(at::equal(copies[i], t.ours[i])) << i;
  }
  EXPECT_THROW(
      second.load_state({{"nope.0.exp_avg", at::zeros({1})}}), DataError);
}

// The form CUDA graphs capture (LR and step count read from device scalars)
// against the host-scalar form, over steps whose LR changes, for both
// optimizers and a group with its own LR scale.
TEST(Optimizer, TheDeviceScalarStepEqualsTheHostScalarStep) {
  for (const OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::AdamW}) {
    Twin t;
    OptimizerOptions o;
    o.kind = kind;
    o.momentum = 0.9;
    o.nesterov = kind == OptimizerKind::Sgd;
    o.weight_decay = 1e-2;
    Optimizer host(
        {{"backbone", {t.ours[0], t.ours[1]}, 1.0},
         {"head", {t.ours[2]}, 10.0}},
        o);
    Optimizer device(
        {{"backbone", {t.theirs[0], t.theirs[1]}, 1.0},
         {"head", {t.theirs[2]}, 10.0}},
        o);
    for (int step = 0; step < 6; ++step) {
      t.set_grads(step);
      const double lr = 0.01 * (1 + step);
      host.step(lr);
      device.set_device_scalars(lr);
      device.step_on_device();
      device.count_device_step();
    }
    EXPECT_EQ(device.steps(), host.steps());
    // float32 LR and bias-correction scalars vs double: ~1e-7 relative.
    EXPECT_TRUE(t.close()) << to_string(kind);
  }
}

TEST(Optimizer, TheDeviceScalarStepNeedsItsScalarsFirst) {
  Twin t;
  Optimizer o({{"all", t.ours, 1.0}}, OptimizerOptions{});
  t.set_grads(0);
  EXPECT_THROW(o.step_on_device(), Error);
}

// --offload optimizer: the update runs on host copies of the parameters,
// whose state lives there too; on the CPU it is the same arithmetic, so
// the parameters and state equal the optimizer's on the device bit for bit.
TEST(Optimizer, AnOffloadedUpdateIsTheSameUpdateWithItsStateOnTheHost) {
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
    torch::manual_seed(4);
    std::vector<at::Tensor> a = {at::randn({7, 5}), at::randn({3})};
    std::vector<at::Tensor> b = {a[0].clone(), a[1].clone()};
    OptimizerOptions o;
    o.kind = kind;
    o.weight_decay = 0.01;
    Optimizer plain({{"all", a, 1.0, true}}, o);
    Optimizer offloaded({{"all", b, 1.0, true}}, o);
    offloaded.offload_to_host();
    EXPECT_TRUE(offloaded.offloaded());
    // The update's parameters are copies, not the model's tensors.
    EXPECT_NE(
        offloaded.groups()[0].params[0].unsafeGetTensorImpl(),
        b[0].unsafeGetTensorImpl());
    for (int step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        const at::Tensor g = at::randn(a[i].sizes());
        a[i].mutable_grad() = g;
        b[i].mutable_grad() = g.clone();
      }
      plain.step(0.01);
      offloaded.step(0.01);
      plain.zero_grad();
      offloaded.zero_grad();
      EXPECT_FALSE(b[0].grad().defined());
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(at::equal(a[i], b[i])) << i; // written back each step
    }
    const auto sa = plain.state();
    const auto sb = offloaded.state();
    ASSERT_EQ(sa.size(), sb.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].first, sb[i].first);
      EXPECT_TRUE(at::equal(sa[i].second, sb[i].second)) << sa[i].first;
      EXPECT_EQ(sb[i].second.device(), at::Device(at::kCPU));
    }
  }
}

} // namespace hotloop::train
