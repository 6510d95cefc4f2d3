#pragma once
// Which files --decode-device gpu sends to the GPU, and what of each it
// decodes there: a pure policy, tested on the CPU (tests/data/
// test_gpu_decode.cpp). nvJPEG's batched hardware decoder takes baseline,
// Huffman-coded, 8-bit JPEGs with one or three components and no 4:1:1 or
// 4:1:0 chroma; everything else (progressive, CMYK/YCCK, arithmetic-coded,
// 12-bit files, PNGs, images that are not resized crops) stays with the
// decode threads' libjpeg path, which handles them all.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "hotloop/data/augment.h"
#include "hotloop/data/decode/jpeg_region.h"

namespace hotloop::data {

struct GpuRoute {
  bool gpu = false;
  std::string why_cpu; // when not: the reason, in a log's words
};

// Where a JPEG with this header decodes.
GpuRoute route_jpeg(const JpegInfo& info);

// The rectangle of the full-size image the GPU decodes for the crop `box`
// resized to `out`: the crop and its filter's support around it, in whole
// pixels, inside the image (the decode threads' region at 8/8).
PixelRect gpu_region(const JpegInfo& info, const CropBox& box, OutputSize out);

// `n` files as consecutive batches of at most `max_batch`, as [first, end).
std::vector<std::pair<std::size_t, std::size_t>> gpu_batches(
    std::size_t n,
    std::size_t max_batch);

} // namespace hotloop::data
