// Online-softmax row update for the vector tiers, written once over xsimd batches of the tier's
// architecture (VectorKit<Isa>::xsimd_arch): masking, soft-cap, ALiBi, max, exp and sum.
#pragma once

#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/backend/row_softmax.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Vector specialisation (see the primary template for the contract).
template <class Isa>
  requires(Isa::id != IsaId::scalar)
struct RowSoftmax<Isa> {
  using batch = xsimd::batch<float, typename VectorKit<Isa>::xsimd_arch>;
  static constexpr int width = static_cast<int>(batch::size);

  /// See RowSoftmax::update.
  static float update(float* s, int n, int lo, int hi, float softcap, float alibi_slope,
                      float alibi_base, float& row_max, float& row_sum) noexcept {
    constexpr float negative_infinity = -std::numeric_limits<float>::infinity();
    if (lo >= hi) {
      for (int t = 0; t < n; t += width) batch(0.0f).store_unaligned(s + t);
      return 1.0f;
    }
    batch running_max(negative_infinity);
    if (lo == 0 && hi == n && softcap <= 0.0f && alibi_slope == 0.0f) {
      // Every lane visible, logits used as they are (most prefill tiles): only the maximum.
      for (int t = 0; t < n; t += width) running_max = xsimd::max(running_max, batch::load_unaligned(s + t));
    } else {
      alignas(64) float lane_index[width];
      for (int i = 0; i < width; ++i) lane_index[i] = static_cast<float>(i);
      const batch first_lane = batch::load_aligned(lane_index);
      const batch lo_lane(static_cast<float>(lo)), hi_lane(static_cast<float>(hi));
      for (int t = 0; t < n; t += width) {
        const batch index = first_lane + batch(static_cast<float>(t));
        batch logit = batch::load_unaligned(s + t);
        if (softcap > 0.0f) logit = batch(softcap) * xsimd::tanh(logit / batch(softcap));
        if (alibi_slope != 0.0f) logit = logit + batch(alibi_slope) * (index + batch(alibi_base));
        logit = xsimd::select((index >= lo_lane) & (index < hi_lane), logit, batch(negative_infinity));
        logit.store_unaligned(s + t);
        running_max = xsimd::max(running_max, logit);
      }
    }
    // fmax written out (the library call showed in profiles); a NaN maximum never wins.
    const float tile_max = VectorKit<Isa>::reduce_max(running_max);
    const float new_max = tile_max > row_max || row_max != row_max ? tile_max : row_max;
    // An unchanged maximum (most tiles once a row has seen a few) needs no exp: exp(0) is 1.
    const float correction = new_max == row_max ? 1.0f : std::exp(row_max - new_max);
    // Every visible logit so far -inf: shift by 0, so that they weigh exp(-inf) = 0 (not NaN).
    const batch shift(new_max == negative_infinity ? 0.0f : new_max);
    batch running_sum(0.0f);
    for (int t = 0; t < n; t += width) {
      // Masked lanes hold -inf: exp gives exactly 0.
      const batch p = xsimd::exp(batch::load_unaligned(s + t) - shift);
      p.store_unaligned(s + t);
      running_sum = running_sum + p;
    }
    row_sum = row_sum * correction + xsimd::hadd(running_sum);
    row_max = new_max;
    return correction;
  }

};

}  // namespace pagedattn::backend
