// RowsView: a non-owning view of a `[d0][d1]...[cols]` tensor (one to three leading dimensions,
// each with its own stride, and a contiguous last dimension) read as rows: the operands of the
// GEMM, linear and MoE entry points.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "pagedattn/core/byte_extent.hpp"
#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"

namespace pagedattn {

/// The row addressing of a RowsView, without its pointer or element type: up to three leading
/// dimensions with their strides (elements). Row r is the r-th index tuple in row-major order.
struct RowsShape {
  /// Most leading dimensions.
  static constexpr int max_leading = 3;
  int rank = 0;                                        ///< Leading dimensions (-1: invalid).
  std::array<std::int64_t, max_leading> extents{};     ///< Size of each leading dimension.
  std::array<std::int64_t, max_leading> strides{};     ///< Stride of each, in elements.

  /// Elements from element (0, ..., 0) to row `row`'s first element. Precondition: 0 <= row <
  /// rows() of a valid shape.
  [[nodiscard]] constexpr std::int64_t row_offset(std::int64_t row) const noexcept {
    std::int64_t offset = 0;
    for (int i = rank - 1; i >= 0; --i) {
      const auto d = static_cast<std::size_t>(i);
      offset += row % extents[d] * strides[d];
      row /= extents[d];
    }
    return offset;
  }
  /// Rows: the product of the leading dimensions (0 when empty or invalid, or on overflow).
  [[nodiscard]] constexpr std::int64_t rows() const noexcept {
    if (rank <= 0) return 0;
    std::int64_t rows = 1;
    for (int i = 0; i < rank; ++i) {
      const std::int64_t e = extents[static_cast<std::size_t>(i)];
      if (e <= 0) return 0;
      if (__builtin_mul_overflow(rows, e, &rows)) return 0;
    }
    return rows;
  }
};

/// Rows of `cols` contiguous elements of `T` (may be const), indexed by up to three leading
/// dimensions: element (i0, i1, i2, c) is at `data[i0 * strides[0] + i1 * strides[1] + i2 *
/// strides[2] + c]` (strides in elements). Row r is the r-th index tuple in row-major order, so a
/// `[batch][seq][hidden]` activation with any strides is `batch * seq` rows of `hidden`. Made by
/// name (matrix, dense, strided); validate_rows checks it.
template <class T>
class RowsView {
 public:
  /// Most leading dimensions.
  static constexpr int max_leading = RowsShape::max_leading;

  /// An empty view (no rows).
  constexpr RowsView() = default;

  /// `rows` rows of `cols` elements, `row_stride` elements apart.
  static constexpr RowsView matrix(T* data, std::int64_t rows, std::int64_t cols, std::int64_t row_stride) noexcept {
    return RowsView(data, {rows}, {row_stride}, cols);
  }

  /// `rows` rows of `cols` elements, densely packed.
  static constexpr RowsView dense(T* data, std::int64_t rows, std::int64_t cols) noexcept {
    return matrix(data, rows, cols, cols);
  }

  /// A tensor of shape `leading..., cols` whose leading dimensions have `strides` (in elements;
  /// as many as `leading`, 1 to 3 of them, else the view is invalid and validate_rows says so).
  static constexpr RowsView strided(T* data, std::initializer_list<std::int64_t> leading,
                                    std::initializer_list<std::int64_t> strides, std::int64_t cols) noexcept {
    return RowsView(data, leading, strides, cols);
  }

  /// A read-only view of the same elements.
  constexpr operator RowsView<const T>() const noexcept {  // NOLINT: widening to const
    return RowsView<const T>::from_parts(data_, shape_, cols_);
  }

  /// Pointer to element (row, 0). Precondition: 0 <= row < rows() of a valid view.
  [[nodiscard]] constexpr T* row(std::int64_t row) const noexcept { return data_ + shape_.row_offset(row); }
  /// Rows: the product of the leading dimensions (0 for an empty or invalid view).
  [[nodiscard]] constexpr std::int64_t rows() const noexcept { return shape_.rows(); }
  /// Elements per row (contiguous).
  [[nodiscard]] constexpr std::int64_t cols() const noexcept { return cols_; }
  /// Element (0, ..., 0).
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  /// The row addressing (leading dimensions and strides).
  [[nodiscard]] constexpr const RowsShape& shape() const noexcept { return shape_; }
  /// Leading dimensions (0 for an empty view; -1 when made from more than max_leading).
  [[nodiscard]] constexpr int rank() const noexcept { return shape_.rank; }
  /// Size of leading dimension `i` < rank().
  [[nodiscard]] constexpr std::int64_t extent(int i) const noexcept { return shape_.extents[static_cast<std::size_t>(i)]; }
  /// Stride (elements) of leading dimension `i` < rank().
  [[nodiscard]] constexpr std::int64_t stride(int i) const noexcept { return shape_.strides[static_cast<std::size_t>(i)]; }

  /// Assembles a view from its parts (the const conversion's helper).
  static constexpr RowsView from_parts(T* data, const RowsShape& shape, std::int64_t cols) noexcept {
    RowsView view;
    view.data_ = data;
    view.shape_ = shape;
    view.cols_ = cols;
    return view;
  }

 private:
  constexpr RowsView(T* data, std::initializer_list<std::int64_t> leading, std::initializer_list<std::int64_t> strides,
                     std::int64_t cols) noexcept
      : data_(data), cols_(cols) {
    if (leading.size() == 0 || leading.size() > max_leading || strides.size() != leading.size()) {
      shape_.rank = -1;
      return;
    }
    shape_.rank = static_cast<int>(leading.size());
    std::size_t i = 0;
    for (std::int64_t e : leading) shape_.extents[i++] = e;
    i = 0;
    for (std::int64_t s : strides) shape_.strides[i++] = s;
  }

  T* data_ = nullptr;
  RowsShape shape_;
  std::int64_t cols_ = 0;
};

/// Checks `view` (named `name` in messages): 1 to 3 leading dimensions of non-negative size,
/// non-negative strides, `cols` == `expected_cols` (when >= 0), data non-null when there are
/// rows, and every element address (the highest row's last element) representable in 64 bits.
/// Strides may be anything else (rows may even alias: only written views are checked for
/// self-overlap, by validate_rows_disjoint).
template <class T>
Status validate_rows(const RowsView<T>& view, std::string_view name, std::int64_t expected_cols) {
  const std::string prefix(name);
  if (view.rank() < 1 || view.rank() > RowsView<T>::max_leading) {
    return detail::make_error(Errc::invalid_argument, prefix + ".rank()", view.rank(),
                              "must be 1 to 3 leading dimensions (with as many strides)");
  }
  for (int i = 0; i < view.rank(); ++i) {
    // Appended, not concatenated: GCC 12 at -O3 warns falsely (-Wrestrict) on "(" + string.
    const std::string index = std::string("(").append(std::to_string(i)).append(")");
    if (view.extent(i) < 0) {
      return detail::make_error(Errc::invalid_argument, prefix + ".extent" + index, view.extent(i),
                                "must not be negative");
    }
    if (view.stride(i) < 0) {
      return detail::make_error(Errc::invalid_argument, prefix + ".stride" + index, view.stride(i),
                                "must not be negative");
    }
  }
  if (view.cols() < 0 || (expected_cols >= 0 && view.cols() != expected_cols)) {
    return detail::make_error(Errc::size_mismatch, prefix + ".cols()", view.cols(),
                              expected_cols >= 0 ? "must equal " + std::to_string(expected_cols)
                                                 : std::string("must not be negative"));
  }
  CheckedSize span = static_cast<std::uint64_t>(view.cols());
  CheckedSize rows = 1;
  for (int i = 0; i < view.rank(); ++i) {
    const auto extent = static_cast<std::uint64_t>(view.extent(i));
    rows = rows * extent;
    if (extent > 0) span = span + CheckedSize(static_cast<std::uint64_t>(view.stride(i))) * (extent - 1);
  }
  const CheckedSize bytes = span * sizeof(T);
  if (rows.overflowed() || bytes.overflowed() || *bytes.value() > static_cast<std::uint64_t>(INT64_MAX)) {
    return detail::make_error(Errc::size_overflow, prefix + ".data()", static_cast<const void*>(view.data()),
                              "its extents and strides reach past 2^63 bytes");
  }
  if (view.rows() > 0 && view.cols() > 0 && view.data() == nullptr) {
    return detail::make_error(Errc::invalid_argument, prefix + ".data()", nullptr, "must not be null");
  }
  return {};
}

/// Checks that the rows of a written view do not overlap each other: sorted by stride, each
/// leading dimension's stride must cover the span of the dimensions inside it. Precondition:
/// validate_rows passed.
template <class T>
Status validate_rows_disjoint(const RowsView<T>& view, std::string_view name) {
  std::array<int, RowsView<T>::max_leading> order{};
  for (int i = 0; i < view.rank(); ++i) order[static_cast<std::size_t>(i)] = i;
  // Innermost first: ascending stride (insertion sort of at most three).
  for (int i = 1; i < view.rank(); ++i) {
    for (int j = i; j > 0 && view.stride(order[j]) < view.stride(order[j - 1]); --j) std::swap(order[j], order[j - 1]);
  }
  std::uint64_t inner_span = static_cast<std::uint64_t>(view.cols());  // fits: validate_rows
  for (int k = 0; k < view.rank(); ++k) {
    const int i = order[static_cast<std::size_t>(k)];
    if (view.extent(i) <= 1) continue;
    const auto stride = static_cast<std::uint64_t>(view.stride(i));
    if (stride < inner_span) {
      return detail::make_error(Errc::invalid_argument, std::string(name).append(".stride(").append(std::to_string(i)).append(")"),
                                view.stride(i),
                                "must be at least " + std::to_string(inner_span) +
                                    " (the span of the dimensions inside it): the rows of a written view must not overlap");
    }
    inner_span = stride * static_cast<std::uint64_t>(view.extent(i) - 1) + inner_span;
  }
  return {};
}

namespace detail {
/// The extent of a validated RowsView: from its first element to one past its highest one.
template <class T>
ByteExtent extent_of(const RowsView<T>& view) noexcept {
  if (view.rows() == 0 || view.cols() == 0) return {};
  std::uint64_t last = static_cast<std::uint64_t>(view.cols());
  for (int i = 0; i < view.rank(); ++i) {
    last += static_cast<std::uint64_t>(view.stride(i)) * static_cast<std::uint64_t>(view.extent(i) - 1);
  }
  return extent_of(view.data(), last);
}
}  // namespace detail

}  // namespace pagedattn
