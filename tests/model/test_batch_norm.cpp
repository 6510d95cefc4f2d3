// The synchronized BatchNorm2d on two ranks (threads, the real Gloo over
// loopback), each with half of a batch, against LibTorch's BatchNorm2d on
// the whole batch: the outputs, the input and parameter gradients and the
// running statistics agree (float32: 1e-5 relative, 1e-6 absolute).
#include <gtest/gtest.h>
#include <unistd.h>

#include <future>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sin.h>

#include "hotloop/model/batch_norm.h"
#include "hotloop/parallel/process_group.h"
#include "support/free_port.h"
#include "support/host_syncs.h"
#include "support/loopback_group.h"

namespace hotloop::model {
namespace {

struct Result {
  at::Tensor out;
  at::Tensor input_grad;
  at::Tensor weight_grad;
  at::Tensor bias_grad;
  at::Tensor running_mean;
  at::Tensor running_var;
};

// A loss that is not symmetric in the samples, so that every sample's
// gradient differs.
at::Tensor loss_of(const at::Tensor& out, const at::Tensor& weights) {
  return (out * weights).sum();
}

Result run(
    BatchNorm2d& bn,
    const at::Tensor& x,
    const at::Tensor& w,
    int steps) {
  Result r;
  for (int i = 0; i < steps; ++i) {
    bn->zero_grad();
    at::Tensor input = x.clone().requires_grad_();
    r.out = bn(input);
    loss_of(r.out, w).backward();
    r.input_grad = input.grad();
  }
  r.weight_grad = bn->weight.grad();
  r.bias_grad = bn->bias.grad();
  r.running_mean = bn->running_mean.clone();
  r.running_var = bn->running_var.clone();
  return r;
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  return at::allclose(a, b, 1e-5, 1e-6);
}

// The parameter gradients are sums over the batch of terms of either sign:
// two ranks add two partial sums, one rank one sum, so float32 rounding of
// terms of size ~10 (1e-6 relative) can leave an absolute difference near
// 1e-5 where the sum cancels to nearly 0 (a CI run under load saw it).
bool close_sums(const at::Tensor& a, const at::Tensor& b) {
  return at::allclose(a, b, 1e-5, 1e-4);
}

TEST(SyncBatchNorm, TwoRanksWithHalfTheBatchEachMatchOneRankWithAllOfIt) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({8, 3, 5, 5}) * 2 + 3; // mean far from 0
  const at::Tensor w =
      at::sin(at::arange(8 * 3 * 5 * 5).reshape({8, 3, 5, 5}).to(at::kFloat));
  BatchNorm2d whole(3);
  const Result ref = run(whole, x, w, 3);

  const int port = test::free_port();
  auto rank = [&](int r) {
    auto g = test::loopback_group(r, 2, port);
    BatchNorm2d bn(3);
    bn->set_sync(
        [g](at::Tensor& t) { g->allreduce_sum_(t, "sync batchnorm"); });
    Result res = run(bn, x.narrow(0, 4 * r, 4), w.narrow(0, 4 * r, 4), 3);
    // The parameter gradients are each rank's part: summed, they are the
    // whole batch's (the trainer all-reduces them).
    g->allreduce_sum_(res.weight_grad, "test");
    g->allreduce_sum_(res.bias_grad, "test");
    return res;
  };
  auto f0 = std::async(std::launch::async, rank, 0);
  auto f1 = std::async(std::launch::async, rank, 1);
  const Result r0 = f0.get();
  const Result r1 = f1.get();
  EXPECT_TRUE(close(at::cat({r0.out, r1.out}), ref.out));
  EXPECT_TRUE(close(at::cat({r0.input_grad, r1.input_grad}), ref.input_grad));
  EXPECT_TRUE(close_sums(r0.weight_grad, ref.weight_grad))
      << (r0.weight_grad - ref.weight_grad).abs().max().item<float>();
  EXPECT_TRUE(close_sums(r0.bias_grad, ref.bias_grad))
      << (r0.bias_grad - ref.bias_grad).abs().max().item<float>();
  for (const Result* r : {&r0, &r1}) {
    EXPECT_TRUE(close(r->running_mean, ref.running_mean));
    EXPECT_TRUE(close(r->running_var, ref.running_var))
        << r->running_var << ref.running_var;
  }
}

TEST(SyncBatchNorm, WithoutSyncOrInEvalItIsLibTorchsBatchNorm) {
  const at::Tensor x = at::randn({4, 3, 5, 5});
  BatchNorm2d a(3);
  torch::nn::BatchNorm2d b(3);
  EXPECT_TRUE(close(a(x), b(x)));
  a->set_sync([](at::Tensor&) { FAIL() << "no sync in eval"; });
  a->eval();
  b->eval();
  EXPECT_TRUE(close(a(x), b(x)));
}

// The synchronized forward and backward read nothing back to the host (on a
// GPU each read is a synchronization per layer per step): the count and the
// cumulative average's momentum stay on the device. With a one-rank "sum"
// it is LibTorch's BatchNorm, the running statistics included, with the
// default momentum and with momentum None (the cumulative average).
TEST(SyncBatchNorm, TheSynchronizedStepReadsNothingOnTheHost) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({4, 3, 5, 5}) * 2 + 1;
  for (const bool cumulative : {false, true}) {
    auto options = torch::nn::BatchNorm2dOptions(3);
    if (cumulative) {
      options.momentum(std::nullopt);
    }
    BatchNorm2d a(options);
    torch::nn::BatchNorm2d b(options);
    a->set_sync([](at::Tensor&) {}); // one rank: the sum is the value
    std::int64_t syncs = 0;
    for (int step = 0; step < 3; ++step) {
      const at::Tensor xs = x * (1.0 + 0.5 * step);
      at::Tensor out;
      {
        test::HostSyncCounter counter(x.device());
        out = a(xs);
        out.sum().backward();
        syncs += counter.count();
      }
      EXPECT_TRUE(close(out, b(xs))) << "step " << step;
    }
    EXPECT_EQ(syncs, 0) << (cumulative ? "momentum None" : "momentum 0.1");
    EXPECT_TRUE(close(a->running_mean, b->running_mean));
    EXPECT_TRUE(close(a->running_var, b->running_var))
        << a->running_var << b->running_var;
  }
}

} // namespace
} // namespace hotloop::model
