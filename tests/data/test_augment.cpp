#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/_upsample_bilinear2d_aa.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isin.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/upsample_bilinear2d.h>

#include "hotloop/data/augment.h"
#include "support/augmented.h"

namespace hotloop::data {

namespace {

// (1, 28, 28) with pixel (y, x) = (y * 28 + x) % 251 + 1: no zeros, so padding
// is visible.
at::Tensor pattern() {
  return at::arange(28 * 28, at::kLong)
      .remainder(251)
      .add(1)
      .to(at::kByte)
      .view({1, 28, 28})
      .contiguous();
}

} // namespace

TEST(Augment, SmallImagesArePaddedCroppedAndFlippedDeterministically) {
  const at::Tensor img = pattern();
  AugmentSpec spec{AugmentSpec::Mode::Train, true, 28, 28, 4, true};
  const at::Tensor a = test::augmented(img, spec, 11);
  EXPECT_TRUE(a.equal(test::augmented(img, spec, 11)))
      << "same seed, same result";
  bool differs = false;
  int zeros_seen = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const at::Tensor out = test::augmented(img, spec, seed);
    differs |= !out.equal(a);
    zeros_seen += out.eq(0).any().item<bool>() ? 1 : 0;
    // Whatever the shift and flip, every nonzero output pixel is a source
    // pixel.
    const at::Tensor nonzero = out.masked_select(out.ne(0));
    EXPECT_TRUE(at::isin(nonzero, img.flatten()).all().item<bool>());
  }
  EXPECT_TRUE(differs);
  EXPECT_GT(zeros_seen, 30) << "most shifts should bring in zero padding";
}

TEST(Augment, EvalLeavesNativeSizeImagesUnchanged) {
  const at::Tensor img = pattern();
  EXPECT_TRUE(
      test::augmented(img, {AugmentSpec::Mode::Eval, true, 28, 28, 4, true}, 3)
          .equal(img));
  EXPECT_TRUE(
      test::augmented(img, {AugmentSpec::Mode::None, false, 28, 28, 4, true}, 3)
          .equal(img));
}

TEST(Augment, ResizedCropsOfAFlatImageAreFlatAndHaveTheOutputSize) {
  const at::Tensor img = at::full({3, 300, 200}, 77, at::kByte);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const at::Tensor out = test::augmented(
        img, {AugmentSpec::Mode::Train, false, 224, 224, 4, true}, seed);
    EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{3, 224, 224}));
    EXPECT_TRUE(out.eq(77).all().item<bool>());
  }
}

TEST(Augment, EvalCenterCropsPhotosLikeResizeThenCenterCrop) {
  // A horizontal ramp: the center column of the output must hold the source's
  // center value.
  at::Tensor ramp = at::arange(256, at::kLong)
                        .to(at::kByte)
                        .view({1, 1, 256})
                        .expand({1, 128, 256})
                        .contiguous();
  const at::Tensor out = test::augmented(
      ramp, {AugmentSpec::Mode::Eval, false, 64, 64, 4, false}, 0);
  EXPECT_NEAR(out[0][32][32].item<int>(), 128, 2);
  // The box is 0.875 of the shorter side (112 px), centered: x from 72 to 184.
  EXPECT_NEAR(out[0][32][0].item<int>(), 73, 2);
  EXPECT_NEAR(out[0][32][63].item<int>(), 183, 2);
}

} // namespace hotloop::data

namespace hotloop::data {
namespace {

// A smooth pattern with fine detail, so that shrinking it without
// antialiasing would alias visibly: (C, H, W) uint8.
at::Tensor detailed_image(std::int64_t c, std::int64_t h, std::int64_t w) {
  const at::Tensor y = at::arange(h, at::kFloat).view({1, h, 1});
  const at::Tensor x = at::arange(w, at::kFloat).view({1, 1, w});
  const at::Tensor ch = at::arange(c, at::kFloat).view({c, 1, 1});
  const at::Tensor v = 127.5 + 60 * at::sin(x * 1.7 + ch) * at::cos(y * 0.9) +
      60 * at::sin((x + y) * 0.05 + ch);
  return v.round().clamp(0, 255).to(at::kByte);
}

// augment_into's plain resize of the whole image (square in, square out).
at::Tensor resized(const at::Tensor& image, std::int64_t out) {
  AugmentSpec spec;
  spec.mode = AugmentSpec::Mode::Eval;
  spec.out_h = spec.out_w = out;
  spec.eval_crop = 1.0;
  at::Tensor dst = at::empty({image.size(0), out, out}, at::kByte);
  augment_into(image, dst.data_ptr<std::uint8_t>(), spec, 0);
  return dst;
}

// A (1, C, H, W) float result as the (C, H, W) bytes an image would hold.
at::Tensor as_bytes(const at::Tensor& batch) {
  return batch.squeeze(0).round().clamp(0, 255).to(at::kByte);
}

std::int64_t max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kInt) - b.to(at::kInt)).abs().max().item<std::int64_t>();
}

} // namespace

TEST(Augment, ShrinkingIsAntialiasedLikeTorchvision) {
  // torchvision resizes with antialias=True (PIL's filter): the reference is
  // ATen's _upsample_bilinear2d_aa on the same image. Tolerance: 1 level
  // (hotloop blends in float, rows first; the reference in another order).
  const at::Tensor planar = detailed_image(3, 97, 97);
  const at::Tensor interleaved =
      planar.permute({1, 2, 0}).contiguous().permute({2, 0, 1});
  for (const std::int64_t out : {40, 23, 64}) {
    const at::Tensor reference = as_bytes(at::_upsample_bilinear2d_aa(
        planar.to(at::kFloat).unsqueeze(0), {out, out}, false));
    EXPECT_LE(max_abs_diff(resized(planar, out), reference), 1) << out;
    EXPECT_LE(max_abs_diff(resized(interleaved, out), reference), 1) << out;
  }
  // Without antialiasing, 97 -> 23 would sample every ~4th pixel of a
  // pattern that changes every pixel: far from the filtered reference.
  const at::Tensor naive = as_bytes(at::upsample_bilinear2d(
      planar.to(at::kFloat).unsqueeze(0), {23, 23}, false));
  EXPECT_GT(max_abs_diff(resized(planar, 23), naive), 20);
}

TEST(Augment, EnlargingIsPlainBilinear) {
  const at::Tensor image = detailed_image(3, 20, 20);
  const at::Tensor reference = as_bytes(at::upsample_bilinear2d(
      image.to(at::kFloat).unsqueeze(0), {47, 47}, false));
  EXPECT_LE(max_abs_diff(resized(image, 47), reference), 1);
}

} // namespace hotloop::data
