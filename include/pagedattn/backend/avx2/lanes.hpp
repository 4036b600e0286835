// AVX2 lane types: 8 x uint32 with the operators the generic minifloat codec uses, plus the loads
// and stores that widen or narrow storage types to and from those lanes.
#pragma once

#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error "backend/avx2 needs AVX2, FMA and F16C compiler flags"
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

#include <cstddef>
#include <cstdint>

#include "pagedattn/config.hpp"

namespace pagedattn::backend::avx2 {

/// All-ones or all-zeros per 32-bit lane.
struct Mask8 {
  __m256i bits;  ///< Lane i all ones = selected.
};

/// 8 unsigned 32-bit lanes. Compares are signed: callers keep compared values below 2^31.
struct U32x8 {
  __m256i v;  ///< The lanes.

  U32x8() = default;
  /// Wraps a register.
  PAGEDATTN_ALWAYS_INLINE U32x8(__m256i lanes) noexcept : v(lanes) {}
  /// Broadcasts `value`.
  PAGEDATTN_ALWAYS_INLINE explicit U32x8(std::uint32_t value) noexcept
      : v(_mm256_set1_epi32(static_cast<int>(value))) {}

  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator+(U32x8 a, U32x8 b) noexcept { return _mm256_add_epi32(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator-(U32x8 a, U32x8 b) noexcept { return _mm256_sub_epi32(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator&(U32x8 a, U32x8 b) noexcept { return _mm256_and_si256(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator|(U32x8 a, U32x8 b) noexcept { return _mm256_or_si256(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator<<(U32x8 a, std::uint32_t n) noexcept { return _mm256_sll_epi32(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator>>(U32x8 a, std::uint32_t n) noexcept { return _mm256_srl_epi32(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator<<(U32x8 a, U32x8 n) noexcept { return _mm256_sllv_epi32(a.v, n.v); }
  friend PAGEDATTN_ALWAYS_INLINE U32x8 operator>>(U32x8 a, U32x8 n) noexcept { return _mm256_srlv_epi32(a.v, n.v); }
  friend PAGEDATTN_ALWAYS_INLINE Mask8 operator>(U32x8 a, U32x8 b) noexcept { return {_mm256_cmpgt_epi32(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask8 operator<(U32x8 a, U32x8 b) noexcept { return {_mm256_cmpgt_epi32(b.v, a.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask8 operator==(U32x8 a, U32x8 b) noexcept { return {_mm256_cmpeq_epi32(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask8 operator>=(U32x8 a, U32x8 b) noexcept {
    return {_mm256_or_si256(_mm256_cmpgt_epi32(a.v, b.v), _mm256_cmpeq_epi32(a.v, b.v))};
  }
  /// Lane-wise `mask ? first : second`.
  friend PAGEDATTN_ALWAYS_INLINE U32x8 select(Mask8 mask, U32x8 first, U32x8 second) noexcept {
    return _mm256_blendv_epi8(second.v, first.v, mask.bits);
  }
  /// Bits of float(lane) for lanes below 2^24 (exact).
  friend PAGEDATTN_ALWAYS_INLINE U32x8 int_to_float_bits(U32x8 a) noexcept {
    return _mm256_castps_si256(_mm256_cvtepi32_ps(a.v));
  }
  /// Lane-wise minimum (signed: lanes below 2^31).
  friend PAGEDATTN_ALWAYS_INLINE U32x8 min(U32x8 a, U32x8 b) noexcept { return _mm256_min_epi32(a.v, b.v); }
  /// The integer nearest (ties to even) to float(lane) * factor, for non-negative floats and
  /// products below 2^24 (fixed rounding, not MXCSR's).
  friend PAGEDATTN_ALWAYS_INLINE U32x8 round_scaled_to_int(U32x8 float_bits, float factor) noexcept {
    const __m256 product = _mm256_mul_ps(_mm256_castsi256_ps(float_bits.v), _mm256_set1_ps(factor));
    return _mm256_cvttps_epi32(_mm256_round_ps(product, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

/// All-ones or all-zeros per 16-bit lane.
struct Mask16x16 {
  __m256i bits;  ///< Lane i all ones = selected.
};

/// 16 unsigned 16-bit lanes (bf16 bit patterns and FP8 codes). Compares are signed: callers keep
/// compared values below 2^15.
struct U16x16 {
  __m256i v;  ///< The lanes.

  U16x16() = default;
  /// Wraps a register.
  PAGEDATTN_ALWAYS_INLINE U16x16(__m256i lanes) noexcept : v(lanes) {}
  /// Broadcasts `value`.
  PAGEDATTN_ALWAYS_INLINE explicit U16x16(std::uint16_t value) noexcept
      : v(_mm256_set1_epi16(static_cast<short>(value))) {}

  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator+(U16x16 a, U16x16 b) noexcept { return _mm256_add_epi16(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator-(U16x16 a, U16x16 b) noexcept { return _mm256_sub_epi16(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator&(U16x16 a, U16x16 b) noexcept { return _mm256_and_si256(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator|(U16x16 a, U16x16 b) noexcept { return _mm256_or_si256(a.v, b.v); }
  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator<<(U16x16 a, std::uint32_t n) noexcept { return _mm256_sll_epi16(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE U16x16 operator>>(U16x16 a, std::uint32_t n) noexcept { return _mm256_srl_epi16(a.v, _mm_cvtsi32_si128(static_cast<int>(n))); }
  friend PAGEDATTN_ALWAYS_INLINE Mask16x16 operator>(U16x16 a, U16x16 b) noexcept { return {_mm256_cmpgt_epi16(a.v, b.v)}; }
  friend PAGEDATTN_ALWAYS_INLINE Mask16x16 operator<(U16x16 a, U16x16 b) noexcept { return {_mm256_cmpgt_epi16(b.v, a.v)}; }
  /// Lane-wise `mask ? first : second`.
  friend PAGEDATTN_ALWAYS_INLINE U16x16 select(Mask16x16 mask, U16x16 first, U16x16 second) noexcept {
    return _mm256_blendv_epi8(second.v, first.v, mask.bits);
  }
  /// Lane-wise unsigned minimum.
  friend PAGEDATTN_ALWAYS_INLINE U16x16 min(U16x16 a, U16x16 b) noexcept { return _mm256_min_epu16(a.v, b.v); }
  /// The integer nearest (ties to even) to bf16(lane) * factor, for lanes holding non-negative
  /// finite bf16 values, `factor` a power of two and products below 2^15 (other lanes get
  /// unspecified values). Precondition: MXCSR rounds to nearest (the default, which the
  /// conversion entry points set: core/float_environment.hpp): each half of the lanes is widened to float and added to a "magic"
  /// number whose last mantissa bit weighs 1 / factor, which leaves the rounded product in the
  /// sum's low bits (AVX2 has no per-instruction rounding; the sum may set the inexact flag).
  friend PAGEDATTN_ALWAYS_INLINE U16x16 round_scaled_to_int(U16x16 bf16_bits, float factor) noexcept {
    const __m256 magic = _mm256_set1_ps(0x1p23f / factor);
    const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits.v, 16));
    const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(bf16_bits.v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
    const __m256i even_sum = _mm256_castps_si256(_mm256_add_ps(even, magic));
    const __m256i odd_sum = _mm256_castps_si256(_mm256_add_ps(odd, magic));
    return _mm256_blend_epi16(even_sum, _mm256_slli_epi32(odd_sum, 16), 0xaa);
  }
};


/// Loads 16 16-bit elements.
PAGEDATTN_ALWAYS_INLINE U16x16 load_u16x16(const void* source) noexcept {
  return _mm256_loadu_si256(static_cast<const __m256i*>(source));
}

/// Stores the low byte of each of the 16 lanes (lanes must be below 256).
PAGEDATTN_ALWAYS_INLINE void store_low_bytes(void* target, U16x16 lanes) noexcept {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(lanes.v, lanes.v), 0x08);
  _mm_storeu_si128(static_cast<__m128i*>(target), _mm256_castsi256_si128(packed));
}

/// The low byte of each lane of `first`, then of `second`, in order (lanes below 256).
PAGEDATTN_ALWAYS_INLINE __m256i pack_low_bytes(U16x16 first, U16x16 second) noexcept {
  return _mm256_permute4x64_epi64(_mm256_packus_epi16(first.v, second.v), 0xd8);
}

/// Loads 8 elements of 4, 2 or 1 bytes and zero-extends each to a 32-bit lane.
template <std::size_t ElementBytes>
PAGEDATTN_ALWAYS_INLINE U32x8 load_widened(const void* source) noexcept {
  if constexpr (ElementBytes == 4) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(source));
  } else if constexpr (ElementBytes == 2) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(source)));
  } else {
    static_assert(ElementBytes == 1);
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(source)));
  }
}

/// Stores the low 4, 2 or 1 bytes of each of the 8 lanes (lanes must fit in that many bytes).
template <std::size_t ElementBytes>
PAGEDATTN_ALWAYS_INLINE void store_narrowed(void* target, U32x8 lanes) noexcept {
  if constexpr (ElementBytes == 4) {
    _mm256_storeu_si256(static_cast<__m256i*>(target), lanes.v);
  } else {
    // packus per 128-bit half gives [a0..a3 a0..a3 | a4..a7 a4..a7]; gather quadwords 0 and 2.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lanes.v, lanes.v), 0x08);
    const __m128i halves = _mm256_castsi256_si128(packed);
    if constexpr (ElementBytes == 2) {
      _mm_storeu_si128(static_cast<__m128i*>(target), halves);
    } else {
      static_assert(ElementBytes == 1);
      _mm_storel_epi64(static_cast<__m128i*>(target), _mm_packus_epi16(halves, halves));
    }
  }
}

}  // namespace pagedattn::backend::avx2
