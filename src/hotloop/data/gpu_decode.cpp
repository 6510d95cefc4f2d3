#include "hotloop/data/gpu_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <ATen/ops/_upsample_bilinear2d_aa.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>
#include <fmt/format.h>

#include "hotloop/data/gpu_decode_plan.h"

namespace hotloop::data {
namespace {

cuda::GpuJpeg as_gpu_jpeg(const GpuJob& job) {
  cuda::GpuJpeg g;
  g.data = job.sample.bytes.data();
  g.size = job.sample.bytes.size();
  g.width = job.info.width;
  g.height = job.info.height;
  g.x = job.region.x;
  g.y = job.region.y;
  g.w = job.region.w;
  g.h = job.region.h;
  return g;
}

// nvJPEG's part played by libjpeg on the CPU (fake_gpu_decode()): each
// file's rectangle (widened to the iMCU grid, as libjpeg crops) or whole
// image, as (h, w, channels) uint8 CPU tensors.
class FakeNvjpeg final : public cuda::NvjpegDecoder {
 public:
  FakeNvjpeg(
      int channels,
      bool regions,
      std::function<bool(const cuda::GpuJpeg&)> refuses)
      : channels_(channels), regions_(regions), refuses_(std::move(refuses)) {}

  bool decodes_regions() const override {
    return regions_;
  }
  std::string describe() const override {
    return fmt::format(
        "a libjpeg stand-in for nvJPEG's {} backend (HOTLOOP_FAKE_GPU_DECODE=1)",
        regions_ ? "hardware" : "hybrid");
  }
  bool supported(const cuda::GpuJpeg& image) override {
    return !refuses_ || !refuses_(image);
  }
  std::vector<cuda::GpuDecoded> decode(
      std::span<const cuda::GpuJpeg> images) override {
    std::vector<cuda::GpuDecoded> out;
    std::vector<std::uint8_t> buffer;
    for (const cuda::GpuJpeg& im : images) {
      try {
        const JpegRegion r = decode_jpeg_region(
            {im.data, im.size},
            "stand-in",
            [&](const JpegInfo&) {
              const bool roi = regions_ && im.w > 0;
              return JpegRegionRequest{
                  8,
                  roi ? PixelRect{im.x, im.y, im.w, im.h} : PixelRect{},
                  static_cast<int>(channels_)};
            },
            buffer,
            std::numeric_limits<std::int64_t>::max());
        const at::Tensor hwc =
            at::from_blob(
                const_cast<std::uint8_t*>(r.pixels),
                {r.rect.h, r.rect.w, channels_},
                {static_cast<std::int64_t>(r.row_bytes), channels_, 1},
                at::TensorOptions().dtype(at::kByte))
                .clone();
        out.push_back({hwc, r.rect.x, r.rect.y});
      } catch (const DataError& e) {
        // As nvJPEG fails a batch with one bad file in it.
        throw cuda::NvjpegError(e.what(), 3);
      }
    }
    return out;
  }

 private:
  std::int64_t channels_;
  bool regions_;
  std::function<bool(const cuda::GpuJpeg&)> refuses_;
};

// The rows of `images` and `labels` that `keep` marks (both as they are
// when it marks every row).
void keep_rows(
    const std::vector<bool>& keep,
    at::Tensor& images,
    at::Tensor& labels) {
  if (std::all_of(keep.begin(), keep.end(), [](bool k) { return k; })) {
    return;
  }
  std::vector<std::int64_t> rows;
  for (std::size_t row = 0; row < keep.size(); ++row) {
    if (keep[row]) {
      rows.push_back(static_cast<std::int64_t>(row));
    }
  }
  const at::Tensor index = at::tensor(rows, at::kLong);
  images = images.index_select(0, index.to(images.device()));
  labels = labels.index_select(0, index.to(labels.device()));
}

} // namespace

GpuDecodeStage::GpuDecodeStage(
    std::unique_ptr<cuda::NvjpegDecoder> decoder,
    SampleTransform transform,
    cuda::BatchFormat format,
    std::size_t max_batch)
    : decoder_(std::move(decoder)),
      transform_(std::move(transform)),
      format_(std::move(format)),
      max_batch_(std::max<std::size_t>(max_batch, 1)),
      description_(decoder_->describe()) {}

bool GpuDecodeStage::take(
    EncodedSample& sample,
    std::uint64_t seed,
    std::int64_t slot,
    std::vector<GpuJob>& jobs) const {
  if (sample.bytes.empty() ||
      sniff_image_format(sample.bytes) != ImageFormat::Jpeg) {
    ++routed_cpu_;
    return false;
  }
  const JpegInfo info =
      read_jpeg_info(sample.bytes, sample.name, transform_.decode.max_pixels);
  const auto box = photo_box(transform_.spec, seed, info.height, info.width);
  if (!box || !route_jpeg(info).gpu) {
    ++routed_cpu_;
    return false;
  }
  GpuJob job;
  job.slot = slot;
  job.seed = seed;
  job.info = info;
  job.box = *box;
  job.region =
      gpu_region(info, *box, {transform_.spec.out_h, transform_.spec.out_w});
  job.sample = std::move(sample);
  jobs.push_back(std::move(job));
  return true;
}

void GpuDecodeStage::finish(
    std::vector<GpuJob>& jobs,
    at::Tensor& images,
    at::Tensor& labels,
    std::vector<std::string>& bad,
    bool fail_on_bad) {
  const std::vector<const GpuJob*> on_cpu = decode_on_gpu(jobs, images);
  fallback_ += on_cpu.size();
  std::vector<bool> keep(static_cast<std::size_t>(images.size(0)), true);
  for (const GpuJob* job : on_cpu) {
    keep[static_cast<std::size_t>(job->slot)] =
        decode_on_cpu(*job, images, bad, fail_on_bad);
  }
  keep_rows(keep, images, labels);
  if (format_.normalize) {
    if (!scale_.defined() || scale_.device() != images.device()) {
      std::tie(scale_, shift_) =
          cuda::normalization(format_.mean, format_.std, images.device());
    }
    images = cuda::in_format(
        images.to(at::kFloat).mul_(scale_).sub_(shift_), format_);
  }
}

// The jobs nvJPEG takes, in batched calls, into their rows; returns the
// others: refused, or in a batch it failed.
std::vector<const GpuJob*> GpuDecodeStage::decode_on_gpu(
    const std::vector<GpuJob>& jobs,
    at::Tensor& images) {
  std::vector<const GpuJob*> on_gpu;
  std::vector<const GpuJob*> on_cpu;
  for (const GpuJob& job : jobs) {
    (decoder_->supported(as_gpu_jpeg(job)) ? on_gpu : on_cpu).push_back(&job);
  }
  for (const auto& [first, end] : gpu_batches(on_gpu.size(), max_batch_)) {
    std::vector<cuda::GpuJpeg> batch;
    for (std::size_t i = first; i < end; ++i) {
      batch.push_back(as_gpu_jpeg(*on_gpu[i]));
    }
    try {
      const std::vector<cuda::GpuDecoded> decoded = decoder_->decode(batch);
      for (std::size_t i = first; i < end; ++i) {
        place(*on_gpu[i], decoded[i - first], images);
      }
      gpu_ += end - first;
    } catch (const cuda::NvjpegError&) {
      on_cpu.insert(on_cpu.end(), on_gpu.begin() + first, on_gpu.begin() + end);
    }
  }
  return on_cpu;
}

// The crop, in whole pixels of what was decoded, resized on the device as
// the threads resize it (antialiased bilinear), mirrored as drawn.
void GpuDecodeStage::place(
    const GpuJob& job,
    const cuda::GpuDecoded& d,
    at::Tensor& images) const {
  const std::int64_t h = d.pixels.size(0);
  const std::int64_t w = d.pixels.size(1);
  const auto edge = [](double v, std::int64_t lo, std::int64_t hi) {
    return std::clamp(static_cast<std::int64_t>(std::lround(v)), lo, hi);
  };
  const std::int64_t x0 = edge(job.box.x0 - d.x, 0, w - 1);
  const std::int64_t y0 = edge(job.box.y0 - d.y, 0, h - 1);
  const std::int64_t x1 = edge(job.box.x0 + job.box.w - d.x, x0 + 1, w);
  const std::int64_t y1 = edge(job.box.y0 + job.box.h - d.y, y0 + 1, h);
  const at::Tensor crop = d.pixels.slice(0, y0, y1)
                              .slice(1, x0, x1)
                              .permute({2, 0, 1})
                              .unsqueeze(0)
                              .to(at::kFloat);
  at::Tensor out = at::_upsample_bilinear2d_aa(
      crop, {transform_.spec.out_h, transform_.spec.out_w}, false);
  if (job.box.flip) {
    out = out.flip({3});
  }
  images.select(0, job.slot).copy_(out.squeeze(0).round_().clamp_(0, 255));
}

bool GpuDecodeStage::decode_on_cpu(
    const GpuJob& job,
    at::Tensor& images,
    std::vector<std::string>& bad,
    bool fail_on_bad) const {
  const at::Tensor row = images.select(0, job.slot);
  at::Tensor host = at::empty(row.sizes(), at::TensorOptions(at::kByte));
  try {
    decode_augment_into(
        job.sample.bytes,
        job.sample.name,
        transform_,
        job.seed,
        host.data_ptr<std::uint8_t>());
  } catch (const DataError& e) {
    if (fail_on_bad) {
      throw;
    }
    bad.emplace_back(e.what());
    return false;
  }
  row.copy_(host);
  return true;
}

GpuDecodeCounts GpuDecodeStage::counts() const {
  return {gpu_, routed_cpu_.load(), fallback_};
}

bool fake_gpu_decode() {
  const char* v = std::getenv("HOTLOOP_FAKE_GPU_DECODE");
  const std::string s = v != nullptr ? v : "";
  if (s.empty() || s == "0") {
    return false;
  }
  if (s != "1") {
    throw UsageError(
        fmt::format("HOTLOOP_FAKE_GPU_DECODE={}: expected 1 or 0", s));
  }
  return true;
}

std::unique_ptr<cuda::NvjpegDecoder> make_fake_nvjpeg(
    int channels,
    bool regions,
    std::function<bool(const cuda::GpuJpeg&)> refuses) {
  return std::make_unique<FakeNvjpeg>(channels, regions, std::move(refuses));
}

std::unique_ptr<cuda::NvjpegDecoder> open_gpu_decoder(
    c10::Device device,
    int channels) {
  if (fake_gpu_decode()) {
    return make_fake_nvjpeg(channels);
  }
  return cuda::NvjpegDecoder::open(device, channels);
}

} // namespace hotloop::data
