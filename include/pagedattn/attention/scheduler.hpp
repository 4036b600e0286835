// AttentionScheduler: turns a batch shape into an AttentionPlan (work items, splits, reductions,
// workspace size) for one layer group. Cheap enough to run every step.
#pragma once

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/isa/dispatch.hpp"

namespace pagedattn {

/// Validates scheduler options: num_workers >= 1; split_tokens a positive multiple of 16 when the
/// policy is SplitPolicy::fixed, and 0 or a positive multiple of 16 otherwise.
Status validate_scheduler_options(const SchedulerOptions& options);

/// Plans paged_attention for the layer group described by `Traits` (see AttentionTraits).
/// Rules: tiles pack all query heads of a KV head (up to AttentionGeometry::max_tile_rows rows);
/// each tile's KV range is the union of what its rows can see (causal, window); long ranges are
/// split per SplitPolicy and merged by ReductionItems; all sizes are 64-bit and checked.
template <class Traits>
class AttentionScheduler {
 public:
  /// A scheduler with `options`. Throws Error when validate_scheduler_options fails, or when the
  /// traits name an ISA this program or CPU cannot run.
  explicit AttentionScheduler(SchedulerOptions options = {});

  /// Builds the plan for `batch` into `plan` (reusing its memory). Returns the first problem
  /// (validate_batch, size overflow) without throwing; `plan` is unspecified on failure.
  Status try_plan(const AttentionBatch& batch, AttentionPlan<Traits>& plan) const;

  /// Builds the plan for `batch`. Throws Error on bad input or size overflow.
  [[nodiscard]] AttentionPlan<Traits> plan(const AttentionBatch& batch) const;

  /// The options in use.
  [[nodiscard]] const SchedulerOptions& options() const noexcept { return options_; }
  /// The ISA plans will run on.
  [[nodiscard]] IsaId isa() const noexcept { return isa_; }

 private:
  SchedulerOptions options_;
  IsaId isa_;
};

}  // namespace pagedattn
