// What only a GPU can show of the first-run fixes (skipped without one;
// scripts/gpu-check runs them on its GPU): a failed CUDA-graph capture
// leaves the caching allocator usable and CUDA's random numbers out of
// capture mode, on-device augmentation queues its
// parameters without synchronizing, and a run's speed and phases come from
// CUDA events for every step.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/cuda.h>

#include "hotloop/cuda/cuda_graph.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/device_augment.h"
#include "hotloop/train/callbacks/telemetry_callback.h"
#include "hotloop/train/trainer.h"
#include "support/host_syncs.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop {
namespace {

#define SKIP_WITHOUT_A_GPU()               \
  if (!torch::cuda::is_available()) {      \
    GTEST_SKIP() << "no CUDA device here"; \
  }

const auto kCuda = at::TensorOptions().device(at::kCUDA);

// Before: capture_end() threw at cudaStreamEndCapture before ending the
// allocation to the pool, so the allocator stayed in capture mode: blocks
// freed with stream uses were parked for good (here 64 x 16 MiB) and
// emptyCache() failed its assertion that no capture was underway.
TEST(CudaOnAGpu, AFailedCaptureLeavesTheAllocatorUsable) {
  SKIP_WITHOUT_A_GPU();
  const cuda::StreamScope scope(0);
  const at::Tensor x = at::randn({1024}, kCuda);
  {
    cuda::Graph g(0);
    EXPECT_ANY_THROW(g.capture([&] {
      const at::Tensor y = x * 2;
      (void)y.sum().item<float>(); // a host read: cannot be captured
    }));
  }
  EXPECT_NO_THROW(cuda::empty_cache());
  const std::uint64_t before = cuda::memory_stats(0).reserved;
  {
    // Tensors made on a side stream and used on this one, as the loader's
    // batches are: each freed block waits for an event, then is reused.
    const cuda::StreamScope side(0);
    for (int i = 0; i < 64; ++i) {
      at::Tensor t = at::ones({4 << 20}, kCuda); // 16 MiB
      t.record_stream(c10::Stream(
          c10::Stream::DEFAULT, c10::Device(c10::kCUDA, 0))); // another use
    }
  }
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_stats(0).reserved, before + (64ULL << 20))
      << "freed blocks stayed parked after the failed capture";
  // And a graph captured afterwards replays correctly.
  const at::Tensor out = at::zeros({1024}, kCuda);
  cuda::Graph ok(0);
  ok.capture([&] { out.copy_(x * 3); });
  ok.replay();
  EXPECT_TRUE(out.equal(x * 3));
}

// Before: capture_begin() set the default generator's state to capturing
// and only a successful capture_end() cleared it, so after a failed capture
// every eager dropout threw "Offset increment outside graph capture
// encountered unexpectedly" and the eager fallback of any model with dropout
// died at its first step.
TEST(CudaOnAGpu, AFailedCaptureLeavesDropoutWorking) {
  SKIP_WITHOUT_A_GPU();
  const cuda::StreamScope scope(0);
  const at::Tensor x = at::ones({4096}, kCuda);
  {
    cuda::Graph g(0);
    EXPECT_ANY_THROW(g.capture([&] {
      const at::Tensor y = at::dropout(x, 0.5, /*train=*/true);
      (void)y.sum().item<float>(); // a host read: cannot be captured
    }));
  }
  at::Tensor y;
  ASSERT_NO_THROW(y = at::dropout(x, 0.5, /*train=*/true));
  // About half kept, each scaled by 2: the generator draws again.
  const double kept = y.ne(0).sum().item<double>() / 4096.0;
  EXPECT_GT(kept, 0.4);
  EXPECT_LT(kept, 0.6);
  EXPECT_NE(at::dropout(x, 0.5, true).ne(y).sum().item<std::int64_t>(), 0)
      << "two eager dropouts drew the same mask: the offset did not advance";
}

// Before: the parameters were copied from pageable memory, which makes the
// host wait for the stream every batch.
TEST(CudaOnAGpu, DeviceAugmentationQueuesWithoutSynchronizing) {
  SKIP_WITHOUT_A_GPU();
  const at::Tensor small = at::randn({64, 1, 28, 28}, kCuda);
  const at::Tensor photos = at::randn({16, 3, 73, 73}, kCuda);
  std::vector<std::uint64_t> seeds(64);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    seeds[i] = 1000 + i;
  }
  data::AugmentSpec s;
  s.mode = data::AugmentSpec::Mode::Train;
  s.small_images = true;
  s.out_h = s.out_w = 28;
  data::AugmentSpec p = s;
  p.small_images = false;
  p.out_h = p.out_w = 64;
  const at::Tensor zero = at::zeros({1, 1, 1, 1}, kCuda);
  (void)data::augment_batch(small, seeds, s, zero); // warm-up: allocations
  test::HostSyncCounter counter(small.device());
  const at::Tensor a = data::augment_batch(small, seeds, s, zero);
  const at::Tensor b =
      data::augment_batch(photos, {seeds.begin(), seeds.begin() + 16}, p, zero);
  EXPECT_EQ(counter.count(), 0)
      << (counter.what().empty() ? "" : counter.what().front());
  EXPECT_EQ(a.sizes(), small.sizes());
  EXPECT_EQ(b.size(2), 64);
}

// images/s and the step times from CUDA events on the training stream, and
// the phases of every step (before: only the previous step's, dropped when
// the GPU was behind).
TEST(CudaOnAGpu, ARunTimesEveryStepOnTheGpu) {
  SKIP_WITHOUT_A_GPU();
  test::TempDir dir;
  train::TrainerOptions o = test::small_options((dir.path() / "run").string());
  o.device = "cuda";
  o.model.name = "cnn-small";
  o.model.image.size = 28;
  o.precision = train::Precision::Bf16;
  o.batch = 256;
  o.steps = 60;
  train::TrainerContext ctx;
  ctx.callbacks.push_back(
      std::make_shared<train::TelemetryCallback>(train::TelemetryOptions{}));
  const train::TrainSummary s = train::Trainer(
                                    test::make(o),
                                    test::synthetic("synthetic:4096x1x28x28"),
                                    nullptr,
                                    o,
                                    ctx)
                                    .fit();
  EXPECT_EQ(s.step_clock, "cuda-events");
  EXPECT_GT(s.images_per_s, 0);
  EXPECT_GT(s.graph_replays, 0);
  EXPECT_EQ(s.callbacks["telemetry"].value("gpu_phases_steps", 0), 60)
      << s.callbacks["telemetry"].dump();
}

} // namespace
} // namespace hotloop
