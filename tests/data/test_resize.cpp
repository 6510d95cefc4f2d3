#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/_upsample_bilinear2d_aa.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randint.h>

#include "hotloop/data/resize.h"

namespace hotloop::data {
namespace {

struct Case {
  std::int64_t c, h, w;
  ResizeBox box;
  std::int64_t oh, ow;
  bool planar;
};

// (C, H, W) bytes held interleaved (H, W, C) or planar, as a view.
ImageView view_of(const at::Tensor& chw) {
  return {
      chw.data_ptr<std::uint8_t>(),
      chw.size(0),
      chw.size(1),
      chw.size(2),
      chw.stride(0),
      chw.stride(1),
      chw.stride(2)};
}

// Random bytes (from the seed at::manual_seed set) of k's shape.
at::Tensor random_image(const Case& k) {
  const at::Tensor hwc = at::randint(256, {k.h, k.w, k.c}, at::kByte);
  return k.planar ? hwc.permute({2, 0, 1}).contiguous()
                  : hwc.permute({2, 0, 1});
}

at::Tensor resized(const at::Tensor& chw, const Case& k, ResizeKernel kernel) {
  at::Tensor out = at::empty({k.c, k.oh, k.ow}, at::kByte);
  resize_into(
      view_of(chw), k.box, out.data_ptr<std::uint8_t>(), k.oh, k.ow, kernel);
  return out;
}

// Boxes of every kind: shrinking by up to ~60x, enlarging, fractional
// origins, one pixel wide, at the edges, mirrored; 1, 3 and 4 channels,
// interleaved and planar; widths around the vector loops' 16 and 32.
std::vector<Case> cases() {
  std::mt19937_64 rng(7);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  std::vector<Case> out = {
      {3, 375, 500, {0, 0, 500, 375, false}, 224, 224, false},
      {3, 1200, 1600, {10.5, 3.25, 1500, 1100, true}, 224, 224, false},
      {3, 20, 20, {0, 0, 20, 20, false}, 47, 47, false},
      {3, 64, 1900, {0, 0, 1900, 64, false}, 7, 31, false},
      {3, 50, 50, {49.5, 0, 0.5, 50, false}, 9, 9, false},
      {1, 97, 97, {0, 0, 97, 97, true}, 23, 23, false},
      {4, 40, 33, {2, 2, 29, 31, false}, 17, 15, false},
      {3, 40, 33, {2, 2, 29, 31, true}, 17, 15, true},
  };
  for (int i = 0; i < 40; ++i) {
    Case k;
    k.c = i % 5 == 0 ? 1 : 3;
    k.h = static_cast<std::int64_t>(uniform(8, 400));
    k.w = static_cast<std::int64_t>(uniform(8, 400));
    k.box.w = uniform(1, static_cast<double>(k.w));
    k.box.h = uniform(1, static_cast<double>(k.h));
    k.box.x0 = uniform(0, static_cast<double>(k.w) - k.box.w);
    k.box.y0 = uniform(0, static_cast<double>(k.h) - k.box.h);
    k.box.flip = i % 2 == 1;
    k.oh = static_cast<std::int64_t>(uniform(1, 260));
    k.ow = static_cast<std::int64_t>(uniform(1, 260));
    k.planar = i % 7 == 3;
    out.push_back(k);
  }
  return out;
}

std::int64_t max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kInt) - b.to(at::kInt)).abs().max().item<std::int64_t>();
}

} // namespace

TEST(Resize, EveryVectorKernelWritesTheScalarKernelsBytes) {
  // Integer arithmetic throughout: not "within a level" but the same bytes,
  // on every CPU and run.
  at::manual_seed(3);
  int compared = 0;
  for (const Case& k : cases()) {
    const at::Tensor image = random_image(k);
    const at::Tensor scalar = resized(image, k, ResizeKernel::Scalar);
    for (const ResizeKernel kernel :
         {ResizeKernel::Sse2, ResizeKernel::Avx2, ResizeKernel::Best}) {
      if (!resize_kernel_available(kernel)) {
        continue;
      }
      EXPECT_TRUE(resized(image, k, kernel).equal(scalar))
          << resize_kernel_name(kernel) << ": " << k.c << "x" << k.h << "x"
          << k.w << " box (" << k.box.x0 << ", " << k.box.y0 << ", " << k.box.w
          << ", " << k.box.h << ") flip " << k.box.flip << " -> " << k.oh << "x"
          << k.ow << (k.planar ? " planar" : " interleaved");
      ++compared;
    }
  }
  EXPECT_GT(compared, 48) << "SSE2 is part of x86-64: at least it compares";
}

TEST(Resize, EveryShapeIsWithinOneLevelOfTheFloatFilter) {
  // The reference: ATen's antialiased bilinear (torchvision's
  // antialias=True, PIL's filter) in float, on each case's shape and
  // layout, whole image to output size (ATen has no box; the boxes' bytes
  // are the test above's). Tolerance 1 level: the fixed-point weights are
  // rounded to 1/16384, the vertical pass to 1/128 of a level.
  at::manual_seed(5);
  for (const ResizeKernel kernel : {ResizeKernel::Scalar, ResizeKernel::Best}) {
    for (const Case& base : cases()) {
      Case k = base;
      k.box = {0, 0, static_cast<double>(k.w), static_cast<double>(k.h)};
      const at::Tensor image = random_image(k);
      const at::Tensor reference =
          at::_upsample_bilinear2d_aa(
              image.to(at::kFloat).unsqueeze(0), {k.oh, k.ow}, false)
              .squeeze(0)
              .round()
              .clamp(0, 255)
              .to(at::kByte);
      EXPECT_LE(max_abs_diff(resized(image, k, kernel), reference), 1)
          << resize_kernel_name(kernel) << ": " << k.c << "x" << k.h << "x"
          << k.w << " -> " << k.oh << "x" << k.ow;
    }
  }
}

TEST(Resize, AFlatImageStaysFlatAtAnyScale) {
  // The weights of every output pixel sum to exactly 1: no drift, even
  // when thousands of source pixels fall under one output pixel.
  for (const std::int64_t value : {0, 1, 128, 254, 255}) {
    const Case k{3, 40000, 8, {0, 0, 8, 40000, false}, 3, 5, false};
    const at::Tensor image =
        at::full({k.h, k.w, k.c}, value, at::kByte).permute({2, 0, 1});
    for (const ResizeKernel kernel :
         {ResizeKernel::Scalar, ResizeKernel::Best}) {
      EXPECT_TRUE(resized(image, k, kernel).eq(value).all().item<bool>())
          << value << " " << resize_kernel_name(kernel);
    }
  }
}

TEST(Resize, AKernelThisCpuLacksIsRefusedByName) {
  EXPECT_TRUE(resize_kernel_available(ResizeKernel::Scalar));
  EXPECT_TRUE(resize_kernel_available(best_resize_kernel()));
  if (resize_kernel_available(ResizeKernel::Avx2)) {
    GTEST_SKIP() << "this CPU has AVX2";
  }
  const at::Tensor image = at::full({3, 4, 4}, 1, at::kByte);
  std::uint8_t out[3 * 2 * 2];
  EXPECT_THROW(
      resize_into(
          view_of(image), {0, 0, 4, 4, false}, out, 2, 2, ResizeKernel::Avx2),
      std::invalid_argument);
}

} // namespace hotloop::data
