// One round of the resize benchmark (bench/resize_vs_today.py runs the
// rounds): decodes the listed images once, then times each resize kernel on
// the same boxes, single-threaded, and prints one JSON object.
//
// usage: hotloop_bench_resize LIST SIZE PASSES KERNEL[,KERNEL...]
//   LIST: lines of "path x0 y0 w h flip" (the box in source pixels)
//   KERNEL: float (hotloop's resize before the fixed-point one), scalar,
//           sse2, avx2 (resize.h's kernels)
// Each kernel resizes every box to SIZE x SIZE (3 planes of bytes) PASSES
// times; its images/s is the work over the steady clock's time. The
// output also says whether the fixed-point kernels wrote the same bytes and
// how far the float baseline's bytes are from them.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/resize.h"
#include "resize/float_resize.h"

namespace {

using hotloop::data::ResizeBox;
using hotloop::data::ResizeKernel;

struct Item {
  hotloop::data::DecodedImage image;
  ResizeBox box;
};

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<Item> load(const std::string& list) {
  std::ifstream in(list);
  std::vector<Item> items;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string path;
    ResizeBox box;
    int flip = 0;
    if (!(fields >> path >> box.x0 >> box.y0 >> box.w >> box.h >> flip)) {
      continue;
    }
    box.flip = flip != 0;
    const auto bytes = read_file(path);
    items.push_back({hotloop::data::decode_image(bytes, path), box});
  }
  if (items.empty()) {
    throw std::runtime_error(list + ": no images listed");
  }
  return items;
}

hotloop::data::ImageView view_of(const hotloop::data::DecodedImage& d) {
  return {
      d.pixels.data(),
      d.channels,
      d.height,
      d.width,
      1,
      d.width * d.channels,
      d.channels};
}

// One kernel over every box, `passes` times; the last pass's bytes in `out`.
double images_per_second(
    const std::string& kernel,
    const std::vector<Item>& items,
    std::int64_t size,
    int passes,
    std::vector<std::uint8_t>& out) {
  const auto plane = static_cast<std::size_t>(3 * size * size);
  out.assign(plane * items.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  for (int pass = 0; pass < passes; ++pass) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::uint8_t* dst = out.data() + i * plane;
      const auto src = view_of(items[i].image);
      if (kernel == "float") {
        hotloop::bench::float_resize_into(src, items[i].box, dst, size, size);
      } else {
        const ResizeKernel k = kernel == "scalar" ? ResizeKernel::Scalar
            : kernel == "sse2"                    ? ResizeKernel::Sse2
                                                  : ResizeKernel::Avx2;
        hotloop::data::resize_into(src, items[i].box, dst, size, size, k);
      }
    }
  }
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
  return static_cast<double>(items.size()) * passes / took.count();
}

int max_diff(
    const std::vector<std::uint8_t>& a,
    const std::vector<std::uint8_t>& b) {
  int d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(int{a[i]} - int{b[i]}));
  }
  return d;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr
        << "usage: hotloop_bench_resize LIST SIZE PASSES KERNEL[,KERNEL...]\n";
    return 2;
  }
  try {
    const std::vector<Item> items = load(argv[1]);
    const std::int64_t size = std::stoll(argv[2]);
    const int passes = std::stoi(argv[3]);
    nlohmann::json result = {
        {"images", items.size()}, {"size", size}, {"passes", passes}};
    std::vector<std::uint8_t> bytes, float_bytes, fixed_bytes;
    bool identical = true;
    std::istringstream kernels(argv[4]);
    for (std::string kernel; std::getline(kernels, kernel, ',');) {
      if (kernel == "avx2" &&
          !hotloop::data::resize_kernel_available(ResizeKernel::Avx2)) {
        continue;
      }
      result["images_per_s"][kernel] =
          images_per_second(kernel, items, size, passes, bytes);
      if (kernel == "float") {
        float_bytes = bytes;
      } else if (fixed_bytes.empty()) {
        fixed_bytes = bytes;
      } else {
        identical = identical && bytes == fixed_bytes;
      }
    }
    if (!float_bytes.empty() && !fixed_bytes.empty()) {
      result["float_max_diff"] = max_diff(float_bytes, fixed_bytes);
    }
    result["fixed_point_kernels_identical"] = identical;
    std::cout << result.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "hotloop_bench_resize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
