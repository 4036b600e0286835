// The public tile GEMM: out (+)= x * W^T (+ bias) with W a PackedWeight, on any tier, in
// caller-owned output and workspace; gemm and weight_packed_linear are its two faces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "pagedattn/core/byte_extent.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/rows_view.hpp"
#include "pagedattn/dispatch/gemm_entry.hpp"
#include "pagedattn/exec/executor.hpp"
#include "pagedattn/gemm/gemm_geometry.hpp"
#include "pagedattn/gemm/packed_weight.hpp"
#include "pagedattn/isa/dispatch.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/gemm_entry_impl.hpp"
#endif

namespace pagedattn {

/// Workspace bytes a GEMM (gemm, weight_packed_linear) with inputs `X` and weights packed as `W`
/// needs on `isa` for an executor of `num_workers` workers: one worker scratch each, then
/// GemmSplit::max_slots partial slots for a split K sum (gemm_tile_geometry<X, W>(isa)
/// .workspace_bytes(num_workers, GemmSplit::max_slots); independent of the shapes). Throws Error
/// for an ISA that is no IsaId or a size past 2^64.
template <GemmElement X, PackedWeightType W>
std::uint64_t gemm_workspace_bytes(std::size_t num_workers, IsaId isa = best_isa()) {
  if (!is_isa_id(isa)) detail::throw_if_error(check_isa(isa));
  const auto bytes = gemm_tile_geometry<X, W>(isa).workspace_bytes(num_workers, GemmSplit::max_slots).value();
  if (!bytes) {
    detail::throw_if_error(detail::make_error(Errc::size_overflow, "num_workers", num_workers,
                                              "the workspace size does not fit in 64 bits"));
  }
  return *bytes;
}

/// Whether a GEMM adds to its output or overwrites it.
enum class GemmUpdate {
  overwrite,   ///< out = x * W^T (+ bias).
  accumulate,  ///< out = out + x * W^T (+ bias); out is read first.
};

/// Checks a GEMM (same arguments as weight_packed_linear, `num_workers` the executor's) without
/// writing anything; returns the first problem naming the argument and its value: "isa"
/// (check_isa); "weight" (empty view); "x" (validate_rows, cols == weight.cols()); "out"
/// (validate_rows, cols == weight.rows(), rows == x.rows(), rows not overlapping each other);
/// "bias.size()" (0 or weight.rows()); "workspace.size()" (at least gemm_workspace_bytes) and
/// "workspace.data()" (64-byte aligned); out and workspace disjoint from each other and from x,
/// the weight and the bias.
template <class Out, class X, class W>
  requires GemmElement<X> && GemmElement<Out> && (!std::is_const_v<Out>)
Status validate_gemm(RowsView<Out> out, RowsView<X> x, PackedWeight<W> weight, std::span<const float> bias,
                     std::span<std::byte> workspace, std::size_t num_workers, IsaId isa) {
  using detail::make_error;
  if (Status status = check_isa(isa); !status.ok()) return status;
  if (weight.data() == nullptr) {
    return make_error(Errc::invalid_argument, "weight.data()", nullptr, "must be a packed weight (pack_weight)");
  }
  if (Status status = validate_rows(x, "x", weight.cols()); !status.ok()) return status;
  if (Status status = validate_rows(out, "out", weight.rows()); !status.ok()) return status;
  if (out.rows() != x.rows()) {
    return make_error(Errc::size_mismatch, "out.rows()", out.rows(), "must equal x.rows() = " + std::to_string(x.rows()));
  }
  if (Status status = validate_rows_disjoint(out, "out"); !status.ok()) return status;
  if (!bias.empty() && bias.size() != static_cast<std::uint64_t>(weight.rows())) {
    return make_error(Errc::size_mismatch, "bias.size()", bias.size(),
                      "must be 0 (no bias) or weight.rows() = " + std::to_string(weight.rows()));
  }
  const std::uint64_t needed = gemm_workspace_bytes<std::remove_const_t<X>, W>(num_workers, isa);
  if (workspace.size() < needed) {
    return make_error(Errc::size_mismatch, "workspace.size()", workspace.size(),
                      "must be at least gemm_workspace_bytes = " + std::to_string(needed) + " for " +
                          std::to_string(num_workers) + " workers");
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % scratch_alignment != 0) {
    return make_error(Errc::invalid_argument, "workspace.data()", static_cast<const void*>(workspace.data()),
                      "must be 64-byte aligned");
  }
  const detail::ByteExtent workspace_extent = detail::extent_of(workspace.data(), needed);
  const detail::NamedExtent read[] = {
      {"x", detail::extent_of(x)},
      {"weight", detail::extent_of(weight.data(), weight.elements())},
      {"bias", detail::extent_of(bias.data(), bias.size())},
      {"workspace", workspace_extent},
  };
  if (Status status = detail::validate_disjoint("out", detail::extent_of(out), read); !status.ok()) return status;
  if (Status status = detail::validate_disjoint("workspace", workspace_extent, std::span(read, 3)); !status.ok()) {
    return status;
  }
  return {};
}

namespace detail {
/// Validates and runs out (+)= x * W^T + bias on `executor` (see weight_packed_linear).
template <class Out, class X, class W, Executor E>
void run_gemm(RowsView<Out> out, RowsView<X> x, PackedWeight<W> weight, std::span<const float> bias,
              GemmUpdate update, std::span<std::byte> workspace, E& executor, IsaId isa) {
  throw_if_error(validate_gemm(out, x, weight, bias, workspace, executor.num_workers(), isa));
  using XT = std::remove_const_t<X>;
  const GemmJob job{dtype_of<XT>,   dtype_of<W>,     dtype_of<Out>,          x.data(),
                    x.shape(),      weight.data(),   weight.rows(),          weight.cols(),
                    out.data(),     out.shape(),     x.rows(),               bias.empty() ? nullptr : bias.data(),
                    update == GemmUpdate::accumulate, workspace.data()};
  if (job.rows == 0) return;
  dispatch_isa(isa, [&]<class Tag>(Tag) {
    const TileGeometry geometry = gemm_tile_geometry<XT, W>(Tag::id);
    const GemmItems items = GemmItems::of(job.rows, job.weight_rows, geometry.shape.max_tile_rows,
                                          PackedWeightLayout<W>::tile_columns);
    const GemmSplit split = GemmSplit::of(items, PackedWeightLayout<W>::chunks(job.depth));
    const auto run_pass = [&](const GemmJob& pass, std::size_t tasks) {
      executor.parallel_for(tasks, [&](std::size_t task, std::size_t worker) {
        run_gemm_item<Tag, XT, W, Out>(pass, task, worker);
      });
    };
    if (split.slices == 1) {
      run_pass(job, items.count());
      return;
    }
    GemmJob sliced = job;
    sliced.slices = split.slices;
    sliced.num_workers = executor.num_workers();
    sliced.pass = GemmPass::slices;
    run_pass(sliced, items.count() * static_cast<std::size_t>(split.slices));
    sliced.pass = GemmPass::merge;
    run_pass(sliced, items.count());
  });
}
}  // namespace detail

/// The tile GEMM: c = a * B^T (GemmUpdate::overwrite) or c += a * B^T (accumulate), where
/// `b` is a weight `[n][k]` packed once (pack_weight). `a`: `[..., k]` rows of float or bf16_t
/// (1-3 leading dimensions, any strides, last dimension contiguous); `c`: `[..., n]` rows of
/// float or bf16_t, as many rows as `a`, rows not overlapping. Sums are float (bf16 inputs with
/// bf16 weights use the tier's bf16 pair products: AVX512-BF16, AMX); a bf16 `c` is rounded once
/// at the end. `workspace`: at least gemm_workspace_bytes<X, W>(executor.num_workers(), isa)
/// bytes, 64-byte aligned, not shared with a concurrent call. Nothing is allocated. Throws Error
/// (nothing written) when validate_gemm fails.
template <class Out, class X, class W, Executor E>
  requires GemmElement<X> && GemmElement<Out> && (!std::is_const_v<Out>)
void gemm(RowsView<Out> c, RowsView<X> a, PackedWeight<W> b, GemmUpdate update, std::span<std::byte> workspace,
          E& executor, IsaId isa = best_isa()) {
  detail::run_gemm(c, a, b, {}, update, workspace, executor, isa);
}

/// A linear layer with a weight packed once: out[..., j] = bias[j] + sum_i x[..., i] * W[j][i]
/// (no bias when `bias` is empty). `x`: `[..., k]` of float or bf16_t (1-3 leading dimensions,
/// any strides); `out`: `[..., n]` of float or bf16_t, preallocated by the caller, as many rows as
/// `x`; `weight`: `[n][k]` packed as float or bf16_t (pack_weight; fp32 for routers). The rest as
/// gemm. Throws Error (nothing written) when validate_gemm fails.
template <class Out, class X, class W, Executor E>
  requires GemmElement<X> && GemmElement<Out> && (!std::is_const_v<Out>)
void weight_packed_linear(RowsView<Out> out, RowsView<X> x, PackedWeight<W> weight, std::span<const float> bias,
                          std::span<std::byte> workspace, E& executor, IsaId isa = best_isa()) {
  detail::run_gemm(out, x, weight, bias, GemmUpdate::overwrite, workspace, executor, isa);
}

}  // namespace pagedattn
