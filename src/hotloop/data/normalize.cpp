#include "hotloop/data/normalize.h"

#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// One channel's plane: out[k * step] = in[k] * scale - shift. Two rounded
// float operations, never fused, as the GPU's mul_ then sub_.
template <typename Out>
void normalize_plane(
    const std::uint8_t* in,
    std::int64_t n,
    float scale,
    float shift,
    Out* out,
    std::int64_t step) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float v = static_cast<float>(in[k]) * scale;
    out[k * step] = static_cast<Out>(v - shift);
  }
}

#if defined(__x86_64__)
// 8 bytes widened to float, times scale, minus shift: the scalar loop's two
// rounded operations (no FMA: the target has none, so none is contracted).
__attribute__((target("avx2"))) inline __m256 normalized8(
    const std::uint8_t* in,
    __m256 scale,
    __m256 shift) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  return _mm256_sub_ps(_mm256_mul_ps(v, scale), shift);
}

// float to bfloat16, rounded to nearest even as c10::BFloat16 does for the
// finite values a normalization gives (batch_format refuses a std that
// could make others).
__attribute__((target("avx2"))) inline __m256i bf16_bits(__m256 f) {
  const __m256i bits = _mm256_castps_si256(f);
  const __m256i odd =
      _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff));
  return _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
}

// How many values of `out` to write one by one before it is 32-byte
// aligned for the streamed stores (all of them when n is that short).
template <typename Out>
std::int64_t head(const Out* out, std::int64_t n) {
  const auto misaligned = reinterpret_cast<std::uintptr_t>(out) % 32;
  const auto k = static_cast<std::int64_t>(
      misaligned == 0 ? 0 : (32 - misaligned) / sizeof(Out));
  return std::min(k, n);
}

// A planar channel with AVX2, 16 values a time after an aligned head;
// returns how many it wrote (the scalar loop does the rest). The batch is
// far larger than the caches and read by another thread or the GPU copy, so
// the stores stream past the cache instead of reading each line first.
__attribute__((target("avx2"))) std::int64_t normalize_plane_avx2(
    const std::uint8_t* in,
    std::int64_t n,
    float scale,
    float shift,
    float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 t = _mm256_set1_ps(shift);
  std::int64_t k = head(out, n);
  normalize_plane(in, k, scale, shift, out, 1);
  for (; k + 16 <= n; k += 16) {
    _mm256_stream_ps(out + k, normalized8(in + k, s, t));
    _mm256_stream_ps(out + k + 8, normalized8(in + k + 8, s, t));
  }
  _mm_sfence(); // the streamed stores before the batch is handed on
  return k;
}

__attribute__((target("avx2"))) std::int64_t normalize_plane_avx2(
    const std::uint8_t* in,
    std::int64_t n,
    float scale,
    float shift,
    c10::BFloat16* out) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 t = _mm256_set1_ps(shift);
  std::int64_t k = head(out, n);
  normalize_plane(in, k, scale, shift, out, 1);
  for (; k + 16 <= n; k += 16) {
    // packus works within 128-bit lanes: (a0-3 b0-3 a4-7 b4-7), reordered.
    const __m256i packed = _mm256_packus_epi32(
        bf16_bits(normalized8(in + k, s, t)),
        bf16_bits(normalized8(in + k + 8, s, t)));
    _mm256_stream_si256(
        reinterpret_cast<__m256i*>(out + k),
        _mm256_permute4x64_epi64(packed, 0xd8));
  }
  _mm_sfence();
  return k;
}
#endif

// One planar channel: the vector kernel where the CPU has one, the scalar
// loop for what it leaves.
template <typename Out>
void normalize_planar(
    const std::uint8_t* in,
    std::int64_t n,
    float scale,
    float shift,
    bool avx2,
    Out* out) {
  std::int64_t done = 0;
#if defined(__x86_64__)
  if (avx2) {
    done = normalize_plane_avx2(in, n, scale, shift, out);
  }
#endif
  normalize_plane(in + done, n - done, scale, shift, out + done, 1);
}

template <typename Out>
void write_sample(
    const std::uint8_t* chw,
    std::int64_t c,
    std::int64_t plane,
    const std::vector<float>& scale,
    const std::vector<float>& shift,
    bool channels_last,
    bool avx2,
    Out* dst) {
  for (std::int64_t ch = 0; ch < c; ++ch) {
    if (channels_last) { // (H, W, C): channel ch every c elements
      normalize_plane(
          chw + ch * plane, plane, scale[ch], shift[ch], dst + ch, c);
    } else {
      normalize_planar(
          chw + ch * plane,
          plane,
          scale[ch],
          shift[ch],
          avx2,
          dst + ch * plane);
    }
  }
}

} // namespace

cuda::BatchFormat batch_format(LoaderOptions& o, std::int64_t channels) {
  if (o.mean.empty()) {
    o.mean = channels == 1 ? std::vector<float>{0.2860f}
                           : std::vector<float>{0.485f, 0.456f, 0.406f};
    o.std = channels == 1 ? std::vector<float>{0.3530f}
                          : std::vector<float>{0.229f, 0.224f, 0.225f};
  }
  if (o.mean.size() != static_cast<std::size_t>(channels) ||
      o.std.size() != o.mean.size()) {
    throw UsageError(fmt::format(
        "normalization has {} means and {} stds for {} channels",
        o.mean.size(),
        o.std.size(),
        channels));
  }
  for (std::size_t i = 0; i < o.std.size(); ++i) {
    if (!std::isfinite(o.std[i]) || o.std[i] <= 0 ||
        !std::isfinite(o.mean[i])) {
      throw UsageError(fmt::format(
          "normalization of channel {}: mean {} and std {}; the std must be "
          "positive and both finite",
          i,
          o.mean[i],
          o.std[i]));
    }
  }
  if (o.dtype != at::kFloat && o.dtype != at::kBFloat16) {
    throw UsageError(fmt::format(
        "the loader delivers float32 or bfloat16 images, not {}",
        c10::toString(o.dtype)));
  }
  return {o.mean, o.std, o.normalize, o.dtype, o.channels_last};
}

SampleNormalizer::SampleNormalizer(const cuda::BatchFormat& format)
    : dtype_(format.dtype),
      channels_last_(format.channels_last)
#if defined(__x86_64__)
      ,
      avx2_(__builtin_cpu_supports("avx2") != 0)
#endif
{
  std::tie(scale_, shift_) =
      cuda::normalization_factors(format.mean, format.std);
}

at::Tensor SampleNormalizer::empty_batch(
    std::int64_t b,
    std::int64_t c,
    std::int64_t h,
    std::int64_t w) const {
  return at::empty(
      {b, c, h, w},
      at::TensorOptions().dtype(dtype_).memory_format(
          channels_last_ ? at::MemoryFormat::ChannelsLast
                         : at::MemoryFormat::Contiguous));
}

void SampleNormalizer::write(
    const std::uint8_t* chw,
    const at::Tensor& batch,
    std::int64_t index) const {
  const std::int64_t c = batch.size(1);
  const std::int64_t plane = batch.size(2) * batch.size(3);
  const std::int64_t offset = index * c * plane; // both layouts
  const auto write_as = [&](auto* batch_data) {
    write_sample(
        chw,
        c,
        plane,
        scale_,
        shift_,
        channels_last_,
        avx2_,
        batch_data + offset);
  };
  if (dtype_ == at::kBFloat16) {
    write_as(batch.data_ptr<c10::BFloat16>());
  } else {
    write_as(batch.data_ptr<float>());
  }
}

} // namespace hotloop::data
