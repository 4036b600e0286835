// AttentionBatch: the shape of one step's batch for one layer group (what the scheduler plans),
// and its validation.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pagedattn/core/array_view.hpp"
#include "pagedattn/core/error.hpp"

namespace pagedattn {

/// Largest seq_len a request may have (2^30 positions): positions are int32, and tiles, splits
/// and padding reach a little past a request's last position, which must stay representable.
inline constexpr std::int32_t max_seq_len = std::int32_t{1} << 30;

/// Shape of a batch mixing decode, chunked prefill and prefill, for one layer group. The array
/// fields view the caller's arrays (ArrayView: they cannot be set from temporaries), which must
/// stay alive and unchanged while the batch is planned and run.
/// Request r's query tokens are rows [query_start_loc[r], query_start_loc[r+1]) of the query
/// tensor (q_len = their count); its context has seq_lens[r] KV positions, the last q_len of which
/// are the new tokens (query token i sits at position seq_len - q_len + i).
struct AttentionBatch {
  ArrayView<std::int32_t> query_start_loc;  ///< [num_requests + 1], from 0, non-decreasing.
  ArrayView<std::int32_t> seq_lens;         ///< [num_requests], q_len <= each <= max_seq_len.
  std::int64_t num_tokens = 0;                    ///< Query rows; == query_start_loc.back().
  int num_query_heads = 0;  ///< Hq of THIS layer group (> 0, a multiple of num_kv_heads).
  int num_kv_heads = 0;     ///< Hkv of THIS layer group (> 0).
  bool causal = true;       ///< Causal mask for every request (unless causal_per_request is set).
  /// Per-request causal flags (0 or 1); empty to use `causal` for all. Size num_requests.
  ArrayView<std::uint8_t> causal_per_request;
  /// Sliding window: j >= p - window_left; -1 = unbounded (any value up to INT32_MAX works too).
  int window_left = -1;
  /// Sliding window: j <= p + window_right; -1 = unbounded (any value up to INT32_MAX works too).
  int window_right = -1;

  /// Number of requests (query_start_loc.size() - 1, or 0 when empty).
  [[nodiscard]] std::int64_t num_requests() const noexcept {
    return query_start_loc.empty() ? 0 : static_cast<std::int64_t>(query_start_loc.size()) - 1;
  }
  /// Whether request r is causal.
  [[nodiscard]] bool is_causal(std::int64_t r) const noexcept {
    return causal_per_request.empty() ? causal : causal_per_request[static_cast<std::size_t>(r)] != 0;
  }
};

/// Validates `batch`: head counts, window bounds, array sizes, query_start_loc starting at 0,
/// non-decreasing and ending at num_tokens, q_len(r) <= seq_lens[r] <= max_seq_len, causal flags
/// 0/1. Returns the first problem found, naming the argument (with its index) and value.
inline Status validate_batch(const AttentionBatch& batch) {
  using detail::make_error;
  if (batch.num_query_heads <= 0) {
    return make_error(Errc::invalid_argument, "num_query_heads", batch.num_query_heads, "must be positive");
  }
  if (batch.num_kv_heads <= 0) {
    return make_error(Errc::invalid_argument, "num_kv_heads", batch.num_kv_heads, "must be positive");
  }
  if (batch.num_query_heads % batch.num_kv_heads != 0) {
    return make_error(Errc::invalid_argument, "num_query_heads", batch.num_query_heads,
                      "must be a multiple of num_kv_heads = " + std::to_string(batch.num_kv_heads));
  }
  if (batch.window_left < -1) {
    return make_error(Errc::invalid_argument, "window_left", batch.window_left, "must be >= -1");
  }
  if (batch.window_right < -1) {
    return make_error(Errc::invalid_argument, "window_right", batch.window_right, "must be >= -1");
  }
  if (batch.num_tokens < 0) {
    return make_error(Errc::invalid_argument, "num_tokens", batch.num_tokens, "must not be negative");
  }
  if (batch.query_start_loc.empty()) {
    return make_error(Errc::size_mismatch, "query_start_loc.size()", 0,
                      "must be num_requests + 1 (at least 1)");
  }
  const std::int64_t requests = batch.num_requests();
  if (static_cast<std::int64_t>(batch.seq_lens.size()) != requests) {
    return make_error(Errc::size_mismatch, "seq_lens.size()", batch.seq_lens.size(),
                      "must equal num_requests = query_start_loc.size() - 1 = " +
                          std::to_string(requests));
  }
  if (!batch.causal_per_request.empty() &&
      static_cast<std::int64_t>(batch.causal_per_request.size()) != requests) {
    return make_error(Errc::size_mismatch, "causal_per_request.size()",
                      batch.causal_per_request.size(),
                      "must be 0 or num_requests = " + std::to_string(requests));
  }
  if (batch.query_start_loc[0] != 0) {
    return make_error(Errc::invalid_argument, "query_start_loc[0]", batch.query_start_loc[0],
                      "must be 0");
  }
  for (std::int64_t r = 0; r < requests; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const std::int64_t q_len =
        std::int64_t{batch.query_start_loc[i + 1]} - std::int64_t{batch.query_start_loc[i]};
    if (q_len < 0) {
      return make_error(Errc::invalid_argument, "query_start_loc[" + std::to_string(r + 1) + "]",
                        batch.query_start_loc[i + 1],
                        "must not be less than query_start_loc[" + std::to_string(r) +
                            "] = " + std::to_string(batch.query_start_loc[i]));
    }
    if (batch.seq_lens[i] < q_len) {
      return make_error(Errc::invalid_argument, "seq_lens[" + std::to_string(r) + "]",
                        batch.seq_lens[i],
                        "must be at least the request's query length " + std::to_string(q_len));
    }
    if (batch.seq_lens[i] > max_seq_len) {
      return make_error(Errc::out_of_range, "seq_lens[" + std::to_string(r) + "]", batch.seq_lens[i],
                        "must be at most max_seq_len = 2^30 = " + std::to_string(max_seq_len));
    }
    if (!batch.causal_per_request.empty() && batch.causal_per_request[i] > 1) {
      return make_error(Errc::invalid_argument, "causal_per_request[" + std::to_string(r) + "]",
                        batch.causal_per_request[i], "must be 0 or 1");
    }
  }
  if (batch.query_start_loc.back() != batch.num_tokens) {
    return make_error(Errc::size_mismatch, "num_tokens", batch.num_tokens,
                      "must equal query_start_loc[" + std::to_string(requests) + "] = " +
                          std::to_string(batch.query_start_loc.back()) + " (the query rows of the batch)");
  }
  return {};
}

}  // namespace pagedattn
