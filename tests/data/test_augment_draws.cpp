// Every random draw of the train transforms takes effect and has the
// distribution it should: the resized crop's position and flip, the small
// images' padding offsets and flip, on the decode threads (augment.h) and on
// the device (device_augment.h, here on the CPU). Shares are checked over
// thousands of seeds against bounds of at least five binomial standard
// deviations, so a correct draw fails them about once in a million runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include "hotloop/data/augment.h"
#include "hotloop/data/device_augment.h"
#include "support/augmented.h"

namespace hotloop::data {
namespace {

constexpr int kDraws = 4000;

// (C, H, W) uint8 with every pixel drawn at random: a mirror or a shift of
// it is never the image itself.
at::Tensor noise(std::int64_t c, std::int64_t h, std::int64_t w) {
  at::manual_seed(3);
  return at::randint(0, 256, {c, h, w}, at::kByte).contiguous();
}

AugmentSpec photo_train(std::int64_t out, bool flip = true) {
  AugmentSpec spec;
  spec.mode = AugmentSpec::Mode::Train;
  spec.out_h = spec.out_w = out;
  spec.flip = flip;
  return spec;
}

AugmentSpec small_train(std::int64_t side, int padding, bool flip = true) {
  AugmentSpec spec = photo_train(side, flip);
  spec.small_images = true;
  spec.padding = padding;
  return spec;
}

// The binomial bound: |share - p| within five standard deviations.
void expect_share(int hits, int draws, double p, const char* what) {
  const double share = static_cast<double>(hits) / draws;
  const double sd = std::sqrt(p * (1 - p) / draws);
  EXPECT_NEAR(share, p, 5 * sd) << what << ": " << hits << " of " << draws;
}

} // namespace

TEST(AugmentDraws, AboutHalfOfTheResizedCropsAreMirrored) {
  int mirrored = 0, without = 0;
  for (std::uint64_t seed = 0; seed < kDraws; ++seed) {
    mirrored += photo_crop(seed, 300, 200, true).flip ? 1 : 0;
    without += photo_crop(seed, 300, 200, false).flip ? 1 : 0;
  }
  expect_share(mirrored, kDraws, 0.5, "mirrored crops");
  EXPECT_EQ(without, 0) << "no flip asked, none drawn";
}

TEST(AugmentDraws, TheCropsPositionSpansTheImage) {
  // x0 / (w - crop w) is uniform in [0, 1] for the crops that fit: its mean
  // is 1/2 (standard deviation of the mean: 1 / sqrt(12 n)).
  double sum_x = 0, sum_y = 0;
  int n = 0;
  for (std::uint64_t seed = 0; seed < kDraws; ++seed) {
    const CropBox b = photo_crop(seed, 300, 200, true);
    if (b.w < 200 && b.h < 300) {
      sum_x += b.x0 / (200 - b.w);
      sum_y += b.y0 / (300 - b.h);
      ++n;
    }
  }
  ASSERT_GT(n, kDraws / 2);
  const double sd = 1 / std::sqrt(12.0 * n);
  EXPECT_NEAR(sum_x / n, 0.5, 5 * sd + 0.01); // + floor()'s bias
  EXPECT_NEAR(sum_y / n, 0.5, 5 * sd + 0.01);
}

TEST(AugmentDraws, TheCropsAreaSpansEightToAHundredPercent) {
  // The target area is uniform in [8%, 100%] of the image's (torchvision's
  // scale); draws that do not fit are drawn again, which thins the top end
  // but leaves both ends reached in 4000 draws of a square image (whose
  // whole fits the aspect ratios of 3/4 to 4/3).
  double smallest = 1, largest = 0;
  for (std::uint64_t seed = 0; seed < kDraws; ++seed) {
    const CropBox b = photo_crop(seed, 256, 256, true);
    const double share = b.w * b.h / (256.0 * 256.0);
    smallest = std::min(smallest, share);
    largest = std::max(largest, share);
  }
  EXPECT_GE(smallest, 0.08 * 0.98); // the rounding of the sides
  EXPECT_LT(smallest, 0.1);
  EXPECT_GT(largest, 0.9);
  EXPECT_LE(largest, 1.0);
}

TEST(AugmentDraws, AMirroredResizedCropIsTheMirrorOfTheUnmirroredOne) {
  const at::Tensor image = noise(3, 60, 50);
  const at::Tensor hwc = image.permute({1, 2, 0}).contiguous();
  const InterleavedPixels pixels{hwc.data_ptr<std::uint8_t>(), 60, 50, 3, 150};
  int mirrored = 0;
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    const at::Tensor out = test::augmented(image, photo_train(32), seed);
    CropBox box = photo_crop(seed, 60, 50, true);
    const bool flip = box.flip;
    box.flip = false;
    at::Tensor plain = at::empty({3, 32, 32}, at::kByte);
    resize_box_into(pixels, box, plain.data_ptr<std::uint8_t>(), {32, 32});
    const at::Tensor expected = flip ? plain.flip({2}) : plain;
    EXPECT_TRUE(out.equal(expected)) << "seed " << seed;
    EXPECT_FALSE(out.equal(flip ? plain : plain.flip({2}))) << "seed " << seed;
    mirrored += flip ? 1 : 0;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 16);
}

TEST(AugmentDraws, SmallImagesShiftByEveryOffsetAndFlipHalfTheTime) {
  constexpr int kPadding = 4;
  std::vector<int> dy(2 * kPadding + 1), dx(2 * kPadding + 1);
  int flips = 0;
  for (std::uint64_t seed = 0; seed < kDraws; ++seed) {
    const SmallImageParams p = small_image_params(seed, kPadding, true);
    ASSERT_LE(std::abs(p.dy), kPadding);
    ASSERT_LE(std::abs(p.dx), kPadding);
    ++dy[static_cast<std::size_t>(p.dy + kPadding)];
    ++dx[static_cast<std::size_t>(p.dx + kPadding)];
    flips += p.flip ? 1 : 0;
    EXPECT_FALSE(small_image_params(seed, kPadding, false).flip);
  }
  for (std::size_t i = 0; i < dy.size(); ++i) {
    expect_share(dy[i], kDraws, 1.0 / dy.size(), "a vertical offset");
    expect_share(dx[i], kDraws, 1.0 / dx.size(), "a horizontal offset");
  }
  expect_share(flips, kDraws, 0.5, "flipped small images");
}

TEST(AugmentDraws, ASmallImageIsItsSourceShiftedAndMirroredAsDrawn) {
  constexpr int kPadding = 4;
  const at::Tensor image = noise(2, 12, 10);
  const auto* src = image.data_ptr<std::uint8_t>();
  AugmentSpec spec = small_train(12, kPadding);
  spec.out_w = 10;
  for (std::uint64_t seed = 0; seed < 32; ++seed) {
    const SmallImageParams p = small_image_params(seed, kPadding, true);
    const at::Tensor out = test::augmented(image, spec, seed);
    at::Tensor expected = at::zeros({2, 12, 10}, at::kByte);
    auto* e = expected.data_ptr<std::uint8_t>();
    for (int c = 0; c < 2; ++c) {
      for (int y = 0; y < 12; ++y) {
        for (int x = 0; x < 10; ++x) {
          const int sy = y + p.dy;
          const int sx = (p.flip ? 9 - x : x) + p.dx;
          if (sy >= 0 && sy < 12 && sx >= 0 && sx < 10) {
            e[(c * 12 + y) * 10 + x] = src[(c * 12 + sy) * 10 + sx];
          }
        }
      }
    }
    EXPECT_TRUE(out.equal(expected)) << "seed " << seed << ": dy " << p.dy
                                     << ", dx " << p.dx << ", flip " << p.flip;
  }
}

// On the device: the small images' gather gives the decode threads' bytes,
// and a photo's crop is mirrored exactly when its draw says so.
TEST(AugmentDraws, TheDeviceTransformsTakeTheSameDraws) {
  const at::Tensor images = noise(2, 12, 10);
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 0; s < 16; ++s) {
    seeds.push_back(s);
  }
  const at::Tensor batch =
      images.unsqueeze(0).expand({16, 2, 12, 10}).to(at::kFloat).contiguous();
  const at::Tensor zero = at::zeros({1, 2, 1, 1});
  AugmentSpec small_spec = small_train(12, 4);
  small_spec.out_w = 10;
  const at::Tensor on_device =
      augment_batch(batch, seeds, small_spec, zero).round().to(at::kByte);
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    EXPECT_TRUE(on_device[static_cast<std::int64_t>(k)].equal(
        test::augmented(images, small_spec, seeds[k])))
        << "seed " << seeds[k];
  }

  const at::Tensor photo = noise(3, 40, 40).to(at::kFloat).unsqueeze(0);
  const at::Tensor photos = photo.expand({16, 3, 40, 40}).contiguous();
  const at::Tensor flipped =
      augment_batch(photos, seeds, photo_train(24, true), zero);
  const at::Tensor plain =
      augment_batch(photos, seeds, photo_train(24, false), zero);
  int mirrored = 0;
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    const auto i = static_cast<std::int64_t>(k);
    const bool flip = photo_crop(seeds[k], 40, 40, true).flip;
    const at::Tensor expected = flip ? plain[i].flip({2}) : plain[i];
    EXPECT_TRUE(flipped[i].allclose(expected, 0, 1e-3)) << "seed " << k;
    if (flip) {
      EXPECT_FALSE(flipped[i].allclose(plain[i], 0, 1e-3)) << "seed " << k;
    }
    mirrored += flip ? 1 : 0;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 16);
}

// On the device, a photo's crop samples the box its draw gives: on an image
// whose pixels hold their own column (channel 0) and row (channel 1), the
// output's mean is the box's centre, x0 + w / 2 - 0.5 in pixel coordinates
// (bilinear sampling of a linear ramp is exact; clamping at the border moves
// it by under 0.02 px here).
TEST(AugmentDraws, TheDevicesPhotoCropSamplesTheDrawnBox) {
  constexpr std::int64_t kSide = 40, kSeeds = 64;
  const at::Tensor ramp = at::arange(kSide, at::kFloat);
  const at::Tensor image = at::stack(
      {ramp.view({1, kSide}).expand({kSide, kSide}),
       ramp.view({kSide, 1}).expand({kSide, kSide})});
  const at::Tensor batch =
      image.unsqueeze(0).expand({kSeeds, 2, kSide, kSide}).contiguous();
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 0; s < kSeeds; ++s) {
    seeds.push_back(s);
  }
  const at::Tensor out =
      augment_batch(batch, seeds, photo_train(24), at::Tensor());
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    const CropBox box = photo_crop(seeds[k], kSide, kSide, true);
    const at::Tensor o = out[static_cast<std::int64_t>(k)];
    EXPECT_NEAR(o[0].mean().item<double>(), box.x0 + box.w / 2 - 0.5, 0.05)
        << "seed " << k << ": box x0 " << box.x0 << ", w " << box.w;
    EXPECT_NEAR(o[1].mean().item<double>(), box.y0 + box.h / 2 - 0.5, 0.05)
        << "seed " << k << ": box y0 " << box.y0 << ", h " << box.h;
  }
}

} // namespace hotloop::data
