// Declarations of the GEMM entry point (one work item: a block of rows times one tile of packed
// columns) that crosses from gemm / weight_packed_linear / fused_moe into an ISA's code, and the
// type-erased job it receives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/rows_view.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::detail {

/// Which pass of a GEMM a job runs (GemmSplit).
enum class GemmPass : std::uint8_t {
  whole,   ///< Task = item: sum all of K, store.
  slices,  ///< Task = item * slices + slice: sum the slice's chunks into partial slot `task`.
  merge,   ///< Task = item: add the item's slots in slice order, store.
};

/// One validated GEMM, type-erased: out[m][n] = (accumulate ? out[m][n] : 0) + bias[n] +
/// sum_k x[m][k] * W[n][k] for m < rows, n < weight_rows.
struct GemmJob {
  DType x_type;              ///< Element type of x (f32 or bf16).
  DType weight_type;         ///< Element type the weight is packed as (f32 or bf16).
  DType out_type;            ///< Element type of out (f32 or bf16).
  const void* x;             ///< Element (0, ..., 0) of x.
  RowsShape x_shape;         ///< Row addressing of x (rows of `depth` contiguous elements).
  const void* weight;        ///< First packed element (PackedWeightLayout of weight_type).
  std::int64_t weight_rows;  ///< n: output features.
  std::int64_t depth;        ///< k: inputs (multiple of 16).
  void* out;                 ///< Element (0, ..., 0) of out.
  RowsShape out_shape;       ///< Row addressing of out (rows of weight_rows contiguous elements).
  std::int64_t rows;         ///< m: rows of x and out.
  const float* bias;         ///< weight_rows values, or null.
  bool accumulate;           ///< Add to out instead of overwriting it.
  std::byte* workspace;      ///< One GEMM worker scratch per worker (gemm_workspace_bytes).
  GemmPass pass = GemmPass::whole;  ///< What a task of this job does.
  int slices = 1;                   ///< K ranges per item (GemmSplit::slices) in passes slices and merge.
  std::size_t num_workers = 0;      ///< Workers the workspace holds scratch for: the partial slots follow
                                    ///< (TileGeometry::partial_offset) in those passes.
};

/// Runs task `item` of `job` (a work item of GemmKernel::items, or one slice of one in
/// GemmPass::slices) as worker `worker`, in its scratch slot, under the default MXCSR (the
/// caller's is restored).
template <class Isa>
void run_gemm_item(const GemmJob& job, std::size_t item, std::size_t worker) noexcept;

/// run_gemm_item for a job whose element types are X, W and Out: with runtime dispatch the
/// compiled entry point above; otherwise only the kernel of these types is instantiated.
template <class Isa, class X, class W, class Out>
void run_gemm_item(const GemmJob& job, std::size_t item, std::size_t worker) noexcept;

#if defined(PAGEDATTN_RUNTIME_DISPATCH)
template <class Isa, class X, class W, class Out>
void run_gemm_item(const GemmJob& job, std::size_t item, std::size_t worker) noexcept {
  run_gemm_item<Isa>(job, item, worker);
}
extern template void run_gemm_item<isa::scalar>(const GemmJob&, std::size_t, std::size_t) noexcept;
extern template void run_gemm_item<isa::avx2>(const GemmJob&, std::size_t, std::size_t) noexcept;
extern template void run_gemm_item<isa::avx512>(const GemmJob&, std::size_t, std::size_t) noexcept;
extern template void run_gemm_item<isa::avx512bf16>(const GemmJob&, std::size_t, std::size_t) noexcept;
extern template void run_gemm_item<isa::amx>(const GemmJob&, std::size_t, std::size_t) noexcept;
extern template void run_gemm_item<isa::amx_emulated>(const GemmJob&, std::size_t, std::size_t) noexcept;
#endif

}  // namespace pagedattn::detail
