#pragma once
// The resize of the decode threads: a box of a uint8 image, antialiased
// bilinear (PIL's filter, torchvision's antialias=True), into planar (C, oh,
// ow) bytes, optionally mirrored.
//
// It runs in fixed point: the filter's weights are 14-bit integers that sum
// to exactly 1 << 14, the vertical pass keeps 7 fractional bits in int16,
// the horizontal pass rounds once to a byte. The arithmetic is integer, so
// every kernel (scalar, SSE2, AVX2) writes the same bytes on every machine
// and run; the vector ones are chosen at run time from the CPU.

#include <cstdint>
#include <string_view>

namespace hotloop::data {

// A (C, H, W) uint8 image with any strides (in elements): planar, or
// interleaved (H, W, C) as the decoders write it (sc 1, sx C).
struct ImageView {
  const std::uint8_t* data;
  std::int64_t c, h, w;
  std::int64_t sc, sy, sx;
  std::uint8_t at(std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return data[ch * sc + y * sy + x * sx];
  }
};

// The source region (in source pixels, fractional) resized to the output,
// and whether the output is mirrored horizontally.
struct ResizeBox {
  double x0 = 0, y0 = 0, w = 0, h = 0;
  bool flip = false;
};

// Which code runs the two passes. Best is the fastest one this CPU has;
// the others exist so tests and the benchmark can hold them side by side.
enum class ResizeKernel { Best, Scalar, Sse2, Avx2 };

// Whether `kernel` can run on this CPU (Best and Scalar always can).
bool resize_kernel_available(ResizeKernel kernel);
// The kernel Best stands for here.
ResizeKernel best_resize_kernel();
std::string_view resize_kernel_name(ResizeKernel kernel);

// Resizes `box` of `src` into dst ((c, oh, ow), contiguous). A downscale
// averages every source pixel under an output pixel (no aliasing); an
// upscale is plain bilinear with half-pixel centers; taps outside the image
// are dropped and the weights renormalized. Throws std::invalid_argument
// for a kernel this CPU lacks.
void resize_into(
    const ImageView& src,
    const ResizeBox& box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow,
    ResizeKernel kernel = ResizeKernel::Best);

} // namespace hotloop::data
