// KvCacheView: a non-owning view of a paged KV cache in caller-owned memory
// `[num_blocks][num_kv_heads][2][block_size * HeadDim]` (element order: KvBlockLayout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"

namespace pagedattn {

namespace detail {
/// Selects the non-validating constructors of views (for conversions between valid views).
struct UncheckedTag {};
}  // namespace detail

/// Largest head dimension the kernels support.
inline constexpr int max_head_dim = 512;

/// The HeadDim template argument meaning "given at run time" (KvCacheView, AttentionTraits): the
/// views and plans then carry the head dimension as a value, checked where they meet.
inline constexpr int dynamic_head_dim = 0;

/// Satisfied by a compile-time head dimension (a positive multiple of 16 up to max_head_dim) and
/// by dynamic_head_dim.
template <int HeadDim>
concept HeadDimArgument = HeadDim == dynamic_head_dim || (HeadDim > 0 && HeadDim % 16 == 0 && HeadDim <= max_head_dim);

/// ok() when `head_dim` is a positive multiple of 16 no larger than max_head_dim.
inline Status check_head_dim(std::int64_t head_dim, std::string_view argument = "head_dim") {
  if (head_dim <= 0 || head_dim % 16 != 0 || head_dim > max_head_dim) {
    return detail::make_error(Errc::invalid_argument, argument, head_dim,
                              "must be a positive multiple of 16 no larger than 512");
  }
  return {};
}

/// Elements a cache of this shape holds, or nullopt when the count overflows 64 bits or a
/// dimension is not positive. Multiply by sizeof(element) (checked) for bytes.
inline std::optional<std::uint64_t> kv_cache_elements(std::int64_t num_blocks, std::int64_t num_kv_heads,
                                                      std::int64_t block_size,
                                                      std::int64_t head_dim) noexcept {
  if (num_blocks <= 0 || num_kv_heads <= 0 || block_size <= 0 || head_dim <= 0) return std::nullopt;
  return (CheckedSize(static_cast<std::uint64_t>(num_blocks)) *
          static_cast<std::uint64_t>(num_kv_heads) * 2u * static_cast<std::uint64_t>(block_size) *
          static_cast<std::uint64_t>(head_dim))
      .value();
}

/// Validates a cache shape: positive counts, block_size a multiple of 16 (and at most 2^20),
/// head_dim per check_head_dim, total bytes representable.
inline Status validate_kv_cache_shape(std::int64_t num_blocks, std::int64_t num_kv_heads,
                                      std::int64_t block_size, std::int64_t head_dim,
                                      std::size_t element_bytes) {
  if (num_blocks <= 0) {
    return detail::make_error(Errc::invalid_argument, "num_blocks", num_blocks, "must be positive");
  }
  if (num_kv_heads <= 0 || num_kv_heads > (1 << 20)) {
    return detail::make_error(Errc::invalid_argument, "num_kv_heads", num_kv_heads,
                              "must be in [1, 2^20]");
  }
  if (block_size <= 0 || block_size % kv_token_group != 0 || block_size > (1 << 20)) {
    return detail::make_error(Errc::invalid_argument, "block_size", block_size,
                              "must be a positive multiple of 16 no larger than 2^20");
  }
  if (Status status = check_head_dim(head_dim); !status.ok()) return status;
  const auto elements = kv_cache_elements(num_blocks, num_kv_heads, block_size, head_dim);
  if (!elements || !checked_mul(*elements, element_bytes)) {
    return detail::make_error(Errc::size_overflow, "num_blocks", num_blocks,
                              "the cache size in bytes does not fit in 64 bits");
  }
  return {};
}

/// Non-owning view of a paged KV cache of `T` elements (`T` may be const for read-only use) with
/// head dimension `HeadDim`, or one given at run time for HeadDim = dynamic_head_dim. Cheap to
/// copy. The memory must hold kv_cache_elements(...) elements.
template <class T, int HeadDim>
  requires HeadDimArgument<HeadDim>
class KvCacheView {
 public:
  /// Element type without const.
  using element_type = std::remove_const_t<T>;
  /// Element order inside a block.
  using layout = KvBlockLayout<element_type>;
  /// The head dimension the type fixes (dynamic_head_dim: the value's head_dim()).
  static constexpr int static_head_dim = HeadDim;

  /// Views `data` as a cache of `num_blocks` blocks of `block_size` tokens for `num_kv_heads`
  /// heads of HeadDim elements. Throws Error for a bad shape (see validate_kv_cache_shape) or a
  /// null `data`.
  KvCacheView(T* data, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size)
    requires(HeadDim != dynamic_head_dim)
      : KvCacheView(validated(data, num_blocks, num_kv_heads, block_size, HeadDim), num_blocks, num_kv_heads,
                    block_size, HeadDim, detail::UncheckedTag{}) {}

  /// Views `data` as a cache of `num_blocks` blocks of `block_size` tokens for `num_kv_heads`
  /// heads of `head_dim` elements (the runtime form). Throws Error as the other constructor.
  KvCacheView(T* data, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size,
              std::int64_t head_dim)
    requires(HeadDim == dynamic_head_dim)
      : KvCacheView(validated(data, num_blocks, num_kv_heads, block_size, head_dim), num_blocks, num_kv_heads,
                    block_size, static_cast<int>(head_dim), detail::UncheckedTag{}) {}

  /// A read-only view of the same cache.
  operator KvCacheView<const element_type, HeadDim>() const noexcept {  // NOLINT: widening
    return KvCacheView<const element_type, HeadDim>(data_, num_blocks_, num_kv_heads_, block_size_, head_dim_,
                                                    detail::UncheckedTag{});
  }

  /// The same cache as a runtime-head-dim view (for the runtime forms of the entry points).
  operator KvCacheView<T, dynamic_head_dim>() const noexcept  // NOLINT: forgetting the static head dim
    requires(HeadDim != dynamic_head_dim)
  {
    return KvCacheView<T, dynamic_head_dim>(data_, num_blocks_, num_kv_heads_, block_size_, head_dim_,
                                            detail::UncheckedTag{});
  }

  /// A read-only runtime-head-dim view of the same cache.
  operator KvCacheView<const element_type, dynamic_head_dim>() const noexcept  // NOLINT: widening
    requires(HeadDim != dynamic_head_dim && !std::is_const_v<T>)
  {
    return KvCacheView<const element_type, dynamic_head_dim>(data_, num_blocks_, num_kv_heads_, block_size_,
                                                             head_dim_, detail::UncheckedTag{});
  }

  /// Elements per head (HeadDim, or the runtime value).
  [[nodiscard]] constexpr int head_dim() const noexcept { return head_dim_; }

  /// First element of the cache.
  [[nodiscard]] T* data() const noexcept { return data_; }
  /// Number of physical blocks.
  [[nodiscard]] std::int64_t num_blocks() const noexcept { return num_blocks_; }
  /// Number of KV heads.
  [[nodiscard]] int num_kv_heads() const noexcept { return num_kv_heads_; }
  /// Tokens per block.
  [[nodiscard]] int block_size() const noexcept { return block_size_; }
  /// Elements in the whole cache.
  [[nodiscard]] std::uint64_t num_elements() const noexcept {
    return *kv_cache_elements(num_blocks_, num_kv_heads_, block_size_, head_dim_);
  }
  /// Elements in one K or V sub-block.
  [[nodiscard]] std::size_t sub_block_elements() const noexcept {
    return layout::sub_block_elements(block_size_, head_dim_);
  }
  /// K sub-block of (`block`, `kv_head`). Preconditions: indices in range.
  [[nodiscard]] T* key_block(std::int64_t block, int kv_head) const noexcept {
    return data_ + (static_cast<std::size_t>(block) * static_cast<std::size_t>(num_kv_heads_) +
                    static_cast<std::size_t>(kv_head)) * 2 * sub_block_elements();
  }
  /// V sub-block of (`block`, `kv_head`). Preconditions: indices in range.
  [[nodiscard]] T* value_block(std::int64_t block, int kv_head) const noexcept {
    return key_block(block, kv_head) + sub_block_elements();
  }

  /// Non-validating constructor: the shape must come from a valid view.
  KvCacheView(T* data, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size, int head_dim,
              detail::UncheckedTag) noexcept
      : data_(data),
        num_blocks_(num_blocks),
        num_kv_heads_(static_cast<int>(num_kv_heads)),
        block_size_(static_cast<int>(block_size)),
        head_dim_(head_dim) {}

 private:
  /// `data`, after throwing Error for a bad shape or a null `data`.
  static T* validated(T* data, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size,
                      std::int64_t head_dim) {
    detail::throw_if_error(validate_kv_cache_shape(num_blocks, num_kv_heads, block_size, head_dim, sizeof(T)));
    if (data == nullptr) {
      detail::throw_if_error(detail::make_error(Errc::invalid_argument, "cache.data", nullptr, "must not be null"));
    }
    return data;
  }

  T* data_;
  std::int64_t num_blocks_;
  int num_kv_heads_;
  int block_size_;
  int head_dim_;
};

}  // namespace pagedattn
