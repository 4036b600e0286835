// TileGemm: the compute core of attention. Primary template of the per-ISA QK^T and P.V tile
// products over one KV-cache block; each back-end specialises it (backend/<isa>/).
#pragma once

#include <cstddef>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::backend {

/// The default `after_block` of TileGemm::qk and pv: does nothing.
struct NoBlockHook {
  constexpr void operator()() const noexcept {}
};

/// The regions of one worker's scratch that a step's products may use (sizes: the step's
/// StepScratch, backend/step_geometry.hpp). Owned by the worker for one work item at a time.
struct TileScratch {
  bf16_t* probs;           ///< StepScratch::probs bytes (bf16 probabilities), 64-byte aligned.
  std::byte* kv_tile;      ///< StepScratch::kv_tile bytes (converted K/V tiles), 64-byte aligned.
  std::byte* tile_state;   ///< StepScratch::tile_state bytes (tile staging and state), 64-byte aligned.

  /// The step regions of the worker scratch at `scratch` (64-byte aligned) laid out by `layout`.
  static TileScratch in(std::byte* scratch, const WorkerScratch& layout) noexcept {
    return {reinterpret_cast<bf16_t*>(scratch + layout.probs), scratch + layout.kv_tile, scratch + layout.tile_state};
  }
};

/// QK^T and P.V products of ISA tier `Isa` (a pagedattn::isa tag) on a cache of `CacheT`
/// elements laid out per KvBlockLayout<CacheT>. `rows` bounds below are the step's TileShape
/// (StepGeometry<Isa, Q, CacheT>::shape). A specialisation provides:
///
///   static void begin(const TileScratch& scratch) noexcept;
///   static void end(const TileScratch& scratch) noexcept;
///     The worker's setup before the first qk_bf16 / pv_bf16 of a work item whose rows
///     uses_tiles and its teardown after the last (AMX: load the tile configuration, release
///     the tiles; nothing on the vector tiers). `scratch` is laid out by the step of bf16
///     queries on this cache type.
///
///   static constexpr bool uses_tiles(int rows, int head_dim) noexcept;
///     Whether qk_bf16 and pv_bf16 multiply `rows` rows in whole tiles (AMX), converting K and V
///     themselves (the caller then never widens); false on the vector tiers.
///
///   static constexpr float value_scale;
///     Factor by which the products see every cache value (1, or a power of two when a fast
///     FP8 decode leaves the exponent offset in; callers divide it back out of their scales).
///
///   template <class AfterBlock = NoBlockHook>
///   static void qk(const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
///                  int token_begin, int num_tokens, float* scores, int score_stride,
///                  std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept;
///     scores[r * score_stride + t] = value_scale * sum_d q[r * q_stride + d] * K[token_begin + t][d]
///     for r < rows, t < num_tokens. K is the K sub-block `k_block`. Preconditions: token_begin
///     and num_tokens multiples of 16, token_begin + num_tokens <= block size, 1 <= rows <=
///     TileShape::max_tile_rows, num_tokens <= TileShape::kv_tile_tokens.
///     Positions never written by reshape_and_cache may be read (their scores are masked later).
///     A non-zero `prefetch_bytes` asks for the bytes that far past each K byte read (the same
///     tokens of the next tile) to be prefetched: a hint, never dereferenced. `after_block()`
///     is called after each register block, qk_blocks(rows, head_dim, num_tokens) times in all: a place
///     for the caller to slip in a little work of its own (such as prefetching the next tile a
///     few lines at a time, which a burst would stall on).
///
///   static constexpr bool dots_bf16_queries;
///   template <class AfterBlock = NoBlockHook>
///   static void qk_bf16(const bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
///                       int token_begin, int num_tokens, float score_scale, float* scores,
///                       int score_stride, const TileScratch& scratch, std::ptrdiff_t prefetch_bytes = 0,
///                       AfterBlock&& after_block = {}) noexcept;  (only where dots_bf16_queries)
///     As qk, for bf16 queries multiplied as they are (bf16 pair dot products: exact products,
///     float sums; subnormal inputs count as 0): scores[r * score_stride + t] = score_scale *
///     value_scale * sum_d q[r * q_stride + d] * K[token_begin + t][d]. The scale comes after the
///     sum because a scaled query would no longer be bf16. Same preconditions,
///     prefetch and after_block calls (qk_blocks) as qk. Where uses_tiles(rows, head_dim), rows
///     [rows, rows + 15] of `q` may be read and of `scores` written (the step's row_capacity),
///     within begin/end of `scratch`.
///
///   template <class AfterBlock = NoBlockHook>
///   static void pv(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
///                  int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
///                  std::ptrdiff_t prefetch_bytes = 0, AfterBlock&& after_block = {}) noexcept;
///     acc[r * acc_stride + d] += value_scale * sum_{t < num_tokens} p[r * p_stride + t] * V[token_begin + t][d].
///     Preconditions: token_begin even, token_begin + num_tokens <= block size, 1 <= rows <=
///     max_tile_rows. V values of tokens >= num_tokens never reach `acc` (not even multiplied by
///     zero), so unwritten cache positions cannot inject NaN. `prefetch_bytes` as in qk;
///     `after_block()` is called pv_blocks(rows, head_dim, num_tokens) times.
///
///   template <class AfterBlock = NoBlockHook>
///   static void pv_bf16(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
///                       int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
///                       const TileScratch& scratch, std::ptrdiff_t prefetch_bytes = 0,
///                       AfterBlock&& after_block = {}) noexcept;
///     (only where dots_bf16_queries) As pv, with each probability rounded to bf16 (nearest even;
///     below 2^-126 it counts as 0) and multiplied by bf16 pair dot products (exact products,
///     float sums): acc[r * acc_stride + d] += value_scale * sum_t bf16(p[r * p_stride + t]) *
///     V[token_begin + t][d]. Half the instructions of pv; for bf16 outputs, whose own rounding
///     is as coarse. Same preconditions (also num_tokens <= kv_tile_tokens), prefetch and
///     after_block calls (pv_blocks) as pv. The rounded probabilities go to scratch.probs.
///
///   template <class AfterBlock = NoBlockHook>
///   static void pv_bf16(bf16_t* p, int rows, int p_stride, (the rest as above)) noexcept;
///     (only where dots_bf16_queries) As pv_bf16 above, with the probabilities already rounded:
///     acc[r * acc_stride + d] += value_scale * sum_t p[r * p_stride + t] * V[token_begin + t][d].
///     p_stride >= num_tokens rounded up to a multiple of 32 and at most kv_tile_tokens; p holds
///     row_capacity rows of p_stride. Where uses_tiles(rows, head_dim), entries [num_tokens, the
///     next multiple of 32) of each row may be set to 0 and rows [rows, rows + 15] read; p may
///     be scratch.probs (the attention kernel's softmax rounds into it directly).
///
///   static constexpr int qk_blocks(int rows, int head_dim, int num_tokens) noexcept;
///   static constexpr int pv_blocks(int rows, int head_dim, int num_tokens) noexcept;
///     How many register blocks (calls of `after_block`) qk and pv run for these extents.
///
///   static void widen_keys(const CacheT* k_block, int head_dim, int token_begin, int num_tokens,
///                          float* k_tile) noexcept;
///   static void widen_values(const CacheT* v_block, int block_size, int head_dim, int token_begin,
///                            int num_tokens, float* v_tile) noexcept;
///     Convert K (V) of tokens [token_begin, token_begin + num_tokens) to floats (times
///     value_scale) in KvBlockLayout<float> order for a block of num_tokens tokens, so that
///     TileGemm<Isa, float> computes exactly what qk (pv) would, bit for bit: tiles with many
///     rows convert once instead of once per register block of rows. Preconditions as qk's;
///     `k_tile`/`v_tile` hold num_tokens * head_dim floats.
///
///   static constexpr bool widens;
///     Whether tiles of many rows should be widened (widen_keys / widen_values, then
///     TileGemm<Isa, float>) rather than multiplied by qk / pv, which convert every element
///     once per register block of rows: true where that conversion costs more than reading
///     the floats back. Always false for float. The results are the same either way.
template <class Isa, class CacheT>
struct TileGemm;

}  // namespace pagedattn::backend
