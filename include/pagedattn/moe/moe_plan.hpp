// The plan of a fused MoE call: its shape, checked, and the layout of its caller-owned workspace,
// every size and offset in checked 64-bit arithmetic, made without allocating anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/dispatch/gemm_entry.hpp"
#include "pagedattn/gemm/gemm.hpp"
#include "pagedattn/gemm/packed_weight.hpp"
#include "pagedattn/isa/dispatch.hpp"

namespace pagedattn {

/// The shape of a fused MoE call. Expert e maps hidden [hidden] to gate and up [2 * intermediate]
/// (w13, gate first), then SiLU(gate) * up [intermediate] back to [hidden] (w2).
struct MoeShape {
  std::int64_t tokens = 0;        ///< M: rows of hidden and out (>= 0).
  std::int64_t hidden = 0;        ///< K: hidden size (a positive multiple of 16).
  std::int64_t intermediate = 0;  ///< N: expert intermediate size (a positive multiple of 16).
  std::int64_t experts = 0;       ///< E: experts (>= 1, below 2^31).
  std::int64_t top_k = 0;         ///< Experts per token (1 <= top_k).
  friend constexpr bool operator==(const MoeShape&, const MoeShape&) = default;
};

/// One region of the MoE workspace.
struct MoeBuffer {
  std::uint64_t offset = 0;  ///< Bytes from the workspace start (a multiple of 64).
  std::uint64_t bytes = 0;   ///< Bytes (exact, not rounded).
  friend constexpr bool operator==(const MoeBuffer&, const MoeBuffer&) = default;
};

/// The workspace regions of a fused MoE call, for `slots = tokens * top_k` (token, expert) pairs.
struct MoeBuffers {
  MoeBuffer gathered;      ///< X [slots][hidden]: hidden rows in expert order.
  MoeBuffer gate_up;       ///< float [slots][2 * intermediate]: w13 products.
  MoeBuffer activated;     ///< X [slots][intermediate]: SiLU(gate) * up.
  MoeBuffer expert_out;    ///< float [slots][hidden]: w2 products.
  MoeBuffer slot_order;    ///< int64 [slots]: slot (token * top_k + j) at each expert-ordered position.
  MoeBuffer slot_position; ///< int64 [slots]: expert-ordered position of each slot.
  MoeBuffer expert_rows;   ///< int64 [experts + 1]: first position of each expert (prefix sums).
  MoeBuffer item_offsets;  ///< int64 [experts + 1]: first GEMM work item of each expert.
  MoeBuffer jobs;          ///< detail::GemmJob [experts]: one expert's GEMM.
  MoeBuffer gemm_scratch;  ///< gemm_tile_geometry<X, W>(isa).workspace_bytes(num_workers, 0): the GEMM workers' scratch.
  std::uint64_t total = 0; ///< Workspace bytes: the end of the last region.
};

/// A fused MoE plan for inputs `X` (float or bf16_t: hidden, out and the activations) and expert
/// weights packed as `W`: the checked shape, the ISA, the worker count and the workspace layout.
/// Made by plan_moe; run by fused_moe with the same X and W.
template <GemmElement X, PackedWeightType W>
class MoePlan {
 public:
  /// The shape planned for.
  [[nodiscard]] const MoeShape& shape() const noexcept { return shape_; }
  /// The ISA the call runs on.
  [[nodiscard]] IsaId isa() const noexcept { return isa_; }
  /// Most workers of the executor that runs it.
  [[nodiscard]] std::size_t num_workers() const noexcept { return num_workers_; }
  /// The workspace regions.
  [[nodiscard]] const MoeBuffers& buffers() const noexcept { return buffers_; }
  /// Workspace bytes (caller-owned, 64-byte aligned).
  [[nodiscard]] std::uint64_t workspace_bytes() const noexcept { return buffers_.total; }

 private:
  template <GemmElement X2, PackedWeightType W2>
  friend MoePlan<X2, W2> plan_moe(const MoeShape&, std::size_t, IsaId);
  MoeShape shape_;
  IsaId isa_ = IsaId::scalar;
  std::size_t num_workers_ = 0;
  MoeBuffers buffers_;
};

/// Checks a MoE shape: tokens >= 0; hidden and intermediate positive multiples of 16 below 2^31
/// (validate_weight_shape of w13 [2N][K] and w2 [K][N]); 1 <= experts < 2^31; 1 <= top_k <= experts.
inline Status validate_moe_shape(const MoeShape& shape) {
  using detail::make_error;
  if (shape.tokens < 0) return make_error(Errc::invalid_argument, "shape.tokens", shape.tokens, "must not be negative");
  if (shape.hidden < 16 || shape.hidden % 16 != 0 || shape.hidden > INT32_MAX) {
    return make_error(Errc::invalid_argument, "shape.hidden", shape.hidden, "must be a positive multiple of 16 below 2^31");
  }
  if (shape.intermediate < 16 || shape.intermediate % 16 != 0 || shape.intermediate > INT32_MAX / 2) {
    return make_error(Errc::invalid_argument, "shape.intermediate", shape.intermediate,
                      "must be a positive multiple of 16 below 2^30");
  }
  if (shape.experts < 1 || shape.experts > INT32_MAX) {
    return make_error(Errc::invalid_argument, "shape.experts", shape.experts, "must be in [1, 2^31 - 1]");
  }
  if (shape.top_k < 1 || shape.top_k > shape.experts) {
    return make_error(Errc::invalid_argument, "shape.top_k", shape.top_k,
                      "must be in [1, experts = " + std::to_string(shape.experts) + "]");
  }
  return {};
}

/// Plans a fused MoE call of `shape` on `isa` for executors of at most `num_workers` workers:
/// checks the shape and lays out the workspace (MoeBuffers), every size and offset in checked
/// 64-bit arithmetic. Allocates nothing. Throws Error when validate_moe_shape or check_isa fails,
/// num_workers is 0, or a size does not fit in 64 bits (Errc::size_overflow, naming the buffer).
template <GemmElement X, PackedWeightType W>
MoePlan<X, W> plan_moe(const MoeShape& shape, std::size_t num_workers, IsaId isa = best_isa()) {
  detail::throw_if_error(validate_moe_shape(shape));
  detail::throw_if_error(check_isa(isa));
  if (num_workers == 0) {
    detail::throw_if_error(detail::make_error(Errc::invalid_argument, "num_workers", num_workers, "must be at least 1"));
  }
  const CheckedSize slots = CheckedSize(static_cast<std::uint64_t>(shape.tokens)) * static_cast<std::uint64_t>(shape.top_k);
  const auto hidden = static_cast<std::uint64_t>(shape.hidden);
  const auto intermediate = static_cast<std::uint64_t>(shape.intermediate);
  const auto experts = static_cast<std::uint64_t>(shape.experts);
  MoePlan<X, W> plan;
  plan.shape_ = shape;
  plan.isa_ = isa;
  plan.num_workers_ = num_workers;
  CheckedSize end = 0;
  const auto place = [&](MoeBuffer& buffer, CheckedSize bytes, const char* name) {
    const CheckedSize offset = end.aligned(scratch_alignment);
    end = offset + bytes;
    if (end.overflowed()) {
      detail::throw_if_error(detail::make_error(Errc::size_overflow, std::string("workspace.") + name,
                                                slots.value().value_or(0),
                                                "this buffer's size or offset does not fit in 64 bits (slots = tokens * top_k)"));
    }
    buffer = {*offset.value(), *bytes.value()};
  };
  MoeBuffers& b = plan.buffers_;
  place(b.gathered, slots * hidden * sizeof(X), "gathered");
  place(b.gate_up, slots * (2 * intermediate) * sizeof(float), "gate_up");
  place(b.activated, slots * intermediate * sizeof(X), "activated");
  place(b.expert_out, slots * hidden * sizeof(float), "expert_out");
  place(b.slot_order, slots * sizeof(std::int64_t), "slot_order");
  place(b.slot_position, slots * sizeof(std::int64_t), "slot_position");
  place(b.expert_rows, CheckedSize(experts + 1) * sizeof(std::int64_t), "expert_rows");
  place(b.item_offsets, CheckedSize(experts + 1) * sizeof(std::int64_t), "item_offsets");
  place(b.jobs, CheckedSize(experts) * sizeof(detail::GemmJob), "jobs");
  // The expert GEMMs run whole items (no split K sum): worker scratch only.
  place(b.gemm_scratch, gemm_tile_geometry<X, W>(isa).workspace_bytes(num_workers, 0), "gemm_scratch");
  b.total = *end.value();
  return plan;
}

}  // namespace pagedattn
