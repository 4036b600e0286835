// TileGemm for the vector tiers (avx2, avx512, avx512bf16; the AMX tiles' vector products), written
// once over VectorKit<Isa>: register blocks of rows x token vectors (QK^T) and rows x dim vectors
// (P.V); each K/V element of a tile is converted once per block of rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/gemm/tile_gemm.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace vector_detail {
/// Calls `f.template operator()<N>()` for the runtime count n in [1, Max].
template <int Max, class F>
PAGEDATTN_ALWAYS_INLINE void with_count(int n, F&& f) noexcept {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (void)((n == I + 1 ? (f.template operator()<I + 1>(), true) : false) || ...);
  }(std::make_integer_sequence<int, Max>{});
}

/// The row split's operand (see VectorKit::split_pair_row): a register block's rows of the other
/// operand times the kit's pair_row_factor. Empty where the row split does not apply.
template <class Kit, bool Enabled>
struct ScaledOperand {
  static constexpr bool enabled = false;
};

template <class Kit>
struct ScaledOperand<Kit, true> {
  static constexpr bool enabled = true;
  /// Rows x columns that fit: 4 rows (QK^T's and P.V's stream blocks) of max_head_dim.
  static constexpr int capacity = 4 * max_head_dim;
  alignas(64) float values[capacity];  ///< The rows taken, `columns` floats apart.
  int first_row = -1;                  ///< The block's first row (-1: none taken yet).
  bool usable = false;                 ///< Whether `values` may be multiplied with a row split.

  /// Takes rows [r0, r0 + rows) of `x` (`x` at row r0, rows `x_stride` apart) times the factor,
  /// unless rows r0.. are already held; returns `usable`: whether they fit, the kit's row split
  /// is usable on this thread and every value stayed finite (|x| < 2^16, or a non-finite x:
  /// those blocks take the other splits, whose products see x itself).
  PAGEDATTN_ALWAYS_INLINE bool take(int r0, const float* x, int x_stride, int rows, int columns) noexcept {
    if (first_row == r0) return usable;
    first_row = r0;
    usable = false;
    if (rows * columns > capacity || !Kit::pair_rows_usable()) return usable;
    using vec = typename Kit::vec;
    const vec factor = Kit::broadcast(Kit::pair_row_factor);
    vec non_finite = Kit::zero();  // 0 * a non-finite value is NaN, and NaN stays
    bool tail_finite = true;
    for (int r = 0; r < rows; ++r) {
      const float* row = x + r * x_stride;
      float* out = values + r * columns;
      int c = 0;
      for (; c + Kit::width <= columns; c += Kit::width) {
        const vec scaled = Kit::mul(Kit::load(row + c), factor);
        Kit::store(out + c, scaled);
        non_finite = Kit::fma(scaled, Kit::zero(), non_finite);
      }
      for (; c < columns; ++c) {
        out[c] = row[c] * Kit::pair_row_factor;
        tail_finite = tail_finite && std::isfinite(out[c]);
      }
    }
    float lanes[Kit::width];
    Kit::store(lanes, non_finite);
    usable = tail_finite && std::all_of(lanes, lanes + Kit::width, [](float lane) { return lane == 0.0f; });
    return usable;
  }
};
}  // namespace vector_detail

/// The tag of a product run that splits whole pair rows (VectorKit::split_pair_row), its other
/// operand taken times pair_row_factor: two vectors per register block, lanes interleaved.
struct RowSplit {};

/// The register-blocked products of every tier with a VectorKit (see TileGemm's contract).
template <class Isa, class CacheT>
struct VectorTileGemm {
  using kit = VectorKit<Isa>;
  using vec = typename kit::vec;
  static constexpr int width = kit::width;
  static constexpr float value_scale = kit::template value_scale<CacheT>;
  using layout = KvBlockLayout<CacheT>;
  /// See TileGemm::widens: the kit decides for the types it converts (the paired ones); float
  /// tiles are already floats.
  static constexpr bool widens = layout::paired && kit::template widens<CacheT>;
  using float_layout = KvBlockLayout<float>;
  using code_screen = typename kit::template code_screen<CacheT>;
  /// Whether the kit splits whole pair rows of this type (see VectorKit::split_pair_row); the
  /// products then do so in register blocks of two vectors wherever the codes were screened and
  /// the other operand scales, and in the other splits elsewhere, with the same results.
  static constexpr bool splits_rows = layout::paired && kit::template splits_pair_rows<CacheT>;
  /// The scaled operand of a run split as `Split` (empty unless the row split applies).
  template <class Split>
  using ScaledOperand = vector_detail::ScaledOperand<kit, splits_rows && std::is_same_v<Split, ScreenedSplit>>;

  /// Adjacent 16-token K groups (16-dim V strips) of a paired layout, each contiguous, that one
  /// register block of few rows reads (see qk_block_vectors): one for 2-byte types, read as a
  /// single sequential stream; two for 1-byte types, whose table conversion leaves the products
  /// of one group's accumulators latency-bound (DESIGN.md), and whose groups are half as long.
  static constexpr int stream_groups = sizeof(CacheT) == 1 ? 2 : 1;
  /// Vectors of such a block: stream_groups groups, at most the kit's widest QK^T and tall P.V
  /// blocks (AVX2's 8-lane blocks already span one group in two vectors).
  static constexpr int stream_vectors =
      std::min({stream_groups * kv_token_group / width, kit::qk_vectors, kit::pv_tall_vectors});
  static_assert(stream_vectors >= kv_token_group / width, "a stream block spans at least one group");

  /// QK^T's register block width for `rows` rows: tiles of one block of rows (decode: a token's
  /// query heads of one KV head) load each K element once whatever the width, and in blocks of
  /// stream_vectors they read K as one stream (two adjacent ones for 1-byte types), which
  /// hardware prefetchers follow far better than a few interleaved 4 KiB apart (DESIGN.md). Each
  /// accumulator sees the same sequence of products in any shape, so results do not depend on it.
  static constexpr int qk_block_vectors(int rows) noexcept {
    return layout::paired && rows <= kit::qk_rows ? stream_vectors : kit::qk_vectors;
  }

  /// Whether P.V streams V (see qk_block_vectors) for `rows` rows: tiles of at most
  /// pv_tall_rows rows of a paired layout. (Float V is token-major: wide blocks read it in order.)
  static constexpr bool pv_streams(int rows) noexcept { return layout::paired && rows <= kit::pv_tall_rows; }

  /// See TileGemm::qk_blocks.
  static constexpr int qk_blocks(int rows, int /*head_dim*/, int num_tokens) noexcept {
    return ceil_div(rows, kit::qk_rows) * ceil_div(num_tokens / width, qk_block_vectors(rows));
  }

  /// See TileGemm::pv_blocks.
  static constexpr int pv_blocks(int rows, int head_dim, int /*num_tokens*/) noexcept {
    if (pv_streams(rows)) return ceil_div(head_dim / width, stream_vectors);
    return tall(rows) ? ceil_div(rows, kit::pv_tall_rows) * ceil_div(head_dim / width, kit::pv_tall_vectors)
                      : ceil_div(rows, kit::pv_rows) * ceil_div(head_dim / width, kit::pv_vectors);
  }

  /// See TileGemm::qk.
  template <class AfterBlock = NoBlockHook>
  static void qk(const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                 int token_begin, int num_tokens, float* scores, int score_stride,
                 std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept {
    screened(key_runs(k_block, head_dim, token_begin, num_tokens), [&](auto split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      ScaledOperand<decltype(split)> scaled;
      each_qk_block(rows, num_tokens, after_block, [&]<int R, int C>(int r0, int v0) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
        with_block_split<R, C>(scaled, split, r0, q + r0 * q_stride, q_stride, head_dim,
                               [&](const float* block_q, int stride, auto block_split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
                                 // token: a group's first where C == 2
                                 qk_block<R, C>(block_q, stride, k_block, head_dim, token_begin + v0 * width,
                                                scores + r0 * score_stride + v0 * width, score_stride,
                                                r0 == 0 ? prefetch_bytes : 0, block_split);
                               });
      });
    });
  }

  /// See TileGemm::dots_bf16_queries: the kit loads this cache type as bf16 pairs.
  static constexpr bool dots_bf16_queries = kit::template loads_bf16_pairs<CacheT>;
  /// See TileGemm::uses_tiles: register blocks only.
  static constexpr bool uses_tiles(int /*rows*/, int /*head_dim*/) noexcept { return false; }
  /// See TileGemm::begin: nothing to set up.
  static void begin(const TileScratch& /*scratch*/) noexcept {}
  /// See TileGemm::end: nothing to tear down.
  static void end(const TileScratch& /*scratch*/) noexcept {}

  /// See TileGemm::qk_bf16.
  template <class AfterBlock = NoBlockHook>
  static void qk_bf16(const bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                      int token_begin, int num_tokens, float score_scale, float* scores, int score_stride,
                      const TileScratch& /*scratch*/, std::ptrdiff_t prefetch_bytes = 0,
                      AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    each_qk_block(rows, num_tokens, after_block, [&]<int R, int C>(int r0, int v0) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      qk_bf16_block<R, C>(q + r0 * q_stride, q_stride, k_block, head_dim, token_begin + v0 * width, score_scale,
                          scores + r0 * score_stride + v0 * width, score_stride, r0 == 0 ? prefetch_bytes : 0);
    });
  }

  /// See TileGemm::pv.
  template <class AfterBlock = NoBlockHook>
  static void pv(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
                 int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
                 std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept {
    // Whole pairs only: an odd tail's partner is split exactly (see pv_last_token).
    const int pairs = num_tokens / 2;
    screened(value_runs(v_block, block_size, head_dim, token_begin, pairs),
             [&](auto split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
               ScaledOperand<decltype(split)> scaled;
               each_pv_block(rows, head_dim, after_block, [&]<int R, int C>(int r0, int dim) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
                 with_block_split<R, C>(scaled, split, r0, p + r0 * p_stride, p_stride, num_tokens,
                                        [&](const float* block_p, int stride, auto block_split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
                                          // dim: a strip's first where C == 2
                                          pv_block<R, C>(block_p, stride, v_block, block_size, head_dim, token_begin,
                                                         pairs, dim, acc + r0 * acc_stride, acc_stride,
                                                         r0 == 0 ? prefetch_bytes : 0, block_split);
                                        });
               });
             });
    each_odd_tail_block(rows, head_dim, num_tokens, [&]<int R, int C>(int r0, int dim) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      pv_last_token<R, C>(p + r0 * p_stride + num_tokens - 1, p_stride, v_block, block_size, head_dim,
                          token_begin + num_tokens - 1, dim, acc + r0 * acc_stride, acc_stride);
    });
  }

  /// See TileGemm::pv_bf16 (float probabilities).
  template <class AfterBlock = NoBlockHook>
  static void pv_bf16(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
                      int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
                      const TileScratch& scratch, std::ptrdiff_t prefetch_bytes = 0,
                      AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    // The probabilities rounded once, rows of whole cache lines; pair i is tokens 2i and 2i + 1.
    constexpr int line = 64 / static_cast<int>(sizeof(bf16_t));
    bf16_t* rounded = scratch.probs;
    const int stride = (num_tokens + line - 1) / line * line;
    for (int r = 0; r < rows; ++r) {
      for (int t = 0; t < num_tokens; t += width) {
        kit::round_to_bf16(p + r * p_stride + t, num_tokens - t < width ? num_tokens - t : width,
                           rounded + r * stride + t);
      }
    }
    pv_bf16(rounded, rows, stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride, scratch,
            prefetch_bytes, after_block);
  }

  /// See TileGemm::pv_bf16 (bf16 probabilities): `p` is only read.
  template <class AfterBlock = NoBlockHook>
  static void pv_bf16(bf16_t* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
                      int token_begin, int num_tokens, float* acc, int acc_stride, const TileScratch& /*scratch*/,
                      std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    each_pv_block(rows, head_dim, after_block, [&]<int R, int C>(int r0, int dim) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      pv_bf16_block<R, C>(p + r0 * p_stride, p_stride, v_block, block_size, head_dim, token_begin, num_tokens / 2,
                          dim, acc + r0 * acc_stride, acc_stride, r0 == 0 ? prefetch_bytes : 0);
    });
    each_odd_tail_block(rows, head_dim, num_tokens, [&]<int R, int C>(int r0, int dim) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      pv_bf16_last_token<R, C>(p + r0 * p_stride + num_tokens - 1, p_stride, v_block, block_size, head_dim,
                               token_begin + num_tokens - 1, dim, acc + r0 * acc_stride, acc_stride);
    });
  }

  /// See TileGemm::widen_keys.
  static void widen_keys(const CacheT* k_block, int head_dim, int token_begin, int num_tokens,
                         float* k_tile) noexcept {
    screened(key_runs(k_block, head_dim, token_begin, num_tokens), [&](auto split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      for (int token = 0; token < num_tokens; token += width) {
        for (int pair = 0; pair < head_dim / 2; ++pair) {
          vec even[1], odd[1];
          load_pairs<1>(k_block + layout::key_index(head_dim, token_begin + token, 2 * pair),
                        key_odd_offset(head_dim), even, odd, split);
          kit::store(k_tile + float_layout::key_index(head_dim, token, 2 * pair), even[0]);
          kit::store(k_tile + float_layout::key_index(head_dim, token, 2 * pair + 1), odd[0]);
        }
      }
    });
  }

  /// See TileGemm::widen_values.
  static void widen_values(const CacheT* v_block, int block_size, int head_dim, int token_begin,
                           int num_tokens, float* v_tile) noexcept {
    // Dims outer: the source runs contiguously over tokens (a dim-major walk would stride by a
    // whole 16-dim column of the block, the same L1 set every time).
    screened(value_runs(v_block, block_size, head_dim, token_begin, (num_tokens + 1) / 2),
             [&](auto split) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      for (int dim = 0; dim < head_dim; dim += width) {
        for (int token = 0; token < num_tokens; token += 2) {
          vec even[1], odd[1];
          load_pairs<1>(v_block + layout::value_index(block_size, head_dim, token_begin + token, dim),
                        value_odd_offset(head_dim), even, odd, split);
          kit::store(v_tile + float_layout::value_index(num_tokens, head_dim, token, dim), even[0]);
          kit::store(v_tile + float_layout::value_index(num_tokens, head_dim, token + 1, dim), odd[0]);
        }
      }
    });
  }

 protected:
  /// Hints the pair block `bytes_ahead` bytes past `source` (the next tile's) into L2 (also
  /// the AMX tiles' FP8 conversion's hint).
  PAGEDATTN_ALWAYS_INLINE static void prefetch_pair(const CacheT* source, std::ptrdiff_t odd_offset,
                                                    std::ptrdiff_t bytes_ahead) noexcept {
    // Written out, not through a helper: GCC deems a function holding only prefetches pure and
    // deletes calls to it unless they are inlined first.
    const auto address = reinterpret_cast<std::uintptr_t>(source) + static_cast<std::uintptr_t>(bytes_ahead);
    __builtin_prefetch(reinterpret_cast<const void*>(address), 0, 2);
    if constexpr (!layout::paired) {
      __builtin_prefetch(reinterpret_cast<const void*>(address + static_cast<std::uintptr_t>(odd_offset) * sizeof(CacheT)), 0, 2);
    }
  }

 private:
  static constexpr int ceil_div(int a, int b) noexcept { return (a + b - 1) / b; }

  /// QK^T's walk over register blocks (qk_blocks of them): `block.template operator()<R, C>(r0,
  /// v0)` for R rows from r0 and C token vectors from v0, then `after_block()`.
  template <class AfterBlock, class Block>
  PAGEDATTN_ALWAYS_INLINE static void each_qk_block(int rows, int num_tokens, AfterBlock& after_block,
                                                    Block&& block) noexcept {
    const int vectors = num_tokens / width, max_vectors = qk_block_vectors(rows);
    for (int r0 = 0; r0 < rows; r0 += kit::qk_rows) {
      const int block_rows = rows - r0 < kit::qk_rows ? rows - r0 : kit::qk_rows;
      for (int v0 = 0; v0 < vectors; v0 += max_vectors) {
        const int block_vectors = vectors - v0 < max_vectors ? vectors - v0 : max_vectors;
        vector_detail::with_count<kit::qk_rows>(block_rows, [&]<int R>() PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          vector_detail::with_count<kit::qk_vectors>(block_vectors, [&]<int C>() PAGEDATTN_ALWAYS_INLINE_LAMBDA {
            block.template operator()<R, C>(r0, v0);
          });
        });
        after_block();
      }
    }
  }

  /// Runs `work(split)` once: with ScreenedSplit where the kit's code_screen clears every run of
  /// codes that `runs(note)` names (one `note(first, count)` per contiguous run that the work
  /// splits), else with ExactSplit. The scan reads ahead of the products; in the products, a
  /// screen would need a register that the accumulators leave none of (DESIGN.md).
  template <class Runs, class Work>
  PAGEDATTN_ALWAYS_INLINE static void screened(Runs&& runs, Work&& work) noexcept {
    if constexpr (std::is_same_v<code_screen, ExactSplit>) {
      work(ExactSplit{});
    } else {
      bool clear = true;
      runs([&](const CacheT* first, std::size_t count) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
        clear = clear && code_screen::clear(first, count);
      });
      if (clear) [[likely]] {
        work(ScreenedSplit{});
      } else {
        work(ExactSplit{});
      }
    }
  }

  /// Runs `block(x, x_stride, split)` for a register block of R rows (from r0) and C vectors
  /// whose other operand `x` has `columns` columns: with `scaled`'s copy of the rows and RowSplit
  /// where the row split applies (a screened run, two vectors) and `scaled` takes the rows, else
  /// with `x` itself and the run's `split`.
  template <int R, int C, class Scaled, class Split, class Block>
  PAGEDATTN_ALWAYS_INLINE static void with_block_split(Scaled& scaled, Split split, int r0, const float* x,
                                                       int x_stride, int columns, Block&& block) noexcept {
    if constexpr (Scaled::enabled && C == 2) {
      if (scaled.take(r0, x, x_stride, R, columns)) {
        block(static_cast<const float*>(scaled.values), columns, RowSplit{});
        return;
      }
    }
    block(x, x_stride, split);
  }

  /// The runs (see screened) of K of tokens [token_begin, token_begin + num_tokens), both
  /// multiples of 16: whole groups, one run.
  static auto key_runs(const CacheT* k_block, int head_dim, int token_begin, int num_tokens) noexcept {
    return [=](auto&& note) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      note(k_block + layout::key_index(head_dim, token_begin, 0),
           static_cast<std::size_t>(num_tokens) * static_cast<std::size_t>(head_dim));
    };
  }

  /// The runs (see screened) of V of the `pairs` token pairs from `token_begin` (even): one per
  /// 16-dim strip.
  static auto value_runs(const CacheT* v_block, int block_size, int head_dim, int token_begin, int pairs) noexcept {
    return [=](auto&& note) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      for (int dim = 0; dim < head_dim; dim += 16) {
        note(v_block + layout::value_index(block_size, head_dim, token_begin, dim), static_cast<std::size_t>(pairs) * 32);
      }
    };
  }

  /// Whether pv runs the tall register blocks for `rows` rows.
  static constexpr bool tall(int rows) noexcept {
    return (kit::pv_tall_rows != kit::pv_rows || kit::pv_tall_vectors != kit::pv_vectors) &&
           rows >= kit::pv_tall_rows;
  }

  /// P.V's walk over register blocks (pv_blocks of them) in the shape `rows` asks for:
  /// `block.template operator()<R, C>(r0, dim)` for R rows from r0 and C dim vectors from `dim`,
  /// then `after_block()`.
  template <class AfterBlock, class Block>
  PAGEDATTN_ALWAYS_INLINE static void each_pv_block(int rows, int head_dim, AfterBlock& after_block,
                                                    Block&& block) noexcept {
    if (pv_streams(rows)) {
      pv_shaped<kit::pv_tall_rows, stream_vectors>(rows, head_dim, after_block, block);
    } else if (tall(rows)) {
      pv_shaped<kit::pv_tall_rows, kit::pv_tall_vectors>(rows, head_dim, after_block, block);
    } else {
      pv_shaped<kit::pv_rows, kit::pv_vectors>(rows, head_dim, after_block, block);
    }
  }

  /// P.V's pass for the last token of an odd `num_tokens` (nothing for an even one): the
  /// register blocks of each_pv_block, without after_block. A pass of its own because with the
  /// last token in the pairs' function, GCC 12 kept each block's accumulators on the stack around
  /// the loop (64-row bf16-pair tiles of 64 tokens took 1.05-1.17 times as long;
  /// docs/PERFORMANCE.md).
  template <class Block>
  PAGEDATTN_ALWAYS_INLINE static void each_odd_tail_block(int rows, int head_dim, int num_tokens,
                                                          Block&& block) noexcept {
    if (num_tokens % 2 == 0) return;
    NoBlockHook no_hook;
    each_pv_block(rows, head_dim, no_hook, block);
  }

  /// each_pv_block in register blocks of at most MaxRows x MaxVectors accumulators.
  template <int MaxRows, int MaxVectors, class AfterBlock, class Block>
  static void pv_shaped(int rows, int head_dim, AfterBlock& after_block, Block& block) noexcept {
    const int vectors = head_dim / width;
    for (int r0 = 0; r0 < rows; r0 += MaxRows) {
      const int block_rows = rows - r0 < MaxRows ? rows - r0 : MaxRows;
      for (int v0 = 0; v0 < vectors; v0 += MaxVectors) {
        const int block_vectors = vectors - v0 < MaxVectors ? vectors - v0 : MaxVectors;
        vector_detail::with_count<MaxRows>(block_rows, [&]<int R>() {
          vector_detail::with_count<MaxVectors>(block_vectors, [&]<int C>() {
            block.template operator()<R, C>(r0, v0 * width);
          });
        });
        after_block();
      }
    }
  }

  /// Elements from an unpaired type's even vector to its odd one (K: next dim; V: next token).
  static constexpr std::ptrdiff_t key_odd_offset(int head_dim) noexcept {
    return static_cast<std::ptrdiff_t>(layout::key_index(head_dim, 0, 1) - layout::key_index(head_dim, 0, 0));
  }
  static constexpr std::ptrdiff_t value_odd_offset(int head_dim) noexcept {
    return static_cast<std::ptrdiff_t>(layout::value_index(2, head_dim, 1, 0) - layout::value_index(2, head_dim, 0, 0));
  }

  /// Pair blocks per load in the inner loops (2 for FP8 on AVX-512: one 64-byte load).
  static constexpr int load_blocks = layout::paired ? kit::template pair_blocks_per_load<CacheT> : 1;

  /// The `Blocks` consecutive pair blocks at `source` (16 or 8 even and odd elements each) as
  /// floats; `odd_offset` locates an unpaired type's odd vector (Blocks is 1 then). `Split` is
  /// ExactSplit or ScreenedSplit (see screened).
  template <int Blocks, class Split>
  PAGEDATTN_ALWAYS_INLINE static void load_pairs(const CacheT* source, std::ptrdiff_t odd_offset,
                                                 vec (&even)[Blocks], vec (&odd)[Blocks], Split /*split*/) noexcept {
    if constexpr (layout::paired && std::is_same_v<Split, ScreenedSplit>) {
      kit::template split_screened_pairs<CacheT, Blocks>(source, even, odd);
    } else if constexpr (layout::paired) {
      kit::template split_pairs<CacheT, Blocks>(source, even, odd);
    } else {
      static_assert(Blocks == 1);
      even[0] = kit::load(source);
      odd[0] = kit::load(source + odd_offset);
    }
  }

  /// The inner step shared by QK^T and P.V: sum[r][c] += x[r][2i] * even + x[r][2i + 1] * odd for
  /// the `Blocks` pairs i from `pair`, even/odd loaded from `source[c]`, which then advance.
  template <int R, int C, int Blocks, class Split>
  PAGEDATTN_ALWAYS_INLINE static void fma_pairs(const float* x, int x_stride, int pair, const CacheT* (&source)[C],
                                                std::ptrdiff_t step, std::ptrdiff_t odd_offset,
                                                std::ptrdiff_t prefetch_bytes, Split split, vec (&sum)[R][C]) noexcept {
    vec even[C][Blocks], odd[C][Blocks];
    if constexpr (std::is_same_v<Split, RowSplit>) {
      static_assert(C == 2 && Blocks == 1, "a row split fills two vectors from one row");
      if (prefetch_bytes != 0) prefetch_pair(source[0], odd_offset, prefetch_bytes);  // one row, one line
      vec first[2], second[2];
      kit::template split_pair_row<CacheT>(source[0], first, second);
      for (int c = 0; c < C; ++c) {
        even[c][0] = first[c];
        odd[c][0] = second[c];
        source[c] += step;
      }
    } else {
      for (int c = 0; c < C; ++c) {
        if (prefetch_bytes != 0) prefetch_pair(source[c], odd_offset, prefetch_bytes);
        load_pairs<Blocks>(source[c], odd_offset, even[c], odd[c], split);
        source[c] += Blocks * step;
      }
    }
    for (int b = 0; b < Blocks; ++b) {
      for (int r = 0; r < R; ++r) {
        const vec x_even = kit::broadcast(x[r * x_stride + 2 * (pair + b)]);
        const vec x_odd = kit::broadcast(x[r * x_stride + 2 * (pair + b) + 1]);
        for (int c = 0; c < C; ++c) {
          sum[r][c] = kit::fma(x_even, even[c][b], sum[r][c]);
          sum[r][c] = kit::fma(x_odd, odd[c][b], sum[r][c]);
        }
      }
    }
  }

  /// The inner step of qk_bf16 and pv_bf16: sum[r][c] += x[r][2i] * first + x[r][2i + 1] * second
  /// (bf16 pair dot products) for the `Blocks` pair blocks i from `pair` at `source[c]`, which
  /// then advance.
  template <int R, int C, int Blocks>
  PAGEDATTN_ALWAYS_INLINE static void dot_pairs(const bf16_t* x, int x_stride, int pair, const CacheT* (&source)[C],
                                                std::ptrdiff_t step, std::ptrdiff_t prefetch_bytes,
                                                vec (&sum)[R][C]) noexcept {
    typename kit::bf16_pairs pairs[C][Blocks];
    for (int c = 0; c < C; ++c) {
      if (prefetch_bytes != 0) prefetch_pair(source[c], 0, prefetch_bytes);
      kit::load_bf16_pairs(source[c], pairs[c]);
      source[c] += Blocks * step;
    }
    for (int b = 0; b < Blocks; ++b) {
      for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
          sum[r][c] = kit::dot_bf16_pairs(sum[r][c], pairs[c][b], x + r * x_stride + 2 * (pair + b));
        }
      }
    }
  }

  /// scores[R rows][C vectors of tokens] for tokens from `token`, split as `Split` says.
  template <int R, int C, class Split>
  PAGEDATTN_ALWAYS_INLINE static void qk_block(const float* q, int q_stride, const CacheT* k_block,
                                               int head_dim, int token, float* scores, int score_stride,
                                               std::ptrdiff_t prefetch_bytes, Split split) noexcept {
    vec sum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) sum[r][c] = kit::zero();
    }
    const CacheT* source[C];
    for (int c = 0; c < C; ++c) source[c] = k_block + layout::key_index(head_dim, token + c * width, 0);
    const auto step = static_cast<std::ptrdiff_t>(layout::key_index(head_dim, 0, 2));
    const std::ptrdiff_t odd_offset = key_odd_offset(head_dim);
    for (int pair = 0; pair < head_dim / 2; pair += load_blocks) {  // head_dim / 2 is a multiple of 8
      fma_pairs<R, C, load_blocks>(q, q_stride, pair, source, step, odd_offset, prefetch_bytes, split, sum);
    }
    if constexpr (std::is_same_v<Split, RowSplit>) {
      for (int r = 0; r < R; ++r) kit::interleave_lanes(sum[r][0], sum[r][1]);
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) kit::store(scores + r * score_stride + c * width, sum[r][c]);
    }
  }

  /// qk_bf16's scores[R rows][C vectors of tokens] for tokens from `token`: one dot product of
  /// bf16 pairs per (row, token vector, pair of dims).
  template <int R, int C>
  PAGEDATTN_ALWAYS_INLINE static void qk_bf16_block(const bf16_t* q, int q_stride, const CacheT* k_block,
                                                    int head_dim, int token, float score_scale, float* scores,
                                                    int score_stride, std::ptrdiff_t prefetch_bytes) noexcept {
    vec sum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) sum[r][c] = kit::zero();
    }
    const CacheT* source[C];
    for (int c = 0; c < C; ++c) source[c] = k_block + layout::key_index(head_dim, token + c * width, 0);
    constexpr int blocks = kit::template bf16_pair_blocks<CacheT>;
    const auto step = static_cast<std::ptrdiff_t>(layout::key_index(head_dim, 0, 2));
    for (int pair = 0; pair < head_dim / 2; pair += blocks) {  // head_dim / 2 is a multiple of 8
      dot_pairs<R, C, blocks>(q, q_stride, pair, source, step, prefetch_bytes, sum);
    }
    const vec factor = kit::broadcast(score_scale);  // the pairs hold value_scale times K already
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) kit::store(scores + r * score_stride + c * width, kit::mul(sum[r][c], factor));
    }
  }

  /// pv_bf16's acc[R rows][C vectors of dims from `dim`] += P . V over the `pairs` token pairs from
  /// `token` (even), P already rounded (rows `p_stride` apart): one dot product of bf16 pairs per
  /// (row, dim vector, pair of tokens).
  template <int R, int C>
  PAGEDATTN_ALWAYS_INLINE static void pv_bf16_block(const bf16_t* p, int p_stride, const CacheT* v_block,
                                                    int block_size, int head_dim, int token, int pairs,
                                                    int dim, float* acc, int acc_stride,
                                                    std::ptrdiff_t prefetch_bytes) noexcept {
    constexpr int blocks = kit::template bf16_pair_blocks<CacheT>;
    // Without pairs, nothing to do; returning here also keeps GCC 12 from spilling the
    // accumulators where a loop that ran and one that did not would meet.
    if (pairs <= 0) return;
    vec sum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) sum[r][c] = kit::load(acc + r * acc_stride + dim + c * width);
    }
    const CacheT* source[C];
    for (int c = 0; c < C; ++c) source[c] = v_block + layout::value_index(block_size, head_dim, token, dim + c * width);
    const auto step = static_cast<std::ptrdiff_t>(layout::value_index(block_size, head_dim, 2, 0) -
                                                  layout::value_index(block_size, head_dim, 0, 0));
    int pair = 0;
    for (; pair + blocks <= pairs; pair += blocks) {
      dot_pairs<R, C, blocks>(p, p_stride, pair, source, step, prefetch_bytes, sum);
    }
    for (; pair < pairs; ++pair) dot_pairs<R, C, 1>(p, p_stride, pair, source, step, 0, sum);
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) kit::store(acc + r * acc_stride + dim + c * width, sum[r][c]);
    }
  }

  /// pv_bf16's acc[R rows][C vectors of dims from `dim`] += p[r * p_stride] * V[token] for the one
  /// token `token` (even: the last of an odd count), whose partner may be an unwritten position:
  /// zeroed in V and in P.
  template <int R, int C>
  PAGEDATTN_ALWAYS_INLINE static void pv_bf16_last_token(const bf16_t* p, int p_stride, const CacheT* v_block,
                                                         int block_size, int head_dim, int token, int dim,
                                                         float* acc, int acc_stride) noexcept {
    typename kit::bf16_pairs values[C][1];
    for (int c = 0; c < C; ++c) {
      kit::load_bf16_pairs(v_block + layout::value_index(block_size, head_dim, token, dim + c * width), values[c]);
      values[c][0] = kit::first_of_pairs(values[c][0]);
    }
    for (int r = 0; r < R; ++r) {
      const bf16_t last[2] = {p[r * p_stride], bf16_t(0.0f)};
      for (int c = 0; c < C; ++c) {
        float* out = acc + r * acc_stride + dim + c * width;
        kit::store(out, kit::dot_bf16_pairs(kit::load(out), values[c][0], last));
      }
    }
  }

  /// acc[R rows][C vectors of dims from `dim`] += P . V over the `pairs` token pairs from `token`
  /// (even), split as `Split` says.
  template <int R, int C, class Split>
  PAGEDATTN_ALWAYS_INLINE static void pv_block(const float* p, int p_stride, const CacheT* v_block,
                                               int block_size, int head_dim, int token, int pairs, int dim,
                                               float* acc, int acc_stride, std::ptrdiff_t prefetch_bytes,
                                               Split split) noexcept {
    // Without pairs, nothing to do (and no accumulators spilled where the loops would meet).
    if (pairs <= 0) return;
    vec sum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) sum[r][c] = kit::load(acc + r * acc_stride + dim + c * width);
    }
    if constexpr (std::is_same_v<Split, RowSplit>) {  // the row split's dims: even, then odd ones
      for (int r = 0; r < R; ++r) kit::deinterleave_lanes(sum[r][0], sum[r][1]);
    }
    const CacheT* source[C];
    for (int c = 0; c < C; ++c) {
      source[c] = v_block + layout::value_index(block_size, head_dim, token, dim + c * width);
    }
    const auto step = static_cast<std::ptrdiff_t>(layout::value_index(block_size, head_dim, 2, 0) -
                                                  layout::value_index(block_size, head_dim, 0, 0));
    const std::ptrdiff_t odd_offset = value_odd_offset(head_dim);
    int pair = 0;
    for (; pair + load_blocks <= pairs; pair += load_blocks) {
      fma_pairs<R, C, load_blocks>(p, p_stride, pair, source, step, odd_offset, prefetch_bytes, split, sum);
    }
    for (; pair < pairs; ++pair) fma_pairs<R, C, 1>(p, p_stride, pair, source, step, odd_offset, 0, split, sum);
    if constexpr (std::is_same_v<Split, RowSplit>) {
      for (int r = 0; r < R; ++r) kit::interleave_lanes(sum[r][0], sum[r][1]);
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) kit::store(acc + r * acc_stride + dim + c * width, sum[r][c]);
    }
  }

  /// acc[R rows][C vectors of dims from `dim`] += p[r * p_stride] * V[token] for the one token
  /// `token` (even: the last of an odd count), whose partner may be an unwritten position, never
  /// scanned: only the pair's even half is used, split exactly.
  template <int R, int C>
  PAGEDATTN_ALWAYS_INLINE static void pv_last_token(const float* p, int p_stride, const CacheT* v_block,
                                                    int block_size, int head_dim, int token, int dim, float* acc,
                                                    int acc_stride) noexcept {
    vec even[C][1], odd[C][1];
    for (int c = 0; c < C; ++c) {
      load_pairs<1>(v_block + layout::value_index(block_size, head_dim, token, dim + c * width),
                    value_odd_offset(head_dim), even[c], odd[c], ExactSplit{});
    }
    for (int r = 0; r < R; ++r) {
      const vec p_last = kit::broadcast(p[r * p_stride]);
      for (int c = 0; c < C; ++c) {
        float* out = acc + r * acc_stride + dim + c * width;
        kit::store(out, kit::fma(p_last, even[c][0], kit::load(out)));
      }
    }
  }
};

/// TileGemm of the vector tiers: their register-blocked products (the AMX tags have their own,
/// backend/amx/tile_gemm.hpp).
template <class Isa, class CacheT>
  requires(Isa::id != IsaId::scalar && !AmxTag<Isa>)
struct TileGemm<Isa, CacheT> : VectorTileGemm<Isa, CacheT> {};

}  // namespace pagedattn::backend
