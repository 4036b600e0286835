// AVX2 vector kit (avx2, and amx_emulated's vector code): 8-float registers and the cache-element
// loads for every cache type (bf16 by shifting, fp16 and FP8 through F16C conversion, fp32
// directly); for amx_emulated also bf16 pair products, done with FMA on the pairs' halves.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "pagedattn/backend/avx2/lanes.hpp"
#include "pagedattn/backend/vector/exp2_fraction.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/cpu_features.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx2 {
/// 8 fp16 codes holding E4M3 codes' sign, exponent and mantissa in place (value * 2^-8);
/// `Low` selects the low byte of each 16-bit lane, else the high byte. An arithmetic shift moves
/// the code below the sign and a mask clears the copied sign bit. NaN codes (S.1111.111, rare)
/// are patched on a separate path when `Exact`; otherwise they come out as +-480 * 2^-8 and the
/// caller has screened them out (E4m3NanScreen).
template <bool Low, bool Exact = true>
PAGEDATTN_ALWAYS_INLINE __m128i e4m3_as_half(__m128i pairs) noexcept {
  const __m128i code_high = Low ? _mm_slli_epi16(pairs, 8) : pairs;
  const __m128i half = _mm_and_si128(_mm_srai_epi16(code_high, 1), _mm_set1_epi16(static_cast<short>(0xBF80)));
  if constexpr (!Exact) {
    return half;
  }
  const int nan_bytes =
      _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(pairs, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F)));
  if (nan_bytes == 0) [[likely]] {
    return half;
  }
  const __m128i nan = _mm_cmpeq_epi16(_mm_and_si128(code_high, _mm_set1_epi16(0x7F00)), _mm_set1_epi16(0x7F00));
  const __m128i quiet_nan =
      _mm_or_si128(_mm_and_si128(half, _mm_set1_epi16(static_cast<short>(0x8000))), _mm_set1_epi16(0x7E00));
  return _mm_blendv_epi8(half, quiet_nan, nan);
}

/// The code_screen of the FP8 types (see VectorKit): whether a run of codes holds none of the
/// special codes that the shift-only splits get wrong (E4M3: NaN, S.1111.111; E5M2: infinities
/// and NaNs, S.11111.xx). Doubled byte by byte (the sign drops out), a special code becomes at
/// least `Limit` and any other less: one add and one unsigned maximum per 32 codes, scanned ahead
/// of the products instead of beside them (there, the screen's register spilled: a store and a
/// reload on every step's critical path).
template <unsigned Limit>
struct DoubledCodeScreen {
  /// Whether none of the `count` codes from `first` is special.
  template <class T>
  static bool clear(const T* first, std::size_t count) noexcept {
    static_assert(sizeof(T) == 1);
    const auto* bytes = reinterpret_cast<const unsigned char*>(first);
    const auto doubled = [&](std::size_t i) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + i));
      return _mm256_add_epi8(codes, codes);
    };
    __m256i top = _mm256_setzero_si256(), top_odd = _mm256_setzero_si256();  // two chains
    std::size_t i = 0;
    for (; i + 64 <= count; i += 64) {
      top = _mm256_max_epu8(top, doubled(i));
      top_odd = _mm256_max_epu8(top_odd, doubled(i + 32));
    }
    if (i + 32 <= count) {
      top = _mm256_max_epu8(top, doubled(i));
      i += 32;
    }
    for (; i < count; ++i) {
      if (((2u * bytes[i]) & 0xFFu) >= Limit) return false;
    }
    const __m256i highest_clear = _mm256_set1_epi8(static_cast<char>(Limit - 1));
    const __m256i capped = _mm256_max_epu8(_mm256_max_epu8(top, top_odd), highest_clear);
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(capped, highest_clear)) == -1;
  }
};
/// E4M3's screen: a doubled NaN code is 0xFE, every other at most 0xFC.
using E4m3NanScreen = DoubledCodeScreen<0xFE>;
/// E5M2's screen: a doubled infinity or NaN code is at least 0xF8, every other at most 0xF6.
using E5m2SpecialScreen = DoubledCodeScreen<0xF8>;

/// Splits one row of 16 FP8 pairs (32 bytes) by shifts alone: the codes' sign, exponent and
/// mantissa bits moved into floats' places, so that every value comes out times 2^(bias - 127)
/// (E4M3 2^-120, E5M2 2^-112), subnormal codes as subnormal floats. Pairs 2j -> first[0] /
/// second[0] lane j, pairs 2j + 1 -> first[1] / second[1]; special codes come out finite (the
/// caller screened them out).
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_fp8_pair_row(const T* source, __m256 (&first)[2], __m256 (&second)[2]) noexcept {
  static_assert(is_fp8_v<T>);
  constexpr bool e4m3 = std::is_same_v<T, fp8_e4m3_t>;
  // A code in the high byte of a 16-bit lane, shifted right arithmetically by one more than its
  // mantissa width: its exponent lands on the float exponent's low bits and copies of its sign
  // fill the bits above; the mask keeps the sign bit, exponent and mantissa.
  constexpr int shift = e4m3 ? 4 : 3;
  const __m256i mask = _mm256_set1_epi32(static_cast<int>(e4m3 ? 0x87F00000u : 0x8FE00000u));
  const __m256i row = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
  const __m256i high = _mm256_srai_epi16(row, shift);                          // bytes 1 and 3
  const __m256i low = _mm256_srai_epi16(_mm256_slli_epi16(row, 8), shift);     // bytes 0 and 2
  first[0] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(low, 16), mask));
  second[0] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(high, 16), mask));
  first[1] = _mm256_castsi256_ps(_mm256_and_si256(low, mask));
  second[1] = _mm256_castsi256_ps(_mm256_and_si256(high, mask));
}

/// Packs the low 16 bits of 8 lanes (values below 2^16) into 8 halves.
PAGEDATTN_ALWAYS_INLINE __m128i low_halves(__m256i lanes) noexcept {
  return _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
}

/// The first (low) and second (high) bf16 of each of 8 pairs as floats: one shift or mask each.
PAGEDATTN_ALWAYS_INLINE void bf16_pairs_as_floats(__m256i pairs, __m256& even, __m256& odd) noexcept {
  even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

/// Even and odd elements of 8 pairs of any paired cache type as floats (E4M3 scaled by 2^-8).
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_pairs(const T* source, __m256& even, __m256& odd) noexcept {
  if constexpr (sizeof(T) == 2) {
    const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
    if constexpr (std::is_same_v<T, bf16_t>) {
      bf16_pairs_as_floats(pairs, even, odd);
    } else {
      static_assert(std::is_same_v<T, fp16_t>);
      even = _mm256_cvtph_ps(low_halves(_mm256_and_si256(pairs, _mm256_set1_epi32(0xFFFF))));
      odd = _mm256_cvtph_ps(low_halves(_mm256_srli_epi32(pairs, 16)));
    }
  } else {
    const __m128i pairs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
    if constexpr (std::is_same_v<T, fp8_e5m2_t>) {
      even = _mm256_cvtph_ps(_mm_slli_epi16(pairs, 8));
      odd = _mm256_cvtph_ps(_mm_and_si128(pairs, _mm_set1_epi16(-256)));
    } else {
      static_assert(std::is_same_v<T, fp8_e4m3_t>);
      even = _mm256_cvtph_ps(e4m3_as_half<true>(pairs));
      odd = _mm256_cvtph_ps(e4m3_as_half<false>(pairs));
    }
  }
}

/// 8 bf16 pairs from floats whose values are exact in bf16 (their low 16 bits are 0): `even` ->
/// the first element of each pair, `odd` -> the second.
PAGEDATTN_ALWAYS_INLINE __m256i exact_bf16_pairs(__m256 even, __m256 odd) noexcept {
  return _mm256_or_si256(_mm256_srli_epi32(_mm256_castps_si256(even), 16), _mm256_castps_si256(odd));
}

/// bf16 codes (in the low 16 bits of each lane) of 8 floats, as VCVTNEPS2BF16 rounds: nearest
/// even, NaN stays NaN (made quiet), subnormal inputs become zero of their sign.
PAGEDATTN_ALWAYS_INLINE __m256i round_to_bf16_lanes(__m256 x) noexcept {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i sign = _mm256_andnot_si256(magnitude, bits);
  const __m256i odd_bit = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), odd_bit), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
  const __m256i signed_zero = _mm256_srli_epi32(sign, 16);
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), magnitude);
  return _mm256_blendv_epi8(_mm256_blendv_epi8(rounded, signed_zero, is_subnormal), quiet_nan, is_nan);
}
}  // namespace avx2

/// AVX2 kit of the avx2 tier and of amx_emulated (which adds the bf16 pair products).
template <Avx2FamilyTag Isa>
struct VectorKit<Isa> {
  using vec = __m256;
  using xsimd_arch = xsimd::fma3<xsimd::avx2>;
  static constexpr int width = 8;
  static constexpr int qk_rows = 4;
  static constexpr int qk_vectors = 2;
  static constexpr int pv_rows = 4;
  static constexpr int pv_vectors = 2;
  static constexpr int pv_tall_rows = pv_rows;
  static constexpr int pv_tall_vectors = pv_vectors;

  template <class CacheT>
  static constexpr float value_scale = std::is_same_v<CacheT, fp8_e4m3_t> ? 0x1p-8f : 1.0f;
  /// bf16 splits with one shift or mask per 8 elements, no dearer than reading widened floats
  /// back: its tiles of many rows multiply directly (prefill measured faster so; DESIGN.md).
  template <class CacheT>
  static constexpr bool widens = !std::is_same_v<CacheT, bf16_t>;

  static PAGEDATTN_ALWAYS_INLINE vec zero() noexcept { return _mm256_setzero_ps(); }
  static PAGEDATTN_ALWAYS_INLINE vec load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static PAGEDATTN_ALWAYS_INLINE void store(float* p, vec v) noexcept { _mm256_storeu_ps(p, v); }
  static PAGEDATTN_ALWAYS_INLINE vec broadcast(float x) noexcept { return _mm256_set1_ps(x); }
  static PAGEDATTN_ALWAYS_INLINE vec fma(vec a, vec b, vec c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  /// 2^x lane by lane for x <= 0 (and rounding errors above), within 2e-7 relative: the
  /// fraction x - floor(x) raised by exp2_fraction, times 2^floor(x) built in the exponent field.
  /// x <= -127 (-inf included) gives exactly 0 (the field's bits all 0); NaN stays NaN.
  static PAGEDATTN_ALWAYS_INLINE vec exp2(vec x) noexcept {
    x = _mm256_max_ps(_mm256_set1_ps(-127.0f), x);  // a NaN x stays: max returns its second operand
    const vec whole = _mm256_floor_ps(x);
    const __m256i power = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(whole), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(exp2_fraction<VectorKit>(_mm256_sub_ps(x, whole)), _mm256_castsi256_ps(power));
  }
  static PAGEDATTN_ALWAYS_INLINE vec mul(vec a, vec b) noexcept { return _mm256_mul_ps(a, b); }

  /// Whether the kit multiplies bf16 pairs (amx_emulated only: its vector products then round
  /// and multiply as the amx tier's do; the avx2 tier widens to floats).
  static constexpr bool dots_bf16 = Bf16DotTag<Isa>;
  /// 8 pairs of bf16, as dot_bf16_pairs takes them.
  using bf16_pairs = __m256i;
  /// Whether load_bf16_pairs<CacheT> exists: bf16, and FP8 through the exact F16C split.
  template <class CacheT>
  static constexpr bool loads_bf16_pairs = dots_bf16 && (std::is_same_v<CacheT, bf16_t> || is_fp8_v<CacheT>);
  /// Pair blocks of 8 pairs that one load_bf16_pairs<CacheT> returns (always 1 here).
  template <class CacheT>
  static constexpr int bf16_pair_blocks = 1;
  /// The pair block at `source` as bf16 pairs times value_scale<CacheT> (exact: every FP8 value
  /// times value_scale is a bf16 value); nothing past it is read.
  template <class CacheT, int Blocks>
  static PAGEDATTN_ALWAYS_INLINE void load_bf16_pairs(const CacheT* source, bf16_pairs (&pairs)[Blocks]) noexcept
    requires(loads_bf16_pairs<CacheT> && Blocks == 1)
  {
    if constexpr (std::is_same_v<CacheT, bf16_t>) {
      pairs[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
    } else {
      __m256 even, odd;
      avx2::split_pairs(source, even, odd);  // already times value_scale
      pairs[0] = avx2::exact_bf16_pairs(even, odd);
    }
  }
  /// `pairs` with the second element of every pair set to +0.
  static PAGEDATTN_ALWAYS_INLINE bf16_pairs first_of_pairs(bf16_pairs pairs) noexcept {
    return _mm256_and_si256(pairs, _mm256_set1_epi32(0xFFFF));
  }
  /// out[i] = bf16(x[i]) for i < n, 0 <= n <= width (nearest even, NaN stays NaN, subnormal
  /// inputs become 0, as VCVTNEPS2BF16); nothing at or past x + n or out + n is touched.
  static PAGEDATTN_ALWAYS_INLINE void round_to_bf16(const float* x, int n, bf16_t* out) noexcept
    requires dots_bf16
  {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i codes = avx2::round_to_bf16_lanes(_mm256_maskload_ps(x, mask));
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    std::uint16_t staged[8];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(staged), packed);
    std::memcpy(static_cast<void*>(out), staged, sizeof(std::uint16_t) * static_cast<std::size_t>(n));
  }
  /// out[i] = bf16(x[i]) for the 8 lanes i, as round_to_bf16 above.
  static PAGEDATTN_ALWAYS_INLINE void round_to_bf16(vec x, bf16_t* out) noexcept
    requires dots_bf16
  {
    const __m256i codes = avx2::round_to_bf16_lanes(x);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
  }
  /// sum[i] + x[1] * pairs[2i + 1] + x[0] * pairs[2i] for the 8 lanes i, in that order (as
  /// VDPBF16PS adds them): products of bf16 are exact in float, so each step is one FMA. Unlike
  /// the instruction, subnormals are kept (MXCSR's default).
  static PAGEDATTN_ALWAYS_INLINE vec dot_bf16_pairs(vec sum, bf16_pairs pairs, const bf16_t* x) noexcept
    requires dots_bf16
  {
    std::uint32_t x_pair;
    std::memcpy(&x_pair, x, sizeof x_pair);
    vec x_first, x_second, first, second;
    avx2::bf16_pairs_as_floats(_mm256_set1_epi32(static_cast<int>(x_pair)), x_first, x_second);
    avx2::bf16_pairs_as_floats(pairs, first, second);
    return _mm256_fmadd_ps(x_first, first, _mm256_fmadd_ps(x_second, second, sum));
  }
  /// Largest lane (a NaN lane may or may not win).
  static PAGEDATTN_ALWAYS_INLINE float reduce_max(vec v) noexcept {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }

  /// The FP8 types are scanned for their special codes ahead of the shift-only row split (and,
  /// for E4M3, of a split without the NaN patch); the rest convert exactly.
  template <class CacheT>
  using code_screen =
      std::conditional_t<std::is_same_v<CacheT, fp8_e4m3_t>, avx2::E4m3NanScreen,
                         std::conditional_t<std::is_same_v<CacheT, fp8_e5m2_t>, avx2::E5m2SpecialScreen, ExactSplit>>;

  /// Pair blocks that split_pairs converts from one load (always 1 here).
  template <class CacheT>
  static constexpr int pair_blocks_per_load = 1;

  /// Even and odd elements of one pair block of a paired cache type (see KvBlockLayout).
  template <class CacheT, int Blocks = 1>
  static PAGEDATTN_ALWAYS_INLINE void split_pairs(const CacheT* source, vec (&even)[Blocks], vec (&odd)[Blocks]) noexcept {
    static_assert(Blocks == 1);
    avx2::split_pairs(source, even[0], odd[0]);
  }

  /// split_pairs for codes that code_screen cleared: E4M3 without the NaN patch, E5M2 as is.
  template <class CacheT, int Blocks = 1>
  static PAGEDATTN_ALWAYS_INLINE void split_screened_pairs(const CacheT* source, vec (&even)[Blocks],
                                                           vec (&odd)[Blocks]) noexcept {
    static_assert(Blocks == 1 && is_fp8_v<CacheT>);
    if constexpr (std::is_same_v<CacheT, fp8_e4m3_t>) {
      const __m128i pairs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
      even[0] = _mm256_cvtph_ps(avx2::e4m3_as_half<true, false>(pairs));
      odd[0] = _mm256_cvtph_ps(avx2::e4m3_as_half<false, false>(pairs));
    } else {
      avx2::split_pairs(source, even[0], odd[0]);
    }
  }

  /// Whether split_pair_row<CacheT> exists: the FP8 types (see VectorKit).
  template <class CacheT>
  static constexpr bool splits_pair_rows = is_fp8_v<CacheT>;
  /// What split_pair_row's other operand is multiplied by beforehand: 2^112.
  static constexpr float pair_row_factor = 0x1p112f;
  /// Whether split_pair_row's subnormal floats reach the products as they are, at full speed:
  /// not where the calling thread's MXCSR has DAZ set (which would read them as zero), nor on
  /// cores that take a microcode assist for subnormal operands (Intel's: E4M3 decode ran about
  /// 10x slower there) or before cpu_features() has said (detail::subnormal_operands_allowed).
  static PAGEDATTN_ALWAYS_INLINE bool pair_rows_usable() noexcept {
    return (_mm_getcsr() & (1u << 6)) == 0 &&
           pagedattn::detail::subnormal_operands_allowed.load(std::memory_order_relaxed) == 1;
  }
  /// The 16 pairs at `source` (screened by code_screen): pairs 2j -> first[0] / second[0] lane
  /// j, pairs 2j + 1 -> first[1] / second[1], each value times value_scale / pair_row_factor.
  /// Shifts and masks only: no conversion instruction (F16C's takes a multiplier's port here).
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void split_pair_row(const CacheT* source, vec (&first)[2], vec (&second)[2]) noexcept
    requires splits_pair_rows<CacheT>
  {
    avx2::split_fp8_pair_row(source, first, second);
  }
  /// Puts 16 elements held as `a` = elements 0, 2, ..., 14 and `b` = 1, 3, ..., 15 in order:
  /// `a` = elements 0..7, `b` = 8..15.
  static PAGEDATTN_ALWAYS_INLINE void interleave_lanes(vec& a, vec& b) noexcept {
    const __m256 low = _mm256_unpacklo_ps(a, b), high = _mm256_unpackhi_ps(a, b);
    a = _mm256_permute2f128_ps(low, high, 0x20);
    b = _mm256_permute2f128_ps(low, high, 0x31);
  }
  /// The inverse of interleave_lanes.
  static PAGEDATTN_ALWAYS_INLINE void deinterleave_lanes(vec& a, vec& b) noexcept {
    const __m256 low = _mm256_permute2f128_ps(a, b, 0x20), high = _mm256_permute2f128_ps(a, b, 0x31);
    a = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0));
    b = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1));
  }
};

}  // namespace pagedattn::backend
