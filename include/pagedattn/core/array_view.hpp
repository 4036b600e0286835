// ArrayView: the non-owning array fields of the API's structs (AttentionBatch, AttentionParams),
// a read-only span that refuses to be made from a temporary container, which would dangle.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <ranges>
#include <span>
#include <type_traits>

namespace pagedattn {

/// A read-only view of `size()` elements of `T` owned by the caller, like std::span<const T>,
/// except that it cannot be constructed (or assigned) from a temporary container or an
/// initializer list: `batch.seq_lens = std::vector<int32_t>{...}` does not compile, because the
/// vector would be destroyed at the end of the statement and the view would dangle. It binds to
/// named containers, arrays, spans and (pointer, size).
template <class T>
class ArrayView {
 public:
  /// The element type.
  using element_type = const T;
  /// The value type.
  using value_type = std::remove_cv_t<T>;

  /// An empty view.
  constexpr ArrayView() noexcept = default;
  /// `size` elements at `data` (which may be null only when size is 0).
  constexpr ArrayView(const T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// The elements of `span` (a view already: nothing is owned).
  constexpr ArrayView(std::span<const T> span) noexcept : data_(span.data()), size_(span.size()) {}  // NOLINT
  /// The elements of the named (lvalue) contiguous range `range`, or of a borrowed range.
  template <std::ranges::contiguous_range R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, ArrayView> &&
             std::is_same_v<std::ranges::range_value_t<R>, value_type> &&
             (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>))
  constexpr ArrayView(R&& range) noexcept  // NOLINT: implicit, like std::span
      : data_(std::ranges::data(range)), size_(static_cast<std::size_t>(std::ranges::size(range))) {}
  /// Deleted: a temporary container would be destroyed while the view still points at it.
  template <std::ranges::contiguous_range R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, ArrayView> && !std::is_lvalue_reference_v<R> &&
             !std::ranges::borrowed_range<R>)
  ArrayView(R&& range) = delete;
  /// Deleted: an initializer list's array lives only until the end of the statement.
  ArrayView(std::initializer_list<value_type>) = delete;

  /// First element.
  [[nodiscard]] constexpr const T* data() const noexcept { return data_; }
  /// Number of elements.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// True when there are no elements.
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  /// Element `i`. Precondition: i < size().
  [[nodiscard]] constexpr const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  /// The last element. Precondition: !empty().
  [[nodiscard]] constexpr const T& back() const noexcept { return data_[size_ - 1]; }
  /// Iterator to the first element.
  [[nodiscard]] constexpr const T* begin() const noexcept { return data_; }
  /// Iterator past the last element.
  [[nodiscard]] constexpr const T* end() const noexcept { return data_ + size_; }
  /// The same elements as a std::span.
  [[nodiscard]] constexpr std::span<const T> span() const noexcept { return {data_, size_}; }
  /// The same elements as a std::span.
  constexpr operator std::span<const T>() const noexcept { return span(); }  // NOLINT: a view of a view

 private:
  const T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace pagedattn

/// ArrayView is a view: ranges built on it may outlive it.
template <class T>
inline constexpr bool std::ranges::enable_borrowed_range<pagedattn::ArrayView<T>> = true;
