// Tile geometry: what a back-end's tile step declares (TileShape, StepScratch) and every size
// derived from it (TileGeometry: one worker's scratch regions, a partial slot, the workspace).
// Each back-end declares its own (backend/step_geometry.hpp); plans record it, kernels read it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"

namespace pagedattn {

/// Alignment of every scratch and workspace region, in bytes (and of the workspace itself).
inline constexpr std::size_t scratch_alignment = 64;

/// The shape of a back-end's tiles.
struct TileShape {
  /// Most query rows (token x query head) one work item holds; the scheduler tiles by it. All
  /// query heads of a KV head share a tile when the group has at most this many heads.
  int max_tile_rows;
  /// KV positions per inner step (a multiple of the 16-token K group).
  int kv_tile_tokens;
  /// Rows of the row-indexed scratch regions (query, acc, scores, probs): at least max_tile_rows;
  /// more where the step's tiles may read or write rows past a work item's last row (AMX tiles
  /// are 16 rows tall).
  int row_capacity;

  friend constexpr bool operator==(const TileShape&, const TileShape&) = default;
};

/// Bytes of the scratch regions a back-end's step sizes itself, for one head dim.
struct StepScratch {
  /// A K or V tile converted for the products: widened to floats (vector tiers), or dequantised
  /// into bf16 B tiles and zero-padded V tails (AMX). 0 where nothing is converted.
  std::size_t kv_tile;
  /// bf16 probabilities [row_capacity][kv_tile_tokens], where P.V multiplies bf16 pairs; else 0.
  std::size_t probs;
  /// Tile state: C-tile staging of partial row blocks and the emulated tile registers (AMX);
  /// else 0.
  std::size_t tile_state;

  friend constexpr bool operator==(const StepScratch&, const StepScratch&) = default;
};

/// Byte offsets of the regions of one worker's scratch.
struct WorkerScratch {
  std::size_t query;       ///< float [row_capacity][head_dim]: the scaled query tile (or, where
                           ///< bf16 queries are multiplied as they are, bf16 of that shape, unscaled).
  std::size_t acc;         ///< float [row_capacity][head_dim]: unnormalised output accumulators.
  std::size_t scores;      ///< float [row_capacity][kv_tile_tokens]: logits, then probabilities.
  std::size_t row_max;     ///< float [row_capacity]: running maximum logit per row.
  std::size_t row_sum;     ///< float [row_capacity]: running softmax denominator per row.
  std::size_t kv_tile;     ///< StepScratch::kv_tile bytes.
  std::size_t probs;       ///< StepScratch::probs bytes.
  std::size_t tile_state;  ///< StepScratch::tile_state bytes.
  std::size_t bytes;       ///< Total, a multiple of scratch_alignment.

  friend constexpr bool operator==(const WorkerScratch&, const WorkerScratch&) = default;
};

/// Byte offsets of one split's partial result (the state a reduction merges), rows compact.
struct PartialSlot {
  std::size_t acc;      ///< float [max_tile_rows][head_dim]: unnormalised output.
  std::size_t row_max;  ///< float [max_tile_rows]: maximum logit per row.
  std::size_t row_sum;  ///< float [max_tile_rows]: softmax denominator per row at row_max.
  std::size_t bytes;    ///< Total, a multiple of scratch_alignment.

  friend constexpr bool operator==(const PartialSlot&, const PartialSlot&) = default;
};

/// The geometry of one (ISA, query type, cache type, head dim): a back-end step's shape and
/// scratch, laid out. The scheduler plans and sizes the workspace with it, the plan records it,
/// and the kernel of that ISA reads the same value from its own step's type.
struct TileGeometry {
  TileShape shape;       ///< The step's tile shape.
  int head_dim;          ///< Head dimension.
  WorkerScratch worker;  ///< One worker's scratch.
  PartialSlot partial;   ///< One partial slot.

  /// Lays out the scratch of a step with `shape` and `step` regions for `head_dim`.
  static constexpr TileGeometry make(TileShape shape, int head_dim, StepScratch step) noexcept {
    const auto dim = static_cast<std::size_t>(head_dim);
    const auto capacity = static_cast<std::size_t>(shape.row_capacity);
    const std::size_t tile = round_up(sizeof(float) * capacity * dim);
    const std::size_t row = round_up(sizeof(float) * capacity);
    TileGeometry g{shape, head_dim, {}, {}};
    g.worker.query = 0;
    g.worker.acc = g.worker.query + tile;
    g.worker.scores = g.worker.acc + tile;
    g.worker.row_max = g.worker.scores + round_up(sizeof(float) * capacity * static_cast<std::size_t>(shape.kv_tile_tokens));
    g.worker.row_sum = g.worker.row_max + row;
    g.worker.kv_tile = g.worker.row_sum + row;
    g.worker.probs = g.worker.kv_tile + round_up(step.kv_tile);
    g.worker.tile_state = g.worker.probs + round_up(step.probs);
    g.worker.bytes = g.worker.tile_state + round_up(step.tile_state);
    const auto rows = static_cast<std::size_t>(shape.max_tile_rows);
    g.partial.acc = 0;
    g.partial.row_max = round_up(sizeof(float) * rows * dim);
    g.partial.row_sum = g.partial.row_max + round_up(sizeof(float) * rows);
    g.partial.bytes = g.partial.row_sum + round_up(sizeof(float) * rows);
    return g;
  }

  /// Byte offset in the workspace of worker `index`'s scratch (workers first, then the slots).
  constexpr std::size_t worker_offset(std::size_t index) const noexcept { return index * worker.bytes; }
  /// Byte offset in the workspace of partial slot `slot`, behind `num_workers` workers' scratch.
  constexpr std::size_t partial_offset(std::size_t num_workers, std::size_t slot) const noexcept {
    return worker_offset(num_workers) + slot * partial.bytes;
  }

  /// Workspace bytes for `num_workers` workers and `num_partials` partial slots (checked).
  constexpr CheckedSize workspace_bytes(std::uint64_t num_workers, std::uint64_t num_partials) const noexcept {
    return CheckedSize(worker.bytes) * num_workers + CheckedSize(partial.bytes) * num_partials;
  }

  friend constexpr bool operator==(const TileGeometry&, const TileGeometry&) = default;

 private:
  static constexpr std::size_t round_up(std::size_t bytes) noexcept {
    return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
  }
};

}  // namespace pagedattn
