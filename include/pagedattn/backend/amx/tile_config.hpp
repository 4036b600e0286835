// AMX tile configuration: the 64-byte operand of LDTILECFG, the architectural limits it is checked
// against (palette 1), the shape checks of TDPBF16PS, and the one configuration the attention tiles
// use. Free of intrinsics: the emulator, the native tiles and the step geometry all read it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/config.hpp"

namespace pagedattn::backend::amx {

/// Tile registers of palette 1.
inline constexpr int num_tiles = 8;
/// Most rows of a tile (palette 1).
inline constexpr int max_rows = 16;
/// Most bytes of a tile row (palette 1).
inline constexpr int max_colsb = 64;
/// Bytes of one tile register.
inline constexpr std::size_t tile_bytes = static_cast<std::size_t>(max_rows) * max_colsb;

/// The memory operand of LDTILECFG (64 bytes): palette, start row, and each tile's rows and bytes
/// per row (entries 8-15 are reserved in palette 1 and must be zero).
struct TileConfig {
  std::uint8_t palette_id = 0;      ///< 0: the init state (every tile unconfigured); 1: 8 tiles.
  std::uint8_t start_row = 0;       ///< Row to restart a faulted load/store at; 0.
  std::uint8_t reserved[14] = {};   ///< Must be zero.
  std::uint16_t colsb[16] = {};     ///< Bytes per row of tile i.
  std::uint8_t rows[16] = {};       ///< Rows of tile i.
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads exactly 64 bytes");

/// Null when LDTILECFG accepts `config` (palette 0 or 1; reserved bytes zero; for tiles 0-7 at
/// most max_rows rows and max_colsb bytes per row, both zero or both non-zero; entries 8-15
/// zero), else what is wrong (where the CPU raises #GP).
PAGEDATTN_ALWAYS_INLINE constexpr const char* tile_config_error(const TileConfig& config) noexcept {
  if (config.palette_id > 1) return "palette_id above 1 (the only palette with tiles)";
  for (std::uint8_t byte : config.reserved) {
    if (byte != 0) return "reserved bytes 2-15 not zero";
  }
  for (int t = 0; t < 16; ++t) {
    const bool in_palette = config.palette_id == 1 && t < num_tiles;
    if (!in_palette && (config.rows[t] != 0 || config.colsb[t] != 0)) {
      return "a tile outside the palette has rows or bytes per row";
    }
    if (config.rows[t] > max_rows) return "a tile has more than 16 rows";
    if (config.colsb[t] > max_colsb) return "a tile has more than 64 bytes per row";
    if ((config.rows[t] == 0) != (config.colsb[t] == 0)) return "a tile has rows without bytes per row, or bytes without rows";
  }
  return nullptr;
}

/// Null when TDPBF16PS with destination `c`, sources `a` and `b` (tile numbers) is valid under
/// `config`, else what is wrong (where the CPU raises #UD): the three tiles distinct and
/// configured; c.rows == a.rows; c.colsb == b.colsb; a.colsb == 4 * b.rows; all bytes per row
/// multiples of 4.
PAGEDATTN_ALWAYS_INLINE constexpr const char* dpbf16ps_error(const TileConfig& config, int c, int a, int b) noexcept {
  if (config.palette_id != 1) return "tiles not configured (palette 0)";
  if (c < 0 || a < 0 || b < 0 || c >= num_tiles || a >= num_tiles || b >= num_tiles) return "tile number out of range";
  if (c == a || c == b || a == b) return "the three tiles are not distinct";
  if (config.rows[c] == 0 || config.rows[a] == 0 || config.rows[b] == 0) return "a tile is not configured";
  if (config.rows[c] != config.rows[a]) return "destination rows differ from the first source's rows";
  if (config.colsb[c] != config.colsb[b]) return "destination bytes per row differ from the second source's";
  if (config.colsb[a] != 4 * config.rows[b]) return "first source's bytes per row are not 4 x the second's rows";
  if (config.colsb[c] % 4 != 0 || config.colsb[a] % 4 != 0) return "bytes per row not a multiple of 4";
  return nullptr;
}

/// The configuration of the attention tiles for lanes of `rows` query rows (1 to max_rows):
/// palette 1, C tiles 0-3 and A tiles 4-5 min(rows, 16) rows x 64 bytes (16 floats; 16 bf16
/// pairs), B tiles 6-7 16 rows x 64 bytes (16 bf16 pairs). A lane under 16 rows multiplies in
/// tiles of its own height: no padding rows are loaded, multiplied or stored.
constexpr TileConfig attention_tile_config(int rows = max_rows) noexcept {
  TileConfig config;
  config.palette_id = 1;
  for (int t = 0; t < num_tiles; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t < 6 && rows < max_rows ? rows : max_rows);
    config.colsb[t] = max_colsb;
  }
  return config;
}

/// Bytes of the C-tile staging at the start of the tile state: the C tiles of one partial block
/// of rows (P.V, lanes of more than 16 rows), so that its rows past the work item's never reach
/// the accumulators.
inline constexpr std::size_t c_stage_bytes = 4 * tile_bytes;

/// Bytes after the C-tile staging that record the A and C tile height the thread's tiles are
/// configured for (one int, padded to a cache line so that the emulated tiles stay aligned).
inline constexpr std::size_t height_record_bytes = 64;

/// Bytes of the emulated tile state (the configuration and the 8 registers) that the emulation
/// keeps in the worker's scratch (EmulatedTiles).
inline constexpr std::size_t emulated_state_bytes = sizeof(TileConfig) + num_tiles * tile_bytes;

}  // namespace pagedattn::backend::amx
