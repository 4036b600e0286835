// paged_attention: runs a plan's attention over a paged KV cache: phase 1 (attention tasks) then
// phase 2 (reductions), each a parallel-for on the caller's executor, in caller-owned workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pagedattn/attention/params.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/exec/executor.hpp"

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
/// ISA runnable here.
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
/// shared with a concurrent call. `executor`: any Executor; results do not depend on it.
/// Throws Error (before writing anything) when validate_paged_attention fails.
template <class Traits, Executor E>
void paged_attention(const AttentionPlan<Traits>& plan,
                     TokenHeadsView<const typename Traits::query_type> query,
                     const typename Traits::cache_view& cache, const BlockTableView& block_table,
                     TokenHeadsView<typename Traits::output_type> output,
                     const AttentionParams& params, std::span<std::byte> workspace, E& executor);

}  // namespace pagedattn
