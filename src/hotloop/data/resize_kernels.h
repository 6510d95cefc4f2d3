#pragma once
// The two passes of resize.h's fixed-point resize, one function each per
// instruction set, and the constants they share. Internal to resize.cpp and
// resize_x86.cpp.

#include <cstdint>

namespace hotloop::data::resize_detail {

// Filter weights are integers summing to 1 << kWeightBits.
constexpr int kWeightBits = 14;
// The vertical pass keeps kRowBits fractional bits: 255 << 7 = 32640 fits
// an int16, and the horizontal pass's sums (at most 32640 << 14) fit int32.
constexpr int kRowBits = 7;
constexpr int kVerticalShift = kWeightBits - kRowBits;
constexpr int kHorizontalShift = kWeightBits + kRowBits;

// out[i] = round(sum_k rows[k][i] * weights[k] / 2^kVerticalShift) for i < n:
// `taps` source rows (bytes) blended into one row of int16.
using VerticalPass = void (*)(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t n,
    std::int16_t* out);

// One output row from a vertically blended row of interleaved pixels (c
// int16 per column, readable for a few values past its end): output pixel x
// blends `taps` columns from col[x] with weights[x * taps ...] and channel ch
// goes to out[ch * plane + x], rounded and clamped to a byte. `taps` is even.
struct HorizontalRow {
  const std::int16_t* row;
  const std::int32_t* col;
  const std::int16_t* weights;
  int taps;
  std::int64_t ow;
  std::int64_t c;
  std::uint8_t* out;
  std::int64_t plane;
};
using HorizontalPass = void (*)(const HorizontalRow& p);

struct Kernels {
  VerticalPass vertical;
  HorizontalPass horizontal;
};

// The scalar vertical sums of columns [begin, n): the scalar kernel's
// whole row, the vector kernels' leftover columns.
void vertical_scalar_columns(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t begin,
    std::int64_t n,
    std::int16_t* out);

// The scalar horizontal pass, for any channel count: the vector kernels
// hand it images that are not 3-channel.
void horizontal_scalar(const HorizontalRow& p);

Kernels scalar_kernels();
#if defined(__x86_64__)
Kernels sse2_kernels();
Kernels avx2_kernels();
#endif

} // namespace hotloop::data::resize_detail
