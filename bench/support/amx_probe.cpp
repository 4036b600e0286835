// The tdpbf16ps peak probe (peak_probes.hpp), in its own translation unit: the only one built
// with the amx tier's compiler flags.
#include <immintrin.h>

#include <array>
#include <cstdint>

#include <pagedattn/backend/amx/tile_config.hpp>

#include "peak_probes.hpp"

namespace pagedattn_bench::probe {

namespace {

/// Tiles 0-3: the C accumulators; 4-5: A; 6-7: B. All 16 rows x 64 bytes: the library's own
/// attention tile configuration.
constexpr pagedattn::backend::amx::TileConfig probe_config = pagedattn::backend::amx::attention_tile_config();
static_assert(amx_tile_rows == pagedattn::backend::amx::max_rows && amx_tile_row_bytes == pagedattn::backend::amx::max_colsb);
static_assert(amx_chains == 4, "the loop below multiplies 2 A by 2 B tiles into 4 C tiles");

/// The A and B operands: bf16 1/1024 (0x3a80) everywhere; constant, so nothing stores them before
/// the tile loads read them.
constexpr int operand_elements = amx_tile_rows * amx_tile_row_bytes / 2;
alignas(64) constexpr auto operand = [] {
  std::array<std::uint16_t, operand_elements> o{};
  o.fill(0x3a80);
  return o;
}();

}  // namespace

float amx_tile_chains(std::size_t iterations) noexcept {
  _tile_loadconfig(&probe_config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand.data(), amx_tile_row_bytes);
  _tile_loadd(5, operand.data(), amx_tile_row_bytes);
  _tile_loadd(6, operand.data(), amx_tile_row_bytes);
  _tile_loadd(7, operand.data(), amx_tile_row_bytes);
  for (std::size_t n = 0; n < iterations; ++n) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[amx_chains][amx_tile_rows * amx_tile_row_bytes / 4];
  _tile_stored(0, c[0], amx_tile_row_bytes);
  _tile_stored(1, c[1], amx_tile_row_bytes);
  _tile_stored(2, c[2], amx_tile_row_bytes);
  _tile_stored(3, c[3], amx_tile_row_bytes);
  _tile_release();
  // GCC's tile stores are asm that does not declare the memory it writes.
  __asm__ __volatile__("" : : "r"(&c[0][0]) : "memory");
  return c[0][0] + c[1][0] + c[2][0] + c[3][0];
}

}  // namespace pagedattn_bench::probe
