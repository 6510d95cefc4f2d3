#include "hotloop/cuda/nvjpeg_decoder.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "hotloop/cuda/nvjpeg_library.h"

namespace hotloop::cuda {
namespace {

using nvjpeg::Status;

void check(Status s, const char* call) {
  if (s != nvjpeg::kSuccess) {
    throw NvjpegError(
        fmt::format("nvJPEG's {} failed: {}", call, nvjpeg::status_name(s)), s);
  }
}

class Nvjpeg final : public NvjpegDecoder {
 public:
  Nvjpeg(c10::Device device, int channels)
      : lib_(nvjpeg::Library::open(nvjpeg::library_candidates())),
        fn_(lib_->fn()),
        device_(device),
        channels_(channels),
        format_(channels == 1 ? nvjpeg::kOutputY : nvjpeg::kOutputRgbi),
        side_(c10::cuda::getStreamFromPool(false, device.index())) {
    const c10::cuda::CUDAGuard guard(device_);
    try {
      create_handle();
      check(fn_.state_create(handle_, &state_), "nvjpegJpegStateCreate");
      check(fn_.stream_create(handle_, &stream_), "nvjpegJpegStreamCreate");
      check(fn_.params_create(handle_, &probe_), "nvjpegDecodeParamsCreate");
      check(fn_.params_set_output_format(probe_, format_), "SetOutputFormat");
    } catch (const Error& e) {
      release();
      throw EnvError(
          fmt::format(
              "nvJPEG ({}) cannot start on {}: {}",
              lib_->path(),
              device_.str(),
              e.what()),
          "run `hotloop doctor`, or use --decode-device cpu");
    }
  }

  ~Nvjpeg() override {
    release();
  }

  bool decodes_regions() const override {
    return hardware_;
  }

  std::string describe() const override {
    return fmt::format(
        "nvJPEG {}, {} ({})",
        lib_->version(),
        hardware_ ? fmt::format("hardware backend, {} engines", engines_)
                  : fmt::format(
                        "hybrid backend (the hardware one: {})",
                        nvjpeg::status_name(hardware_status_)),
        lib_->path());
  }

  // The hybrid backend has no such check: its batched call fails instead,
  // and the caller decodes that batch on the CPU.
  bool supported(const GpuJpeg& image) override {
    if (!hardware_) {
      return true;
    }
    try {
      check(
          fn_.stream_parse_header(handle_, image.data, image.size, stream_),
          "nvjpegJpegStreamParseHeader");
      set_roi(probe_, image);
      int verdict = 1;
      check(
          fn_.batched_supported_ex(handle_, stream_, probe_, &verdict),
          "nvjpegDecodeBatchedSupportedEx");
      return verdict == 0; // 0: supported
    } catch (const NvjpegError&) {
      return false; // the CPU decodes it, and says what is wrong with it
    }
  }

  // On a side stream, into memory the compute stream is done with: the
  // hardware decoder writes when it is called, not in its stream's order
  // (torchcodec and torchvision measured it on H100s), so its output must
  // not be a block the caching allocator hands back while queued kernels
  // still read it (record_stream on the compute stream holds a block back
  // until they ran). The host waits for the decode before the files' bytes
  // and the decoder's state are reused; the compute stream waits for it too.
  std::vector<GpuDecoded> decode(std::span<const GpuJpeg> images) override {
    const c10::cuda::CUDAGuard guard(device_);
    const c10::cuda::CUDAStream compute =
        c10::cuda::getCurrentCUDAStream(device_.index());
    const c10::cuda::CUDAStreamGuard on_side(side_);
    try {
      std::vector<GpuDecoded> out = decode_batch(images, compute);
      side_.synchronize();
      at::cuda::CUDAEvent decoded;
      decoded.record(side_);
      decoded.block(compute);
      return out;
    } catch (const NvjpegError&) {
      initialized_ = 0; // a failed batch needs nvjpegDecodeBatchedInitialize
      throw;
    }
  }

 private:
  // The hardware backend where the GPU has JPEG engines (elsewhere its
  // creation fails, "architecture mismatch"), else the default (hybrid) one.
  void create_handle() {
    hardware_status_ =
        fn_.create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &handle_);
    hardware_ = hardware_status_ == nvjpeg::kSuccess;
    if (hardware_) {
      unsigned cores = 0;
      if (fn_.hardware_decoder_info(handle_, &engines_, &cores) !=
          nvjpeg::kSuccess) {
        engines_ = 0;
      }
      return;
    }
    handle_ = nullptr;
    check(
        fn_.create_ex(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &handle_),
        "nvjpegCreateEx");
  }

  // One batched call into one allocation, on the side stream (current).
  std::vector<GpuDecoded> decode_batch(
      std::span<const GpuJpeg> images,
      const c10::cuda::CUDAStream& compute) {
    const int n = static_cast<int>(images.size());
    if (n != initialized_) {
      check(
          fn_.batched_initialize(handle_, state_, n, 1, format_),
          "nvjpegDecodeBatchedInitialize");
      initialized_ = n;
    }
    std::vector<GpuDecoded> out(images.size());
    std::vector<std::int64_t> offsets(images.size() + 1, 0);
    for (std::size_t i = 0; i < images.size(); ++i) {
      const GpuJpeg& im = images[i];
      const bool roi = hardware_ && im.w > 0;
      out[i].x = roi ? im.x : 0;
      out[i].y = roi ? im.y : 0;
      const std::int64_t w = roi ? im.w : im.width;
      const std::int64_t h = roi ? im.h : im.height;
      offsets[i + 1] = offsets[i] + w * h * channels_;
    }
    at::Tensor all = at::empty(
        {offsets.back()}, at::TensorOptions().dtype(at::kByte).device(device_));
    all.record_stream(compute);
    std::vector<nvjpeg::Image> dst(images.size());
    std::vector<const unsigned char*> data(images.size());
    std::vector<std::size_t> lengths(images.size());
    for (std::size_t i = 0; i < images.size(); ++i) {
      const GpuJpeg& im = images[i];
      const bool roi = hardware_ && im.w > 0;
      const std::int64_t w = roi ? im.w : im.width;
      const std::int64_t h = roi ? im.h : im.height;
      out[i].pixels = all.narrow(0, offsets[i], offsets[i + 1] - offsets[i])
                          .view({h, w, channels_});
      dst[i] = {};
      dst[i].channel[0] = out[i].pixels.data_ptr<std::uint8_t>();
      dst[i].pitch[0] = static_cast<std::size_t>(w * channels_);
      data[i] = im.data;
      lengths[i] = im.size;
    }
    const auto stream = reinterpret_cast<nvjpeg::CudaStream>(side_.stream());
    if (hardware_) {
      while (params_.size() < images.size()) {
        nvjpeg::DecodeParams p = nullptr;
        check(fn_.params_create(handle_, &p), "nvjpegDecodeParamsCreate");
        params_.push_back(p);
        check(fn_.params_set_output_format(p, format_), "SetOutputFormat");
      }
      for (std::size_t i = 0; i < images.size(); ++i) {
        set_roi(params_[i], images[i]);
      }
      check(
          fn_.decode_batched_ex(
              handle_,
              state_,
              data.data(),
              lengths.data(),
              dst.data(),
              params_.data(),
              stream),
          "nvjpegDecodeBatchedEx");
    } else {
      check(
          fn_.decode_batched(
              handle_, state_, data.data(), lengths.data(), dst.data(), stream),
          "nvjpegDecodeBatched");
    }
    return out;
  }

  void set_roi(nvjpeg::DecodeParams p, const GpuJpeg& im) {
    if (hardware_ && im.w > 0) {
      check(fn_.params_set_roi(p, im.x, im.y, im.w, im.h), "SetROI");
    } else {
      check(fn_.params_set_roi(p, 0, 0, -1, -1), "SetROI");
    }
  }

  void release() {
    for (nvjpeg::DecodeParams p : params_) {
      fn_.params_destroy(p);
    }
    params_.clear();
    if (probe_ != nullptr) {
      fn_.params_destroy(probe_);
      probe_ = nullptr;
    }
    if (stream_ != nullptr) {
      fn_.stream_destroy(stream_);
      stream_ = nullptr;
    }
    if (state_ != nullptr) {
      fn_.state_destroy(state_);
      state_ = nullptr;
    }
    if (handle_ != nullptr) {
      fn_.destroy(handle_);
      handle_ = nullptr;
    }
  }

  std::unique_ptr<nvjpeg::Library> lib_;
  const nvjpeg::Functions& fn_;
  c10::Device device_;
  std::int64_t channels_;
  nvjpeg::OutputFormat format_;
  c10::cuda::CUDAStream side_; // where nvJPEG decodes
  bool hardware_ = false;
  Status hardware_status_ = nvjpeg::kSuccess;
  unsigned engines_ = 0;
  nvjpeg::Handle handle_ = nullptr;
  nvjpeg::State state_ = nullptr;
  nvjpeg::JpegStream stream_ = nullptr;
  nvjpeg::DecodeParams probe_ = nullptr;
  std::vector<nvjpeg::DecodeParams> params_;
  int initialized_ = 0;
};

} // namespace

std::unique_ptr<NvjpegDecoder> NvjpegDecoder::open(
    c10::Device device,
    int channels) {
  if (!torch::cuda::is_available()) {
    throw EnvError(
        fmt::format(
            "cannot decode JPEGs on {}: CUDA is not available", device.str()),
        "run `hotloop doctor` to see why, or use --decode-device cpu");
  }
  if (device.index() < 0) {
    device = c10::Device(c10::kCUDA, c10::cuda::current_device());
  }
  return std::make_unique<Nvjpeg>(device, channels);
}

} // namespace hotloop::cuda
