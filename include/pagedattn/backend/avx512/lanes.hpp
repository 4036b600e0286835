// AVX-512 lane types: 16 x uint32 with the operators the generic minifloat codec uses, plus the
// loads and stores that widen or narrow storage types to and from those lanes.
#pragma once

#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__))
#error "backend/avx512 needs AVX-512 F/BW/DQ/VL compiler flags"
#endif

// GCC 12's AVX-512 intrinsics trip a false -Wmaybe-uninitialized, or under AddressSanitizer
// -Wuninitialized (GCC bug 105593: _mm512_undefined_ps) wherever they are inlined; silence both for
// the intrinsic headers only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>

#include "pagedattn/config.hpp"

namespace pagedattn::backend::avx512 {

/// One bit per lane of a U32x16.
struct Mask16 {
  __mmask16 bits;  ///< Bit i set = lane i selected.
};

/// 16 unsigned 32-bit lanes. Compares are signed: callers keep compared values below 2^31.
struct U32x16 {
  __m512i v;  ///< The lanes.

  U32x16() = default;
  /// Wraps a register.
  PAGEDATTN_ALWAYS_INLINE U32x16(__m512i lanes) noexcept : v(lanes) {}
  /// Broadcasts `value`.
  PAGEDATTN_ALWAYS_INLINE explicit U32x16(std::uint32_t value) noexcept
      : v(_mm512_set1_epi32(static_cast<int>(value))) {}

  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator+(U32x16 a, U32x16 b) noexcept { return _mm512_add_epi32(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator-(U32x16 a, U32x16 b) noexcept { return _mm512_sub_epi32(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator&(U32x16 a, U32x16 b) noexcept { return _mm512_and_si512(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator|(U32x16 a, U32x16 b) noexcept { return _mm512_or_si512(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator<<(U32x16 a, std::uint32_t n) noexcept { return _mm512_sll_epi32(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator>>(U32x16 a, std::uint32_t n) noexcept { return _mm512_srl_epi32(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator<<(U32x16 a, U32x16 n) noexcept { return _mm512_sllv_epi32(a.v, n.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x16 operator>>(U32x16 a, U32x16 n) noexcept { return _mm512_srlv_epi32(a.v, n.v); }
  friend PAGEDATTN_ALWAYS_INLINE Mask16 operator<(U32x16 a, U32x16 b) noexcept { return {_mm512_cmplt_epi32_mask(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask16 operator>(U32x16 a, U32x16 b) noexcept { return {_mm512_cmpgt_epi32_mask(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask16 operator>=(U32x16 a, U32x16 b) noexcept { return {_mm512_cmpge_epi32_mask(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask16 operator==(U32x16 a, U32x16 b) noexcept { return {_mm512_cmpeq_epi32_mask(a.v, b.v)}; }
  /// Lane-wise `mask ? first : second`.
  friend PAGEDATTN_ALWAYS_INLINE U32x16 select(Mask16 mask, U32x16 first, U32x16 second) noexcept {
    return _mm512_mask_blend_epi32(mask.bits, second.v, first.v);
  }
  /// Bits of float(lane) for lanes below 2^24 (exact).
  friend PAGEDATTN_ALWAYS_INLINE U32x16 int_to_float_bits(U32x16 a) noexcept {
    return _mm512_castps_si512(_mm512_cvtepi32_ps(a.v));
  }
  /// Lane-wise minimum (signed: lanes below 2^31).
  friend PAGEDATTN_ALWAYS_INLINE U32x16 min(U32x16 a, U32x16 b) noexcept { return _mm512_min_epi32(a.v, b.v); }
  /// The integer nearest (ties to even) to float(lane) * factor, for non-negative floats and
  /// products below 2^24 (fixed rounding, not MXCSR's; no exception flags).
  friend PAGEDATTN_ALWAYS_INLINE U32x16 round_scaled_to_int(U32x16 float_bits, float factor) noexcept {
    const __m512 product = _mm512_mul_ps(_mm512_castsi512_ps(float_bits.v), _mm512_set1_ps(factor));
    return _mm512_cvt_roundps_epi32(product, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};

/// One bit per lane of a U16x32.
struct Mask32 {
  __mmask32 bits;  ///< Bit i set = lane i selected.
};

/// 32 unsigned 16-bit lanes (bf16 bit patterns and FP8 codes). Compares are signed: callers keep
/// compared values below 2^15.
struct U16x32 {
  __m512i v;  ///< The lanes.

  U16x32() = default;
  /// Wraps a register.
  PAGEDATTN_ALWAYS_INLINE U16x32(__m512i lanes) noexcept : v(lanes) {}
  /// Broadcasts `value`.
  PAGEDATTN_ALWAYS_INLINE explicit U16x32(std::uint16_t value) noexcept
      : v(_mm512_set1_epi16(static_cast<short>(value))) {}

  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator+(U16x32 a, U16x32 b) noexcept { return _mm512_add_epi16(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator-(U16x32 a, U16x32 b) noexcept { return _mm512_sub_epi16(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator&(U16x32 a, U16x32 b) noexcept { return _mm512_and_si512(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator|(U16x32 a, U16x32 b) noexcept { return _mm512_or_si512(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator<<(U16x32 a, std::uint32_t n) noexcept { return _mm512_sll_epi16(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U16x32 operator>>(U16x32 a, std::uint32_t n) noexcept { return _mm512_srl_epi16(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE Mask32 operator<(U16x32 a, U16x32 b) noexcept { return {_mm512_cmplt_epi16_mask(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask32 operator>(U16x32 a, U16x32 b) noexcept { return {_mm512_cmpgt_epi16_mask(a.v, b.v)}; }
  /// Lane-wise `mask ? first : second`.
  friend PAGEDATTN_ALWAYS_INLINE U16x32 select(Mask32 mask, U16x32 first, U16x32 second) noexcept {
    return _mm512_mask_blend_epi16(mask.bits, second.v, first.v);
  }
  /// Lane-wise unsigned minimum.
  friend PAGEDATTN_ALWAYS_INLINE U16x32 min(U16x32 a, U16x32 b) noexcept { return _mm512_min_epu16(a.v, b.v); }
  /// The integer nearest (ties to even) to bf16(lane) * factor, for lanes holding non-negative
  /// finite bf16 values, `factor` a power of two and products below 2^15 (other lanes get
  /// unspecified values); fixed rounding, not MXCSR's, and no exception flags. Each half of the
  /// lanes is widened to float and added to a "magic" number whose last mantissa bit weighs
  /// 1 / factor, which leaves the rounded product in the sum's low bits.
  friend PAGEDATTN_ALWAYS_INLINE U16x32 round_scaled_to_int(U16x32 bf16_bits, float factor) noexcept {
    const __m512 magic = _mm512_set1_ps(0x1p23f / factor);
    const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits.v, 16));
    const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(bf16_bits.v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    constexpr int rounding = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i even_sum = _mm512_castps_si512(_mm512_add_round_ps(even, magic, rounding));
    const __m512i odd_sum = _mm512_castps_si512(_mm512_add_round_ps(odd, magic, rounding));
    // Low 16 bits of each even sum, with the odd sum's low 16 bits above them.
    return _mm512_ternarylogic_epi32(even_sum, _mm512_slli_epi32(odd_sum, 16), _mm512_set1_epi32(0xffff), 0xe4);
  }
};

/// Loads 32 16-bit elements.
PAGEDATTN_ALWAYS_INLINE U16x32 load_u16x32(const void* source) noexcept { return _mm512_loadu_si512(source); }

/// Stores the low byte of each of the 32 lanes (lanes must be below 256) under `mask`.
PAGEDATTN_ALWAYS_INLINE void store_low_bytes(void* target, U16x32 lanes, __mmask32 mask) noexcept {
  _mm512_mask_cvtepi16_storeu_epi8(target, mask, lanes.v);
}

/// Mask of the first `count` lanes (count <= 16).
PAGEDATTN_ALWAYS_INLINE __mmask16 first_lanes(std::size_t count) noexcept {
  return static_cast<__mmask16>(count >= 16 ? 0xffffu : (1u << count) - 1u);
}

/// Mask of the first `count` of 32 16-bit lanes (all 32 when count >= 32).
PAGEDATTN_ALWAYS_INLINE __mmask32 first_lanes32(std::size_t count) noexcept {
  return static_cast<__mmask32>(count >= 32 ? 0xffffffffu : (1u << count) - 1u);
}

/// Loads `mask`-selected elements of 4, 2 or 1 bytes and zero-extends each to a 32-bit lane.
template <std::size_t ElementBytes>
PAGEDATTN_ALWAYS_INLINE U32x16 load_widened(const void* source, __mmask16 mask) noexcept {
  if constexpr (ElementBytes == 4) {
    return _mm512_maskz_loadu_epi32(mask, source);
  } else if constexpr (ElementBytes == 2) {
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, source));
  } else {
    static_assert(ElementBytes == 1);
    return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, source));
  }
}

/// Stores the low 4, 2 or 1 bytes of each `mask`-selected lane.
template <std::size_t ElementBytes>
PAGEDATTN_ALWAYS_INLINE void store_narrowed(void* target, U32x16 lanes, __mmask16 mask) noexcept {
  if constexpr (ElementBytes == 4) {
    _mm512_mask_storeu_epi32(target, mask, lanes.v);
  } else if constexpr (ElementBytes == 2) {
    _mm512_mask_cvtepi32_storeu_epi16(target, mask, lanes.v);
  } else {
    static_assert(ElementBytes == 1);
    _mm512_mask_cvtepi32_storeu_epi8(target, mask, lanes.v);
  }
}

}  // namespace pagedattn::backend::avx512
