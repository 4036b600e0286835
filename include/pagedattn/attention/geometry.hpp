// Tile geometry of the attention kernels and the sizes derived from it: the single owner of
// every scratch and workspace size. Kernels, traits and plans all read it from here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"

namespace pagedattn {

/// Geometry shared by every back-end (so a plan does not depend on the ISA that runs it).
struct AttentionGeometry {
  /// Most query rows (token x query head of one KV head) one work item processes. All query
  /// heads of a KV head share a tile when the group has at most this many heads.
  static constexpr int max_tile_rows = 64;
  /// KV positions per inner step (a multiple of the 16-token K group).
  static constexpr int kv_tile_tokens = 128;
  /// Alignment of every scratch and workspace region, in bytes.
  static constexpr std::size_t alignment = 64;

  static_assert(kv_tile_tokens % kv_token_group == 0);

  /// Byte offsets of the regions of one worker's scratch for head dimension `head_dim`.
  struct WorkerScratch {
    std::size_t query;   ///< float [max_tile_rows][head_dim]: the scaled query tile (or, where
                         ///< bf16 queries are multiplied as they are, bf16 of that shape, unscaled).
    std::size_t acc;     ///< float [max_tile_rows][head_dim]: unnormalised output accumulators.
    std::size_t scores;  ///< float [max_tile_rows][kv_tile_tokens]: logits, then probabilities.
    std::size_t row_max; ///< float [max_tile_rows]: running maximum logit per row.
    std::size_t row_sum; ///< float [max_tile_rows]: running softmax denominator per row.
    std::size_t kv_tile; ///< float [kv_tile_tokens][head_dim]: a K or V tile widened to floats.
    std::size_t bytes;   ///< Total, a multiple of `alignment`.
  };

  /// Layout of one worker's scratch.
  static constexpr WorkerScratch worker_scratch(int head_dim) noexcept {
    const std::size_t tile = round_up(sizeof(float) * max_tile_rows * static_cast<std::size_t>(head_dim));
    const std::size_t scores = round_up(sizeof(float) * max_tile_rows * kv_tile_tokens);
    const std::size_t row = round_up(sizeof(float) * max_tile_rows);
    WorkerScratch s{};
    s.query = 0;
    s.acc = s.query + tile;
    s.scores = s.acc + tile;
    s.row_max = s.scores + scores;
    s.row_sum = s.row_max + row;
    s.kv_tile = s.row_sum + row;
    s.bytes = s.kv_tile + round_up(sizeof(float) * kv_tile_tokens * static_cast<std::size_t>(head_dim));
    return s;
  }

  /// Byte offsets of one split's partial result (the state a reduction merges).
  struct PartialSlot {
    std::size_t acc;      ///< float [max_tile_rows][head_dim]: unnormalised output.
    std::size_t row_max;  ///< float [max_tile_rows]: maximum logit per row.
    std::size_t row_sum;  ///< float [max_tile_rows]: softmax denominator per row at row_max.
    std::size_t bytes;    ///< Total, a multiple of `alignment`.
  };

  /// Layout of one partial slot.
  static constexpr PartialSlot partial_slot(int head_dim) noexcept {
    const std::size_t tile = round_up(sizeof(float) * max_tile_rows * static_cast<std::size_t>(head_dim));
    const std::size_t row = round_up(sizeof(float) * max_tile_rows);
    PartialSlot p{};
    p.acc = 0;
    p.row_max = tile;
    p.row_sum = tile + row;
    p.bytes = tile + 2 * row;
    return p;
  }

  /// Workspace bytes for `num_workers` workers and `num_partials` partial slots (checked).
  static constexpr CheckedSize workspace_bytes(int head_dim, std::uint64_t num_workers,
                                               std::uint64_t num_partials) noexcept {
    return CheckedSize(worker_scratch(head_dim).bytes) * num_workers +
           CheckedSize(partial_slot(head_dim).bytes) * num_partials;
  }

 private:
  static constexpr std::size_t round_up(std::size_t bytes) noexcept {
    return (bytes + alignment - 1) / alignment * alignment;
  }
};

}  // namespace pagedattn
