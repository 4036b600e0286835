// paged_attention: runs a plan's attention over a paged KV cache: phase 1 (attention tasks) then
// phase 2 (reductions), each a parallel-for on the caller's executor, in caller-owned workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pagedattn/attention/params.hpp"
#include "pagedattn/dispatch/attention_entry.hpp"
#include "pagedattn/isa/dispatch.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/exec/executor.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/attention_entry_impl.hpp"
#endif

namespace pagedattn {

/// Row-major `[num_rows][row_stride]` int32 block table: row r maps request r's logical block b
/// to the physical block `data[r * row_stride + b]`; the first ceil(seq_len / block_size)
/// entries of each row are read.
struct BlockTableView {
  const std::int32_t* data = nullptr;  ///< Entry (0, 0).
  std::int64_t num_rows = 0;           ///< Rows (>= the batch's number of requests).
  std::int64_t num_cols = 0;           ///< Usable entries per row.
  std::int64_t row_stride = 0;         ///< Elements between rows (>= num_cols).
};

/// Validates a paged_attention call (everything that can be wrong before any byte is written):
/// plan consistent with the query, output, cache and block table; output shaped like the query;
/// block-table rows and columns sufficient and every used entry in [0, num_blocks); params
/// (validate_params); workspace at least plan.workspace_bytes() and 64-byte aligned; the plan's
/// ISA runnable here, and its tile geometry the one that ISA's kernel for these types uses
/// (Traits::geometry(plan.isa())).
template <class Traits>
Status validate_paged_attention(const AttentionPlan<Traits>& plan,
                                TokenHeadsView<const typename Traits::query_type> query,
                                const typename Traits::cache_view& cache, const BlockTableView& block_table,
                                TokenHeadsView<typename Traits::output_type> output,
                                const AttentionParams& params, std::span<std::byte> workspace);

/// Computes attention (DESIGN.md section 3) for every query row of the plan's batch into
/// `output` (shape of `query`: [num_tokens][Hq][head_dim], any strides, last dim contiguous).
/// `cache` holds K/V for every position < seq_len of each request, reached through
/// `block_table`. `workspace`: at least plan.workspace_bytes() bytes, 64-byte aligned, not
/// shared with a concurrent call. `executor`: any Executor with at most plan.num_workers()
/// workers (the workspace holds one scratch area per worker); results do not depend on it.
/// Throws Error (before writing anything) when validate_paged_attention fails or the executor
/// has more workers than the plan.
template <class Traits, Executor E>
void paged_attention(const AttentionPlan<Traits>& plan,
                     TokenHeadsView<const typename Traits::query_type> query,
                     const typename Traits::cache_view& cache, const BlockTableView& block_table,
                     TokenHeadsView<typename Traits::output_type> output,
                     const AttentionParams& params, std::span<std::byte> workspace, E& executor);

namespace detail {
/// Checks the block table against the plan's batch and the cache (see validate_paged_attention).
inline Status validate_block_table(const PlanData& plan, const BlockTableView& table,
                                   std::int64_t num_blocks, int block_size) {
  const auto requests = static_cast<std::int64_t>(plan.seq_lens.size());
  if (table.num_rows < requests) {
    return make_error(Errc::size_mismatch, "block_table.num_rows", table.num_rows,
                      "must be at least the plan's number of requests = " + std::to_string(requests) +
                          " (plan built for another batch?)");
  }
  if (table.num_cols < 0 || table.row_stride < table.num_cols) {
    return make_error(Errc::invalid_argument, "block_table.row_stride", table.row_stride,
                      "must be at least block_table.num_cols = " + std::to_string(table.num_cols));
  }
  if (requests > 0 && table.data == nullptr) {
    return make_error(Errc::invalid_argument, "block_table.data", 0, "must not be null");
  }
  for (std::int64_t r = 0; r < requests; ++r) {
    const std::int64_t seq_len = plan.seq_lens[static_cast<std::size_t>(r)];
    const std::int64_t needed = (seq_len + block_size - 1) / block_size;
    if (needed > table.num_cols) {
      return make_error(Errc::size_mismatch, "block_table.num_cols", table.num_cols,
                        "request " + std::to_string(r) + " with seq_len " + std::to_string(seq_len) +
                            " needs " + std::to_string(needed) + " blocks of " +
                            std::to_string(block_size));
    }
    const std::int32_t* row = table.data + r * table.row_stride;
    for (std::int64_t b = 0; b < needed; ++b) {
      if (row[b] < 0 || row[b] >= num_blocks) {
        return make_error(Errc::out_of_range,
                          "block_table[" + std::to_string(r) + "][" + std::to_string(b) + "]", row[b],
                          "must be in [0, num_blocks = " + std::to_string(num_blocks) + ")");
      }
    }
  }
  return {};
}
}  // namespace detail

template <class Traits>
Status validate_paged_attention(const AttentionPlan<Traits>& plan,
                                TokenHeadsView<const typename Traits::query_type> query,
                                const typename Traits::cache_view& cache, const BlockTableView& block_table,
                                TokenHeadsView<typename Traits::output_type> output,
                                const AttentionParams& params, std::span<std::byte> workspace) {
  using detail::make_error;
  const detail::PlanData& data = plan.data();
  if (Status status = check_isa(data.isa); !status.ok()) return status;
  if (data.geometry != Traits::geometry(data.isa)) {
    return make_error(Errc::invalid_argument, "plan.geometry()", isa_name(data.isa),
                      "the plan's tiles and scratch are not those of this ISA's kernel for the traits' "
                      "query and cache types (plan made for another ISA or cache type?)");
  }
  if (Status status = validate_token_heads(query, "query", data.num_query_heads, Traits::head_dim);
      !status.ok()) {
    return status;
  }
  if (query.num_tokens != data.num_tokens) {
    return make_error(Errc::size_mismatch, "query.num_tokens", query.num_tokens,
                      "must equal the plan's num_tokens = " + std::to_string(data.num_tokens) +
                          " (plan built for another batch?)");
  }
  if (Status status = validate_token_heads(output, "output", data.num_query_heads, Traits::head_dim);
      !status.ok()) {
    return status;
  }
  if (output.num_tokens != query.num_tokens) {
    return make_error(Errc::size_mismatch, "output.num_tokens", output.num_tokens,
                      "must equal query.num_tokens = " + std::to_string(query.num_tokens));
  }
  if (cache.num_kv_heads() != data.num_kv_heads) {
    return make_error(Errc::size_mismatch, "cache.num_kv_heads()", cache.num_kv_heads(),
                      "must equal the plan's num_kv_heads = " + std::to_string(data.num_kv_heads));
  }
  if (Status status = detail::validate_block_table(data, block_table, cache.num_blocks(), cache.block_size());
      !status.ok()) {
    return status;
  }
  if (Status status = validate_params(params, data.num_query_heads); !status.ok()) return status;
  if (workspace.size() < data.workspace_bytes) {
    return make_error(Errc::size_mismatch, "workspace.size()", workspace.size(),
                      "must be at least plan.workspace_bytes() = " + std::to_string(data.workspace_bytes));
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % scratch_alignment != 0) {
    return make_error(Errc::invalid_argument, "workspace.data()",
                      reinterpret_cast<std::uintptr_t>(workspace.data()), "must be 64-byte aligned");
  }
  return {};
}

template <class Traits, Executor E>
void paged_attention(const AttentionPlan<Traits>& plan,
                     TokenHeadsView<const typename Traits::query_type> query,
                     const typename Traits::cache_view& cache, const BlockTableView& block_table,
                     TokenHeadsView<typename Traits::output_type> output,
                     const AttentionParams& params, std::span<std::byte> workspace, E& executor) {
  detail::throw_if_error(
      validate_paged_attention(plan, query, cache, block_table, output, params, workspace));
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
      detail::run_attention_item<Tag>(job, task, worker);
    });
    if (!data.reductions.empty()) {
      executor.parallel_for(data.reductions.size(), [&](std::size_t task, std::size_t worker) {
        detail::run_attention_reduction<Tag>(job, task, worker);
      });
    }
  });
}

}  // namespace pagedattn
