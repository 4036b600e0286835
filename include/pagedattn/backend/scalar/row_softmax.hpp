// Scalar online-softmax row update: the readable reference for the vector versions.
#pragma once

#include <cmath>
#include <limits>

#include "pagedattn/backend/row_softmax.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Scalar loops, templated on the ISA tag that compiles them (distinct symbols per ISA).
template <class Isa>
struct ScalarRowSoftmax {
  /// See RowSoftmax::update.
  static float update(float* s, int n, int lo, int hi, float logit_scale, float softcap, float alibi_slope,
                      float alibi_base, float& row_max, float& row_sum, bf16_t* probs = nullptr) noexcept {
    if (lo >= hi) {
      for (int t = 0; t < n; ++t) store(s, probs, t, 0.0f);
      return 1.0f;
    }
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int t = lo; t < hi; ++t) {
      float logit = logit_scale * s[t];
      if (softcap > 0.0f) logit = softcap * std::tanh(logit / softcap);
      logit += alibi_slope * (static_cast<float>(t) + alibi_base);
      s[t] = logit;
      tile_max = std::fmax(tile_max, logit);
    }
    const float new_max = std::fmax(row_max, tile_max);
    // exp(-inf) = 0 on the first tile with a finite maximum; an unchanged maximum gives 1.
    const float correction = new_max == row_max ? 1.0f : std::exp(row_max - new_max);
    // Every visible logit so far -inf: shift by 0, so that they weigh exp(-inf) = 0 (not NaN).
    const float shift = new_max == -std::numeric_limits<float>::infinity() ? 0.0f : new_max;
    float sum = 0.0f;
    for (int t = 0; t < n; ++t) {
      const float p = (t >= lo && t < hi) ? std::exp(s[t] - shift) : 0.0f;
      store(s, probs, t, p);
      sum += p;
    }
    row_sum = row_sum * correction + sum;
    row_max = new_max;
    return correction;
  }

 private:
  /// Probability `p` of lane t: to s[t], or rounded to probs[t] where probs is given.
  static void store(float* s, bf16_t* probs, int t, float p) noexcept {
    if (probs != nullptr) {
      probs[t] = bf16_t(p);
    } else {
      s[t] = p;
    }
  }
};

/// Scalar specialisation (see the primary template for the contract).
template <>
struct RowSoftmax<isa::scalar> : ScalarRowSoftmax<isa::scalar> {};

}  // namespace pagedattn::backend
