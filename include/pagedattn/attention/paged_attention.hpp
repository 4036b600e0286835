// paged_attention: runs a plan's attention over a paged KV cache: phase 1 (attention tasks) then
// phase 2 (reductions), each a parallel-for on the caller's executor, in caller-owned workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/params.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/attention/run_checks.hpp"
#include "pagedattn/dispatch/attention_entry.hpp"
#include "pagedattn/isa/dispatch.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/exec/executor.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/attention_entry_impl.hpp"
#endif

namespace pagedattn {

/// Validates a paged_attention call (everything that can be wrong before any byte is written):
/// `batch` the one the plan was built for (same counts, query_start_loc, seq_lens, causal flags
/// and window: a stale plan is refused); plan consistent with the query, output, cache and block
/// table; output shaped like the query; block-table rows and columns sufficient, its addresses
/// representable and every used entry in [0, num_blocks); params (validate_params; k_scale and
/// v_scale only for FP8 caches); workspace at least plan.workspace_bytes() and 64-byte aligned;
/// the output and the workspace disjoint from each other and from everything the call reads
/// (query, cache, block table, ALiBi slopes, sinks), except that the output may be the query
/// itself (same data pointer and strides: attention in place); the plan's ISA runnable here, and
/// its tile geometry the one that ISA's kernel for these types uses (Traits::geometry(plan.isa())).
template <class Traits>
Status validate_paged_attention(const AttentionPlan<Traits>& plan, const AttentionBatch& batch,
                                TokenHeadsView<const typename Traits::query_type> query,
                                const typename Traits::cache_view& cache, const BlockTableView& block_table,
                                TokenHeadsView<typename Traits::output_type> output,
                                const AttentionParams& params, std::span<std::byte> workspace);

/// Computes attention (DESIGN.md section 3) for every query row of `batch`, the batch `plan` was
/// built for, into `output` (shape of `query`: [num_tokens][Hq][head_dim], any strides, last dim
/// contiguous; it may be `query` itself, with the same strides, and must not otherwise overlap an
/// input or the workspace).
/// `cache` holds K/V for every position < seq_len of each request, reached through
/// `block_table`. `workspace`: at least plan.workspace_bytes() bytes, 64-byte aligned, not
/// shared with a concurrent call. `executor`: any Executor with at most plan.num_workers()
/// workers (the workspace holds one scratch area per worker); results do not depend on it.
/// Throws Error (before writing anything) when validate_paged_attention fails or the executor
/// has more workers than the plan.
template <class Traits, Executor E>
void paged_attention(const AttentionPlan<Traits>& plan, const AttentionBatch& batch,
                     TokenHeadsView<const typename Traits::query_type> query,
                     const typename Traits::cache_view& cache, const BlockTableView& block_table,
                     TokenHeadsView<typename Traits::output_type> output,
                     const AttentionParams& params, std::span<std::byte> workspace, E& executor);

template <class Traits>
Status validate_paged_attention(const AttentionPlan<Traits>& plan, const AttentionBatch& batch,
                                TokenHeadsView<const typename Traits::query_type> query,
                                const typename Traits::cache_view& cache, const BlockTableView& block_table,
                                TokenHeadsView<typename Traits::output_type> output,
                                const AttentionParams& params, std::span<std::byte> workspace) {
  using detail::make_error;
  const detail::PlanData& data = plan.data();
  if (Status status = check_isa(data.isa); !status.ok()) return status;
  if (Status status = check_head_dim(data.geometry.head_dim, "plan.geometry().head_dim"); !status.ok()) return status;
  if (data.geometry != Traits::geometry(data.isa, data.geometry.head_dim)) {
    return make_error(Errc::invalid_argument, "plan.geometry()", isa_name(data.isa),
                      "the plan's tiles and scratch are not those of this ISA's kernel for the traits' "
                      "query and cache types (plan made for another ISA or cache type?)");
  }
  if (Status status = detail::validate_plan_batch(data, batch); !status.ok()) return status;
  if (Status status = validate_token_heads(query, "query", data.num_query_heads, data.geometry.head_dim);
      !status.ok()) {
    return status;
  }
  if (query.num_tokens != data.num_tokens) {
    return make_error(Errc::size_mismatch, "query.num_tokens", query.num_tokens,
                      "must equal the plan's num_tokens = " + std::to_string(data.num_tokens) +
                          " (plan built for another batch?)");
  }
  if (Status status = validate_token_heads(output, "output", data.num_query_heads, data.geometry.head_dim);
      !status.ok()) {
    return status;
  }
  if (output.num_tokens != query.num_tokens) {
    return make_error(Errc::size_mismatch, "output.num_tokens", output.num_tokens,
                      "must equal query.num_tokens = " + std::to_string(query.num_tokens));
  }
  if (cache.head_dim() != data.geometry.head_dim) {
    return make_error(Errc::size_mismatch, "cache.head_dim()", cache.head_dim(),
                      "must equal the plan's head dim " + std::to_string(data.geometry.head_dim));
  }
  if (cache.num_kv_heads() != data.num_kv_heads) {
    return make_error(Errc::size_mismatch, "cache.num_kv_heads()", cache.num_kv_heads(),
                      "must equal the plan's num_kv_heads = " + std::to_string(data.num_kv_heads));
  }
  if (Status status = detail::validate_block_table(data, block_table, cache.num_blocks(), cache.block_size());
      !status.ok()) {
    return status;
  }
  if (Status status = validate_params(params, data.num_query_heads, is_fp8_v<typename Traits::cache_type>);
      !status.ok()) {
    return status;
  }
  if (workspace.size() < data.workspace_bytes) {
    return make_error(Errc::size_mismatch, "workspace.size()", workspace.size(),
                      "must be at least plan.workspace_bytes() = " + std::to_string(data.workspace_bytes));
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % scratch_alignment != 0) {
    return make_error(Errc::invalid_argument, "workspace.data()", static_cast<const void*>(workspace.data()),
                      "must be 64-byte aligned");
  }
  // Overlaps (extents are representable: every size above was checked).
  detail::ByteExtent table_extent;
  if (Status status = detail::block_table_extent(block_table, plan.num_requests(), table_extent); !status.ok()) {
    return status;
  }
  const detail::ByteExtent output_extent = detail::extent_of(output);
  const detail::ByteExtent query_extent = detail::extent_of(query);
  const detail::ByteExtent workspace_extent = detail::extent_of(workspace.data(), data.workspace_bytes);
  const detail::NamedExtent read[] = {
      {"cache", detail::extent_of(cache.data(), cache.num_elements())},
      {"block_table", table_extent},
      {"params.alibi_slopes", detail::extent_of(params.alibi_slopes.data(), params.alibi_slopes.size())},
      {"params.sinks", detail::extent_of(params.sinks.data(), params.sinks.size())},
      {"workspace", workspace_extent},
  };
  const bool in_place = static_cast<const void*>(output.data) == static_cast<const void*>(query.data) &&
                        output.token_stride == query.token_stride && output.head_stride == query.head_stride;
  if (!in_place && output_extent.overlaps(query_extent)) {
    return make_error(Errc::invalid_argument, "output.data", static_cast<const void*>(output.data),
                      "overlaps query (at " + detail::describe_value(static_cast<const void*>(query.data)) +
                          ") without being it: the output must be the query itself (same data and strides) "
                          "or disjoint from it");
  }
  if (Status status = detail::validate_disjoint("output.data", output_extent, read); !status.ok()) return status;
  const detail::NamedExtent inputs[] = {read[0], read[1], read[2], read[3], {"query", query_extent}};
  if (Status status = detail::validate_disjoint("workspace.data()", workspace_extent, inputs); !status.ok()) {
    return status;
  }
  return {};
}

template <class Traits, Executor E>
void paged_attention(const AttentionPlan<Traits>& plan, const AttentionBatch& batch,
                     TokenHeadsView<const typename Traits::query_type> query,
                     const typename Traits::cache_view& cache, const BlockTableView& block_table,
                     TokenHeadsView<typename Traits::output_type> output,
                     const AttentionParams& params, std::span<std::byte> workspace, E& executor) {
  detail::throw_if_error(
      validate_paged_attention(plan, batch, query, cache, block_table, output, params, workspace));
  const detail::PlanData& data = plan.data();
  if (executor.num_workers() > data.num_workers) {
    detail::throw_if_error(detail::make_error(
        Errc::invalid_argument, "executor.num_workers()", executor.num_workers(),
        "must not exceed the plan's num_workers = " + std::to_string(data.num_workers) +
            " (the workspace holds one scratch area per worker)"));
  }
  using Q = typename Traits::query_type;
  using CacheT = typename Traits::cache_type;
  const detail::AttentionJob job{dtype_of<Q>,
                                 dtype_of<CacheT>,
                                 &data,
                                 query.data,
                                 query.token_stride,
                                 query.head_stride,
                                 output.data,
                                 output.token_stride,
                                 output.head_stride,
                                 cache.data(),
                                 cache.block_size(),
                                 block_table.data,
                                 block_table.row_stride,
                                 params.scale,
                                 params.softcap,
                                 params.alibi_slopes.empty() ? nullptr : params.alibi_slopes.data(),
                                 params.sinks.empty() ? nullptr : params.sinks.data(),
                                 params.k_scale,
                                 params.v_scale,
                                 workspace.data()};
  dispatch_isa(data.isa, [&]<class Tag>(Tag) {
    executor.parallel_for(data.work_items.size(), [&](std::size_t task, std::size_t worker) {
      detail::run_attention_item<Tag, Q, CacheT>(job, task, worker);
    });
    if (!data.reductions.empty()) {
      executor.parallel_for(data.reductions.size(), [&](std::size_t task, std::size_t worker) {
        detail::run_attention_reduction<Tag, Q, CacheT>(job, task, worker);
      });
    }
  });
}

}  // namespace pagedattn
