// AVX-512 reshape_and_cache (avx512 and amx tiers): K runs of 4+ tokens via 16x16 register
// transposes and token-masked stores, V pairs interleaved in registers, single V rows with masked
// stores; whole 16-token groups (prefill) with streaming stores, FP8 quantized in registers there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/backend/avx2/cache_writer.hpp"
#include "pagedattn/backend/avx512/fp8_converter.hpp"
#include "pagedattn/backend/avx512/lanes.hpp"
#include "pagedattn/backend/cache_writer.hpp"
#include "pagedattn/backend/vector/fp8_encode.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx512 {
/// Transposes a 16x16 matrix of 32-bit lanes in place: rows[i] lane j <-> rows[j] lane i.
PAGEDATTN_ALWAYS_INLINE void transpose16x16(__m512i (&rows)[16]) noexcept {
  __m512i pairs[16];  // lanes (2k, 2k+1) interleaved per 128-bit quarter
  for (int k = 0; k < 8; ++k) {
    pairs[2 * k] = _mm512_unpacklo_epi32(rows[2 * k], rows[2 * k + 1]);
    pairs[2 * k + 1] = _mm512_unpackhi_epi32(rows[2 * k], rows[2 * k + 1]);
  }
  // quads[4k + c], quarter L: rows 4k..4k+3 of column 4L + c.
  __m512i quads[16];
  for (int k = 0; k < 4; ++k) {
    quads[4 * k + 0] = _mm512_unpacklo_epi64(pairs[4 * k], pairs[4 * k + 2]);
    quads[4 * k + 1] = _mm512_unpackhi_epi64(pairs[4 * k], pairs[4 * k + 2]);
    quads[4 * k + 2] = _mm512_unpacklo_epi64(pairs[4 * k + 1], pairs[4 * k + 3]);
    quads[4 * k + 3] = _mm512_unpackhi_epi64(pairs[4 * k + 1], pairs[4 * k + 3]);
  }
  // Column 4L + c = quarter L of quads[c], quads[4 + c], quads[8 + c], quads[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i low01 = _mm512_shuffle_i32x4(quads[c], quads[4 + c], 0x44);       // q0 q1 of both
    const __m512i low23 = _mm512_shuffle_i32x4(quads[c], quads[4 + c], 0xEE);       // q2 q3 of both
    const __m512i high01 = _mm512_shuffle_i32x4(quads[8 + c], quads[12 + c], 0x44);
    const __m512i high23 = _mm512_shuffle_i32x4(quads[8 + c], quads[12 + c], 0xEE);
    rows[c] = _mm512_shuffle_i32x4(low01, high01, 0x88);
    rows[4 + c] = _mm512_shuffle_i32x4(low01, high01, 0xDD);
    rows[8 + c] = _mm512_shuffle_i32x4(low23, high23, 0x88);
    rows[12 + c] = _mm512_shuffle_i32x4(low23, high23, 0xDD);
  }
}

/// Writes one 64-byte line (`target` 64-byte aligned) with a streaming store.
PAGEDATTN_ALWAYS_INLINE void stream_line(void* target, __m512i line) noexcept {
  _mm512_stream_si512(static_cast<__m512i*>(target), line);
}

/// Token t's 32-bit lane holding two 2-byte K units (a, b) -> per 128-bit quarter (4 tokens)
/// the units apart, then quarters joined: [a of the 16 tokens | b of the 16 tokens].
PAGEDATTN_ALWAYS_INLINE __m512i split_unit_pairs(__m512i lanes) noexcept {
  const __m512i order = _mm512_set4_epi32(0x0f0e0b0a, 0x07060302, 0x0d0c0908, 0x05040100);
  return _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0),
                                  _mm512_shuffle_epi8(lanes, order));
}

/// The AVX-512 kernel set of write_token_runs (see there), templated on the tier that compiles
/// it (avx512 or amx).
template <class Isa>
struct CacheKernels {
  /// Runs of at least this many tokens go through the transpose (fewer: unit stores are cheaper).
  static constexpr std::size_t min_key_run = 4;

  /// Writes the K rows of a run of `count` tokens at lanes [first_lane, first_lane + count) of
  /// the K group starting at `group`: per 16 units, load each token's units as 32-bit lanes
  /// (other lanes zero), transpose, and store each unit's tokens with a lane mask.
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void write_key_run(CacheRows<CacheT> rows, int first_lane,
                                                   int count, CacheT* group,
                                                   int head_dim) noexcept {
    constexpr int unit = key_unit_elements<CacheT>;
    constexpr std::size_t unit_bytes = key_unit_bytes<CacheT>;
    const int units = head_dim / unit;  // a multiple of 8
    const auto tokens = static_cast<__mmask16>(((1u << count) - 1u) << first_lane);
    for (int u0 = 0; u0 < units; u0 += 16) {
      const __mmask16 loaded = first_lanes(static_cast<std::size_t>(units - u0));
      __m512i lanes[16];
      for (int t = 0; t < 16; ++t) {
        if (t >= first_lane && t < first_lane + count) {
          const CacheT* row = rows[static_cast<std::size_t>(t - first_lane)];
          lanes[t] = load_widened<unit_bytes>(row + u0 * unit, loaded).v;
        } else {
          lanes[t] = _mm512_setzero_si512();
        }
      }
      transpose16x16(lanes);
      const int stored = units - u0 < 16 ? units - u0 : 16;
      for (int j = 0; j < stored; ++j) {
        store_narrowed<unit_bytes>(group + (u0 + j) * kv_token_group * unit, U32x16(lanes[j]),
                                   tokens);
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
      const U32x16 low = load_widened<bytes>(even + chunk, 0xFFFF);
      const U32x16 high = load_widened<bytes>(odd + chunk, 0xFFFF);
      store_narrowed<2 * bytes>(
          value_block + KvBlockLayout<CacheT>::value_index(block_size, head_dim, even_token, chunk),
          low | (high << static_cast<std::uint32_t>(8 * bytes)), 0xFFFF);
    }
  }

  /// Writes one token's V row: contiguous for fp32; for the paired layouts each 16-dim chunk is
  /// moved to the token's half of the pairs and stored with an every-other-element mask.
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE void write_value_row(const CacheT* row, CacheT* value_block,
                                                     int token, int block_size,
                                                     int head_dim) noexcept {
    if constexpr (!KvBlockLayout<CacheT>::paired) {
      place_value_row<Isa>(row, value_block, token, block_size, head_dim);
    } else {
      constexpr std::size_t bytes = sizeof(CacheT);
      const int odd = token % 2;
      const std::uint32_t shift = odd != 0 ? 8 * bytes : 0;
      const auto elements = static_cast<__mmask32>(odd != 0 ? 0xAAAAAAAAu : 0x55555555u);
      for (int chunk = 0; chunk < head_dim; chunk += 16) {
        // Pair start of this chunk (the even token's element; the odd one is at +1).
        CacheT* target = value_block + KvBlockLayout<CacheT>::value_index(
                                           block_size, head_dim, token - odd, chunk);
        const U32x16 moved = load_widened<bytes>(row + chunk, 0xFFFF) << shift;
        if constexpr (bytes == 2) {
          _mm512_mask_storeu_epi16(target, elements, moved.v);
        } else {
          static_assert(bytes == 1);
          _mm256_mask_storeu_epi8(target, elements, _mm512_cvtepi32_epi16(moved.v));
        }
      }
    }
  }

  /// Whole groups are streamed for every head dim (masked loads cover partial blocks of lanes).
  template <class CacheT>
  static constexpr bool streams_group(int /*head_dim*/) noexcept {
    return true;
  }

  /// The fused FP8 path (QuantizingRows) exists; its encoder rounds with the instructions' own
  /// rounding mode, not MXCSR's.
  static constexpr bool quantizes_bf16_rows = true;

  /// Cache bytes 4 * word .. 4 * word + 63 of row `token` as 16 32-bit lanes; lanes from
  /// `words` on (words <= 16) are zero and their bytes are not read.
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE __m512i load_row_words(CacheRows<CacheT> rows, int token, int word,
                                                       int words) noexcept {
    return _mm512_maskz_loadu_epi32(first_lanes(static_cast<std::size_t>(words)),
                                    rows[static_cast<std::size_t>(token)] + word * 4 / static_cast<int>(sizeof(CacheT)));
  }
  /// The same for an FP8 cache fed by bf16 rows: 4 * words elements from element 4 * word,
  /// quantized (one byte each; two 32-lane encodes packed in element order).
  template <class Format>
  static PAGEDATTN_ALWAYS_INLINE __m512i load_row_words(QuantizingRows<Format> rows, int token, int word,
                                                       int words) noexcept {
    const bf16_t* source = rows[static_cast<std::size_t>(token)] + 4 * word;
    const auto elements = static_cast<std::size_t>(4 * words);
    const U16x32 low(_mm512_maskz_loadu_epi16(first_lanes32(elements), source));
    const U16x32 high(_mm512_maskz_loadu_epi16(first_lanes32(elements > 32 ? elements - 32 : 0), source + 32));
    // packus interleaves the two inputs' 8-lane quarters; the permutation restores element order.
    const __m512i packed = _mm512_packus_epi16(encode_fp8_from_bf16(low, rows.constants).v,
                                               encode_fp8_from_bf16(high, rows.constants).v);
    return _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), packed);
  }

  /// Writes the K rows of a whole 16-token group starting at `group` (64-byte aligned) with
  /// streaming stores, line by line: rows (CacheRows<CacheT>, or QuantizingRows for an FP8
  /// CacheT) are read 16 32-bit lanes at a time (one 4-byte unit, or two 2-byte FP8 units per
  /// lane) and transposed; lane j is then the line of unit j (4-byte units), or of FP8 units 2j
  /// and 2j + 1 once split_unit_pairs has separated them. Calls each_line() after each line.
  template <class CacheT, class Rows, class EachLine>
  static PAGEDATTN_ALWAYS_INLINE void stream_key_group(Rows rows, CacheT* group, int head_dim,
                                                      EachLine& each_line) noexcept {
    const int words = head_dim * static_cast<int>(sizeof(CacheT)) / 4;
    auto* target = reinterpret_cast<std::byte*>(group);
    for (int w0 = 0; w0 < words; w0 += 16) {
      __m512i lanes[16];
      for (int t = 0; t < 16; ++t) lanes[t] = load_row_words(rows, t, w0, words - w0);
      transpose16x16(lanes);
      const int stored = words - w0 < 16 ? words - w0 : 16;
      for (int j = 0; j < stored; ++j) {
        __m512i line = lanes[j];
        if constexpr (key_unit_bytes<CacheT> == 2) line = split_unit_pairs(line);
        stream_line(target + 64 * (w0 + j), line);
        each_line();
      }
    }
  }

  /// Writes one V line of a streamed group (see stream_value_group): 16 dims of `rows` (1, 2 or
  /// 4 tokens for 4-, 2- and 1-byte types) at `target` (64-byte aligned), one 64-byte stream.
  template <class CacheT, std::size_t Tokens>
  static PAGEDATTN_ALWAYS_INLINE void stream_value_line(CacheT* target, const CacheT* const (&rows)[Tokens]) noexcept {
    if constexpr (Tokens == 1) {
      stream_line(target, _mm512_loadu_si512(rows[0]));
    } else if constexpr (Tokens == 2) {
      const U32x16 low = load_widened<2>(rows[0], 0xFFFF);
      const U32x16 high = load_widened<2>(rows[1], 0xFFFF);
      stream_line(target, (low | (high << 16u)).v);
    } else {
      static_assert(Tokens == 4);
      __m256i first;
      __m256i second;
      avx2::interleave_byte_rows<Isa>(rows[0], rows[1], rows[2], rows[3], first, second);
      stream_line(target, _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
    }
  }

  /// Writes one V line of a streamed group into an FP8 cache from bf16 rows: dims chunk..+15
  /// of tokens `token`..`token` + 3, quantized; each pair's codes interleave byte by byte (even
  /// token's code in the low byte of a 16-bit lane), as stream_value_line stores them. Tokens 0
  /// and 2 share one encode (the low bytes), tokens 1 and 3 the other.
  template <class Format>
  static PAGEDATTN_ALWAYS_INLINE void stream_quantized_value_line(Minifloat<Format>* target, QuantizingRows<Format> rows,
                                                                  int token, int chunk) noexcept {
    const auto codes = [&](int first, int second) {
      const auto half = [&](int i) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[static_cast<std::size_t>(token + i)] + chunk));
      };
      return encode_fp8_from_bf16(U16x32(_mm512_inserti64x4(_mm512_castsi256_si512(half(first)), half(second), 1)),
                                  rows.constants);
    };
    stream_line(target, (codes(0, 2) | (codes(1, 3) << 8u)).v);
  }

  /// Makes the streaming stores visible before any later store (e.g. a flag another thread reads).
  static PAGEDATTN_ALWAYS_INLINE void end_streaming() noexcept { _mm_sfence(); }
};
}  // namespace avx512

/// AVX-512 specialisation for the avx512, avx512bf16 and amx tiers.
template <Avx512FamilyTag Isa>
struct CacheWriter<Isa> {
  /// See the primary template.
  template <class InputT, class CacheT>
  static void run(const CacheWriteArgs<InputT, CacheT>& args) noexcept {
    write_token_runs<Isa, avx512::CacheKernels<Isa>>(args);
  }
};

}  // namespace pagedattn::backend
