// Primary template of the per-ISA "vector kit": the register type, its arithmetic, and the loads
// that turn KV-cache elements (any cache type, in KvBlockLayout order) into float vectors.
#pragma once

#include <cstddef>

namespace pagedattn::backend {

/// Vector primitives of ISA tier `Isa` used by the generic vector kernels. A specialisation
/// provides: `vec` (a float register), `width` (floats per vec, dividing 16), `xsimd_arch`,
/// `qk_rows`/`qk_vectors` and `pv_rows`/`pv_vectors` (register blocking: rows x vectors of
/// accumulators), `pv_tall_rows`/`pv_tall_vectors` (P.V blocking for tiles of at least
/// pv_tall_rows rows; the same as pv_rows/pv_vectors where one shape serves all), zero/load/store/
/// broadcast/fma, exp2(vec x) (2^x for x <= 0 within 2e-7 relative, exactly 0 from some
/// x >= -150 down, -inf included; NaN kept), `dots_bf16` (whether the tier multiplies bf16 pairs directly; when true also
/// `mul`, a `bf16_pairs` register type of `width` pairs, dot_bf16_pairs(vec sum, bf16_pairs,
/// const bf16_t* x) adding x[0] * first + x[1] * second of each pair to its lane, products
/// exact, first_of_pairs (the second elements set to +0), round_to_bf16(x, n, out) for
/// n <= width floats and round_to_bf16(vec, out) for a whole register), `loads_bf16_pairs<CacheT>`
/// (false without dots_bf16; where true, load_bf16_pairs<CacheT>(source, bf16_pairs (&)[Blocks])
/// gives Blocks (1 or bf16_pair_blocks<CacheT>) pair blocks at `source` as bf16 times
/// value_scale, exactly), and for every cache type CacheT:
///   template <class CacheT> static constexpr float value_scale;  (see TileGemm)
///   template <class CacheT> static constexpr bool widens;  (see TileGemm; asked only for the
///     paired types, which the kit converts: TileGemm never widens float tiles)
///   template <class CacheT> using code_screen;  ExactSplit, or a screen type with
///     `static bool clear(const CacheT* first, std::size_t count)` (whether none of the `count`
///     codes from `first` is one of the rare codes that the kit's cheaper splits,
///     split_screened_pairs<CacheT, Blocks>(source, even, odd) and split_pair_row, turn into
///     wrong finite values: E4M3 NaNs; on avx2 also E5M2 infinities and NaNs, for the row
///     split). Callers scan what they will split first and take the exact split_pairs where a
///     scan fails, so results never depend on which split ran.
///   template <class CacheT> static constexpr bool splits_pair_rows;  where true, also
///     pair_row_factor, pair_rows_usable(), split_pair_row<CacheT>(source, vec (&first)[2],
///     vec (&second)[2]) (the 16 pairs of one K group row or V strip row at `source`, screened
///     by code_screen: pairs 2j -> first[0] / second[0] lane j, pairs 2j + 1 -> first[1] /
///     second[1], each value times value_scale / pair_row_factor, so the other operand is
///     multiplied by pair_row_factor first), and interleave_lanes / deinterleave_lanes (16
///     elements as even / odd ones <-> in order). Products must not use it where
///     pair_rows_usable() is false or the scaled operand would overflow.
///   template <class CacheT> static constexpr int pair_blocks_per_load;  (1 or 2)
///   split_pairs<CacheT, Blocks>(source, vec (&even)[Blocks], vec (&odd)[Blocks]): for a paired
///     type (KvBlockLayout<CacheT>::paired) and Blocks 1 or pair_blocks_per_load, the Blocks x
///     `width` consecutive pairs at `source` as floats: first elements -> even[b], second ->
///     odd[b] (times value_scale). `even` never depends on the second elements.
template <class Isa>
struct VectorKit;

/// The code_screen of a cache type that split_pairs converts exactly as it loads: nothing is
/// ever scanned. Also the tag of a product run that splits with split_pairs.
struct ExactSplit {};

/// The tag of a product run whose codes the kit's code_screen cleared: it splits with
/// split_screened_pairs.
struct ScreenedSplit {};

}  // namespace pagedattn::backend
