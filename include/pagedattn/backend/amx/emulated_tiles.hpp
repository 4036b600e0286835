// Software AMX: the tile operations the attention tiles use (LDTILECFG, TILERELEASE, TILEZERO,
// TILELOADD, TILESTORED, TDPBF16PS), following the instruction definitions, on a register file kept
// in caller memory. Lets the AMX kernels run, and be tested, on CPUs without AMX; the operations
// themselves need only AVX2 and FMA.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "pagedattn/backend/amx/tile_config.hpp"
#include "pagedattn/config.hpp"

namespace pagedattn::backend::amx {

/// The emulated tile state: the loaded configuration and the 8 tile registers.
struct EmulatedTileFile {
  TileConfig config;                                         ///< As LDTILECFG loaded it.
  alignas(64) std::uint8_t tiles[num_tiles][tile_bytes];     ///< Row r of tile t at tiles[t][64 r].
};
static_assert(sizeof(EmulatedTileFile) == emulated_state_bytes, "emulated_state_bytes sizes EmulatedTileFile");

/// Tile operations in software, on an EmulatedTileFile at `state` (emulated_state_bytes,
/// 64-byte aligned). Semantics (Intel SDM, AMX instruction pages):
///  - configure (LDTILECFG): a configuration tile_config_error rejects faults (#GP); otherwise
///    every tile register is zeroed. release (TILERELEASE) returns to the init state (palette 0).
///  - load (TILELOADD): row r < rows of tile T <- colsb bytes at base + r * stride; the rest of
///    each row and rows past `rows` are zeroed. store (TILESTORED): rows x colsb bytes out.
///    zero (TILEZERO): all 0. Using an unconfigured tile faults (#UD).
///  - dpbf16ps<C, A, B> (TDPBF16PS): for each row m of C, two fp32 partial sums per column n (even
///    and odd bf16 elements of the pairs), each an FMA chain over the k pairs of A's row m and B's
///    row k, then C[m][n] += (even + odd); every FMA and add rounds to nearest even with input
///    denormals treated as zero and output denormals flushed to zero (DAZ = FTZ = 1, whatever
///    the caller's MXCSR, which is restored). Shapes are checked as dpbf16ps_error lists them.
/// A fault prints what the CPU would have trapped on and aborts. Templated on the ISA tag that
/// compiles it (distinct symbols per ISA).
template <class Isa>
class EmulatedTiles {
 public:
  /// Operates on the state at `state`.
  explicit EmulatedTiles(std::byte* state) noexcept : file_(reinterpret_cast<EmulatedTileFile*>(state)) {}

  /// LDTILECFG.
  void configure(const TileConfig& config) noexcept {
    if (const char* error = tile_config_error(config)) fault("LDTILECFG", error);
    new (file_) EmulatedTileFile{};
    file_->config = config;
  }

  /// TILERELEASE.
  void release() noexcept { new (file_) EmulatedTileFile{}; }

  /// TILEZERO tmm<T>.
  template <int T>
  void zero() noexcept {
    require_configured<T>("TILEZERO");
    std::memset(file_->tiles[T], 0, tile_bytes);
  }

  /// TILELOADD tmm<T>, [base + stride * row].
  template <int T>
  void load(const void* base, std::size_t stride) noexcept {
    require_configured<T>("TILELOADD");
    std::memset(file_->tiles[T], 0, tile_bytes);
    const auto* source = static_cast<const std::uint8_t*>(base);
    for (int r = 0; r < file_->config.rows[T]; ++r) {
      std::memcpy(file_->tiles[T] + r * max_colsb, source + static_cast<std::size_t>(r) * stride, file_->config.colsb[T]);
    }
  }

  /// TILESTORED [base + stride * row], tmm<T>.
  template <int T>
  void store(void* base, std::size_t stride) const noexcept {
    require_configured<T>("TILESTORED");
    auto* target = static_cast<std::uint8_t*>(base);
    for (int r = 0; r < file_->config.rows[T]; ++r) {
      std::memcpy(target + static_cast<std::size_t>(r) * stride, file_->tiles[T] + r * max_colsb, file_->config.colsb[T]);
    }
  }

  /// TDPBF16PS tmm<C>, tmm<A>, tmm<B>. Written with AVX2 and FMA (two 8-column halves), so the
  /// emulation runs on every CPU of the avx2 tier and up.
  template <int C, int A, int B>
  void dpbf16ps() noexcept {
    if (const char* error = dpbf16ps_error(file_->config, C, A, B)) fault("TDPBF16PS", error);
    const TileConfig& config = file_->config;
    const int columns = config.colsb[C] / 4;
    const int pairs = config.colsb[A] / 4;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    // Columns past colsb[C] are written as zero.
    const __m256 kept[2] = {_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(columns), lane)),
                            _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(columns - 8), lane))};
    const __m256i high_half = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(round_nearest_daz_ftz);
    for (int m = 0; m < config.rows[C]; ++m) {
      float* row = reinterpret_cast<float*>(file_->tiles[C] + m * max_colsb);
      for (int half = 0; half < 2; ++half) {
        __m256 even = _mm256_setzero_ps();
        __m256 odd = _mm256_setzero_ps();
        for (int k = 0; k < pairs; ++k) {
          std::uint32_t a_pair;
          std::memcpy(&a_pair, file_->tiles[A] + m * max_colsb + 4 * k, sizeof a_pair);
          const __m256 a_even = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(a_pair << 16)));
          const __m256 a_odd = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(a_pair & 0xFFFF0000u)));
          const __m256i b_pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(file_->tiles[B] + k * max_colsb + 32 * half));
          even = _mm256_fmadd_ps(a_even, _mm256_castsi256_ps(_mm256_slli_epi32(b_pairs, 16)), even);
          odd = _mm256_fmadd_ps(a_odd, _mm256_castsi256_ps(_mm256_and_si256(b_pairs, high_half)), odd);
        }
        const __m256 sum = _mm256_add_ps(_mm256_loadu_ps(row + 8 * half), _mm256_add_ps(even, odd));
        _mm256_storeu_ps(row + 8 * half, _mm256_and_ps(sum, kept[half]));
      }
    }
    std::memset(file_->tiles[C] + config.rows[C] * max_colsb, 0, static_cast<std::size_t>(max_rows - config.rows[C]) * max_colsb);
    _mm_setcsr(saved);
  }

 private:
  /// MXCSR: all exceptions masked, round to nearest even, DAZ and FTZ.
  static constexpr unsigned round_nearest_daz_ftz = 0x1F80u | 0x0040u | 0x8000u;

  [[noreturn]] static void fault(const char* instruction, const char* why) noexcept {
    std::fprintf(stderr, "pagedattn AMX emulation: %s faults: %s\n", instruction, why);
    std::abort();
  }

  template <int T>
  void require_configured(const char* instruction) const noexcept {
    static_assert(T >= 0 && T < num_tiles, "tile number out of range");
    if (file_->config.palette_id != 1 || file_->config.rows[T] == 0) fault(instruction, "tile not configured");
  }

  EmulatedTileFile* file_;
};

}  // namespace pagedattn::backend::amx
