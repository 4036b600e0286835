// TileGemm of the AMX tags (amx: the CPU's tiles; amx_emulated: the software tiles): QK^T and P.V
// of bf16 queries with bf16 or FP8 caches in AMX-BF16 tiles (TDPBF16PS) where the step's rule
// (uses_tiles) says so; every other product is the vector one of the same tag (VectorTileGemm).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "pagedattn/backend/amx/emulated_tiles.hpp"
#include "pagedattn/backend/amx/tile_config.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/backend/vector/tile_gemm.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
#include "pagedattn/backend/amx/native_tiles.hpp"
#endif

namespace pagedattn::backend {

namespace amx {
/// The tile operations of an AMX tag: the CPU's for isa::amx, the emulation's for amx_emulated.
template <class Isa>
struct TilesOf {
  using type = EmulatedTiles<Isa>;
};
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
template <>
struct TilesOf<isa::amx> {
  using type = NativeTiles<isa::amx>;
};
#endif
}  // namespace amx

/// AMX products (see TileGemm's contract). Tiles 0-3 hold C (2 row blocks x 2 K groups or V
/// strips), 4-5 the A tiles (16 query rows x 32 dims, or 16 rows x 32 probabilities; a lane under
/// 16 rows configures A and C tiles of its own height, amx::attention_tile_config), 6-7 the B
/// tiles (a K group's 16 positions x 32 dims, or a V strip's 32 positions x 16 dims): each K and V
/// tile feeds 2 row blocks, each A tile 2 columns of C, and C stays in its tiles across the
/// whole sum. bf16 K and V tiles load straight from the cache (the layout is the B-tile order);
/// FP8 ones are dequantised into bf16 in the kv_tile scratch first (the kit's exact tables).
template <AmxTag Isa, class CacheT>
struct TileGemm<Isa, CacheT> : VectorTileGemm<Isa, CacheT> {
  /// The vector products every other call runs.
  using base = VectorTileGemm<Isa, CacheT>;
  /// The tag's vector kit (bf16 rounding, FP8 to bf16): AVX-512's for amx, AVX2's for
  /// amx_emulated (backend/kernels.hpp includes each where the flags allow).
  using kit = VectorKit<Isa>;
  /// The cache's element order.
  using layout = KvBlockLayout<CacheT>;
  /// The tile operations (the CPU's or the emulation's).
  using tiles_type = typename amx::TilesOf<Isa>::type;
  /// See TileGemm::dots_bf16_queries (bf16 and FP8 caches).
  using base::dots_bf16_queries;
  /// See TileGemm::value_scale (the kit's: FP8 tables carry E4M3's 2^-8).
  using base::value_scale;

  /// See TileGemm::uses_tiles: the step's rule (StepGeometry<Isa, bf16_t, CacheT>::uses_tiles)
  /// for the types that multiply bf16 queries; in tiles, `after_block` is not called.
  static constexpr bool uses_tiles(int rows, int head_dim) noexcept {
    if constexpr (dots_bf16_queries) {
      return StepGeometry<Isa, bf16_t, CacheT>::uses_tiles(rows, head_dim);
    } else {
      return false;
    }
  }

  /// See TileGemm::begin: loads the tile configuration for lanes of 16 rows or more (all 8 tiles
  /// 16 x 64 bytes); a call with fewer rows reconfigures the A and C tiles to its height.
  static void begin(const TileScratch& scratch) noexcept {
    if constexpr (dots_bf16_queries) configure(scratch, amx::tile_rows);
  }

  /// See TileGemm::end: releases the tiles (the thread leaves with no tile state in use).
  static void end(const TileScratch& scratch) noexcept {
    if constexpr (dots_bf16_queries) tiles(scratch).release();
  }

  /// See TileGemm::qk_bf16. In tiles, `prefetch_bytes` is taken by FP8 caches only, inside their
  /// conversion (one line per 64 codes; decode streams the cache by it); bf16 tiles leave it to
  /// the hardware prefetcher: on an AMX Xeon the hint loops held 31% of QK^T's and 20% of P.V's
  /// samples, and without them (and a faster query copy) causal prefill ran 1.15x and the
  /// 512 x 10,000 case 1.3x as fast (DESIGN.md, "AMX back-end").
  template <class AfterBlock = NoBlockHook>
  static void qk_bf16(const bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                      int token_begin, int num_tokens, float score_scale, float* scores, int score_stride,
                      const TileScratch& scratch, std::ptrdiff_t prefetch_bytes = 0,
                      AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    if (!uses_tiles(rows, head_dim)) {
      base::qk_bf16(q, rows, q_stride, k_block, head_dim, token_begin, num_tokens, score_scale, scores,
                    score_stride, scratch, prefetch_bytes, after_block);
      return;
    }
    tiles_type t = tiles_for(scratch, rows);
    const int groups = num_tokens / kv_token_group;
    const int row_blocks = ceil_div(rows, amx::tile_rows);
    const std::size_t group_elements = static_cast<std::size_t>(kv_token_group) * static_cast<std::size_t>(head_dim);
    ScoreBlock pending{};
    const bool scaled = score_scale != 1.0f;
    for (int g = 0; g < groups; g += 2) {
      const int pair = std::min(2, groups - g);
      const bf16_t* keys[2] = {};
      for (int j = 0; j < pair; ++j) {
        const CacheT* group = k_block + layout::key_index(head_dim, token_begin + (g + j) * kv_token_group, 0);
        if constexpr (std::is_same_v<CacheT, bf16_t>) {
          keys[j] = group;
        } else {
          bf16_t* staged = reinterpret_cast<bf16_t*>(scratch.kv_tile) + static_cast<std::size_t>(j) * group_elements;
          to_bf16(group, group_elements, staged, prefetch_bytes);
          keys[j] = staged;
        }
      }
      for (int rb = 0; rb < row_blocks; rb += 2) {
        const bf16_t* a = q + static_cast<std::ptrdiff_t>(rb) * amx::tile_rows * q_stride;
        float* c = scores + static_cast<std::ptrdiff_t>(rb) * amx::tile_rows * score_stride + g * kv_token_group;
        with_blocks(std::min(2, row_blocks - rb), pair, [&]<int R, int G>() PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          qk_block<R, G>(t, a, q_stride, keys, head_dim, c, score_stride);
        });
        // The tiles sum value_scale * q.K exactly as pair dot products; the scale (unless 1: the
        // attention kernel scales in its softmax) comes after, one block late: the vector
        // multiplies run while this block's tile products do, and read stores long completed.
        if (scaled) pending.scale(scores, score_stride, score_scale);
        pending = {rb * amx::tile_rows, std::min(rows, (rb + 2) * amx::tile_rows), g * kv_token_group,
                   (g + pair) * kv_token_group};
      }
    }
    if (scaled) pending.scale(scores, score_stride, score_scale);
  }

  /// See TileGemm::pv_bf16 (float probabilities; in tiles, `prefetch_bytes` as in qk_bf16).
  template <class AfterBlock = NoBlockHook>
  static void pv_bf16(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
                      int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
                      const TileScratch& scratch, std::ptrdiff_t prefetch_bytes = 0,
                      AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    if (!uses_tiles(rows, head_dim)) {
      base::pv_bf16(p, rows, p_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride,
                    scratch, prefetch_bytes, after_block);
      return;
    }
    // Rounded once into rows of probs_stride (a whole step's positions).
    bf16_t* probs = scratch.probs;
    for (int r = 0; r < rows; ++r) {
      const float* p_row = p + static_cast<std::ptrdiff_t>(r) * p_stride;
      bf16_t* row = probs + static_cast<std::ptrdiff_t>(r) * probs_stride;
      for (int n = 0; n < num_tokens; n += kit::width) kit::round_to_bf16(p_row + n, std::min(kit::width, num_tokens - n), row + n);
    }
    pv_bf16(probs, rows, probs_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride, scratch,
            prefetch_bytes, after_block);
  }

  /// See TileGemm::pv_bf16 (bf16 probabilities). In tiles, each row's entries from num_tokens to
  /// the end of its last 32-position A tile are set to 0 (so those positions add nothing), and in
  /// a lane of more than 16 rows a partial last block of 16 rows reads up to 15 rows past `rows`.
  template <class AfterBlock = NoBlockHook>
  static void pv_bf16(bf16_t* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
                      int token_begin, int num_tokens, float* acc, int acc_stride, const TileScratch& scratch,
                      std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept
    requires dots_bf16_queries
  {
    if (!uses_tiles(rows, head_dim)) {
      base::pv_bf16(p, rows, p_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride,
                    scratch, prefetch_bytes, after_block);
      return;
    }
    tiles_type t = tiles_for(scratch, rows);
    const int chunks = ceil_div(num_tokens, amx::tile_tokens);
    const int padded = chunks * amx::tile_tokens;
    if (padded != num_tokens) {
      for (int r = 0; r < rows; ++r) {
        std::memset(static_cast<void*>(p + static_cast<std::ptrdiff_t>(r) * p_stride + num_tokens), 0,
                    sizeof(bf16_t) * static_cast<std::size_t>(padded - num_tokens));
      }
    }
    const int row_blocks = ceil_div(rows, amx::tile_rows);
    const int strips = head_dim / amx::tile_columns;
    for (int s = 0; s < strips; s += 2) {
      // V B tiles of strips s and s + 1: chunk c of strip j at values[j] + c * tile elements.
      const bf16_t* values[2][max_chunks] = {};
      for (int j = 0; j < 2; ++j) stage_values(v_block, block_size, head_dim, token_begin, num_tokens, s + j, j,
                                               scratch, prefetch_bytes, values[j]);
      for (int rb = 0; rb < row_blocks; rb += 2) {
        const int block_rows = std::min(2 * amx::tile_rows, rows - rb * amx::tile_rows);
        float* c = acc + static_cast<std::ptrdiff_t>(rb) * amx::tile_rows * acc_stride + s * amx::tile_columns;
        const bf16_t* a = p + static_cast<std::ptrdiff_t>(rb) * amx::tile_rows * p_stride;
        with_blocks(std::min(2, row_blocks - rb), 2, [&]<int R, int S>() PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          // Blocks as tall as the configured tiles (every block of a lane under 16 rows) add
          // straight into acc.
          if (block_rows == R * tile_height(rows)) {
            pv_block<R>(t, a, p_stride, values, chunks, c, acc_stride);
            return;
          }
          // A partial last block of a taller lane: through the staging, so that its rows past
          // `rows` never reach acc.
          float* first = c;
          if constexpr (R == 2) {
            pv_block<1>(t, a, p_stride, values, chunks, c, acc_stride);
            first = c + amx::tile_rows * acc_stride;
          }
          const bf16_t* a_last = a + (R - 1) * amx::tile_rows * p_stride;
          const int last_rows = block_rows - (R - 1) * amx::tile_rows;
          float* staged = reinterpret_cast<float*>(scratch.tile_state);
          constexpr int staged_stride = 2 * amx::tile_columns;
          for (int r = 0; r < amx::tile_rows; ++r) {
            for (int d = 0; d < staged_stride; ++d) {
              staged[r * staged_stride + d] = r < last_rows ? first[static_cast<std::ptrdiff_t>(r) * acc_stride + d] : 0.0f;
            }
          }
          pv_block<1>(t, a_last, p_stride, values, chunks, staged, staged_stride);
          for (int r = 0; r < last_rows; ++r) {
            std::memcpy(first + static_cast<std::ptrdiff_t>(r) * acc_stride, staged + r * staged_stride,
                        sizeof(float) * staged_stride);
          }
        });
      }
    }
  }

 private:
  /// Elements of one bf16 tile (16 rows x 32).
  static constexpr std::size_t tile_elements = amx::tile_bytes / sizeof(bf16_t);
  /// Row stride of the rounded probabilities (a whole step's positions).
  static constexpr int probs_stride = StepGeometry<Isa, bf16_t, CacheT>::shape.kv_tile_tokens;
  /// Most 32-position chunks of a step.
  static constexpr int max_chunks = probs_stride / amx::tile_tokens;

  static constexpr int ceil_div(int a, int b) noexcept { return (a + b - 1) / b; }

  /// Rows [row_begin, row_end) x positions [column_begin, column_end) of the scores that one block
  /// of QK^T tiles stored (empty: nothing yet).
  struct ScoreBlock {
    int row_begin = 0, row_end = 0, column_begin = 0, column_end = 0;

    /// Multiplies the block's scores by `factor`.
    PAGEDATTN_ALWAYS_INLINE void scale(float* scores, int stride, float factor) const noexcept {
      for (int r = row_begin; r < row_end; ++r) {
        float* row = scores + static_cast<std::ptrdiff_t>(r) * stride;
        for (int n = column_begin; n < column_end; n += kit::width) {
          kit::store(row + n, kit::mul(kit::load(row + n), kit::broadcast(factor)));
        }
      }
    }
  };

  /// The tile operations on this worker's tile state (after the C staging and the height record).
  static tiles_type tiles(const TileScratch& scratch) noexcept {
    return tiles_type(scratch.tile_state + amx::c_stage_bytes + amx::height_record_bytes);
  }

  /// Loads the configuration of A and C tiles of `height` rows and records the height.
  static void configure(const TileScratch& scratch, int height) noexcept {
    static constexpr auto configs = [] {
      std::array<amx::TileConfig, amx::tile_rows + 1> all{};
      for (int h = 1; h <= amx::tile_rows; ++h) all[static_cast<std::size_t>(h)] = amx::attention_tile_config(h);
      return all;
    }();
    tiles(scratch).configure(configs[static_cast<std::size_t>(height)]);
    std::memcpy(scratch.tile_state + amx::c_stage_bytes, &height, sizeof height);
  }

  /// Rows of the A and C tiles a lane of `rows` rows multiplies in: its own up to 16.
  static constexpr int tile_height(int rows) noexcept { return std::min(rows, amx::tile_rows); }

  /// The tiles, configured for a lane of `rows` rows: A and C tiles of tile_height(rows) rows
  /// (LDTILECFG only when the recorded height differs: once per work item at most).
  static tiles_type tiles_for(const TileScratch& scratch, int rows) noexcept {
    const int height = tile_height(rows);
    int configured = 0;
    std::memcpy(&configured, scratch.tile_state + amx::c_stage_bytes, sizeof configured);
    if (configured != height) configure(scratch, height);
    return tiles(scratch);
  }

  /// Calls `f.template operator()<R, C>()` for the runtime block counts r, c in {1, 2}.
  template <class F>
  PAGEDATTN_ALWAYS_INLINE static void with_blocks(int r, int c, F&& f) noexcept {
    if (r == 2) {
      if (c == 2) f.template operator()<2, 2>(); else f.template operator()<2, 1>();
    } else {
      if (c == 2) f.template operator()<1, 2>(); else f.template operator()<1, 1>();
    }
  }

  /// `count` (a multiple of 32) FP8 codes at `codes`, in order, as bf16 of value_scale times
  /// their values (the kit's exact conversion); nothing past them is read. Unless
  /// `prefetch_bytes` is 0, each 64 codes' line `prefetch_bytes` further on is hinted into L2.
  static void to_bf16(const CacheT* codes, std::size_t count, bf16_t* out, std::ptrdiff_t prefetch_bytes) noexcept {
    constexpr int blocks = kit::template bf16_pair_blocks<CacheT>;
    constexpr std::size_t block_elements = 2 * kit::width;  // codes of one pair block
    static_assert(amx::tile_dims % block_elements == 0, "whole pair blocks make up every 32 codes");
    std::size_t i = 0;
    for (; i + blocks * block_elements <= count; i += blocks * block_elements) {
      if (prefetch_bytes != 0) base::prefetch_pair(codes + i, 0, prefetch_bytes);
      typename kit::bf16_pairs pairs[blocks];
      kit::template load_bf16_pairs<CacheT, blocks>(codes + i, pairs);
      // One store per vector (a copy of the whole array went through the stack).
      for (int b = 0; b < blocks; ++b) {
        std::memcpy(static_cast<void*>(out + i + b * block_elements), &pairs[b], sizeof pairs[b]);
      }
    }
    for (; i < count; i += block_elements) {
      typename kit::bf16_pairs pairs[1];
      kit::template load_bf16_pairs<CacheT, 1>(codes + i, pairs);
      std::memcpy(static_cast<void*>(out + i), pairs, sizeof pairs);
    }
  }

  /// Points chunks[c] at the B tile of positions [32c, 32c + 32) of V strip `strip` (16 head dims)
  /// for the `num_tokens` positions from token_begin: the cache itself for bf16, else the
  /// dequantised copy in slot `slot` of the kv_tile scratch; a chunk reaching past num_tokens is
  /// a copy with those positions zeroed (also an odd last position's partner).
  static void stage_values(const CacheT* v_block, int block_size, int head_dim, int token_begin, int num_tokens,
                           int strip, int slot, const TileScratch& scratch, std::ptrdiff_t prefetch_bytes,
                           const bf16_t* (&chunks)[max_chunks]) noexcept {
    const int count = ceil_div(num_tokens, amx::tile_tokens);
    const CacheT* source = v_block + layout::value_index(block_size, head_dim, token_begin, strip * amx::tile_columns);
    // Positions past the block's end are never read: only the pairs a chunk holds are copied.
    const std::size_t elements = static_cast<std::size_t>(ceil_div(num_tokens, 2)) * 2 * amx::tile_columns;
    bf16_t* stage = reinterpret_cast<bf16_t*>(scratch.kv_tile);
    if constexpr (std::is_same_v<CacheT, bf16_t>) {
      for (int c = 0; c < count; ++c) chunks[c] = source + static_cast<std::size_t>(c) * tile_elements;
      stage += static_cast<std::size_t>(slot) * tile_elements;  // one tail tile per strip
    } else {
      stage += static_cast<std::size_t>(slot) * max_chunks * tile_elements;  // a whole strip
      to_bf16(source, elements, stage, prefetch_bytes);
      for (int c = 0; c < count; ++c) chunks[c] = stage + static_cast<std::size_t>(c) * tile_elements;
      stage += static_cast<std::size_t>(count - 1) * tile_elements;  // the tail chunk, in place
    }
    const int tail = num_tokens - (count - 1) * amx::tile_tokens;  // positions of the last chunk
    if (tail == amx::tile_tokens) return;
    const bf16_t* last = chunks[count - 1];
    const std::size_t kept = static_cast<std::size_t>(ceil_div(tail, 2)) * 2 * amx::tile_columns;
    if (last != stage) std::memcpy(stage, last, sizeof(bf16_t) * kept);
    std::memset(static_cast<void*>(stage + kept), 0, sizeof(bf16_t) * (tile_elements - kept));
    if (tail % 2 != 0) {
      bf16_t* pair_row = stage + kept - 2 * amx::tile_columns;
      for (int d = 0; d < amx::tile_columns; ++d) pair_row[2 * d + 1] = bf16_t::from_bits(0);
    }
    chunks[count - 1] = stage;
  }

  /// C[R row blocks][G groups] = q rows x K groups over all head dims, stored to `c`.
  template <int R, int G>
  PAGEDATTN_ALWAYS_INLINE static void qk_block(tiles_type& t, const bf16_t* a, int a_stride, const bf16_t* const* keys,
                                               int head_dim, float* c, int c_stride) noexcept {
    const std::size_t a_bytes = sizeof(bf16_t) * static_cast<std::size_t>(a_stride);
    const std::size_t c_bytes = sizeof(float) * static_cast<std::size_t>(c_stride);
    t.template zero<0>();
    if constexpr (G == 2) t.template zero<1>();
    if constexpr (R == 2) t.template zero<2>();
    if constexpr (R == 2 && G == 2) t.template zero<3>();
    for (int d = 0; d < head_dim; d += amx::tile_dims) {
      // A K group's rows for dims [d, d + 32) are its pairs [d / 2, d / 2 + 16): 64 bytes each.
      const std::size_t k_offset = static_cast<std::size_t>(d / 2) * 2 * kv_token_group;
      t.template load<4>(a + d, a_bytes);
      t.template load<6>(keys[0] + k_offset, amx::max_colsb);
      t.template dpbf16ps<0, 4, 6>();
      if constexpr (G == 2) {
        t.template load<7>(keys[1] + k_offset, amx::max_colsb);
        t.template dpbf16ps<1, 4, 7>();
      }
      if constexpr (R == 2) {
        t.template load<5>(a + static_cast<std::ptrdiff_t>(amx::tile_rows) * a_stride + d, a_bytes);
        t.template dpbf16ps<2, 5, 6>();
        if constexpr (G == 2) t.template dpbf16ps<3, 5, 7>();
      }
    }
    t.template store<0>(c, c_bytes);
    if constexpr (G == 2) t.template store<1>(c + kv_token_group, c_bytes);
    if constexpr (R == 2) t.template store<2>(c + static_cast<std::ptrdiff_t>(amx::tile_rows) * c_stride, c_bytes);
    if constexpr (R == 2 && G == 2) {
      t.template store<3>(c + static_cast<std::ptrdiff_t>(amx::tile_rows) * c_stride + kv_token_group, c_bytes);
    }
  }

  /// C[R row blocks][2 strips] at `c` += probabilities `a` (rows a_stride apart) x the V chunks
  /// of two strips.
  template <int R>
  PAGEDATTN_ALWAYS_INLINE static void pv_block(tiles_type& t, const bf16_t* a, int a_stride,
                                               const bf16_t* const (*values)[max_chunks], int chunks, float* c,
                                               int c_stride) noexcept {
    const std::size_t a_bytes = sizeof(bf16_t) * static_cast<std::size_t>(a_stride);
    const std::size_t c_bytes = sizeof(float) * static_cast<std::size_t>(c_stride);
    float* c_low = c + static_cast<std::ptrdiff_t>(amx::tile_rows) * c_stride;
    t.template load<0>(c, c_bytes);
    t.template load<1>(c + amx::tile_columns, c_bytes);
    if constexpr (R == 2) {
      t.template load<2>(c_low, c_bytes);
      t.template load<3>(c_low + amx::tile_columns, c_bytes);
    }
    for (int k = 0; k < chunks; ++k) {
      t.template load<4>(a + k * amx::tile_tokens, a_bytes);
      t.template load<6>(values[0][k], amx::max_colsb);
      t.template load<7>(values[1][k], amx::max_colsb);
      t.template dpbf16ps<0, 4, 6>();
      t.template dpbf16ps<1, 4, 7>();
      if constexpr (R == 2) {
        t.template load<5>(a + static_cast<std::ptrdiff_t>(amx::tile_rows) * a_stride + k * amx::tile_tokens, a_bytes);
        t.template dpbf16ps<2, 5, 6>();
        t.template dpbf16ps<3, 5, 7>();
      }
    }
    t.template store<0>(c, c_bytes);
    t.template store<1>(c + amx::tile_columns, c_bytes);
    if constexpr (R == 2) {
      t.template store<2>(c_low, c_bytes);
      t.template store<3>(c_low + amx::tile_columns, c_bytes);
    }
  }
};

}  // namespace pagedattn::backend
