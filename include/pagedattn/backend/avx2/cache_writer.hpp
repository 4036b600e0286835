// AVX2 reshape_and_cache: FP8 rows quantized with Fp8Converter (in registers for a prefill's
// whole groups of bf16 input), whole 16-token K groups written with 8x8 register transposes, V
// token pairs interleaved in registers; whole groups of a prefill written with streaming stores.
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

/// Interleaves the 16 elements of 1-byte rows r0..r3 (tokens 4q..4q+3, one 16-dim chunk) into
/// the chunk's two V pairs, one 64-byte line: `first` = 16 x (r0, r1), `second` = 16 x (r2, r3).
/// Shared by the AVX2 and AVX-512 kernels (templated on the tier that compiles it).
template <class Isa>
PAGEDATTN_ALWAYS_INLINE void interleave_byte_rows(const void* r0, const void* r1, const void* r2,
                                                  const void* r3, __m256i& first,
                                                  __m256i& second) noexcept {
  const __m128i a = _mm_loadu_si128(static_cast<const __m128i*>(r0));
  const __m128i b = _mm_loadu_si128(static_cast<const __m128i*>(r1));
  const __m128i c = _mm_loadu_si128(static_cast<const __m128i*>(r2));
  const __m128i d = _mm_loadu_si128(static_cast<const __m128i*>(r3));
  first = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
  second = _mm256_set_m128i(_mm_unpackhi_epi8(c, d), _mm_unpacklo_epi8(c, d));
}

/// Token t's 32-bit lane holding two 2-byte K units (a, b) -> per 128-bit half (4 tokens) the
/// units apart, then halves joined: [a of the 8 tokens | b of the 8 tokens].
PAGEDATTN_ALWAYS_INLINE __m256i split_unit_pairs(__m256i lanes) noexcept {
  const __m256i order = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                         0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(lanes, order), 0xd8);
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

  /// Whole groups are streamed in blocks of 8 32-bit lanes per row: always for 2- and 4-byte
  /// elements, for FP8 when head_dim is a multiple of 32.
  template <class CacheT>
  static constexpr bool streams_group(int head_dim) noexcept {
    return sizeof(CacheT) > 1 || head_dim % 32 == 0;
  }

  /// The fused FP8 path (QuantizingRows) exists. Its encoder rounds subnormals with MXCSR's
  /// rounding mode, which is to nearest: run_cache_write runs under the default MXCSR.
  static constexpr bool quantizes_bf16_rows = true;

  /// 32 cache bytes of row `token`, from its byte `offset` (a multiple of 32).
  template <class CacheT>
  static PAGEDATTN_ALWAYS_INLINE __m256i load_row_bytes(CacheRows<CacheT> rows, int token, int offset) noexcept {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        reinterpret_cast<const std::byte*>(rows[static_cast<std::size_t>(token)]) + offset));
  }
  /// The same for an FP8 cache fed by bf16 rows: 32 elements quantized (one byte each).
  template <class Format>
  static PAGEDATTN_ALWAYS_INLINE __m256i load_row_bytes(QuantizingRows<Format> rows, int token, int offset) noexcept {
    return quantize_bf16x32(rows[static_cast<std::size_t>(token)] + offset, rows.constants);
  }

  /// Writes the K rows of a whole 16-token group starting at `group` (64-byte aligned) with
  /// streaming stores, line by line: rows (CacheRows<CacheT>, or QuantizingRows for an FP8
  /// CacheT) are read as 32-bit lanes (one 4-byte unit, or two 2-byte FP8 units) for tokens 0-7
  /// and 8-15, each half transposed; lane j of both halves is the line of unit j (4-byte
  /// units), or of FP8 units 2j and 2j + 1 once split_unit_pairs has separated them. Calls
  /// each_line() once per line, after each step's 8 lines.
  template <class CacheT, class Rows, class EachLine>
  static PAGEDATTN_ALWAYS_INLINE void stream_key_group(Rows rows, CacheT* group, int head_dim,
                                                      EachLine& each_line) noexcept {
    const int words = head_dim * static_cast<int>(sizeof(CacheT)) / 4;  // a multiple of 8
    auto* target = reinterpret_cast<std::byte*>(group);
    for (int w0 = 0; w0 < words; w0 += 8) {
      __m256i low[8];   // tokens 0-7
      __m256i high[8];  // tokens 8-15
      for (int t = 0; t < 8; ++t) {
        low[t] = load_row_bytes(rows, t, 4 * w0);
        high[t] = load_row_bytes(rows, 8 + t, 4 * w0);
      }
      transpose8x8(low);
      transpose8x8(high);
      for (int j = 0; j < 8; ++j) {
        auto* line = reinterpret_cast<__m256i*>(target + 64 * (w0 + j));
        if constexpr (key_unit_bytes<CacheT> == 4) {
          _mm256_stream_si256(line, low[j]);
          _mm256_stream_si256(line + 1, high[j]);
        } else {
          const __m256i a = split_unit_pairs(low[j]);
          const __m256i b = split_unit_pairs(high[j]);
          _mm256_stream_si256(line, _mm256_permute2x128_si256(a, b, 0x20));
          _mm256_stream_si256(line + 1, _mm256_permute2x128_si256(a, b, 0x31));
        }
      }
      // Once per line written, outside the store loop (a counter branch in it came slower).
      for (int j = 0; j < 8; ++j) each_line();
    }
  }

  /// Writes one V line of a streamed group (see stream_value_group): 16 dims of `rows` (1, 2 or
  /// 4 tokens for 4-, 2- and 1-byte types) at `target` (64-byte aligned), two 32-byte streams.
  template <class CacheT, std::size_t Tokens>
  static PAGEDATTN_ALWAYS_INLINE void stream_value_line(CacheT* target, const CacheT* const (&rows)[Tokens]) noexcept {
    auto* line = reinterpret_cast<__m256i*>(target);
    if constexpr (Tokens == 1) {
      for (int half = 0; half < 2; ++half) {
        _mm256_stream_si256(line + half, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[0]) + half));
      }
    } else if constexpr (Tokens == 2) {
      for (int half = 0; half < 2; ++half) {
        const U32x8 low = load_widened<2>(rows[0] + 8 * half);
        const U32x8 high = load_widened<2>(rows[1] + 8 * half);
        _mm256_stream_si256(line + half, (low | (high << 16u)).v);
      }
    } else {
      static_assert(Tokens == 4);
      __m256i first;
      __m256i second;
      interleave_byte_rows<Isa>(rows[0], rows[1], rows[2], rows[3], first, second);
      _mm256_stream_si256(line, first);
      _mm256_stream_si256(line + 1, second);
    }
  }

  /// Writes one V line of a streamed group into an FP8 cache from bf16 rows: dims chunk..+15
  /// of tokens `token`..`token` + 3, quantized; each pair's codes interleave byte by byte
  /// (even token's code in the low byte of a 16-bit lane), as stream_value_line stores them.
  template <class Format>
  static PAGEDATTN_ALWAYS_INLINE void stream_quantized_value_line(Minifloat<Format>* target, QuantizingRows<Format> rows,
                                                                  int token, int chunk) noexcept {
    const auto codes = [&](int i) {
      return quantize_bf16x16(rows[static_cast<std::size_t>(token + i)] + chunk, rows.constants);
    };
    auto* line = reinterpret_cast<__m256i*>(target);
    _mm256_stream_si256(line, (codes(0) | (codes(1) << 8u)).v);
    _mm256_stream_si256(line + 1, (codes(2) | (codes(3) << 8u)).v);
  }

  /// Makes the streaming stores visible before any later store (e.g. a flag another thread reads).
  static PAGEDATTN_ALWAYS_INLINE void end_streaming() noexcept { _mm_sfence(); }
};
}  // namespace avx2

/// AVX2 specialisation for the avx2 tier and amx_emulated.
template <Avx2FamilyTag Isa>
struct CacheWriter<Isa> {
  /// See the primary template.
  template <class InputT, class CacheT>
  static void run(const CacheWriteArgs<InputT, CacheT>& args) noexcept {
    write_token_runs<Isa, avx2::CacheKernels<Isa>>(args);
  }
};

}  // namespace pagedattn::backend
