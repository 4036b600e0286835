// fused_moe: a mixture-of-experts layer (per-expert w13 GEMM, SiLU-and-mul, w2 GEMM, weighted sum
// over each token's top-k experts) on the public tile GEMM, in the caller-owned workspace of a MoePlan.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "pagedattn/core/byte_extent.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/float_environment.hpp"
#include "pagedattn/core/rows_view.hpp"
#include "pagedattn/dispatch/gemm_entry.hpp"
#include "pagedattn/exec/executor.hpp"
#include "pagedattn/gemm/gemm.hpp"
#include "pagedattn/moe/moe_plan.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/gemm_entry_impl.hpp"
#endif

namespace pagedattn {

/// Checks a fused_moe call (same arguments; `num_workers` the executor's) without writing
/// anything; returns the first problem naming the argument and its value: "plan" ISA runnable;
/// "hidden", "out" (validate_rows: [tokens][hidden]; out's rows disjoint); "w13.size()",
/// "w2.size()" (== experts) and each "w13[e]" ([2 * intermediate][hidden]) and "w2[e]"
/// ([hidden][intermediate]) packed weight; "topk_weights", "topk_ids" ([tokens][top_k]);
/// "topk_ids[m][j]" in [0, experts) (Errc::out_of_range; a token may name one expert twice: it
/// then counts twice); "num_workers" <= plan.num_workers(); "workspace.size()" >=
/// plan.workspace_bytes() and "workspace.data()" 64-byte aligned; out and workspace disjoint from
/// each other and from every input.
template <class X, class W, class Hidden>
Status validate_fused_moe(const MoePlan<X, W>& plan, RowsView<X> out, RowsView<Hidden> hidden,
                          std::span<const PackedWeight<W>> w13, std::span<const PackedWeight<W>> w2,
                          RowsView<const float> topk_weights, RowsView<const std::int32_t> topk_ids,
                          std::span<std::byte> workspace, std::size_t num_workers) {
  using detail::make_error;
  static_assert(std::is_same_v<std::remove_const_t<Hidden>, X>, "hidden has the plan's input type");
  const MoeShape& s = plan.shape();
  if (Status status = check_isa(plan.isa()); !status.ok()) return status;
  if (Status status = validate_rows(hidden, "hidden", s.hidden); !status.ok()) return status;
  if (hidden.rows() != s.tokens) {
    return make_error(Errc::size_mismatch, "hidden.rows()", hidden.rows(), "must equal plan tokens = " + std::to_string(s.tokens));
  }
  if (Status status = validate_rows(out, "out", s.hidden); !status.ok()) return status;
  if (out.rows() != s.tokens) {
    return make_error(Errc::size_mismatch, "out.rows()", out.rows(), "must equal plan tokens = " + std::to_string(s.tokens));
  }
  if (Status status = validate_rows_disjoint(out, "out"); !status.ok()) return status;
  const auto experts = static_cast<std::size_t>(s.experts);
  const auto check_experts = [&](std::span<const PackedWeight<W>> weights, const char* name, std::int64_t rows,
                                 std::int64_t cols) -> Status {
    if (weights.size() != experts) {
      return make_error(Errc::size_mismatch, std::string(name) + ".size()", weights.size(),
                        "must equal plan experts = " + std::to_string(experts));
    }
    for (std::size_t e = 0; e < experts; ++e) {
      const PackedWeight<W>& w = weights[e];
      if (w.data() == nullptr || w.rows() != rows || w.cols() != cols) {
        return make_error(Errc::size_mismatch, std::string(name) + "[" + std::to_string(e) + "]",
                          std::to_string(w.rows()) + " x " + std::to_string(w.cols()),
                          "must be a packed weight of " + std::to_string(rows) + " x " + std::to_string(cols));
      }
    }
    return {};
  };
  if (Status status = check_experts(w13, "w13", 2 * s.intermediate, s.hidden); !status.ok()) return status;
  if (Status status = check_experts(w2, "w2", s.hidden, s.intermediate); !status.ok()) return status;
  if (Status status = validate_rows(topk_weights, "topk_weights", s.top_k); !status.ok()) return status;
  if (topk_weights.rows() != s.tokens) {
    return make_error(Errc::size_mismatch, "topk_weights.rows()", topk_weights.rows(),
                      "must equal plan tokens = " + std::to_string(s.tokens));
  }
  if (Status status = validate_rows(topk_ids, "topk_ids", s.top_k); !status.ok()) return status;
  if (topk_ids.rows() != s.tokens) {
    return make_error(Errc::size_mismatch, "topk_ids.rows()", topk_ids.rows(),
                      "must equal plan tokens = " + std::to_string(s.tokens));
  }
  for (std::int64_t m = 0; m < s.tokens; ++m) {
    const std::int32_t* ids = topk_ids.row(m);
    for (std::int64_t j = 0; j < s.top_k; ++j) {
      if (ids[j] < 0 || ids[j] >= s.experts) {
        return make_error(Errc::out_of_range, "topk_ids[" + std::to_string(m) + "][" + std::to_string(j) + "]", ids[j],
                          "must be in [0, experts = " + std::to_string(s.experts) + ")");
      }
    }
  }
  if (num_workers > plan.num_workers()) {
    return make_error(Errc::invalid_argument, "executor.num_workers()", num_workers,
                      "must not exceed the plan's num_workers = " + std::to_string(plan.num_workers()));
  }
  if (workspace.size() < plan.workspace_bytes()) {
    return make_error(Errc::size_mismatch, "workspace.size()", workspace.size(),
                      "must be at least plan.workspace_bytes() = " + std::to_string(plan.workspace_bytes()));
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % scratch_alignment != 0) {
    return make_error(Errc::invalid_argument, "workspace.data()", static_cast<const void*>(workspace.data()),
                      "must be 64-byte aligned");
  }
  const detail::ByteExtent workspace_extent = detail::extent_of(workspace.data(), plan.workspace_bytes());
  detail::NamedExtent read[] = {{"hidden", detail::extent_of(hidden)},
                                {"topk_weights", detail::extent_of(topk_weights)},
                                {"topk_ids", detail::extent_of(topk_ids)},
                                {"workspace", workspace_extent}};
  if (Status status = detail::validate_disjoint("out", detail::extent_of(out), read); !status.ok()) return status;
  if (Status status = detail::validate_disjoint("workspace", workspace_extent, std::span(read, 3)); !status.ok()) {
    return status;
  }
  const detail::ByteExtent written[] = {detail::extent_of(out), workspace_extent};
  for (std::size_t e = 0; e < experts; ++e) {
    for (const auto& [weights, name] : {std::pair{w13, "w13"}, std::pair{w2, "w2"}}) {
      const detail::NamedExtent weight[] = {{name, detail::extent_of(weights[e].data(), weights[e].elements())}};
      for (std::size_t i = 0; i < 2; ++i) {
        if (Status status = detail::validate_disjoint(i == 0 ? "out" : "workspace", written[i], weight); !status.ok()) {
          return status;
        }
      }
    }
  }
  return {};
}

namespace detail {
/// SiLU(g) * u, in float.
inline float silu_and_mul(float gate, float up) noexcept { return gate / (1.0f + std::exp(-gate)) * up; }

/// Runs one GEMM per expert with rows (all experts' work items in one parallel-for).
template <class Tag, class X, class W, class Out, Executor E>
void run_expert_gemms(const GemmJob* jobs, const std::int64_t* item_offsets, std::size_t experts, E& executor) {
  const auto total = static_cast<std::size_t>(item_offsets[experts]);
  executor.parallel_for(total, [&](std::size_t task, std::size_t worker) {
    const auto* first = std::upper_bound(item_offsets, item_offsets + experts + 1, static_cast<std::int64_t>(task));
    const auto e = static_cast<std::size_t>(first - item_offsets - 1);
    run_gemm_item<Tag, X, W, Out>(jobs[e], task - static_cast<std::size_t>(item_offsets[e]), worker);
  });
}
}  // namespace detail

/// A fused mixture-of-experts layer: for each token m, out[m] = sum_j topk_weights[m][j] *
/// w2[e] * (SiLU(gate) * up), with e = topk_ids[m][j] and [gate; up] = w13[e] * hidden[m] (gate
/// the first `intermediate` rows of w13[e]). `hidden`, `out`: [tokens][hidden] of X (any row
/// strides); `w13[e]`: [2 * intermediate][hidden] and `w2[e]`: [hidden][intermediate] packed as W,
/// one per expert; `topk_weights` (float), `topk_ids` (int32): [tokens][top_k]. Products are the
/// tile GEMM's (float sums); the gate/up products stay float, the activations are stored as X,
/// the expert outputs as float, and each token's top_k terms are summed in order j = 0, 1, ...
/// (results do not depend on the executor). Experts with no tokens cost nothing. `workspace`: at
/// least plan.workspace_bytes(), 64-byte aligned, not shared with a concurrent call. Nothing is
/// allocated. Throws Error (nothing written) when validate_fused_moe fails.
template <class X, class W, class Hidden, Executor E>
void fused_moe(const MoePlan<X, W>& plan, RowsView<X> out, RowsView<Hidden> hidden,
               std::span<const PackedWeight<W>> w13, std::span<const PackedWeight<W>> w2,
               RowsView<const float> topk_weights, RowsView<const std::int32_t> topk_ids,
               std::span<std::byte> workspace, E& executor) {
  detail::throw_if_error(validate_fused_moe(plan, out, hidden, w13, w2, topk_weights, topk_ids, workspace,
                                            executor.num_workers()));
  const MoeShape& s = plan.shape();
  if (s.tokens == 0) return;
  const MoeBuffers& b = plan.buffers();
  std::byte* base = workspace.data();
  const auto region = [&]<class T>(std::type_identity<T>, const MoeBuffer& buffer) {
    return reinterpret_cast<T*>(base + buffer.offset);
  };
  X* gathered = region(std::type_identity<X>{}, b.gathered);
  float* gate_up = region(std::type_identity<float>{}, b.gate_up);
  X* activated = region(std::type_identity<X>{}, b.activated);
  float* expert_out = region(std::type_identity<float>{}, b.expert_out);
  std::int64_t* slot_order = region(std::type_identity<std::int64_t>{}, b.slot_order);
  std::int64_t* slot_position = region(std::type_identity<std::int64_t>{}, b.slot_position);
  std::int64_t* expert_rows = region(std::type_identity<std::int64_t>{}, b.expert_rows);
  std::int64_t* item_offsets = region(std::type_identity<std::int64_t>{}, b.item_offsets);
  auto* jobs = reinterpret_cast<detail::GemmJob*>(base + b.jobs.offset);
  std::byte* gemm_scratch = base + b.gemm_scratch.offset;

  // Slots (token, j) sorted by expert, stably: a counting sort.
  const auto experts = static_cast<std::size_t>(s.experts);
  const std::int64_t slots = s.tokens * s.top_k;
  std::fill(expert_rows, expert_rows + experts + 1, std::int64_t{0});
  for (std::int64_t m = 0; m < s.tokens; ++m) {
    const std::int32_t* ids = topk_ids.row(m);
    for (std::int64_t j = 0; j < s.top_k; ++j) ++expert_rows[ids[j] + 1];
  }
  for (std::size_t e = 0; e < experts; ++e) expert_rows[e + 1] += expert_rows[e];
  for (std::int64_t m = 0; m < s.tokens; ++m) {
    const std::int32_t* ids = topk_ids.row(m);
    for (std::int64_t j = 0; j < s.top_k; ++j) {
      const std::int64_t position = expert_rows[ids[j]]++;
      slot_order[position] = m * s.top_k + j;
      slot_position[m * s.top_k + j] = position;
    }
  }
  for (std::size_t e = experts; e > 0; --e) expert_rows[e] = expert_rows[e - 1];
  expert_rows[0] = 0;

  // Row-parallel passes in chunks of rows.
  constexpr std::int64_t rows_per_task = 16;
  const auto for_rows = [&](std::int64_t rows, auto&& body) {
    const auto tasks = static_cast<std::size_t>((rows + rows_per_task - 1) / rows_per_task);
    executor.parallel_for(tasks, [&](std::size_t task, std::size_t /*worker*/) {
      const detail::DefaultFloatEnvironment float_environment;
      const std::int64_t first = static_cast<std::int64_t>(task) * rows_per_task;
      for (std::int64_t p = first; p < std::min(rows, first + rows_per_task); ++p) body(p);
    });
  };
  const std::int64_t k = s.hidden, n = s.intermediate;
  for_rows(slots, [&](std::int64_t p) {
    const auto* source = hidden.row(slot_order[p] / s.top_k);
    std::copy(source, source + k, gathered + p * k);
  });

  const auto set_jobs = [&]<class In>(std::type_identity<In>, std::span<const PackedWeight<W>> weights,
                                      const In* input, std::int64_t depth, float* output, std::int64_t width) {
    const TileGeometry geometry = gemm_tile_geometry<X, W>(plan.isa());
    item_offsets[0] = 0;
    for (std::size_t e = 0; e < experts; ++e) {
      const std::int64_t first = expert_rows[e], rows = expert_rows[e + 1] - first;
      const RowsView<const In> x = RowsView<const In>::dense(input + first * depth, rows, depth);
      const RowsView<float> y = RowsView<float>::dense(output + first * width, rows, width);
      ::new (static_cast<void*>(jobs + e)) detail::GemmJob{
          dtype_of<In>, dtype_of<W>, DType::f32, x.data(), x.shape(), weights[e].data(), width, depth,
          y.data(), y.shape(), rows, nullptr, false, gemm_scratch};
      const GemmItems items = GemmItems::of(rows, width, geometry.shape.max_tile_rows, PackedWeightLayout<W>::tile_columns);
      item_offsets[e + 1] = item_offsets[e] + (rows == 0 ? 0 : static_cast<std::int64_t>(items.count()));
    }
  };
  dispatch_isa(plan.isa(), [&]<class Tag>(Tag) {
    set_jobs(std::type_identity<X>{}, w13, gathered, k, gate_up, 2 * n);
    detail::run_expert_gemms<Tag, X, W, float>(jobs, item_offsets, experts, executor);
  });
  for_rows(slots, [&](std::int64_t p) {
    const float* row = gate_up + p * 2 * n;
    X* target = activated + p * n;
    for (std::int64_t i = 0; i < n; ++i) target[i] = static_cast<X>(detail::silu_and_mul(row[i], row[n + i]));
  });
  dispatch_isa(plan.isa(), [&]<class Tag>(Tag) {
    set_jobs(std::type_identity<X>{}, w2, activated, n, expert_out, k);
    detail::run_expert_gemms<Tag, X, W, float>(jobs, item_offsets, experts, executor);
  });
  for_rows(s.tokens, [&](std::int64_t m) {
    // Each element sums its top_k terms in order j = 0, 1, ...; columns go in blocks so that
    // every expert output row is read contiguously.
    constexpr std::int64_t block = 256;
    float sums[block];
    X* target = out.row(m);
    const float* weights = topk_weights.row(m);
    for (std::int64_t i0 = 0; i0 < k; i0 += block) {
      const std::int64_t width = std::min(block, k - i0);
      std::fill(sums, sums + width, 0.0f);
      for (std::int64_t j = 0; j < s.top_k; ++j) {
        const float* row = expert_out + slot_position[m * s.top_k + j] * k + i0;
        for (std::int64_t i = 0; i < width; ++i) sums[i] += weights[j] * row[i];
      }
      for (std::int64_t i = 0; i < width; ++i) target[i0 + i] = static_cast<X>(sums[i]);
    }
  });
}

}  // namespace pagedattn
