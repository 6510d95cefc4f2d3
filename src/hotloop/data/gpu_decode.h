#pragma once
// --decode-device gpu: the loader's JPEGs decoded on the GPU (nvJPEG,
// cuda/nvjpeg_decoder.h) instead of in the decode threads.
// - In a decode thread, take() reads a file's header, routes it
//   (gpu_decode_plan.h) and, for the GPU, draws its crop (the same draw the
//   CPU path makes) and keeps its bytes for the batch: no decode there.
// - On the consumer, after the batch's uint8 rows (the files the threads
//   decoded) reached the device, finish() decodes the kept files in batched
//   calls (only each crop's rectangle on the hardware backend), resizes each
//   crop to the output size on the device (antialiased bilinear, the box in
//   whole pixels), mirrors it as drawn, writes it into its row and normalizes
//   the batch. Files nvJPEG refuses at run time, and batches it fails, are
//   decoded on the CPU instead; a file bad there too is skipped (or fails the
//   run) as in the threads.
// HOTLOOP_FAKE_GPU_DECODE=1 is a seam, not a feature: on the CPU a libjpeg
// stand-in plays nvJPEG's part (the hardware backend's regions, and the
// run-time refusals of progressive files), so the whole path runs in tests
// and in the gpu-check rehearsal.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/cuda/nvjpeg_decoder.h"
#include "hotloop/cuda/transfer.h"
#include "hotloop/data/decode/crop_decode.h"
#include "hotloop/data/sources/encoded_images.h"

namespace hotloop::data {

// A file the GPU decodes into row `slot` of its batch.
struct GpuJob {
  std::int64_t slot = 0;
  EncodedSample sample;
  std::uint64_t seed = 0;
  JpegInfo info;
  CropBox box; // full-size pixels
  PixelRect region; // what the hardware backend decodes
};

// What the stage did, for LoaderStats.
struct GpuDecodeCounts {
  std::size_t gpu = 0; // files decoded by nvJPEG
  std::size_t cpu = 0; // files the threads kept (routed there)
  std::size_t fallback = 0; // files nvJPEG refused or failed, then the CPU's
};

class GpuDecodeStage {
 public:
  GpuDecodeStage(
      std::unique_ptr<cuda::NvjpegDecoder> decoder,
      SampleTransform transform,
      cuda::BatchFormat format,
      std::size_t max_batch);

  // In a decode thread: true when the GPU decodes `sample` (moved into a
  // job appended to `jobs`); false when the thread decodes it itself.
  // Thread-safe; DataError for a corrupt header, as the threads' decode.
  bool take(
      EncodedSample& sample,
      std::uint64_t seed,
      std::int64_t slot,
      std::vector<GpuJob>& jobs) const;

  // On the consumer: `images` (B, C, H, W) uint8 on the device with the
  // threads' rows written; the jobs' rows are written, rows whose file is
  // bad are dropped from images and labels (their messages appended to
  // `bad`; DataError instead with `fail_on_bad`), and the images come back
  // in the batch's format.
  void finish(
      std::vector<GpuJob>& jobs,
      at::Tensor& images,
      at::Tensor& labels,
      std::vector<std::string>& bad,
      bool fail_on_bad);

  const std::string& description() const {
    return description_;
  }
  GpuDecodeCounts counts() const;

 private:
  std::vector<const GpuJob*> decode_on_gpu(
      const std::vector<GpuJob>& jobs,
      at::Tensor& images);
  void place(const GpuJob& job, const cuda::GpuDecoded& d, at::Tensor& images)
      const;
  // The CPU's decode of `job` into its row; false (and the message in `bad`)
  // for a bad file.
  bool decode_on_cpu(
      const GpuJob& job,
      at::Tensor& images,
      std::vector<std::string>& bad,
      bool fail_on_bad) const;

  std::unique_ptr<cuda::NvjpegDecoder> decoder_;
  SampleTransform transform_;
  cuda::BatchFormat format_;
  std::size_t max_batch_;
  std::string description_;
  at::Tensor scale_, shift_;
  mutable std::atomic<std::size_t> routed_cpu_{0};
  std::size_t gpu_ = 0;
  std::size_t fallback_ = 0;
};

// HOTLOOP_FAKE_GPU_DECODE=1 (anything else but 0 or unset is a UsageError).
bool fake_gpu_decode();

// nvJPEG on `device`, or the libjpeg stand-in where fake_gpu_decode().
// `refuses`: the stand-in's run-time refusals (by default progressive files,
// which route_jpeg already keeps on the CPU); `regions`: whether it plays the
// hardware backend (regions) or the hybrid one (whole images).
std::unique_ptr<cuda::NvjpegDecoder> make_fake_nvjpeg(
    int channels,
    bool regions = true,
    std::function<bool(const cuda::GpuJpeg&)> refuses = {});
std::unique_ptr<cuda::NvjpegDecoder> open_gpu_decoder(
    c10::Device device,
    int channels);

} // namespace hotloop::data
