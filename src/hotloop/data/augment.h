#pragma once
// Per-sample geometry on the CPU (in the decode threads), written straight into
// the sample's slot of the batch buffer: (C, H, W) uint8 in, (C, out_h, out_w)
// uint8 out, no intermediate tensors.
//
// - Train, small images (the data set's native size, e.g. Fashion-MNIST):
// zero-pad by `padding`,
//   random crop back to the native size, random horizontal flip.
// - Train, photos: random-resized-crop (area 8-100%, aspect 3/4-4/3, as
// torchvision's
//   RandomResizedCrop) to out_h x out_w with bilinear interpolation, random
//   horizontal flip.
// - Eval: small images unchanged; photos resized to out/0.875 on the shorter
// side and center-cropped
//   (torchvision's Resize(256) + CenterCrop(224) for 224).
// The random choices are a function of the seed passed in, so a sample's
// augmentation does not depend on which thread ran it.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace hotloop::data {

struct AugmentSpec {
  enum class Mode { None, Train, Eval };
  Mode mode = Mode::None;
  bool small_images = false; // pad-and-crop instead of resized crops
  std::int64_t out_h = 0;
  std::int64_t out_w = 0;
  int padding = 4;
  bool flip = true;
  // Eval on photos: the centered crop's share of the shorter side (0.875:
  // torchvision's Resize(256) + CenterCrop(224)); 1.0 keeps the whole shorter
  // side (the staging image of on-device augmentation).
  double eval_crop = 0.875;
};

// The random-resized-crop box (in source pixels) and flip that the photo
// train transform draws for `seed` on an h x w image: the same draws
// augment_into makes, for the on-device path (device_augment.h).
struct CropBox {
  double x0 = 0, y0 = 0, w = 0, h = 0;
  bool flip = false;
};
CropBox photo_crop(
    std::uint64_t seed,
    std::int64_t h,
    std::int64_t w,
    bool flip);

// The source box (and flip) augment_into resizes for `seed` on an h x w photo:
// the random-resized crop (Train), the centered crop (Eval), the whole image
// (None); nullopt where the transform is not a resize of a box (small
// images, or an image already at the output size outside Train). The crop
// decode (crop_decode.h) draws its crop here, from the header's size.
std::optional<CropBox> photo_box(
    const AugmentSpec& spec,
    std::uint64_t seed,
    std::int64_t h,
    std::int64_t w);

// An interleaved (h, w, c) uint8 image whose rows are `row_bytes` apart, as
// a decoder writes it.
struct InterleavedPixels {
  const std::uint8_t* data;
  std::int64_t h, w, c;
  std::int64_t row_bytes;
};
struct OutputSize {
  std::int64_t h, w;
};

// Resizes `box` (in the image's pixels) of `image` into dst ((c, out.h,
// out.w)), mirrored if box.flip: augment_into's resize (antialiased
// bilinear, as PIL's).
void resize_box_into(
    const InterleavedPixels& image,
    const CropBox& box,
    std::uint8_t* dst,
    OutputSize out);

// The random choices of the small-image train transform for one sample: shift
// in [-padding, padding] on each axis and whether to flip. The CPU path and the
// resident (on-device) path both use it, so they produce the same batches.
struct SmallImageParams {
  int dy = 0;
  int dx = 0;
  bool flip = false;
};
SmallImageParams small_image_params(std::uint64_t seed, int padding, bool flip);

// The per-sample augmentation seed: a function of (loader seed, epoch, dataset
// index) only.
std::uint64_t sample_seed(
    std::uint64_t seed,
    std::size_t epoch,
    std::size_t index);

// Writes `image` ((C, H, W) uint8, any strides: planar or an (H, W, C) buffer
// seen as CHW) transformed by `spec` into `dst`, which holds C * out_h * out_w
// bytes. `seed` makes the random choices. With Mode::None the image must
// already be out_h x out_w (it is copied) or is resized to it.
void augment_into(
    const at::Tensor& image,
    std::uint8_t* dst,
    const AugmentSpec& spec,
    std::uint64_t seed);

} // namespace hotloop::data
