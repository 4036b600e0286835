// Primary template of the per-ISA "vector kit": the register type, its arithmetic, and the loads
// that turn KV-cache elements (any cache type, in KvBlockLayout order) into float vectors.
#pragma once

namespace pagedattn::backend {

/// Vector primitives of ISA tier `Isa` used by the generic vector kernels. A specialisation
/// provides: `vec` (a float register), `width` (floats per vec, dividing 16), `xsimd_arch`,
/// `qk_rows`/`qk_vectors` and `pv_rows`/`pv_vectors` (register blocking), zero/load/store/
/// broadcast/fma, and for every cache type CacheT:
///   template <class CacheT> static constexpr float value_scale;  (see TileGemm)
///   split_pairs<CacheT>(source, even, odd): for a paired type (KvBlockLayout<CacheT>::paired),
///     the `width` pairs at `source` as floats: first elements -> even, second -> odd (times
///     value_scale). `even` never depends on the second elements.
template <class Isa>
struct VectorKit;

}  // namespace pagedattn::backend
