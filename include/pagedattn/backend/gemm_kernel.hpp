// The GEMM kernel of one tier: a work item multiplies a block of input rows by one tile of packed
// weights with the tier's TileGemm QK^T product (the packed tiles are K sub-blocks), chunk by chunk
// of inputs (all of them, or one slice of a split GEMM), then adds bias and the previous output
// and stores the output type.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/dispatch/gemm_entry.hpp"
#include "pagedattn/gemm/gemm_geometry.hpp"
#include "pagedattn/gemm/packed_weight.hpp"
#include "pagedattn/gemm/tile_gemm.hpp"

namespace pagedattn::backend {

/// GEMM of inputs `X`, weights packed as `W` and outputs `Out` on tier `Isa`.
template <class Isa, class X, class W, class Out>
struct GemmKernel {
  using gemm = TileGemm<Isa, W>;
  using layout = PackedWeightLayout<W>;
  /// The step whose products and scratch the GEMM uses (gemm_tile_geometry reads the same).
  using step = StepGeometry<Isa, X, W>;
  /// Whether the products multiply bf16 inputs as they are (bf16 pair dot products, AMX tiles);
  /// otherwise inputs are staged as floats.
  static constexpr bool dots_inputs = std::is_same_v<X, bf16_t> && gemm::dots_bf16_queries;
  using staged_type = std::conditional_t<dots_inputs, bf16_t, float>;
  static constexpr int rows_per_block = step::shape.max_tile_rows;
  /// Rows from which an item hints the next chunk's weights while it multiplies this one. Fewer
  /// rows do few FLOP per weight byte and read the tile (its chunks are contiguous) once, as one
  /// stream that the hardware prefetcher follows: hints there only cost (docs/DESIGN.md, section 7).
  static constexpr int hinted_rows = 8;
  /// Stride (floats) of the chunk sums and products: one tile of columns.
  static constexpr int sum_stride = layout::tile_columns;
  static_assert(layout::tile_columns <= step::shape.kv_tile_tokens, "a tile of columns is one step of positions");
  static_assert(sum_stride <= layout::chunk_depth, "the acc region ([row_capacity][chunk_depth]) holds the sums");
  static_assert(gemm::value_scale == 1.0f, "float and bf16 weights are multiplied as they are");

  /// The work items of `job`.
  static constexpr GemmItems items(const detail::GemmJob& job) noexcept {
    return GemmItems::of(job.rows, job.weight_rows, rows_per_block, layout::tile_columns);
  }

  /// The layout of the scratch and partial slots (gemm_tile_geometry reads the same).
  static constexpr TileGeometry geometry = step::geometry(layout::chunk_depth);
  static_assert(geometry.shape.row_capacity * sum_stride <= geometry.shape.max_tile_rows * layout::chunk_depth,
                "a partial slot's acc ([max_tile_rows][chunk_depth]) holds one item's sums");

  /// Runs task `task` of `job` (see GemmPass) in worker `worker`'s scratch.
  static void run_item(const detail::GemmJob& job, std::size_t task, std::size_t worker) noexcept {
    std::byte* scratch = job.workspace + geometry.worker_offset(worker);
    const std::int64_t chunks = layout::chunks(job.depth);
    const auto slot = [&](std::size_t index) {
      return reinterpret_cast<float*>(job.workspace + geometry.partial_offset(job.num_workers, index) + geometry.partial.acc);
    };
    switch (job.pass) {
      case detail::GemmPass::whole: {
        auto* sums = reinterpret_cast<float*>(scratch + geometry.worker.acc);
        sum_chunks(job, task, 0, chunks, sums, scratch);
        store(job, task, sums);
        return;
      }
      case detail::GemmPass::slices: {
        const auto slices = static_cast<std::size_t>(job.slices);
        const GemmSplit split{job.slices};
        const int slice = static_cast<int>(task % slices);
        sum_chunks(job, task / slices, split.first_chunk(chunks, slice), split.first_chunk(chunks, slice + 1),
                   slot(task), scratch);
        return;
      }
      case detail::GemmPass::merge: {
        const auto slices = static_cast<std::size_t>(job.slices);
        float* sums = slot(task * slices);
        const Extent extent = extent_of(job, task);
        for (std::size_t slice = 1; slice < slices; ++slice) {
          add_rows(sums, slot(task * slices + slice), extent.rows, extent.width);
        }
        store(job, task, sums);
        return;
      }
    }
  }

 private:
  /// Where work item `item` lies: its first row and column and how many of each.
  struct Extent {
    std::int64_t row0;     ///< First row.
    int rows;              ///< Rows (at most rows_per_block).
    std::int64_t tile;     ///< Column tile.
    std::int64_t column0;  ///< First output column.
    int width;             ///< Packed columns of the tile (padding included).
    int columns;           ///< Output columns of the tile.
  };

  static Extent extent_of(const detail::GemmJob& job, std::size_t item) noexcept {
    const GemmItems work = items(job);
    Extent e{};
    e.row0 = work.row_block(item) * rows_per_block;
    e.rows = static_cast<int>(std::min<std::int64_t>(rows_per_block, job.rows - e.row0));
    e.tile = work.column_tile(item);
    e.column0 = e.tile * layout::tile_columns;
    e.width = layout::tile_width(job.weight_rows, e.tile);
    e.columns = static_cast<int>(std::min<std::int64_t>(e.width, job.weight_rows - e.column0));
    return e;
  }

  /// sums[r][c] += addend[r][c] for r < rows, c < width (stride sum_stride).
  static void add_rows(float* sums, const float* addend, int rows, int width) noexcept {
    for (int r = 0; r < rows; ++r) {
      float* sum = sums + static_cast<std::ptrdiff_t>(r) * sum_stride;
      const float* add = addend + static_cast<std::ptrdiff_t>(r) * sum_stride;
      for (int c = 0; c < width; ++c) sum[c] += add[c];
    }
  }

  /// sums[r][c] (stride sum_stride) = the sum over chunks [first, last) of work item `item`'s
  /// products, in chunk order, in the worker scratch at `scratch`.
  static void sum_chunks(const detail::GemmJob& job, std::size_t item, std::int64_t first, std::int64_t last,
                         float* sums, std::byte* scratch) noexcept {
    const TileScratch step_scratch = TileScratch::in(scratch, geometry.worker);
    auto* staged = reinterpret_cast<staged_type*>(scratch + geometry.worker.query);
    auto* products = reinterpret_cast<float*>(scratch + geometry.worker.scores);
    const Extent e = extent_of(job, item);
    const std::int64_t chunks = layout::chunks(job.depth);

    const auto* x = static_cast<const X*>(job.x);
    const X* x_rows[rows_per_block];
    for (int r = 0; r < e.rows; ++r) x_rows[r] = x + job.x_shape.row_offset(e.row0 + r);

    const bool in_tiles = [&] {
      if constexpr (dots_inputs) {
        return gemm::uses_tiles(e.rows, layout::chunk_size(job.depth, first)) ||
               gemm::uses_tiles(e.rows, layout::chunk_size(job.depth, last - 1));
      } else {
        return false;
      }
    }();
    if (in_tiles) gemm::begin(step_scratch);  // the step's tiles (AMX): set up once per task
    const auto* weight = static_cast<const W*>(job.weight);
    for (std::int64_t chunk = first; chunk < last; ++chunk) {
      const int depth = layout::chunk_size(job.depth, chunk);
      const std::int64_t first_input = chunk * layout::chunk_depth;
      for (int r = 0; r < e.rows; ++r) {
        const X* source = x_rows[r] + first_input;
        staged_type* target = staged + static_cast<std::ptrdiff_t>(r) * depth;
        if constexpr (std::is_same_v<X, staged_type>) {
          // A copy as bytes: element by element, GCC 12 moved bf16 rows 2 bytes at a time (on a
          // Zen 4 EPYC 1.1-1.2x the time of the whole M 512 GEMM).
          std::memcpy(static_cast<void*>(target), source, sizeof(X) * static_cast<std::size_t>(depth));
        } else {
          for (int d = 0; d < depth; ++d) target[d] = static_cast<staged_type>(source[d]);
        }
      }
      const W* block = weight + layout::block_offset(job.weight_rows, job.depth, e.tile, chunk);
      // The next chunk's block follows this one: in items of hinted_rows rows or more, its bytes
      // are hinted while this one is multiplied.
      const std::ptrdiff_t ahead = e.rows >= hinted_rows && chunk + 1 < chunks
                                       ? static_cast<std::ptrdiff_t>(e.width) * depth * static_cast<std::ptrdiff_t>(sizeof(W))
                                       : 0;
      float* target = chunk == first ? sums : products;
      if constexpr (dots_inputs) {
        gemm::qk_bf16(staged, e.rows, depth, block, depth, 0, e.width, 1.0f, target, sum_stride, step_scratch, ahead);
      } else {
        gemm::qk(staged, e.rows, depth, block, depth, 0, e.width, target, sum_stride, ahead);
      }
      if (chunk != first) add_rows(sums, products, e.rows, e.width);
    }
    if (in_tiles) gemm::end(step_scratch);
  }

  /// out rows of work item `item` = sums (+ bias) (+ out when accumulating), in the output type.
  static void store(const detail::GemmJob& job, std::size_t item, const float* sums) noexcept {
    const Extent e = extent_of(job, item);
    auto* out = static_cast<Out*>(job.out);
    for (int r = 0; r < e.rows; ++r) {
      const float* sum = sums + static_cast<std::ptrdiff_t>(r) * sum_stride;
      Out* target = out + job.out_shape.row_offset(e.row0 + r) + e.column0;
      for (int c = 0; c < e.columns; ++c) {
        float value = sum[c];
        if (job.bias != nullptr) value += job.bias[e.column0 + c];
        if (job.accumulate) value += static_cast<float>(target[c]);
        target[c] = static_cast<Out>(value);
      }
    }
  }
};

}  // namespace pagedattn::backend
