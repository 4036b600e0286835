// The vdpbf16ps peak probe (peak_probes.hpp), in its own translation unit: the only one built
// with the avx512bf16 tier's compiler flags.
#include <immintrin.h>

#include "peak_probes.hpp"

namespace pagedattn_bench::probe {

float bf16_dot_chains(std::size_t iterations) noexcept {
  __m512 acc[vector_chains];
  for (int i = 0; i < vector_chains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 small = _mm512_set1_ps(1e-3f);
  const __m512bh x = _mm512_cvtne2ps_pbh(small, small), y = x;
  for (std::size_t n = 0; n < iterations; ++n) {
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < vector_chains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[avx512_lanes];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace pagedattn_bench::probe
