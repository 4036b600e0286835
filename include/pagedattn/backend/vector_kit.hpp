// Primary template of the per-ISA "vector kit": the register type, its arithmetic, and the loads
// that turn KV-cache elements (any cache type, in KvBlockLayout order) into float vectors.
#pragma once

namespace pagedattn::backend {

/// Vector primitives of ISA tier `Isa` used by the generic vector kernels. A specialisation
/// provides: `vec` (a float register), `width` (floats per vec, dividing 16), `xsimd_arch`,
/// `qk_rows`/`qk_vectors` and `pv_rows`/`pv_vectors` (register blocking), zero/load/store/
/// broadcast/fma, and for every cache type CacheT:
///   template <class CacheT> static constexpr float value_scale;  (see TileGemm)
///   load_key_pair<CacheT>(k_block, head_dim, token, dim_pair, even, odd):
///     K[token + i][2*dim_pair] -> even[i], K[token + i][2*dim_pair + 1] -> odd[i], i < width;
///     token % width == 0.
///   load_value_pair<CacheT>(v_block, block_size, head_dim, token, dim, even, odd):
///     V[token][dim + i] -> even[i], V[token + 1][dim + i] -> odd[i], i < width; token even,
///     dim % width == 0. `even` never depends on token + 1's elements.
template <class Isa>
struct VectorKit;

}  // namespace pagedattn::backend
