#include "hotloop/data/gpu_decode_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "hotloop/data/decode/crop_decode.h"

namespace hotloop::data {

GpuRoute route_jpeg(const JpegInfo& info) {
  const auto cpu = [](std::string why) { return GpuRoute{false, why}; };
  if (info.progressive) {
    return cpu("progressive JPEG");
  }
  if (info.cmyk) {
    return cpu("CMYK or YCCK JPEG");
  }
  if (info.arithmetic) {
    return cpu("arithmetic-coded JPEG");
  }
  if (info.precision != 8) {
    return cpu(fmt::format("{}-bit JPEG", info.precision));
  }
  if (info.components != 1 && info.components != 3) {
    return cpu(fmt::format("JPEG with {} components", info.components));
  }
  if (info.subsampling_x > 2 || info.subsampling_y > 2) {
    return cpu(fmt::format(
        "JPEG with {}x{} chroma subsampling",
        info.subsampling_x,
        info.subsampling_y));
  }
  return {true, ""};
}

PixelRect gpu_region(const JpegInfo& info, const CropBox& box, OutputSize out) {
  return plan_crop_decode(info.width, info.height, box, out, /*scale=*/false)
      .rect;
}

std::vector<std::pair<std::size_t, std::size_t>> gpu_batches(
    std::size_t n,
    std::size_t max_batch) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  const std::size_t step = std::max<std::size_t>(max_batch, 1);
  for (std::size_t first = 0; first < n; first += step) {
    out.emplace_back(first, std::min(n, first + step));
  }
  return out;
}

} // namespace hotloop::data
