#include "hotloop/data/device_augment.h"

#include <cmath>

#include <ATen/TensorIndexing.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/affine_grid_generator.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/grid_sampler_2d.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>

namespace hotloop::data {

std::int64_t staging_size(std::int64_t out) {
  return static_cast<std::int64_t>(
      std::lround(static_cast<double>(out) / 0.875));
}

namespace {

// The per-sample parameters, drawn on the host, to the batch's device
// without stopping the host: a copy from pageable memory is synchronous
// (the host waits for the stream), so they go through pinned memory
// (LibTorch's caching host allocator, which keeps the block until the copy
// is done) with non_blocking.
at::Tensor to_device(const at::Tensor& host, const c10::Device& device) {
  if (!device.is_cuda()) {
    return host;
  }
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

at::Tensor small_images(
    const at::Tensor& images,
    const std::vector<std::uint64_t>& seeds,
    const AugmentSpec& spec,
    const at::Tensor& zero) {
  std::vector<std::int64_t> params(seeds.size() * 3);
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    const SmallImageParams sp =
        small_image_params(seeds[k], spec.padding, spec.flip);
    params[3 * k] = sp.dy;
    params[3 * k + 1] = sp.dx;
    params[3 * k + 2] = sp.flip ? 1 : 0;
  }
  const at::Tensor prm = to_device(
      at::tensor(params, at::kLong).view({images.size(0), 3}), images.device());
  // Padded with the normalized value of a black pixel, as the CPU path pads
  // with 0 before normalizing.
  return pad_crop_flip(images, prm, spec.padding, zero);
}

// One affine map per sample from output to input coordinates, in
// grid_sample's normalized [-1, 1] space (align_corners=False): the crop box
// (x0, y0, w, h) of an S x S image maps u_out to (w / S) * u_out + (2 x0 + w)
// / S - 1, which samples the same half-pixel centers as the CPU resize.
at::Tensor photos(
    const at::Tensor& images,
    const std::vector<std::uint64_t>& seeds,
    const AugmentSpec& spec) {
  const std::int64_t b = images.size(0), c = images.size(1), h = images.size(2),
                     w = images.size(3);
  std::vector<float> theta(seeds.size() * 6);
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    const CropBox box = photo_crop(seeds[k], h, w, spec.flip);
    const double ax = box.w / static_cast<double>(w),
                 ay = box.h / static_cast<double>(h);
    float* t = theta.data() + 6 * k;
    t[0] = static_cast<float>(box.flip ? -ax : ax);
    t[1] = 0;
    t[2] =
        static_cast<float>((2 * box.x0 + box.w) / static_cast<double>(w) - 1);
    t[3] = 0;
    t[4] = static_cast<float>(ay);
    t[5] =
        static_cast<float>((2 * box.y0 + box.h) / static_cast<double>(h) - 1);
  }
  const at::Tensor th =
      to_device(at::tensor(theta, at::kFloat).view({b, 2, 3}), images.device())
          .to(images.scalar_type());
  const at::Tensor grid = at::affine_grid_generator(
      th, {b, c, spec.out_h, spec.out_w}, /*align_corners=*/false);
  return at::grid_sampler_2d(
      images, grid, /*bilinear*/ 0, /*border*/ 1, /*align_corners=*/false);
}

} // namespace

at::Tensor pad_crop_flip(
    const at::Tensor& images,
    const at::Tensor& params,
    std::int64_t padding,
    const at::Tensor& fill) {
  const std::int64_t b = images.size(0), c = images.size(1), h = images.size(2),
                     w = images.size(3);
  const std::int64_t p = padding;
  using at::indexing::Slice;
  at::Tensor padded;
  if (fill.defined()) {
    padded = fill.to(images.scalar_type())
                 .expand({b, c, h + 2 * p, w + 2 * p})
                 .clone();
    padded.index({Slice(), Slice(), Slice(p, p + h), Slice(p, p + w)})
        .copy_(images);
  } else {
    padded =
        at::constant_pad_nd(images, {p, p, p, p}, 0); // (B, C, H + 2p, W + 2p)
  }
  const auto opts =
      at::TensorOptions().dtype(at::kLong).device(images.device());
  const at::Tensor ys = at::arange(h, opts).unsqueeze(0) +
      params.select(1, 0).unsqueeze(1) + p; // (B, H)
  const at::Tensor xs_plain = at::arange(w, opts).unsqueeze(0); // (1, W)
  const at::Tensor xs = at::where(
                            params.select(1, 2).unsqueeze(1).to(at::kBool),
                            (w - 1) - xs_plain,
                            xs_plain) +
      params.select(1, 1).unsqueeze(1) + p; // (B, W)
  const at::Tensor bi = at::arange(b, opts).view({b, 1, 1});
  // Advanced indexing with the channel dimension sliced: (B, H, W, C).
  return padded.index({bi, Slice(), ys.unsqueeze(2), xs.unsqueeze(1)})
      .permute({0, 3, 1, 2});
}

at::Tensor augment_batch(
    const at::Tensor& images,
    const std::vector<std::uint64_t>& seeds,
    const AugmentSpec& spec,
    const at::Tensor& zero) {
  if (spec.mode != AugmentSpec::Mode::Train || seeds.empty()) {
    return images;
  }
  return spec.small_images ? small_images(images, seeds, spec, zero)
                           : photos(images, seeds, spec);
}

} // namespace hotloop::data
