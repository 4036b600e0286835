// Online-softmax row update for the vector tiers, written once over xsimd batches of the tier's
// architecture (VectorKit<Isa>::xsimd_arch): masking, soft-cap, ALiBi, max, exp and sum, the
// probabilities stored as floats or rounded to bf16.
#pragma once

#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/backend/row_softmax.hpp"
#include "pagedattn/backend/vector_kit.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Vector specialisation (see the primary template for the contract).
template <class Isa>
  requires(Isa::id != IsaId::scalar)
struct RowSoftmax<Isa> {
  using batch = xsimd::batch<float, typename VectorKit<Isa>::xsimd_arch>;
  static constexpr int width = static_cast<int>(batch::size);

  /// See RowSoftmax::update.
  static float update(float* s, int n, int lo, int hi, float logit_scale, float softcap, float alibi_slope,
                      float alibi_base, float& row_max, float& row_sum, bf16_t* probs = nullptr) noexcept {
    if (probs != nullptr) {
      if constexpr (kit::dots_bf16) {
        return update_to(s, n, lo, hi, logit_scale, softcap, alibi_slope, alibi_base, row_max, row_sum,
                         [probs](int t, batch p) PAGEDATTN_ALWAYS_INLINE_LAMBDA { kit::round_to_bf16(p, probs + t); });
      } else {
        // No vector rounding on this tier: the same probabilities, each rounded as bf16_t rounds.
        return update_to(s, n, lo, hi, logit_scale, softcap, alibi_slope, alibi_base, row_max, row_sum,
                         [probs](int t, batch p) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
                           alignas(64) float lanes[width];
                           p.store_aligned(lanes);
                           for (int i = 0; i < width; ++i) probs[t + i] = bf16_t(lanes[i]);
                         });
      }
    }
    return update_to(s, n, lo, hi, logit_scale, softcap, alibi_slope, alibi_base, row_max, row_sum,
                     [s](int t, batch p) PAGEDATTN_ALWAYS_INLINE_LAMBDA { p.store_unaligned(s + t); });
  }

 private:
  using kit = VectorKit<Isa>;

  /// update, with each probability vector of lanes [t, t + width) given to `out(t, p)`.
  template <class Out>
  PAGEDATTN_ALWAYS_INLINE static float update_to(float* s, int n, int lo, int hi, float logit_scale, float softcap,
                                                 float alibi_slope, float alibi_base, float& row_max, float& row_sum,
                                                 Out&& out) noexcept {
    constexpr float negative_infinity = -std::numeric_limits<float>::infinity();
    if (lo >= hi) {
      for (int t = 0; t < n; t += width) out(t, batch(0.0f));
      return 1.0f;
    }
    batch running_max(negative_infinity);
    // The factor of s in the exponent: logit_scale where s still holds dot products, 1 where the
    // masked loop below has stored the logits.
    float exponent_scale = logit_scale;
    if (lo == 0 && hi == n && softcap <= 0.0f && alibi_slope == 0.0f) {
      // Every lane visible, logits used as they are (most prefill tiles): only the maximum, of
      // the dot products (logit_scale > 0 keeps the order, and the largest logit is exactly
      // logit_scale times the largest product).
      for (int t = 0; t < n; t += width) running_max = xsimd::max(running_max, batch::load_unaligned(s + t));
    } else {
      exponent_scale = 1.0f;
      alignas(64) float lane_index[width];
      for (int i = 0; i < width; ++i) lane_index[i] = static_cast<float>(i);
      const batch first_lane = batch::load_aligned(lane_index);
      const batch lo_lane(static_cast<float>(lo)), hi_lane(static_cast<float>(hi));
      for (int t = 0; t < n; t += width) {
        const batch index = first_lane + batch(static_cast<float>(t));
        batch logit = batch::load_unaligned(s + t) * batch(logit_scale);
        if (softcap > 0.0f) logit = batch(softcap) * xsimd::tanh(logit / batch(softcap));
        if (alibi_slope != 0.0f) logit = logit + batch(alibi_slope) * (index + batch(alibi_base));
        logit = xsimd::select((index >= lo_lane) & (index < hi_lane), logit, batch(negative_infinity));
        logit.store_unaligned(s + t);
        running_max = xsimd::max(running_max, logit);
      }
    }
    // fmax written out (the library call showed in profiles); a NaN maximum never wins.
    const float tile_max = kit::reduce_max(running_max) * exponent_scale;
    const float new_max = tile_max > row_max || row_max != row_max ? tile_max : row_max;
    // An unchanged maximum (most tiles once a row has seen a few) needs no exp: exp(0) is 1.
    const float correction = new_max == row_max ? 1.0f : std::exp(row_max - new_max);
    // Every visible logit so far -inf: shift by 0, so that they weigh exp(-inf) = 0 (not NaN).
    const float shift = new_max == negative_infinity ? 0.0f : new_max;
    // exp(a s - c) = 2^(a log2(e) s - c log2(e)): one multiply-add from the stored values, where
    // c log2(e) stays finite; else 2^((a s - c) log2(e)).
    const bool moderate = std::fabs(shift) <= 0x1p120f && exponent_scale <= 0x1p120f;
    const batch factor(moderate ? exponent_scale * log2_e : exponent_scale);
    const batch offset(moderate ? -shift * log2_e : -shift);
    batch running_sum(0.0f);
    for (int t = 0; t < n; t += width) {
      // Masked lanes hold -inf: exp2 gives exactly 0.
      batch x = xsimd::fma(batch::load_unaligned(s + t), factor, offset);
      if (!moderate) [[unlikely]] x = x * batch(log2_e);
      const batch p = kit::exp2(x);
      out(t, p);
      running_sum = running_sum + p;
    }
    row_sum = row_sum * correction + xsimd::hadd(running_sum);
    row_max = new_max;
    return correction;
  }

  static constexpr float log2_e = 1.44269504088896340736f;
};

}  // namespace pagedattn::backend
