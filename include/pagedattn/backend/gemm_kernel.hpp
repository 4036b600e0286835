// The GEMM kernel of one tier: a work item multiplies a block of input rows by one tile of packed
// weights with the tier's TileGemm QK^T product (the packed tiles are K sub-blocks), chunk by chunk
// of inputs, then adds bias and the previous output and stores the output type.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
  /// Stride (floats) of the chunk sums and products: one tile of columns.
  static constexpr int sum_stride = layout::tile_columns;
  static_assert(layout::tile_columns <= step::shape.kv_tile_tokens, "a tile of columns is one step of positions");
  static_assert(sum_stride <= layout::chunk_depth, "the acc region ([row_capacity][chunk_depth]) holds the sums");
  static_assert(gemm::value_scale == 1.0f, "float and bf16 weights are multiplied as they are");

  /// The work items of `job`.
  static constexpr GemmItems items(const detail::GemmJob& job) noexcept {
    return GemmItems::of(job.rows, job.weight_rows, rows_per_block, layout::tile_columns);
  }

  /// Runs item `item` of `job` in worker `worker`'s scratch.
  static void run_item(const detail::GemmJob& job, std::size_t item, std::size_t worker) noexcept {
    constexpr TileGeometry geometry = step::geometry(layout::chunk_depth);
    std::byte* scratch = job.workspace + geometry.worker_offset(worker);
    const TileScratch step_scratch = TileScratch::in(scratch, geometry.worker);
    auto* staged = reinterpret_cast<staged_type*>(scratch + geometry.worker.query);
    auto* sums = reinterpret_cast<float*>(scratch + geometry.worker.acc);
    auto* products = reinterpret_cast<float*>(scratch + geometry.worker.scores);

    const GemmItems work = items(job);
    const std::int64_t row0 = work.row_block(item) * rows_per_block;
    const int rows = static_cast<int>(std::min<std::int64_t>(rows_per_block, job.rows - row0));
    const std::int64_t tile = work.column_tile(item);
    const std::int64_t column0 = tile * layout::tile_columns;
    const int width = layout::tile_width(job.weight_rows, tile);
    const int columns = static_cast<int>(std::min<std::int64_t>(width, job.weight_rows - column0));
    const std::int64_t chunks = layout::chunks(job.depth);

    const auto* x = static_cast<const X*>(job.x);
    const X* x_rows[rows_per_block];
    for (int r = 0; r < rows; ++r) x_rows[r] = x + job.x_shape.row_offset(row0 + r);

    const bool in_tiles = [&] {
      if constexpr (dots_inputs) {
        return gemm::uses_tiles(rows, layout::chunk_size(job.depth, 0)) ||
               gemm::uses_tiles(rows, layout::chunk_size(job.depth, chunks - 1));
      } else {
        return false;
      }
    }();
    if (in_tiles) gemm::begin(step_scratch);  // the step's tiles (AMX): set up once per item
    const auto* weight = static_cast<const W*>(job.weight);
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int depth = layout::chunk_size(job.depth, chunk);
      const std::int64_t first = chunk * layout::chunk_depth;
      for (int r = 0; r < rows; ++r) {
        const X* source = x_rows[r] + first;
        staged_type* target = staged + static_cast<std::ptrdiff_t>(r) * depth;
        for (int d = 0; d < depth; ++d) target[d] = static_cast<staged_type>(source[d]);
      }
      const W* block = weight + layout::block_offset(job.weight_rows, job.depth, tile, chunk);
      // The next chunk's block follows this one: its bytes are hinted while this one is read.
      const std::ptrdiff_t ahead = chunk + 1 < chunks ? static_cast<std::ptrdiff_t>(width) * depth * sizeof(W) : 0;
      float* target = chunk == 0 ? sums : products;
      if constexpr (dots_inputs) {
        gemm::qk_bf16(staged, rows, depth, block, depth, 0, width, 1.0f, target, sum_stride, step_scratch, ahead);
      } else {
        gemm::qk(staged, rows, depth, block, depth, 0, width, target, sum_stride, ahead);
      }
      if (chunk != 0) {
        for (int r = 0; r < rows; ++r) {
          float* sum = sums + static_cast<std::ptrdiff_t>(r) * sum_stride;
          const float* product = products + static_cast<std::ptrdiff_t>(r) * sum_stride;
          for (int c = 0; c < width; ++c) sum[c] += product[c];
        }
      }
    }
    if (in_tiles) gemm::end(step_scratch);

    auto* out = static_cast<Out*>(job.out);
    for (int r = 0; r < rows; ++r) {
      const float* sum = sums + static_cast<std::ptrdiff_t>(r) * sum_stride;
      Out* target = out + job.out_shape.row_offset(row0 + r) + column0;
      for (int c = 0; c < columns; ++c) {
        float value = sum[c];
        if (job.bias != nullptr) value += job.bias[column0 + c];
        if (job.accumulate) value += static_cast<float>(target[c]);
        target[c] = static_cast<Out>(value);
      }
    }
  }
};

}  // namespace pagedattn::backend
