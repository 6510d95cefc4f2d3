#pragma once
// Batched JPEG decoding on the GPU with nvJPEG (nvjpeg_library.h): the
// hardware backend where the GPU has JPEG engines (A100, H100, H200), which
// decodes only a rectangle of each image (its ROI); the hybrid backend
// elsewhere (Huffman on the CPU, the rest on the GPU), which decodes whole
// images. Each call is one nvjpegDecodeBatched(Ex) on the device's current
// stream into one device allocation.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hotloop/errors.h"

namespace hotloop::cuda {

// One file: its bytes (host memory valid until decode() returns) and the
// rectangle to decode, in full-size pixels (w == 0: the whole image).
struct GpuJpeg {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  int width = 0; // the whole image's, from its header
  int height = 0;
  int x = 0, y = 0, w = 0, h = 0;
};

// A decoded image: (h, w, channels) uint8 on the device, and where its
// first pixel lies in the whole image (the ROI's corner, or 0, 0).
struct GpuDecoded {
  at::Tensor pixels;
  int x = 0;
  int y = 0;
};

// A batch nvJPEG refused or failed; the caller decodes its files on the CPU,
// where a bad one gets its own error.
class NvjpegError : public Error {
 public:
  NvjpegError(const std::string& what, int status)
      : Error(what), status(status) {}
  int status;
};

class NvjpegDecoder {
 public:
  // Loads nvJPEG and creates its handle on `device`: the hardware backend
  // first, the default one where the GPU has no engines. `channels`: 3 (RGB)
  // or 1 (luminance). EnvError when nvJPEG or CUDA cannot be used.
  static std::unique_ptr<NvjpegDecoder> open(c10::Device device, int channels);
  virtual ~NvjpegDecoder() = default;

  // Decodes only the rectangle asked (the hardware backend).
  virtual bool decodes_regions() const = 0;
  // "nvJPEG 13.3.2, hardware backend, 7 engines (PATH)".
  virtual std::string describe() const = 0;
  // Whether the batched decoder takes this file with its rectangle
  // (nvjpegDecodeBatchedSupportedEx); else it goes to the CPU.
  virtual bool supported(const GpuJpeg& image) = 0;
  // One batched decode; NvjpegError when nvJPEG fails it.
  virtual std::vector<GpuDecoded> decode(std::span<const GpuJpeg> images) = 0;
};

} // namespace hotloop::cuda
