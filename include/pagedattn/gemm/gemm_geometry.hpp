// The geometry of the GEMM on a tier: the attention step of the same (ISA, input type, weight type)
// laid out for one chunk of packed inputs, and the work items it implies. Free of intrinsics.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/gemm/packed_weight.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn {

/// The tile geometry GEMMs with inputs `X` and weights packed as `W` use on `isa`: the step of
/// (isa, X, W) laid out for head dim = one chunk of packed inputs. A worker's scratch holds the
/// staged inputs (query region), the chunk sums (acc), one chunk's products (scores) and the
/// step's own regions. The kernel reads the same from its step's type.
template <GemmElement X, PackedWeightType W>
constexpr TileGeometry gemm_tile_geometry(IsaId isa) noexcept {
  return tile_geometry<std::remove_const_t<X>, W>(isa, PackedWeightLayout<W>::chunk_depth);
}

/// The work items of a GEMM of `rows` rows and `columns` output features on a geometry: blocks of
/// shape.max_tile_rows rows times tiles of packed columns, row blocks minor (consecutive items
/// share a tile of weights).
struct GemmItems {
  std::int64_t row_blocks;     ///< Blocks of rows.
  std::int64_t column_tiles;   ///< Tiles of packed columns.
  int rows_per_block;          ///< Rows of every block but the last.

  /// The items of `rows` x `columns` with `rows_per_block` rows per block.
  static constexpr GemmItems of(std::int64_t rows, std::int64_t columns, int rows_per_block,
                                int tile_columns) noexcept {
    return {(rows + rows_per_block - 1) / rows_per_block, (columns + tile_columns - 1) / tile_columns,
            rows_per_block};
  }
  /// Number of items.
  [[nodiscard]] constexpr std::size_t count() const noexcept {
    return static_cast<std::size_t>(row_blocks) * static_cast<std::size_t>(column_tiles);
  }
  /// Row block of item `item`.
  [[nodiscard]] constexpr std::int64_t row_block(std::size_t item) const noexcept {
    return static_cast<std::int64_t>(item % static_cast<std::size_t>(row_blocks));
  }
  /// Column tile of item `item`.
  [[nodiscard]] constexpr std::int64_t column_tile(std::size_t item) const noexcept {
    return static_cast<std::int64_t>(item / static_cast<std::size_t>(row_blocks));
  }
};

/// How a GEMM with few work items (a router's one tile of columns at M 1) shares its K sum among
/// more workers: each item's chunks are cut into `slices` consecutive ranges, each summed by its
/// own task into a partial slot of the workspace (slot item * slices + slice); a second pass adds
/// an item's slots in slice order and stores. Chosen from the shape alone, so the bits do not
/// depend on the executor.
struct GemmSplit {
  /// Partial slots every GEMM workspace holds: the most item-times-slice tasks of a split GEMM.
  static constexpr std::size_t max_slots = 8;

  int slices;  ///< K ranges per item; 1: not split.

  /// The split of `items` over `chunks` chunks of packed inputs: as many slices as max_slots
  /// allows for the item count (at most one per chunk); none for more than max_slots / 2 items.
  static constexpr GemmSplit of(const GemmItems& items, std::int64_t chunks) noexcept {
    const std::size_t count = items.count();
    if (count == 0 || count > max_slots / 2 || chunks < 2) return {1};
    return {static_cast<int>(std::min<std::int64_t>(chunks, static_cast<std::int64_t>(max_slots / count)))};
  }
  /// First chunk of slice `slice` (0 <= slice <= slices; slice = slices gives the end).
  [[nodiscard]] constexpr std::int64_t first_chunk(std::int64_t chunks, int slice) const noexcept {
    return chunks * slice / slices;
  }
};

}  // namespace pagedattn
