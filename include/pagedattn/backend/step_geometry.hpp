// The tile geometry each back-end's step declares, by (ISA tag, query type, cache type): the
// primary template serves the scalar and vector tiers, backend/<isa>/step_geometry.hpp specialises
// it. Free of intrinsics, so the scheduler reads it in any translation unit.
#pragma once

#include <type_traits>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Geometry of the scalar and vector steps (TileGemm's register-blocked products) of ISA tag
/// `Isa` for query type `Q` and cache type `CacheT`.
template <class Isa, class Q, class CacheT>
struct VectorStepGeometry {
  /// 64 rows x 128-position steps, on every such tier alike.
  static constexpr TileShape shape{64, 128, 64};
  /// Widening converts whole steps of paired cache types to floats (TileGemm::widen_*); bf16 queries
  /// on tiers with bf16 pair dot products round the probabilities to bf16 (TileGemm::pv_bf16).
  static constexpr StepScratch scratch(int head_dim) noexcept {
    const auto tokens = static_cast<std::size_t>(shape.kv_tile_tokens);
    const bool rounds_probs = Bf16DotTag<Isa> && std::is_same_v<Q, bf16_t> &&
                              (std::is_same_v<CacheT, bf16_t> || is_fp8_v<CacheT>);
    return {KvBlockLayout<CacheT>::paired ? sizeof(float) * tokens * static_cast<std::size_t>(head_dim) : 0,
            rounds_probs ? sizeof(bf16_t) * static_cast<std::size_t>(shape.row_capacity) * tokens : 0, 0};
  }
  /// The laid-out geometry for `head_dim`.
  static constexpr TileGeometry geometry(int head_dim) noexcept {
    return TileGeometry::make(shape, head_dim, scratch(head_dim));
  }
};

/// Geometry of the step of ISA tag `Isa` for query type `Q` and cache type `CacheT`: `shape`,
/// `scratch(head_dim)` and `geometry(head_dim)`, as VectorStepGeometry has them. The scalar and
/// vector tiers (and what the AMX tags delegate to them) use VectorStepGeometry; a back-end with
/// tiles of its own specialises this.
template <class Isa, class Q, class CacheT>
struct StepGeometry : VectorStepGeometry<Isa, Q, CacheT> {};

}  // namespace pagedattn::backend

// One entry per back-end that declares its own geometry.
#include "pagedattn/backend/amx/step_geometry.hpp"

namespace pagedattn {

/// The tile geometry of query type `Q`, cache type `CacheT` and `head_dim` on `isa`: what a plan
/// for that ISA records and what that ISA's kernel reads.
template <class Q, class CacheT>
constexpr TileGeometry tile_geometry(IsaId isa, int head_dim) noexcept {
  return visit_isa(isa, [&]<class Tag>(Tag) { return backend::StepGeometry<Tag, Q, CacheT>::geometry(head_dim); });
}

}  // namespace pagedattn
