// The SSE2 and AVX2 kernels of the fixed-point resize (resize_kernels.h).
// Both passes multiply int16 pixels by int16 weights two taps at a time
// (pmaddwd: the pixels of two taps interleaved, times the two weights), so
// they compute exactly the scalar kernels' integer sums.
#if defined(__x86_64__)

#include "hotloop/data/resize_kernels.h"

#include <cstring>

#include <immintrin.h>

namespace hotloop::data::resize_detail {
namespace {

#define HOTLOOP_INLINE inline __attribute__((always_inline))

// Two weights as the 32-bit lane pmaddwd multiplies two interleaved taps by.
HOTLOOP_INLINE __m128i weight_pair(std::int16_t w0, std::int16_t w1) {
  const auto lo = static_cast<std::uint16_t>(w0);
  const auto hi = static_cast<std::uint16_t>(w1);
  return _mm_set1_epi32(static_cast<std::int32_t>(
      static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16)));
}

// 16 columns a time: each 16 bytes widened to two 8 x int16 halves.
void vertical_sse2(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t n,
    std::int16_t* out) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kVerticalShift - 1));
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i acc[4] = {round, round, round, round};
    for (int k = 0; k < taps; k += 2) {
      const bool pair = k + 1 < taps; // an odd last tap pairs with zeros
      const __m128i a =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + i));
      const __m128i b = pair
          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k + 1] + i))
          : zero;
      const __m128i w = weight_pair(weights[k], pair ? weights[k + 1] : 0);
      const __m128i a0 = _mm_unpacklo_epi8(a, zero);
      const __m128i a1 = _mm_unpackhi_epi8(a, zero);
      const __m128i b0 = _mm_unpacklo_epi8(b, zero);
      const __m128i b1 = _mm_unpackhi_epi8(b, zero);
      acc[0] =
          _mm_add_epi32(acc[0], _mm_madd_epi16(_mm_unpacklo_epi16(a0, b0), w));
      acc[1] =
          _mm_add_epi32(acc[1], _mm_madd_epi16(_mm_unpackhi_epi16(a0, b0), w));
      acc[2] =
          _mm_add_epi32(acc[2], _mm_madd_epi16(_mm_unpacklo_epi16(a1, b1), w));
      acc[3] =
          _mm_add_epi32(acc[3], _mm_madd_epi16(_mm_unpackhi_epi16(a1, b1), w));
    }
    for (int j = 0; j < 2; ++j) {
      const __m128i lo = _mm_srai_epi32(acc[2 * j], kVerticalShift);
      const __m128i hi = _mm_srai_epi32(acc[2 * j + 1], kVerticalShift);
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(out + i + 8 * j), _mm_packs_epi32(lo, hi));
    }
  }
  vertical_scalar_columns(rows, weights, taps, i, n, out); // the rest
}

// 32 columns a time. Unpacking works within each 128-bit lane, and so does
// the final pack, which puts the columns back in order.
__attribute__((target("avx2"))) void vertical_avx2(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t n,
    std::int16_t* out) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i round = _mm256_set1_epi32(1 << (kVerticalShift - 1));
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i acc[4] = {round, round, round, round};
    for (int k = 0; k < taps; k += 2) {
      const bool pair = k + 1 < taps;
      const __m256i w = _mm256_broadcastsi128_si256(
          weight_pair(weights[k], pair ? weights[k + 1] : 0));
      for (int h = 0; h < 2; ++h) {
        const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(rows[k] + i + 16 * h)));
        const __m256i b = pair
            ? _mm256_cvtepu8_epi16(_mm_loadu_si128(
                  reinterpret_cast<const __m128i*>(rows[k + 1] + i + 16 * h)))
            : zero;
        acc[2 * h] = _mm256_add_epi32(
            acc[2 * h], _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w));
        acc[2 * h + 1] = _mm256_add_epi32(
            acc[2 * h + 1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = _mm256_srai_epi32(acc[2 * h], kVerticalShift);
      const __m256i hi = _mm256_srai_epi32(acc[2 * h + 1], kVerticalShift);
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(out + i + 16 * h),
          _mm256_packs_epi32(lo, hi));
    }
  }
  vertical_scalar_columns(rows, weights, taps, i, n, out); // the rest
}

// Three channels: a tap's pixel is one 64-bit load (its 3 values and the
// next pixel's first, whose lane is dropped), two taps interleaved per
// pmaddwd. The output pixel's rounded sums, one 32-bit lane per channel.
template <int Taps>
HOTLOOP_INLINE __m128i pixel_sums(const HorizontalRow& p, std::int64_t x) {
  const int taps = Taps > 0 ? Taps : p.taps;
  const std::int16_t* px = p.row + p.col[x] * 3;
  const std::int16_t* wx = p.weights + x * taps;
  __m128i acc = _mm_set1_epi32(1 << (kHorizontalShift - 1));
  for (int k = 0; k < taps; k += 2) {
    const __m128i a =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(px + 3 * k));
    const __m128i b =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(px + 3 * k + 3));
    acc = _mm_add_epi32(
        acc,
        _mm_madd_epi16(
            _mm_unpacklo_epi16(a, b), weight_pair(wx[k], wx[k + 1])));
  }
  return _mm_srai_epi32(acc, kHorizontalShift);
}

// Four output pixels at a time: their sums packed to bytes (pixel-major, 4
// bytes each), transposed to channel-major with two byte unpacks, and
// written as 4 bytes to each plane. Taps > 0 is known at compile time; 0
// reads it from p.
template <int Taps>
HOTLOOP_INLINE void horizontal_rgb(const HorizontalRow& p) {
  std::int64_t x = 0;
  for (; x + 4 <= p.ow; x += 4) {
    const __m128i lo =
        _mm_packs_epi32(pixel_sums<Taps>(p, x), pixel_sums<Taps>(p, x + 1));
    const __m128i hi =
        _mm_packs_epi32(pixel_sums<Taps>(p, x + 2), pixel_sums<Taps>(p, x + 3));
    const __m128i bytes = _mm_packus_epi16(lo, hi);
    const __m128i half = _mm_unpacklo_epi8(bytes, _mm_srli_si128(bytes, 8));
    const __m128i planar = _mm_unpacklo_epi8(half, _mm_srli_si128(half, 8));
    const std::uint32_t c0 =
        static_cast<std::uint32_t>(_mm_cvtsi128_si32(planar));
    const std::uint32_t c1 = static_cast<std::uint32_t>(
        _mm_cvtsi128_si32(_mm_srli_si128(planar, 4)));
    const std::uint32_t c2 = static_cast<std::uint32_t>(
        _mm_cvtsi128_si32(_mm_srli_si128(planar, 8)));
    std::memcpy(p.out + x, &c0, 4);
    std::memcpy(p.out + p.plane + x, &c1, 4);
    std::memcpy(p.out + 2 * p.plane + x, &c2, 4);
  }
  for (; x < p.ow; ++x) {
    const __m128i sums = pixel_sums<Taps>(p, x);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(sums, sums), sums);
    const auto v = static_cast<std::uint32_t>(_mm_cvtsi128_si32(bytes));
    p.out[x] = static_cast<std::uint8_t>(v);
    p.out[p.plane + x] = static_cast<std::uint8_t>(v >> 8);
    p.out[2 * p.plane + x] = static_cast<std::uint8_t>(v >> 16);
  }
}

HOTLOOP_INLINE void horizontal_any(const HorizontalRow& p) {
  if (p.c != 3) {
    horizontal_scalar(p);
    return;
  }
  switch (p.taps) { // the common tap counts unrolled
    case 2:
      return horizontal_rgb<2>(p);
    case 4:
      return horizontal_rgb<4>(p);
    case 6:
      return horizontal_rgb<6>(p);
    case 8:
      return horizontal_rgb<8>(p);
    default:
      return horizontal_rgb<0>(p);
  }
}

void horizontal_sse2(const HorizontalRow& p) {
  horizontal_any(p);
}

__attribute__((target("avx2"))) void horizontal_avx2(const HorizontalRow& p) {
  horizontal_any(p);
}

#undef HOTLOOP_INLINE

} // namespace

Kernels sse2_kernels() {
  return {vertical_sse2, horizontal_sse2};
}

Kernels avx2_kernels() {
  return {vertical_avx2, horizontal_avx2};
}

} // namespace hotloop::data::resize_detail

#endif
