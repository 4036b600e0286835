// AVX2 reshape_and_cache: FP8 rows quantized 8 lanes at a time (Fp8Converter), whole 16-token K
// groups written with 8x8 register transposes, V token pairs interleaved in registers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/backend/avx2/fp8_converter.hpp"
#include "pagedattn/backend/avx2/lanes.hpp"
#include "pagedattn/backend/cache_writer.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx2 {
/// Transposes an 8x8 matrix of 32-bit lanes in place: rows[i] lane j <-> rows[j] lane i.
PAGEDATTN_ALWAYS_INLINE void transpose8x8(__m256i (&rows)[8]) noexcept {
  __m256i pairs[8];  // lanes (2k, 2k+1) interleaved per 128-bit half
  for (int k = 0; k < 4; ++k) {
    pairs[2 * k] = _mm256_unpacklo_epi32(rows[2 * k], rows[2 * k + 1]);
    pairs[2 * k + 1] = _mm256_unpackhi_epi32(rows[2 * k], rows[2 * k + 1]);
  }
  // quads[4k + c], half L: rows 4k..4k+3 of column 4L + c.
  __m256i quads[8];
  for (int k = 0; k < 2; ++k) {
    quads[4 * k + 0] = _mm256_unpacklo_epi64(pairs[4 * k], pairs[4 * k + 2]);
    quads[4 * k + 1] = _mm256_unpackhi_epi64(pairs[4 * k], pairs[4 * k + 2]);
    quads[4 * k + 2] = _mm256_unpacklo_epi64(pairs[4 * k + 1], pairs[4 * k + 3]);
    quads[4 * k + 3] = _mm256_unpackhi_epi64(pairs[4 * k + 1], pairs[4 * k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    rows[c] = _mm256_permute2x128_si256(quads[c], quads[4 + c], 0x20);
    rows[4 + c] = _mm256_permute2x128_si256(quads[c], quads[4 + c], 0x31);
  }
}

/// The AVX2 kernel set of write_token_runs (see there), templated on the tier that compiles it.
template <class Isa>
struct CacheKernels {
  /// Only whole 16-token groups are transposed (AVX2 has no 16-bit masked store).
  static constexpr std::size_t min_key_run = kv_token_group;

  /// Writes a whole K group (`count` == 16, `first_lane` == 0) starting at `group`: for each
  /// half of 8 tokens and 8 units, load the tokens' units as 32-bit lanes, transpose, and store
  /// each unit's 8 tokens contiguously.
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void write_key_run(CacheRows<CacheT> rows, int /*first_lane*/,
                                                   int /*count*/, CacheT* group,
                                                   int head_dim) noexcept {
    constexpr int unit = key_unit_elements<CacheT>;
    constexpr std::size_t unit_bytes = key_unit_bytes<CacheT>;
    const int units = head_dim / unit;  // a multiple of 8
    for (int half = 0; half < 2; ++half) {
      for (int u0 = 0; u0 < units; u0 += 8) {
        __m256i lanes[8];
        for (int t = 0; t < 8; ++t) {
          const CacheT* row = rows[static_cast<std::size_t>(8 * half + t)];
          lanes[t] = load_widened<unit_bytes>(row + u0 * unit).v;
        }
        transpose8x8(lanes);
        for (int j = 0; j < 8; ++j) {
          store_narrowed<unit_bytes>(group + ((u0 + j) * kv_token_group + 8 * half) * unit,
                                     U32x8(lanes[j]));
        }
      }
    }
  }

  /// Writes V rows of tokens `even_token` and `even_token + 1` (paired layouts): each 16-dim
  /// chunk becomes 16 (even, odd) element pairs, built by shift-or in 32-bit lanes.
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void write_value_pair(const CacheT* even, const CacheT* odd,
                                                      CacheT* value_block, int even_token,
                                                      int block_size, int head_dim) noexcept {
    constexpr std::size_t bytes = sizeof(CacheT);
    for (int chunk = 0; chunk < head_dim; chunk += 16) {
      CacheT* target = value_block +
                       KvBlockLayout<CacheT>::value_index(block_size, head_dim, even_token, chunk);
      for (int half = 0; half < 16; half += 8) {
        const U32x8 low = load_widened<bytes>(even + chunk + half);
        const U32x8 high = load_widened<bytes>(odd + chunk + half);
        const U32x8 pairs = low | (high << static_cast<std::uint32_t>(8 * bytes));
        store_narrowed<2 * bytes>(target + 2 * half, pairs);
      }
    }
  }

  /// Writes one token's V row (element by element for the paired layouts).
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void write_value_row(const CacheT* row, CacheT* value_block,
                                                     int token, int block_size,
                                                     int head_dim) noexcept {
    place_value_row<Isa>(row, value_block, token, block_size, head_dim);
  }
};
}  // namespace avx2

/// AVX2 specialisation.
template <>
struct CacheWriter<isa::avx2> {
  /// See the primary template.
  template <class InputT, class CacheT>
  static void run(const CacheWriteArgs<InputT, CacheT>& args) noexcept {
    write_token_runs<isa::avx2, avx2::CacheKernels<isa::avx2>>(args);
  }
};

}  // namespace pagedattn::backend
