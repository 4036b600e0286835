// TokenHeadsView: a non-owning strided view of a `[num_tokens][num_heads][head_dim]` tensor with a
// contiguous last dimension (query, output, and the key/value inputs of reshape_and_cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"

namespace pagedattn {

/// View of `[num_tokens][num_heads][head_dim]` elements of `T` (may be const): element
/// (t, h, d) is at `data[t * token_stride + h * head_stride + d]`. Strides are in elements and
/// may describe padding or an interleaved layout; the last dimension is contiguous.
template <class T>
struct TokenHeadsView {
  T* data = nullptr;              ///< Element (0, 0, 0); may be null only when num_tokens == 0.
  std::int64_t num_tokens = 0;    ///< Rows.
  std::int64_t num_heads = 0;     ///< Heads per token.
  std::int64_t head_dim = 0;      ///< Elements per head (contiguous).
  std::int64_t token_stride = 0;  ///< Elements between consecutive tokens.
  std::int64_t head_stride = 0;   ///< Elements between consecutive heads of one token.

  /// A densely packed view (`head_stride = head_dim`, `token_stride = num_heads * head_dim`).
  static TokenHeadsView packed(T* data, std::int64_t num_tokens, std::int64_t num_heads,
                               std::int64_t head_dim) noexcept {
    return {data, num_tokens, num_heads, head_dim, num_heads * head_dim, head_dim};
  }

  /// A read-only view of the same elements.
  operator TokenHeadsView<const T>() const noexcept {  // NOLINT: widening to const
    return {data, num_tokens, num_heads, head_dim, token_stride, head_stride};
  }

  /// Pointer to element (token, head, 0). Preconditions: indices in range.
  [[nodiscard]] T* row(std::int64_t token, std::int64_t head) const noexcept {
    return data + token * token_stride + head * head_stride;
  }
};

/// Validates `view` (named `name` in messages) against the expected head count and head dim:
/// non-negative sizes, strides that keep every row inside distinct, non-overlapping memory
/// (head_stride >= head_dim, token_stride >= num_heads' span), non-null data when non-empty, and
/// a 64-bit element span.
template <class T>
Status validate_token_heads(const TokenHeadsView<T>& view, std::string_view name,
                            std::int64_t expected_heads, std::int64_t expected_head_dim) {
  const std::string prefix(name);
  if (view.num_tokens < 0) {
    return detail::make_error(Errc::invalid_argument, prefix + ".num_tokens", view.num_tokens,
                              "must not be negative");
  }
  if (view.num_heads != expected_heads) {
    return detail::make_error(Errc::size_mismatch, prefix + ".num_heads", view.num_heads,
                              "must equal " + std::to_string(expected_heads));
  }
  if (view.head_dim != expected_head_dim) {
    return detail::make_error(Errc::size_mismatch, prefix + ".head_dim", view.head_dim,
                              "must equal " + std::to_string(expected_head_dim));
  }
  if (view.head_stride < view.head_dim) {
    return detail::make_error(Errc::invalid_argument, prefix + ".head_stride", view.head_stride,
                              "must be at least head_dim = " + std::to_string(view.head_dim));
  }
  const auto head_span = checked_mul(static_cast<std::uint64_t>(view.head_stride),
                                     static_cast<std::uint64_t>(view.num_heads - 1));
  if (!head_span || view.token_stride < 0 ||
      static_cast<std::uint64_t>(view.token_stride) <
          *head_span + static_cast<std::uint64_t>(view.head_dim)) {
    return detail::make_error(Errc::invalid_argument, prefix + ".token_stride", view.token_stride,
                              "must be at least (num_heads - 1) * head_stride + head_dim");
  }
  if (view.num_tokens > 0 && view.data == nullptr) {
    return detail::make_error(Errc::invalid_argument, prefix + ".data", nullptr, "must not be null");
  }
  const CheckedSize span = CheckedSize(static_cast<std::uint64_t>(view.token_stride)) *
                               static_cast<std::uint64_t>(view.num_tokens) *
                               sizeof(std::remove_const_t<T>);
  if (span.overflowed()) {
    return detail::make_error(Errc::size_overflow, prefix + ".num_tokens", view.num_tokens,
                              "the tensor's byte span does not fit in 64 bits");
  }
  return {};
}

}  // namespace pagedattn
