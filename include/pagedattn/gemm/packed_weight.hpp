// Packed weights: the one layout every tier's GEMM reads (tiles of the K-cache block layout, so the
// attention TileGemm multiplies them as it multiplies keys), its sizes, and pack_weight.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/core/byte_extent.hpp"
#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/core/rows_view.hpp"

namespace pagedattn {

/// Element types a weight may be packed as: float or bf16_t.
template <class W>
concept PackedWeightType = std::is_same_v<W, float> || std::is_same_v<W, bf16_t>;

/// Element types a weight may be packed from, and GEMM inputs and outputs: float or bf16_t.
template <class T>
concept GemmElement = std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, bf16_t>;

/// Version of the packed-weight format below; bumped on any change of element order.
inline constexpr int packed_weight_format_version = 1;

/// The packed format of a weight `W[n][k]` (n output features, k inputs): columns (output
/// features) in tiles of `tile_columns`, each tile's inputs in chunks of `chunk_depth`; a (tile,
/// chunk) block is the K sub-block of a KV-cache block (KvBlockLayout<W>::key_index) with
/// block_size = the tile's columns (rounded up to 16; the extra columns are zero) and head_dim =
/// the chunk's depth. Blocks are stored tile-major, chunk-minor, so one tile's weights are one
/// contiguous run. The same bytes serve every tier. Preconditions everywhere: n >= 1, k >= 16,
/// k % 16 == 0 (validate_weight_shape).
template <PackedWeightType W>
struct PackedWeightLayout {
  /// Columns (output features) per tile: the GEMM's work items cover one tile each.
  static constexpr int tile_columns = 128;
  /// Inputs per chunk (the last chunk may be shorter, a multiple of 16).
  static constexpr int chunk_depth = 256;
  static_assert(tile_columns % kv_token_group == 0 && chunk_depth % kv_token_group == 0);

  /// n rounded up to a multiple of 16: the stored columns.
  static constexpr std::int64_t padded_columns(std::int64_t n) noexcept {
    return (n + kv_token_group - 1) / kv_token_group * kv_token_group;
  }
  /// Number of column tiles.
  static constexpr std::int64_t tiles(std::int64_t n) noexcept { return (n + tile_columns - 1) / tile_columns; }
  /// Number of input chunks.
  static constexpr std::int64_t chunks(std::int64_t k) noexcept { return (k + chunk_depth - 1) / chunk_depth; }
  /// Stored columns of tile `tile` (a multiple of 16).
  static constexpr int tile_width(std::int64_t n, std::int64_t tile) noexcept {
    return static_cast<int>(std::min<std::int64_t>(tile_columns, padded_columns(n) - tile * tile_columns));
  }
  /// Inputs of chunk `chunk` (a multiple of 16).
  static constexpr int chunk_size(std::int64_t k, std::int64_t chunk) noexcept {
    return static_cast<int>(std::min<std::int64_t>(chunk_depth, k - chunk * chunk_depth));
  }
  /// Stored elements: padded_columns(n) * k, or an overflow.
  static constexpr CheckedSize elements(std::int64_t n, std::int64_t k) noexcept {
    return CheckedSize(static_cast<std::uint64_t>(padded_columns(n))) * static_cast<std::uint64_t>(k);
  }
  /// Offset (elements) of the (tile, chunk) block. Precondition: elements(n, k) fits.
  static constexpr std::size_t block_offset(std::int64_t n, std::int64_t k, std::int64_t tile,
                                            std::int64_t chunk) noexcept {
    return static_cast<std::size_t>(tile) * tile_columns * static_cast<std::size_t>(k) +
           static_cast<std::size_t>(chunk) * chunk_depth * static_cast<std::size_t>(tile_width(n, tile));
  }
  /// Offset (elements) of W[column][input].
  static constexpr std::size_t index(std::int64_t n, std::int64_t k, std::int64_t column, std::int64_t input) noexcept {
    const std::int64_t tile = column / tile_columns, chunk = input / chunk_depth;
    return block_offset(n, k, tile, chunk) +
           KvBlockLayout<W>::key_index(chunk_size(k, chunk), static_cast<int>(column % tile_columns),
                                       static_cast<int>(input % chunk_depth));
  }
};

/// Checks a weight shape `[n][k]` (argument names `<name>.rows()` and `<name>.cols()`): n >= 1,
/// k >= 16 and a multiple of 16 (the K-group granularity of the tile products), both below 2^31,
/// and the packed size below 2^63 bytes.
template <PackedWeightType W>
Status validate_weight_shape(std::int64_t n, std::int64_t k, std::string_view name = "weight") {
  const std::string prefix(name);
  if (n < 1 || n > INT32_MAX) {
    return detail::make_error(Errc::invalid_argument, prefix + ".rows()", n, "must be in [1, 2^31 - 1]");
  }
  if (k < kv_token_group || k > INT32_MAX || k % kv_token_group != 0) {
    return detail::make_error(Errc::invalid_argument, prefix + ".cols()", k,
                              "must be a positive multiple of 16 below 2^31 (pad the inputs with zeros)");
  }
  const auto bytes = (PackedWeightLayout<W>::elements(n, k) * sizeof(W)).value();
  if (!bytes || *bytes > static_cast<std::uint64_t>(INT64_MAX)) {
    return detail::make_error(Errc::size_overflow, prefix + ".cols()", k,
                              "the packed size reaches past 2^63 bytes (no address range holds it)");
  }
  return {};
}

/// Bytes of a weight `[n][k]` packed as `W` (the one owner of this size). Throws Error when
/// validate_weight_shape fails.
template <PackedWeightType W>
std::uint64_t packed_weight_bytes(std::int64_t n, std::int64_t k) {
  detail::throw_if_error(validate_weight_shape<W>(n, k));
  return *(PackedWeightLayout<W>::elements(n, k) * sizeof(W)).value();
}

/// A read-only view of a packed weight `[n][k]` of `W` (PackedWeightLayout<W>): the second GEMM
/// operand. A distinct type, so an unpacked matrix cannot be passed where it is expected; made by
/// pack_weight_into, by PackedWeightBuffer, or by adopt() for bytes pack_weight wrote earlier.
template <PackedWeightType W>
class PackedWeight {
 public:
  /// The element type.
  using element_type = W;
  /// An empty view (no weight); GEMM entry points reject it.
  PackedWeight() = default;
  /// Views `data` as a weight `[n][k]` that pack_weight (of any process, any tier) packed as W:
  /// for weights kept in files or shared memory. Throws Error when the shape is invalid.
  /// Precondition: `data` holds packed_weight_bytes<W>(n, k) bytes written by pack_weight for (n, k).
  static PackedWeight adopt(const W* data, std::int64_t n, std::int64_t k) {
    detail::throw_if_error(validate_weight_shape<W>(n, k));
    if (data == nullptr) {
      detail::throw_if_error(detail::make_error(Errc::invalid_argument, "data", nullptr, "must not be null"));
    }
    return PackedWeight(data, n, k);
  }
  /// First packed element (null for an empty view).
  [[nodiscard]] const W* data() const noexcept { return data_; }
  /// Output features n (rows of the unpacked weight).
  [[nodiscard]] std::int64_t rows() const noexcept { return rows_; }
  /// Inputs k (columns of the unpacked weight).
  [[nodiscard]] std::int64_t cols() const noexcept { return cols_; }
  /// Packed elements (0 for an empty view).
  [[nodiscard]] std::size_t elements() const noexcept {
    return data_ == nullptr ? 0 : static_cast<std::size_t>(*PackedWeightLayout<W>::elements(rows_, cols_).value());
  }
  /// W[column][input], unpacked (a debugging and test aid). Precondition: indices in range.
  [[nodiscard]] W at(std::int64_t column, std::int64_t input) const noexcept {
    return data_[PackedWeightLayout<W>::index(rows_, cols_, column, input)];
  }

 private:
  template <PackedWeightType>
  friend class PackedWeightBuffer;
  template <PackedWeightType V, class S>
  friend PackedWeight<V> pack_weight_into(RowsView<S>, std::span<V>);
  PackedWeight(const W* data, std::int64_t n, std::int64_t k) noexcept : data_(data), rows_(n), cols_(k) {}

  const W* data_ = nullptr;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

/// Packs `weight` (`[n][k]` of float or bf16_t, any row stride: validate_rows) as `W` into the
/// caller's `storage` (at least PackedWeightLayout<W>::elements(n, k) elements; it must not
/// overlap `weight`) and returns the view of it. float to bf16_t rounds to nearest even; every
/// other pair converts exactly. Throws Error (nothing written) for a bad shape (validate_rows,
/// validate_weight_shape), storage too small, or overlap.
template <PackedWeightType W, class S>
PackedWeight<W> pack_weight_into(RowsView<S> weight, std::span<W> storage) {
  static_assert(GemmElement<S>, "weights are packed from float or bf16_t");
  detail::throw_if_error(validate_rows(weight, "weight", -1));
  const std::int64_t n = weight.rows(), k = weight.cols();
  detail::throw_if_error(validate_weight_shape<W>(n, k));
  using layout = PackedWeightLayout<W>;
  const std::uint64_t elements = *layout::elements(n, k).value();
  if (storage.size() < elements) {
    detail::throw_if_error(detail::make_error(Errc::size_mismatch, "storage.size()", storage.size(),
                                              "must be at least " + std::to_string(elements) +
                                                  " elements (PackedWeightLayout::elements)"));
  }
  const detail::NamedExtent read[] = {{"weight", detail::extent_of(weight)}};
  detail::throw_if_error(detail::validate_disjoint("storage", detail::extent_of(storage.data(), elements), read));
  W* out = storage.data();
  const auto convert = [](S value) {
    if constexpr (std::is_same_v<std::remove_const_t<S>, W>) {
      return value;
    } else {
      return W(static_cast<float>(value));
    }
  };
  for (std::int64_t tile = 0; tile < layout::tiles(n); ++tile) {
    const int width = layout::tile_width(n, tile);
    for (std::int64_t chunk = 0; chunk < layout::chunks(k); ++chunk) {
      const int depth = layout::chunk_size(k, chunk);
      W* block = out + layout::block_offset(n, k, tile, chunk);
      for (int c = 0; c < width; ++c) {
        const std::int64_t column = tile * layout::tile_columns + c;
        const S* source = column < n ? weight.row(column) + chunk * layout::chunk_depth : nullptr;
        for (int d = 0; d < depth; ++d) {
          block[KvBlockLayout<W>::key_index(depth, c, d)] = source != nullptr ? convert(source[d]) : W(0.0f);
        }
      }
    }
  }
  return PackedWeight<W>(out, n, k);
}

/// A packed weight in library-owned, 64-byte aligned storage: pack once, then pass view() to every
/// call. Movable, not copyable.
template <PackedWeightType W>
class PackedWeightBuffer {
 public:
  /// Packs `weight` as pack_weight_into does, into storage allocated here (throws Error as it
  /// does; std::bad_alloc when the allocation fails).
  template <class S>
  explicit PackedWeightBuffer(RowsView<S> weight) {
    detail::throw_if_error(validate_rows(weight, "weight", -1));
    detail::throw_if_error(validate_weight_shape<W>(weight.rows(), weight.cols()));
    const auto elements = static_cast<std::size_t>(*PackedWeightLayout<W>::elements(weight.rows(), weight.cols()).value());
    storage_.reset(static_cast<W*>(::operator new(elements * sizeof(W), std::align_val_t{scratch_alignment})));
    view_ = pack_weight_into<W>(weight, std::span<W>(storage_.get(), elements));
  }
  /// The packed weight.
  [[nodiscard]] PackedWeight<W> view() const noexcept { return view_; }

 private:
  struct Free {
    void operator()(W* p) const noexcept { ::operator delete(p, std::align_val_t{scratch_alignment}); }
  };
  std::unique_ptr<W, Free> storage_;
  PackedWeight<W> view_;
};

/// Packs `weight` (`[n][k]` of float or bf16_t) as `W` into library-owned storage (see
/// PackedWeightBuffer).
template <PackedWeightType W, class S>
PackedWeightBuffer<W> pack_weight(RowsView<S> weight) {
  return PackedWeightBuffer<W>(weight);
}

}  // namespace pagedattn
