// AVX-512 vector kit: 16-float registers and the cache-element loads for every cache type
// (bf16 by shifting, fp16 and FP8 through F16C-style conversion, fp32 directly).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "pagedattn/backend/avx2/vector_kit.hpp"
#include "pagedattn/backend/avx512/lanes.hpp"
#include "pagedattn/backend/vector/exp2_fraction.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx512 {
/// 32 fp16 codes holding E4M3 codes' sign, exponent and mantissa in place (value * 2^-8);
/// `Low` selects the low byte of each 16-bit lane, else the high byte. An arithmetic shift moves
/// the code below the sign and a mask clears the copied sign bit; NaN codes (S.1111.111, rare)
/// are patched on a separate path.
template <bool Low>
PAGEDATTN_ALWAYS_INLINE __m512i e4m3_as_half(__m512i pairs) noexcept {
  const __m512i code_high = Low ? _mm512_slli_epi16(pairs, 8) : pairs;
  const __m512i half = _mm512_and_si512(_mm512_srai_epi16(code_high, 1), _mm512_set1_epi16(static_cast<short>(0xBF80)));
  const __mmask64 nan_bytes = _mm512_cmpeq_epi8_mask(
      _mm512_and_si512(pairs, _mm512_set1_epi8(0x7F)), _mm512_set1_epi8(0x7F));
  if (nan_bytes == 0) [[likely]] {
    return half;
  }
  const __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(code_high, _mm512_set1_epi16(0x7F00)),
                                                _mm512_set1_epi16(0x7F00));
  const __m512i quiet_nan = _mm512_or_si512(_mm512_and_si512(half, _mm512_set1_epi16(static_cast<short>(0x8000))),
                                            _mm512_set1_epi16(0x7E00));
  return _mm512_mask_mov_epi16(half, nan, quiet_nan);
}

/// Even and odd elements of 16 pairs of bf16 codes as floats: one shift or mask each.
PAGEDATTN_ALWAYS_INLINE void bf16_pairs_as_floats(__m512i pairs, __m512& even, __m512& odd) noexcept {
  even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

/// Even and odd 16-bit elements of 16 pairs (one 512-bit load) as floats.
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_pairs16(const T* source, __m512& even, __m512& odd) noexcept {
  const __m512i pairs = _mm512_loadu_si512(source);
  if constexpr (std::is_same_v<T, bf16_t>) {
    bf16_pairs_as_floats(pairs, even, odd);
  } else {
    static_assert(std::is_same_v<T, fp16_t>);
    even = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs));
    odd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16)));
  }
}

/// fp16 codes of the even (low) and odd (high) bytes of the 16-bit lanes of `pairs` (E4M3 scaled
/// by 2^-8; E5M2 exact).
template <class T>
PAGEDATTN_ALWAYS_INLINE void split_bytes_as_half(__m512i pairs, __m512i& even, __m512i& odd) noexcept {
  if constexpr (std::is_same_v<T, fp8_e5m2_t>) {
    even = _mm512_slli_epi16(pairs, 8);
    odd = _mm512_and_si512(pairs, _mm512_set1_epi16(-256));
  } else {
    static_assert(std::is_same_v<T, fp8_e4m3_t>);
    even = e4m3_as_half<true>(pairs);
    odd = e4m3_as_half<false>(pairs);
  }
}

/// Even and odd 8-bit elements of `Blocks` (1 or 2) consecutive pair blocks of 16 pairs as floats:
/// two blocks share one 512-bit load and one pass of the byte arithmetic.
template <class T, int Blocks>
PAGEDATTN_ALWAYS_INLINE void split_pairs8(const T* source, __m512 (&even)[Blocks], __m512 (&odd)[Blocks]) noexcept {
  const __m512i pairs = Blocks == 2 ? _mm512_loadu_si512(source)
                                    : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
  __m512i even_half, odd_half;
  split_bytes_as_half<T>(pairs, even_half, odd_half);
  even[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(even_half));
  odd[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(odd_half));
  if constexpr (Blocks == 2) {
    even[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(even_half, 1));
    odd[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(odd_half, 1));
  }
}
/// Byte tables of the bf16 codes of `scale` times each FP8 magnitude code (0-127; the sign is the
/// code's top bit): low bytes in [0, 128), high bytes in [128, 256). Every FP8 value, NaN and
/// infinity times a power of two in [2^-8, 1] is exact in bf16.
template <class Fp8>
constexpr std::array<std::uint8_t, 256> fp8_bf16_bytes(float scale) noexcept {
  std::array<std::uint8_t, 256> bytes{};
  for (unsigned code = 0; code < 128; ++code) {
    const float value = static_cast<float>(Fp8::from_bits(static_cast<std::uint8_t>(code)));
    const std::uint16_t bits = value != value ? std::uint16_t{0x7FC0} : bf16_t(value * scale).bits();
    bytes[code] = static_cast<std::uint8_t>(bits & 0xFF);
    bytes[128 + code] = static_cast<std::uint8_t>(bits >> 8);
  }
  return bytes;
}

/// The bf16 codes of the 64 FP8 codes in `codes` (two pair blocks of 16 pairs) by `table` (an
/// fp8_bf16_bytes table, 64-byte aligned), in the same order: codes 0-31 -> pairs[0], 32-63 ->
/// pairs[1]. The codes' 8-byte quarters are reordered so that two in-lane byte interleaves give
/// that order, then two byte-table lookups (VBMI), the sign, and the two interleaves.
PAGEDATTN_ALWAYS_INLINE void fp8_as_bf16_pairs(__m512i codes, const std::uint8_t* table, __m512i (&pairs)[2]) noexcept {
  // 128-bit lane i holds codes [8i, 8i + 8) below codes [32 + 8i, 40 + 8i): unpacklo then yields
  // codes 0-31 in order, unpackhi codes 32-63.
  const __m512i lanes = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), codes);
  const __m512i low = _mm512_permutex2var_epi8(_mm512_loadu_si512(table), lanes, _mm512_loadu_si512(table + 64));
  __m512i high = _mm512_permutex2var_epi8(_mm512_loadu_si512(table + 128), lanes, _mm512_loadu_si512(table + 192));
  high = _mm512_ternarylogic_epi32(high, lanes, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // high | (lanes & 0x80)
  pairs[0] = _mm512_unpacklo_epi8(low, high);
  pairs[1] = _mm512_unpackhi_epi8(low, high);
}
}  // namespace avx512

/// AVX-512 kit for the avx512, avx512bf16 and amx tiers.
template <Avx512FamilyTag Isa>
struct VectorKit<Isa> {
  using vec = __m512;
  using xsimd_arch = xsimd::avx512bw;
  static constexpr int width = 16;
  static constexpr int qk_rows = 8;
  static constexpr int qk_vectors = 2;
  static constexpr int pv_rows = 4;
  static constexpr int pv_vectors = 4;
  // Tall tiles: each V vector feeds 8 rows (about a quarter faster at head dim 256, hot tile).
  static constexpr int pv_tall_rows = 8;
  static constexpr int pv_tall_vectors = 2;

  template <class CacheT>
  static constexpr float value_scale = std::is_same_v<CacheT, fp8_e4m3_t> ? 0x1p-8f : 1.0f;
  /// bf16 splits with one shift or mask per 16 elements: its tiles of many rows multiply directly
  /// (prefill took 0.79-0.94 of the widened time on an AVX-512 host; DESIGN.md); the rest widen.
  template <class CacheT>
  static constexpr bool widens = !std::is_same_v<CacheT, bf16_t>;

  static PAGEDATTN_ALWAYS_INLINE vec zero() noexcept { return _mm512_setzero_ps(); }
  static PAGEDATTN_ALWAYS_INLINE vec load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static PAGEDATTN_ALWAYS_INLINE void store(float* p, vec v) noexcept { _mm512_storeu_ps(p, v); }
  static PAGEDATTN_ALWAYS_INLINE vec broadcast(float x) noexcept { return _mm512_set1_ps(x); }
  static PAGEDATTN_ALWAYS_INLINE vec fma(vec a, vec b, vec c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static PAGEDATTN_ALWAYS_INLINE vec mul(vec a, vec b) noexcept { return _mm512_mul_ps(a, b); }

  /// 2^x lane by lane for x <= 0 (and rounding errors above), within 2e-7 relative: the
  /// fraction x - floor(x) in one VREDUCEPS, its power (exp2_fraction), scaled by 2^floor(x) in one
  /// VSCALEFPS. x <= -150 (-inf included) gives exactly 0; NaN stays NaN.
  static PAGEDATTN_ALWAYS_INLINE vec exp2(vec x) noexcept {
    x = _mm512_max_ps(_mm512_set1_ps(-150.0f), x);  // a NaN x stays: max returns its second operand
    const vec fraction = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(exp2_fraction<VectorKit>(fraction), x);
  }

  /// Whether the tier has AVX512_BF16's pair dot products (load_bf16_pairs and dot_bf16_pairs).
  static constexpr bool dots_bf16 = Bf16DotTag<Isa>;
  /// 16 pairs of bf16, as dot_bf16_pairs takes them.
  using bf16_pairs = __m512i;
  /// Whether load_bf16_pairs<CacheT> exists: bf16, and FP8 by table lookup (VBMI).
  template <class CacheT>
  static constexpr bool loads_bf16_pairs = dots_bf16 && (std::is_same_v<CacheT, bf16_t> || is_fp8_v<CacheT>);
  /// The byte tables from an FP8 type's codes to bf16 codes of value_scale times their values.
  template <class CacheT>
  alignas(64) static constexpr std::array<std::uint8_t, 256> bf16_bytes =
      avx512::fp8_bf16_bytes<CacheT>(value_scale<CacheT>);
  /// Pair blocks of 16 pairs that one load_bf16_pairs<CacheT> returns: 2 for FP8 (64 codes), else 1.
  template <class CacheT>
  static constexpr int bf16_pair_blocks = sizeof(CacheT) == 1 ? 2 : 1;
  /// The `Blocks` (1 or bf16_pair_blocks<CacheT>) pair blocks at `source` as bf16 pairs times
  /// value_scale<CacheT>; nothing past them is read.
  template <class CacheT, int Blocks>
  static PAGEDATTN_ALWAYS_INLINE void load_bf16_pairs(const CacheT* source, bf16_pairs (&pairs)[Blocks]) noexcept
    requires(loads_bf16_pairs<CacheT> && (Blocks == 1 || Blocks == bf16_pair_blocks<CacheT>))
  {
    if constexpr (std::is_same_v<CacheT, bf16_t>) {
      pairs[0] = _mm512_loadu_si512(source);
    } else if constexpr (Blocks == 2) {
      avx512::fp8_as_bf16_pairs(_mm512_loadu_si512(source), bf16_bytes<CacheT>.data(), pairs);
    } else {
      __m512i both[2];
      avx512::fp8_as_bf16_pairs(_mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source))),
                                bf16_bytes<CacheT>.data(), both);
      pairs[0] = both[0];
    }
  }
  /// `pairs` with the second element of every pair set to +0.
  static PAGEDATTN_ALWAYS_INLINE bf16_pairs first_of_pairs(bf16_pairs pairs) noexcept {
    return _mm512_and_si512(pairs, _mm512_set1_epi32(0xFFFF));
  }
  /// out[i] = bf16(x[i]) for i < n, 0 <= n <= width (nearest even, NaN stays NaN, subnormal
  /// inputs become 0); nothing at or past x + n or out + n is touched.
  static PAGEDATTN_ALWAYS_INLINE void round_to_bf16(const float* x, int n, bf16_t* out) noexcept
    requires dots_bf16
  {
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x));
    _mm256_mask_storeu_epi16(out, mask, reinterpret_cast<const __m256i&>(rounded));
  }
  /// out[i] = bf16(x[i]) for the 16 lanes i, as round_to_bf16 above.
  static PAGEDATTN_ALWAYS_INLINE void round_to_bf16(vec x, bf16_t* out) noexcept
    requires dots_bf16
  {
    const __m256bh rounded = _mm512_cvtneps_pbh(x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), reinterpret_cast<const __m256i&>(rounded));
  }
  /// sum[i] + x[0] * pairs[2i] + x[1] * pairs[2i + 1] for the 16 lanes i: products of bf16 are
  /// exact in float; bf16 subnormals count as 0 and subnormal results flush to 0 (AVX512_BF16).
  static PAGEDATTN_ALWAYS_INLINE vec dot_bf16_pairs(vec sum, bf16_pairs pairs, const bf16_t* x) noexcept
    requires dots_bf16
  {
    std::uint32_t x_pair;
    std::memcpy(&x_pair, x, sizeof x_pair);
    return _mm512_dpbf16_ps(sum, reinterpret_cast<__m512bh>(pairs),
                            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x_pair))));
  }
  /// Largest lane (a NaN lane may or may not win).
  static PAGEDATTN_ALWAYS_INLINE float reduce_max(vec v) noexcept {
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return VectorKit<isa::avx2>::reduce_max(_mm256_max_ps(_mm512_castps512_ps256(v), high));
  }

  /// Every type converts exactly as it loads (screening E4M3 here has not been measured yet).
  template <class CacheT>
  using code_screen = ExactSplit;
  /// No row split (see VectorKit): the table split is exact and as cheap.
  template <class CacheT>
  static constexpr bool splits_pair_rows = false;

  /// Pair blocks that split_pairs converts from one load: 2 for 1-byte types, else 1.
  template <class CacheT>
  static constexpr int pair_blocks_per_load = sizeof(CacheT) == 1 ? 2 : 1;

  /// Even and odd elements of `Blocks` consecutive pair blocks of a paired cache type (see
  /// KvBlockLayout); Blocks is 1 or pair_blocks_per_load<CacheT>.
  template <class CacheT, int Blocks = 1>
  static PAGEDATTN_ALWAYS_INLINE void split_pairs(const CacheT* source, vec (&even)[Blocks], vec (&odd)[Blocks]) noexcept {
    if constexpr (sizeof(CacheT) == 2) {
      static_assert(Blocks == 1);
      avx512::split_pairs16(source, even[0], odd[0]);
    } else if constexpr (loads_bf16_pairs<CacheT>) {
      // Table lookups to bf16 (exact for every code, NaN included), then a shift or mask each.
      const __m512i codes = Blocks == 2 ? _mm512_loadu_si512(source)
                                        : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
      __m512i pairs[2];
      avx512::fp8_as_bf16_pairs(codes, bf16_bytes<CacheT>.data(), pairs);
      for (int b = 0; b < Blocks; ++b) avx512::bf16_pairs_as_floats(pairs[b], even[b], odd[b]);
    } else {
      avx512::split_pairs8<CacheT, Blocks>(source, even, odd);
    }
  }
};

}  // namespace pagedattn::backend
