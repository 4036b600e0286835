// AttentionLayerGroup: one object per layer group that plans each step's batch once (scheduler,
// plan, workspace) and runs every layer of the group with one call each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/paged_attention.hpp"
#include "pagedattn/attention/params.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/attention/run_checks.hpp"
#include "pagedattn/attention/scheduler.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/exec/executor.hpp"

namespace pagedattn {

/// The attention of one layer group (layers sharing query type, cache type, head dim and head
/// counts) across steps: plan(batch) once per step, then run(...) once per layer. It owns its
/// scheduler and plan, and either owns its workspace (grown, 64-byte aligned, only when a step
/// needs more than any before) or borrows the caller's. Not thread-safe: one step at a time.
template <class Traits>
class AttentionLayerGroup {
 public:
  /// The query and output element type.
  using query_type = typename Traits::query_type;
  /// The cache view run() takes.
  using cache_view = typename Traits::cache_view;

  /// A layer group planned with `options` (num_workers: the workers of the executor run() will
  /// get) for the traits' head dimension. Throws Error as AttentionScheduler's constructor.
  explicit AttentionLayerGroup(SchedulerOptions options = {})
    requires(Traits::head_dim != dynamic_head_dim)
      : scheduler_(options) {}

  /// A layer group for head dimension `head_dim` given at run time (traits with dynamic_head_dim).
  AttentionLayerGroup(SchedulerOptions options, int head_dim)
    requires(Traits::head_dim == dynamic_head_dim)
      : scheduler_(options, head_dim) {}

  /// Plans `batch` (this step's batch) into the owned workspace, growing it when needed. Throws
  /// Error for a bad batch (nothing is kept from the previous step then: plan again).
  void plan(const AttentionBatch& batch) {
    planned_ = false;
    detail::throw_if_error(scheduler_.try_plan(batch, plan_));
    const auto needed = static_cast<std::size_t>(plan_.workspace_bytes());
    if (needed > owned_bytes_) {
      const std::size_t size = (needed + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
      std::unique_ptr<std::byte, FreeDeleter> grown(static_cast<std::byte*>(std::aligned_alloc(scratch_alignment, size)));
      if (grown == nullptr) {
        detail::throw_if_error(detail::make_error(Errc::runtime_failure, "workspace", needed,
                                                  "bytes could not be allocated"));
      }
      owned_ = std::move(grown);
      owned_bytes_ = size;
    }
    workspace_ = std::span<std::byte>(owned_.get(), needed);
    planned_ = true;
  }

  /// Plans `batch` to run in the caller's `workspace` (at least workspace_bytes() after this
  /// call, 64-byte aligned; checked by run()), which must outlive this step's run() calls.
  void plan(const AttentionBatch& batch, std::span<std::byte> workspace) {
    planned_ = false;
    detail::throw_if_error(scheduler_.try_plan(batch, plan_));
    workspace_ = workspace;
    planned_ = true;
  }

  /// Runs one layer of this step: paged_attention(plan(), batch, query, cache, block_table,
  /// output, params, workspace, executor), with everything it checks (`batch` must be the batch
  /// given to the last plan()). Throws Error (nothing written) when nothing was planned yet.
  template <Executor E>
  void run(const AttentionBatch& batch, TokenHeadsView<const query_type> query, const cache_view& cache,
           const BlockTableView& block_table, TokenHeadsView<query_type> output, const AttentionParams& params,
           E& executor) const {
    if (!planned_) {
      detail::throw_if_error(detail::make_error(Errc::invalid_argument, "plan", "none",
                                                "call plan(batch) for this step before run()"));
    }
    paged_attention(plan_, batch, query, cache, block_table, output, params, workspace_, executor);
  }

  /// The current step's plan (valid after a successful plan()).
  [[nodiscard]] const AttentionPlan<Traits>& current_plan() const noexcept { return plan_; }
  /// Bytes of workspace the current plan needs.
  [[nodiscard]] std::uint64_t workspace_bytes() const noexcept { return plan_.workspace_bytes(); }
  /// The scheduler (options, ISA, head dim).
  [[nodiscard]] const AttentionScheduler<Traits>& scheduler() const noexcept { return scheduler_; }

 private:
  /// Frees aligned_alloc memory.
  struct FreeDeleter {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };

  AttentionScheduler<Traits> scheduler_;
  AttentionPlan<Traits> plan_;
  std::unique_ptr<std::byte, FreeDeleter> owned_;
  std::size_t owned_bytes_ = 0;
  std::span<std::byte> workspace_;
  bool planned_ = false;
};

}  // namespace pagedattn
