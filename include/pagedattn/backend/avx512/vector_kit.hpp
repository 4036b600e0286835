// AVX-512 vector kit: 16-float registers and the cache-element loads for every cache type
// (bf16 by shifting, fp16 and FP8 through F16C-style conversion, fp32 directly).
#pragma once

#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "pagedattn/backend/avx2/vector_kit.hpp"
#include "pagedattn/backend/avx512/lanes.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx512 {
/// 16 fp16 codes holding E4M3 codes' sign, exponent and mantissa in place (value * 2^-8);
/// `Low` selects the low byte of each 16-bit lane, else the high byte. An arithmetic shift moves
/// the code below the sign and a mask clears the copied sign bit; NaN codes (S.1111.111, rare)
/// are patched on a separate path.
template <bool Low>
PAGEDATTN_ALWAYS_INLINE __m256i e4m3_as_half(__m256i pairs) noexcept {
  const __m256i code_high = Low ? _mm256_slli_epi16(pairs, 8) : pairs;
  const __m256i half = _mm256_and_si256(_mm256_srai_epi16(code_high, 1), _mm256_set1_epi16(static_cast<short>(0xBF80)));
  const __mmask32 nan_bytes = _mm256_cmpeq_epi8_mask(
      _mm256_and_si256(pairs, _mm256_set1_epi8(0x7F)), _mm256_set1_epi8(0x7F));
  if (nan_bytes == 0) [[likely]] {
    return half;
  }
  const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(code_high, _mm256_set1_epi16(0x7F00)),
                                                _mm256_set1_epi16(0x7F00));
  const __m256i quiet_nan = _mm256_or_si256(_mm256_and_si256(half, _mm256_set1_epi16(static_cast<short>(0x8000))),
                                            _mm256_set1_epi16(0x7E00));
  return _mm256_mask_mov_epi16(half, nan, quiet_nan);
}

/// Even and odd 16-bit elements of 16 pairs (one 512-bit load) as floats.
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_pairs16(const T* source, __m512& even, __m512& odd) noexcept {
  const __m512i pairs = _mm512_loadu_si512(source);
  if constexpr (std::is_same_v<T, bf16_t>) {
    even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else {
    static_assert(std::is_same_v<T, fp16_t>);
    even = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs));
    odd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16)));
  }
}

/// Even and odd 8-bit elements of 16 pairs (one 256-bit load) as floats (E4M3 scaled by 2^-8).
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_pairs8(const T* source, __m512& even, __m512& odd) noexcept {
  const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
  if constexpr (std::is_same_v<T, fp8_e5m2_t>) {
    even = _mm512_cvtph_ps(_mm256_slli_epi16(pairs, 8));
    odd = _mm512_cvtph_ps(_mm256_and_si256(pairs, _mm256_set1_epi16(-256)));
  } else {
    static_assert(std::is_same_v<T, fp8_e4m3_t>);
    even = _mm512_cvtph_ps(e4m3_as_half<true>(pairs));
    odd = _mm512_cvtph_ps(e4m3_as_half<false>(pairs));
  }
}

/// Even/odd split of one pair block of any paired cache type.
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_pairs(const T* source, __m512& even, __m512& odd) noexcept {
  if constexpr (sizeof(T) == 2) {
    split_pairs16(source, even, odd);
  } else {
    split_pairs8(source, even, odd);
  }
}
}  // namespace avx512

/// AVX-512 kit for the avx512 and amx tiers.
template <Avx512FamilyTag Isa>
struct VectorKit<Isa> {
  using vec = __m512;
  using xsimd_arch = xsimd::avx512bw;
  static constexpr int width = 16;
  static constexpr int qk_rows = 8;
  static constexpr int qk_vectors = 2;
  static constexpr int pv_rows = 4;
  static constexpr int pv_vectors = 4;

  template <class CacheT>
  static constexpr float value_scale = std::is_same_v<CacheT, fp8_e4m3_t> ? 0x1p-8f : 1.0f;

  static PAGEDATTN_ALWAYS_INLINE vec zero() noexcept { return _mm512_setzero_ps(); }
  static PAGEDATTN_ALWAYS_INLINE vec load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static PAGEDATTN_ALWAYS_INLINE void store(float* p, vec v) noexcept { _mm512_storeu_ps(p, v); }
  static PAGEDATTN_ALWAYS_INLINE vec broadcast(float x) noexcept { return _mm512_set1_ps(x); }
  static PAGEDATTN_ALWAYS_INLINE vec fma(vec a, vec b, vec c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  /// Largest lane (a NaN lane may or may not win).
  static PAGEDATTN_ALWAYS_INLINE float reduce_max(vec v) noexcept {
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return VectorKit<isa::avx2>::reduce_max(_mm256_max_ps(_mm512_castps512_ps256(v), high));
  }

  /// Even and odd elements of one pair block of a paired cache type (see KvBlockLayout).
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void split_pairs(const CacheT* source, vec& even, vec& odd) noexcept {
    avx512::split_pairs(source, even, odd);
  }
};

}  // namespace pagedattn::backend
