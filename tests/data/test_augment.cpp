#include <gtest/gtest.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isin.h>

#include "hotloop/data/augment.h"

namespace hotloop::data {

namespace {

at::Tensor run(
    const at::Tensor& image,
    const AugmentSpec& spec,
    std::uint64_t seed) {
  at::Tensor out =
      at::empty({image.size(0), spec.out_h, spec.out_w}, at::kByte);
  augment_into(image, out.data_ptr<std::uint8_t>(), spec, seed);
  return out;
}

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
  const at::Tensor a = run(img, spec, 11);
  EXPECT_TRUE(a.equal(run(img, spec, 11))) << "same seed, same result";
  bool differs = false;
  int zeros_seen = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const at::Tensor out = run(img, spec, seed);
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
      run(img, {AugmentSpec::Mode::Eval, true, 28, 28, 4, true}, 3).equal(img));
  EXPECT_TRUE(run(img, {AugmentSpec::Mode::None, false, 28, 28, 4, true}, 3)
                  .equal(img));
}

TEST(Augment, ResizedCropsOfAFlatImageAreFlatAndHaveTheOutputSize) {
  const at::Tensor img = at::full({3, 300, 200}, 77, at::kByte);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const at::Tensor out =
        run(img, {AugmentSpec::Mode::Train, false, 224, 224, 4, true}, seed);
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
  const at::Tensor out =
      run(ramp, {AugmentSpec::Mode::Eval, false, 64, 64, 4, false}, 0);
  EXPECT_NEAR(out[0][32][32].item<int>(), 128, 2);
  // The box is 0.875 of the shorter side (112 px), centered: x from 72 to 184.
  EXPECT_NEAR(out[0][32][0].item<int>(), 73, 2);
  EXPECT_NEAR(out[0][32][63].item<int>(), 183, 2);
}

} // namespace hotloop::data
