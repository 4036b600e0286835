// The compute probes' instruction counts and FLOP per instruction (the one place of these
// formulas), and the probes that need their ISA's compiler flags, each defined in its own
// translation unit (avx512bf16_probe.cpp, amx_probe.cpp) that bench/CMakeLists.txt builds with them.
#pragma once

#include <cstddef>

namespace pagedattn_bench::probe {

/// Independent accumulator chains of the vector probes: FMA or dot-product latency 6 x
/// throughput 2 per cycle, as much as any of these CPUs needs to keep its ports full.
inline constexpr int vector_chains = 12;
/// FP32 lanes of a 256-bit (AVX2) and a 512-bit (AVX-512) register.
inline constexpr int avx2_lanes = 8, avx512_lanes = 16;
/// FLOP of one FP32 FMA per lane (a multiply and an add).
inline constexpr double fma_flop_per_lane = 2.0;
/// FLOP of one vdpbf16ps on 512-bit registers: each FP32 lane adds 2 bf16 products (2 FLOP each).
inline constexpr double bf16_dot_flop = avx512_lanes * 2 * 2.0;
/// Rows and bytes per row of every AMX tile of the probe (the palette-1 maximum: 16 x 64 bytes).
inline constexpr int amx_tile_rows = 16, amx_tile_row_bytes = 64;
/// FLOP of one tdpbf16ps on such tiles: 16 x 16 FP32 results, each adding 32 bf16 products.
inline constexpr double amx_tile_flop =
    amx_tile_rows * (amx_tile_row_bytes / 4) * (amx_tile_row_bytes / 2) * 2.0;
/// Independent C tiles of the AMX probe (from 2 A and 2 B tiles, loaded once).
inline constexpr int amx_chains = 4;

/// vector_chains x `iterations` vdpbf16ps on 512-bit registers; returns a value of the sums.
/// Defined where the build has the avx512bf16 probe (PEAK_PROBE_ISA_AVX512BF16); call only where
/// the CPU supports IsaId::avx512bf16.
float bf16_dot_chains(std::size_t iterations) noexcept;

/// amx_chains x `iterations` tdpbf16ps (tile configuration loaded once, released at the end);
/// returns a value of the sums. Defined where the build has the amx probe (PEAK_PROBE_ISA_AMX);
/// call only where the CPU supports IsaId::amx (which asks Linux for the tile permission).
float amx_tile_chains(std::size_t iterations) noexcept;

}  // namespace pagedattn_bench::probe
