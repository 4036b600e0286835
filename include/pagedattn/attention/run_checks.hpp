// The checks of a paged_attention call beyond single arguments: the batch is the plan's own, the
// block table's rows and entries, and no written buffer overlapping anything the call reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/core/byte_extent.hpp"
#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/token_heads_view.hpp"

namespace pagedattn {

/// Row-major `[num_rows][row_stride]` int32 block table: row r maps request r's logical block b
/// to the physical block `data[r * row_stride + b]`; the first ceil(seq_len / block_size)
/// entries of each row are read. Made by name only (row_major, with_stride), never from a
/// positional list whose sizes are easy to swap; the fields stay readable and writable.
struct BlockTableView {
  const std::int32_t* data = nullptr;  ///< Entry (0, 0).
  std::int64_t num_rows = 0;           ///< Rows (>= the batch's number of requests).
  std::int64_t num_cols = 0;           ///< Usable entries per row.
  std::int64_t row_stride = 0;         ///< Elements between rows (>= num_cols).

  /// An empty table (for a batch with no requests).
  constexpr BlockTableView() noexcept = default;

  /// A densely packed table of `num_rows` rows of `num_cols` entries (row_stride = num_cols).
  [[nodiscard]] static constexpr BlockTableView row_major(const std::int32_t* data, std::int64_t num_rows,
                                                          std::int64_t num_cols) noexcept {
    return with_stride(data, num_rows, num_cols, num_cols);
  }

  /// A table of `num_rows` rows of `num_cols` usable entries, `row_stride` elements apart (a view
  /// of the first columns of a wider table).
  [[nodiscard]] static constexpr BlockTableView with_stride(const std::int32_t* data, std::int64_t num_rows,
                                                            std::int64_t num_cols, std::int64_t row_stride) noexcept {
    BlockTableView table;
    table.data = data;
    table.num_rows = num_rows;
    table.num_cols = num_cols;
    table.row_stride = row_stride;
    return table;
  }
};

namespace detail {

/// The extent of a validated TokenHeadsView: from its first element to one past its last.
template <class T>
ByteExtent extent_of(const TokenHeadsView<T>& view) noexcept {
  if (view.num_tokens == 0 || view.num_heads == 0) return {};
  const auto last = static_cast<std::uint64_t>((view.num_tokens - 1) * view.token_stride +
                                               (view.num_heads - 1) * view.head_stride + view.head_dim);
  return extent_of(view.data, last);
}

/// Checks that `batch` is the batch the plan was built for (same tokens, heads, requests,
/// query_start_loc, seq_lens, causal flags and window), naming the first difference.
inline Status validate_plan_batch(const PlanData& plan, const AttentionBatch& batch) {
  const std::string stale = " (the plan was built for another batch: plan this one)";
  if (batch.num_tokens != plan.num_tokens) {
    return make_error(Errc::invalid_argument, "batch.num_tokens", batch.num_tokens,
                      "differs from the plan's " + std::to_string(plan.num_tokens) + stale);
  }
  if (batch.num_query_heads != plan.num_query_heads || batch.num_kv_heads != plan.num_kv_heads) {
    return make_error(Errc::invalid_argument, "batch.num_query_heads/num_kv_heads",
                      std::to_string(batch.num_query_heads) + "/" + std::to_string(batch.num_kv_heads),
                      "differ from the plan's " + std::to_string(plan.num_query_heads) + "/" +
                          std::to_string(plan.num_kv_heads) + stale);
  }
  if (batch.window_left != plan.window_left || batch.window_right != plan.window_right) {
    return make_error(Errc::invalid_argument, "batch.window_left/window_right",
                      std::to_string(batch.window_left) + "/" + std::to_string(batch.window_right),
                      "differ from the plan's " + std::to_string(plan.window_left) + "/" +
                          std::to_string(plan.window_right) + stale);
  }
  if (batch.seq_lens.size() != plan.seq_lens.size() || batch.query_start_loc.size() != plan.query_start_loc.size()) {
    return make_error(Errc::size_mismatch, "batch.seq_lens.size()", batch.seq_lens.size(),
                      "differs from the plan's " + std::to_string(plan.seq_lens.size()) + " requests" + stale);
  }
  for (std::size_t r = 0; r < plan.seq_lens.size(); ++r) {
    if (batch.seq_lens[r] != plan.seq_lens[r]) {
      return make_error(Errc::invalid_argument, "batch.seq_lens[" + std::to_string(r) + "]", batch.seq_lens[r],
                        "differs from the plan's " + std::to_string(plan.seq_lens[r]) + stale);
    }
    if (batch.query_start_loc[r + 1] != plan.query_start_loc[r + 1]) {
      return make_error(Errc::invalid_argument, "batch.query_start_loc[" + std::to_string(r + 1) + "]",
                        batch.query_start_loc[r + 1],
                        "differs from the plan's " + std::to_string(plan.query_start_loc[r + 1]) + stale);
    }
    if (batch.is_causal(static_cast<std::int64_t>(r)) != (plan.causal[r] != 0)) {
      return make_error(Errc::invalid_argument, "batch causal flag of request " + std::to_string(r),
                        batch.is_causal(static_cast<std::int64_t>(r)), "differs from the plan's" + stale);
    }
  }
  return {};
}

/// The extent of the rows of `table` a batch of `requests` requests may read (0 when none),
/// or a size_overflow Status when the table's addresses cannot be formed.
inline Status block_table_extent(const BlockTableView& table, std::int64_t requests, ByteExtent& extent) {
  extent = {};
  if (requests == 0) return {};
  const std::optional<std::uint64_t> elements =
      (CheckedSize(static_cast<std::uint64_t>(requests - 1)) * static_cast<std::uint64_t>(table.row_stride) +
       static_cast<std::uint64_t>(table.num_cols))
          .value();
  const auto address = reinterpret_cast<std::uintptr_t>(table.data);
  if (!elements || *elements > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(std::int32_t) ||
      address > std::numeric_limits<std::uintptr_t>::max() - *elements * sizeof(std::int32_t)) {
    return make_error(Errc::size_overflow, "block_table.row_stride", table.row_stride,
                      "rows [0, " + std::to_string(requests) + ") of the table at " + describe_value(table.data) +
                          " do not fit in the address space");
  }
  extent = extent_of(table.data, *elements);
  return {};
}

/// Checks the block table against the plan's batch and the cache: rows and columns sufficient,
/// addresses representable, every entry a request reads in [0, num_blocks).
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
    return make_error(Errc::invalid_argument, "block_table.data", table.data, "must not be null");
  }
  ByteExtent extent;
  if (Status status = block_table_extent(table, requests, extent); !status.ok()) return status;
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
}  // namespace pagedattn
