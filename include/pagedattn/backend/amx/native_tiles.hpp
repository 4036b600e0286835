// AMX tile operations on the CPU's own tiles: the same interface as EmulatedTiles, one intrinsic
// each. Compiled only where the AMX-TILE and AMX-BF16 flags are on (the amx tier).
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "pagedattn/backend/amx/tile_config.hpp"
#include "pagedattn/config.hpp"

namespace pagedattn::backend::amx {

/// The CPU's tiles (see EmulatedTiles for each operation's meaning). Holds no state: the tile
/// registers are the thread's. Templated on the ISA tag that compiles it.
template <class Isa>
class NativeTiles {
 public:
  /// The CPU's tiles keep no state in memory: `state` is not used.
  explicit NativeTiles(std::byte* /*state*/) noexcept {}

  /// LDTILECFG.
  PAGEDATTN_ALWAYS_INLINE void configure(const TileConfig& config) noexcept {
    __asm__ __volatile__("" ::: "memory");  // LDTILECFG's asm declares only 8 of its 64 bytes read
    _tile_loadconfig(&config);
  }
  /// TILERELEASE.
  PAGEDATTN_ALWAYS_INLINE void release() noexcept { _tile_release(); }
  // GCC's tile intrinsics paste the tile number into their assembly text, so it must be a literal:
  // each operation spells out the 8 tiles.

  /// TILEZERO tmm<T>.
  template <int T>
  PAGEDATTN_ALWAYS_INLINE void zero() noexcept {
    static_assert(T >= 0 && T < num_tiles, "tile number out of range");
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
    if constexpr (T == 2) _tile_zero(2);
    if constexpr (T == 3) _tile_zero(3);
    if constexpr (T == 4) _tile_zero(4);
    if constexpr (T == 5) _tile_zero(5);
    if constexpr (T == 6) _tile_zero(6);
    if constexpr (T == 7) _tile_zero(7);
  }
  /// TILELOADD tmm<T>, [base + stride * row].
  template <int T>
  PAGEDATTN_ALWAYS_INLINE void load(const void* base, std::size_t stride) noexcept {
    static_assert(T >= 0 && T < num_tiles, "tile number out of range");
    const auto bytes = static_cast<long>(stride);
    // GCC's TILELOADD asm declares no memory read: without this barrier the stores that filled
    // `base` (staged tiles, rounded probabilities) could be moved past it.
    __asm__ __volatile__("" ::: "memory");
    if constexpr (T == 0) _tile_loadd(0, base, bytes);
    if constexpr (T == 1) _tile_loadd(1, base, bytes);
    if constexpr (T == 2) _tile_loadd(2, base, bytes);
    if constexpr (T == 3) _tile_loadd(3, base, bytes);
    if constexpr (T == 4) _tile_loadd(4, base, bytes);
    if constexpr (T == 5) _tile_loadd(5, base, bytes);
    if constexpr (T == 6) _tile_loadd(6, base, bytes);
    if constexpr (T == 7) _tile_loadd(7, base, bytes);
  }
  /// TILESTORED [base + stride * row], tmm<T>.
  template <int T>
  PAGEDATTN_ALWAYS_INLINE void store(void* base, std::size_t stride) const noexcept {
    static_assert(T >= 0 && T < num_tiles, "tile number out of range");
    const auto bytes = static_cast<long>(stride);
    if constexpr (T == 0) _tile_stored(0, base, bytes);
    if constexpr (T == 1) _tile_stored(1, base, bytes);
    if constexpr (T == 2) _tile_stored(2, base, bytes);
    if constexpr (T == 3) _tile_stored(3, base, bytes);
    if constexpr (T == 4) _tile_stored(4, base, bytes);
    if constexpr (T == 5) _tile_stored(5, base, bytes);
    if constexpr (T == 6) _tile_stored(6, base, bytes);
    if constexpr (T == 7) _tile_stored(7, base, bytes);
  }
  /// TDPBF16PS tmm<C>, tmm<A>, tmm<B>, for the four products of the attention tiles (C tiles 0-3,
  /// A tiles 4-5, B tiles 6-7: C = 2 (A - 4) + (B - 6)).
  template <int C, int A, int B>
  PAGEDATTN_ALWAYS_INLINE void dpbf16ps() noexcept {
    static_assert(A >= 4 && A <= 5 && B >= 6 && B <= 7 && C == 2 * (A - 4) + (B - 6),
                  "only the attention tiles' products are spelled out");
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (C == 3) _tile_dpbf16ps(3, 5, 7);
  }
};

}  // namespace pagedattn::backend::amx
