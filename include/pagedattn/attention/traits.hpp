// AttentionTraits: the compile-time description of a layer group (query type, cache type, head
// dim, ISA). Plans, caches and kernels are typed by it, so their sizes cannot disagree.
#pragma once

#include <type_traits>
#include <utility>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn {

namespace isa {
/// Tag meaning "the best ISA available at plan time" (runtime choice; the plan records it).
struct dispatched {};
}  // namespace isa

/// Satisfied by float, bf16_t and fp16_t: the query (and output) element types.
template <class T>
concept QueryType =
    std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, fp16_t>;

/// Satisfied when `CacheT` may be paired with query type `Q`: the same type, or an FP8 type.
template <class Q, class CacheT>
concept CacheTypeFor = QueryType<Q> && (std::is_same_v<Q, CacheT> || is_fp8_v<CacheT>);

/// Compile-time description of a layer group's attention.
/// `Q`: query and output element type (float, bf16_t, fp16_t). `CacheT`: KV-cache element type
/// (`Q` itself, fp8_e4m3_t or fp8_e5m2_t). `HeadDim`: a multiple of 16 up to 512, or
/// dynamic_head_dim for a head dimension given at run time (to the scheduler; the plan records
/// it and paged_attention checks the query, output and cache against it). `Isa`: an ISA tag from
/// pagedattn::isa, or isa::dispatched to choose at plan time.
template <class Q, class CacheT, int HeadDim, class Isa = isa::dispatched>
  requires CacheTypeFor<Q, CacheT> && HeadDimArgument<HeadDim>
struct AttentionTraits {
  using query_type = Q;        ///< Query element type.
  using output_type = Q;       ///< Output element type (same as the query's).
  using cache_type = CacheT;   ///< KV-cache element type.
  using isa_tag = Isa;         ///< Requested ISA (or isa::dispatched).
  /// View type of the cache this layer group reads.
  using cache_view = KvCacheView<const CacheT, HeadDim>;
  /// Head dimension (dynamic_head_dim: given at run time).
  static constexpr int head_dim = HeadDim;
  /// The tile geometry of this layer group on `isa` at `runtime_head_dim` (tiles, scratch,
  /// partial slots), declared by that ISA's back-end step: what a plan for `isa` records and its
  /// kernel reads. Precondition: runtime_head_dim is HeadDim when that is not dynamic_head_dim,
  /// and passes check_head_dim.
  static constexpr TileGeometry geometry(IsaId isa, int runtime_head_dim = HeadDim) noexcept {
    return tile_geometry<Q, CacheT>(isa, runtime_head_dim);
  }
};

/// Head dimensions with a ready-made dispatch to a compile-time value (visit_head_dim). Any
/// multiple of 16 up to 512 works at run time with HeadDim = dynamic_head_dim, and as a template
/// argument.
inline constexpr int dispatched_head_dims[] = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};

/// Calls `f(std::integral_constant<int, D>{})` for the D in dispatched_head_dims equal to
/// `head_dim` (for engines that learn the head dimension from the model at run time) and returns
/// true; returns false, calling nothing, for any other value.
template <class F>
bool visit_head_dim(int head_dim, F&& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return ((head_dim == dispatched_head_dims[I]
                 ? (f(std::integral_constant<int, dispatched_head_dims[I]>{}), true)
                 : false) ||
            ...);
  }(std::make_index_sequence<std::size(dispatched_head_dims)>{});
}

}  // namespace pagedattn
