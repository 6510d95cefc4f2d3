// What only a GPU can show of the first-run fixes (skipped without one;
// scripts/gpu-check runs them on its GPU): a failed CUDA-graph capture
// leaves the caching allocator usable and CUDA's random numbers out of
// capture mode, on-device augmentation queues its
// parameters without synchronizing, and a run's speed and phases come from
// CUDA events for every step; nvJPEG decodes what libjpeg decodes, whole and
// as a region, and the loader's GPU decode gives the threads' batch.
#include <gtest/gtest.h>

#include <iostream>

#include <ATen/TensorOperators.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/cuda.h>

#include "hotloop/cuda/cuda_graph.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/cuda/nvjpeg_decoder.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/device_augment.h"
#include "hotloop/data/gpu_decode.h"
#include "hotloop/data/sources/image_folder.h"
#include "hotloop/train/callbacks/telemetry_callback.h"
#include "hotloop/train/trainer.h"
#include "support/host_syncs.h"
#include "support/image_files.h"
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

// Issue 55: nvJPEG (the hardware backend on an H100/H200) against libjpeg on
// the same file: different IDCTs and chroma upsampling, so a level or so on
// average; a region is the whole decode's pixels there.
TEST(CudaOnAGpu, NvjpegDecodesWhatLibjpegDecodesWholeAndAsARegion) {
  SKIP_WITHOUT_A_GPU();
  const auto file =
      test::jpeg_file(test::textured_image(375, 500, 3, 7), 375, 500, 3);
  auto decoder = cuda::NvjpegDecoder::open(c10::Device(c10::kCUDA, 0), 3);
  std::cout << decoder->describe() << "\n";
  cuda::GpuJpeg whole;
  whole.data = file.data();
  whole.size = file.size();
  whole.width = 500;
  whole.height = 375;
  cuda::GpuJpeg region = whole;
  region.x = 96;
  region.y = 64;
  region.w = 200;
  region.h = 150;
  ASSERT_TRUE(decoder->supported(whole));
  const auto out = decoder->decode(std::vector<cuda::GpuJpeg>{whole, region});
  ASSERT_EQ(out.size(), 2U);
  const data::DecodedImage cpu = data::decode_image(file, "cpu.jpg");
  const at::Tensor ref = at::from_blob(
                             const_cast<std::uint8_t*>(cpu.pixels.data()),
                             {375, 500, 3},
                             at::kByte)
                             .to(at::kFloat);
  const at::Tensor w = out[0].pixels.cpu().to(at::kFloat);
  ASSERT_EQ(w.sizes(), ref.sizes());
  EXPECT_LE((w - ref).abs().mean().item<double>(), 1.5);
  const at::Tensor r = out[1].pixels.cpu().to(at::kFloat);
  const at::Tensor same = w.slice(0, out[1].y, out[1].y + r.size(0))
                              .slice(1, out[1].x, out[1].x + r.size(1));
  EXPECT_LE((r - same).abs().mean().item<double>(), 0.5);
}

// The loader with --decode-device gpu on a GPU: the threads' labels, their
// images within a few levels on average, every file through nvJPEG.
TEST(CudaOnAGpu, TheLoadersGpuDecodeGivesTheThreadsBatch) {
  SKIP_WITHOUT_A_GPU();
  test::TempDir dir;
  for (int i = 0; i < 16; ++i) {
    test::write_bytes(
        dir.path() / "train" / (i % 2 ? "b" : "a") /
            (std::to_string(i) + ".jpg"),
        test::jpeg_file(
            test::textured_image(375, 500, 3, 70 + i), 375, 500, 3));
  }
  const auto folder = std::make_shared<data::ImageFolder>(
      dir.path().string(), data::Split::Train);
  const auto batch = [&](bool gpu) {
    data::LoaderOptions o;
    o.batch_size = 16;
    o.workers = 2;
    o.shuffle = false;
    o.seed = 5;
    o.decode = data::Decode::Region;
    o.decode_on_device = gpu;
    o.device = c10::Device(c10::kCUDA, 0);
    data::Loader loader(folder, o);
    data::Batch b = *loader.next();
    if (gpu) {
      EXPECT_EQ(loader.stats().gpu_decoded, 16U) << loader.feed_reason();
    }
    return b;
  };
  const data::Batch threads = batch(false);
  const data::Batch gpu = batch(true);
  EXPECT_TRUE(threads.labels.equal(gpu.labels));
  const double level = 1.0 / 255 / 0.224;
  EXPECT_LE(
      (threads.images - gpu.images).abs().mean().item<double>(), 2.5 * level);
}

} // namespace
} // namespace hotloop
