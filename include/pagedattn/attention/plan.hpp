// AttentionPlan: the scheduler's output (work items, reduction items, workspace size), typed by
// the layer group's AttentionTraits so it only runs with matching kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "pagedattn/attention/traits.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn {

/// One attention task: query tokens [token_begin, token_end) x query heads [head_begin, head_end)
/// (indices within each KV head's group) of one request and of KV heads [kv_head, kv_head_end),
/// over KV positions [kv_begin, kv_end). Rows = KV heads x tokens x heads <=
/// the geometry's TileShape::max_tile_rows, KV-head-major, then token-major. Several KV heads share an
/// item only when each of them holds all its request's query rows in it (decode, short chunks):
/// the item then reads each cache block's sub-blocks of those heads in address order.
struct WorkItem {
  std::int32_t request;      ///< Request index.
  std::int32_t kv_head;      ///< First KV head.
  std::int32_t kv_head_end;  ///< One past the last KV head.
  std::int32_t token_begin;  ///< First query token (0-based within the request).
  std::int32_t token_end;    ///< One past the last query token.
  std::int32_t head_begin;   ///< First query head within the group (0-based).
  std::int32_t head_end;     ///< One past the last query head within the group.
  std::int32_t kv_begin;     ///< First KV position processed.
  std::int32_t kv_end;       ///< One past the last KV position processed.
  std::int32_t partial;      ///< -1: writes the final output; else the partial slot it fills.
};

/// Merges the partial slots [first_partial, first_partial + num_partials) of one tile (same
/// request, KV heads, tokens and heads as the work items that filled them; rows ordered as
/// theirs), in slot order, into the output.
struct ReductionItem {
  std::int32_t request;        ///< Request index.
  std::int32_t kv_head;        ///< First KV head.
  std::int32_t kv_head_end;    ///< One past the last KV head.
  std::int32_t token_begin;    ///< First query token.
  std::int32_t token_end;      ///< One past the last query token.
  std::int32_t head_begin;     ///< First query head within the group.
  std::int32_t head_end;       ///< One past the last query head within the group.
  std::int32_t first_partial;  ///< First partial slot.
  std::int32_t num_partials;   ///< Number of slots (>= 2).
};

/// How long KV ranges are split across tasks (flash-decoding).
enum class SplitPolicy : std::uint8_t {
  automatic,  ///< Split when there are too few tasks to keep the workers busy.
  off,        ///< Never split.
  fixed,      ///< Split every KV range at multiples of SchedulerOptions::split_tokens.
};

/// Options of AttentionScheduler.
struct SchedulerOptions {
  std::size_t num_workers = 1;                     ///< Workers of the executor that will run it (>= 1).
  SplitPolicy split_policy = SplitPolicy::automatic;  ///< See SplitPolicy.
  /// KV positions per split (a multiple of 16) for SplitPolicy::fixed and deterministic mode;
  /// ignored by SplitPolicy::automatic.
  std::int32_t split_tokens = 0;
  /// Deterministic mode: splits only at fixed KV positions (multiples of split_tokens, or
  /// deterministic_split_tokens when that is 0) chosen from each request alone, merged in a
  /// fixed order, so a request's output is bitwise identical whatever the batch and worker count.
  bool deterministic = false;
  /// ISA for traits with isa::dispatched (unset = best_isa()); must match a concrete traits tag.
  std::optional<IsaId> isa;
};

/// KV positions per split in deterministic mode when SchedulerOptions::split_tokens is 0.
inline constexpr std::int32_t deterministic_split_tokens = 2048;

namespace detail {
/// Everything a plan holds, independent of its traits (the kernels read this).
struct PlanData {
  std::vector<WorkItem> work_items;          ///< Phase 1 tasks, longest first.
  std::vector<ReductionItem> reductions;     ///< Phase 2 tasks.
  std::vector<std::int32_t> query_start_loc; ///< Copy of the batch's query_start_loc.
  std::vector<std::int32_t> seq_lens;        ///< Copy of the batch's seq_lens.
  std::vector<std::uint8_t> causal;          ///< Resolved causal flag per request.
  std::int64_t num_tokens = 0;               ///< Query rows.
  int num_query_heads = 0;                   ///< Hq.
  int num_kv_heads = 0;                      ///< Hkv.
  int window_left = -1;                      ///< As in the batch.
  int window_right = -1;                     ///< As in the batch.
  TileGeometry geometry{};                   ///< Tiles and scratch of the traits' types on `isa`.
  std::size_t num_workers = 1;               ///< Workers the workspace was sized for.
  std::int32_t num_partials = 0;             ///< Partial slots.
  std::uint64_t workspace_bytes = 0;         ///< Bytes of workspace the run needs.
  IsaId isa = IsaId::scalar;                 ///< ISA the run uses.
  bool deterministic = false;                ///< Built in deterministic mode.
};
}  // namespace detail

template <class Traits>
class AttentionScheduler;

/// A plan for one batch shape and one layer group, built by AttentionScheduler<Traits> and
/// reusable by every layer of the group in the same step. Only paged_attention with the same
/// Traits accepts it.
template <class Traits>
class AttentionPlan {
 public:
  /// The layer group's traits.
  using traits = Traits;

  /// Phase-1 attention tasks.
  [[nodiscard]] std::span<const WorkItem> work_items() const noexcept { return data_.work_items; }
  /// Phase-2 reductions merging split tasks.
  [[nodiscard]] std::span<const ReductionItem> reductions() const noexcept { return data_.reductions; }
  /// Bytes of caller-owned workspace paged_attention needs (64-byte aligned memory).
  [[nodiscard]] std::uint64_t workspace_bytes() const noexcept { return data_.workspace_bytes; }
  /// Number of partial slots (splits that go through a reduction).
  [[nodiscard]] std::int32_t num_partials() const noexcept { return data_.num_partials; }
  /// Workers the plan (and its workspace) was built for.
  [[nodiscard]] std::size_t num_workers() const noexcept { return data_.num_workers; }
  /// The ISA paged_attention will run.
  [[nodiscard]] IsaId isa() const noexcept { return data_.isa; }
  /// The tile geometry the plan was built with: Traits::geometry(isa()).
  [[nodiscard]] const TileGeometry& geometry() const noexcept { return data_.geometry; }
  /// Query rows of the batch.
  [[nodiscard]] std::int64_t num_tokens() const noexcept { return data_.num_tokens; }
  /// Requests of the batch.
  [[nodiscard]] std::int64_t num_requests() const noexcept {
    return static_cast<std::int64_t>(data_.seq_lens.size());
  }
  /// Query heads of the layer group.
  [[nodiscard]] int num_query_heads() const noexcept { return data_.num_query_heads; }
  /// KV heads of the layer group.
  [[nodiscard]] int num_kv_heads() const noexcept { return data_.num_kv_heads; }
  /// Whether the plan was built in deterministic mode.
  [[nodiscard]] bool deterministic() const noexcept { return data_.deterministic; }
  /// Everything the plan holds (for kernels and inspection).
  [[nodiscard]] const detail::PlanData& data() const noexcept { return data_; }

 private:
  friend class AttentionScheduler<Traits>;
  detail::PlanData data_;
};

}  // namespace pagedattn
