// Geometry of the AMX step (amx and amx_emulated tags; bf16 queries with bf16 or FP8 caches): tile
// blocks of 16 rows, the rows a partial block may touch, the bf16 B-tile staging sized from the cache
// type, and the tile state. Free of intrinsics (included by backend/step_geometry.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "pagedattn/backend/amx/tile_config.hpp"
#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace amx {
/// Rows of a tile (query rows of an A tile, of a C tile).
inline constexpr int tile_rows = max_rows;
/// Head dims of one A tile of queries (32 bf16 = 64 bytes a row): head dims that are a multiple
/// of it multiply in tiles.
inline constexpr int tile_dims = max_colsb / 2;
/// KV positions of one A tile of probabilities (16 pairs of tokens) and of one V B tile.
inline constexpr int tile_tokens = max_colsb / 2;
/// Columns of a C tile: 16 positions (QK^T) or 16 head dims (P.V), one K group or one V strip.
inline constexpr int tile_columns = max_colsb / 4;
/// C tiles a block of products keeps in registers: 2 row blocks x 2 column blocks (the other 4
/// tiles hold 2 A and 2 B tiles).
inline constexpr int c_tiles = 4;
}  // namespace amx

/// The AMX step: at head dims that are multiples of amx::tile_dims, lanes of an FP8 cache at any
/// row count and of a bf16 cache from amx::tile_rows rows multiply in tiles; others run the vector
/// products of the same tag (so its scratch also covers theirs).
template <AmxTag Isa, class CacheT>
  requires(std::is_same_v<CacheT, bf16_t> || is_fp8_v<CacheT>)
struct StepGeometry<Isa, bf16_t, CacheT> {
  /// The vector products' geometry, which lanes outside uses_tiles run on.
  using vector_step = VectorStepGeometry<Isa, bf16_t, CacheT>;
  /// Most rows of a work item: twice the vector steps' 64, so that each K and V tile a step
  /// loads feeds twice the tile products (2-core AMX Xeon, 1 worker, medians of 3 alternating
  /// rounds: causal prefill 2048 68.0 -> 62.6 ms, 512 x 10,000 199 -> 167 ms; 32 rows ran 1.2-1.3x
  /// slower than 64, 256 no faster than 128 on the causal case).
  static constexpr int max_tile_rows = 2 * vector_step::shape.max_tile_rows;
  /// The vector tiers' 128-position steps with max_tile_rows rows, and row regions tall enough
  /// for a partial 16-row block's tiles to read (and in the score rows, write) up to
  /// tile_rows - 1 rows past a work item's last row.
  static constexpr TileShape shape{max_tile_rows, vector_step::shape.kv_tile_tokens, max_tile_rows + amx::tile_rows};

  /// Whether a lane of `rows` rows at `head_dim` multiplies in tiles: FP8 decode in tiles ran
  /// 1.3-1.5x as fast as on the vector pair products (bound by VDPBF16PS on the AMX Xeon); bf16
  /// decode reads at the memory's speed on those already (DESIGN.md, "AMX back-end").
  static constexpr bool uses_tiles(int rows, int head_dim) noexcept {
    return (is_fp8_v<CacheT> || rows >= amx::tile_rows) && head_dim % amx::tile_dims == 0;
  }

  /// Bytes of the bf16 B tiles an FP8 cache is dequantised into: two K groups (all head dims of
  /// 16 positions each) or two V strips (16 head dims of a whole step each), whichever is larger.
  static constexpr std::size_t fp8_stage_bytes(int head_dim) noexcept {
    const std::size_t keys = 2 * sizeof(bf16_t) * kv_token_group * static_cast<std::size_t>(head_dim);
    const std::size_t values = 2 * sizeof(bf16_t) * amx::tile_columns * static_cast<std::size_t>(shape.kv_tile_tokens);
    return std::max(keys, values);
  }

  /// kv_tile: where tiles run, the FP8 stage (fp8_stage_bytes) or, for bf16 caches, two V tail
  /// tiles (a step's last 32 positions, zero past the valid ones), else the vector step's; probs:
  /// bf16 probabilities [row_capacity][kv_tile_tokens]; tile_state: C-tile staging for partial
  /// row blocks, the configured tile height, and the emulated tile registers where the tiles are
  /// emulated.
  static constexpr StepScratch scratch(int head_dim) noexcept {
    const std::size_t tiles_kv =
        is_fp8_v<CacheT> ? fp8_stage_bytes(head_dim) : 2 * amx::tile_bytes;
    const std::size_t kv_tile = head_dim % amx::tile_dims == 0 ? tiles_kv : vector_step::scratch(head_dim).kv_tile;
    const std::size_t probs = sizeof(bf16_t) * static_cast<std::size_t>(shape.row_capacity) *
                              static_cast<std::size_t>(shape.kv_tile_tokens);
    const std::size_t emulated = Isa::id == IsaId::amx_emulated ? amx::emulated_state_bytes : 0;
    return {kv_tile, probs, amx::c_stage_bytes + amx::height_record_bytes + emulated};
  }

  /// The laid-out geometry for `head_dim`.
  static constexpr TileGeometry geometry(int head_dim) noexcept {
    return TileGeometry::make(shape, head_dim, scratch(head_dim));
  }
};

}  // namespace pagedattn::backend
