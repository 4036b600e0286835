// AttentionParams: per-call numeric options of paged_attention (scale, soft-cap, ALiBi, sinks,
// KV-cache scales) and their validation.
#pragma once

#include <cmath>
#include <span>
#include <string>

#include "pagedattn/core/array_view.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/float_checks.hpp"

namespace pagedattn {

/// Numeric options of one paged_attention call. Logit s = scale * dot(q, k); if softcap > 0,
/// s = softcap * tanh(s / softcap); with ALiBi, s += alibi_slopes[h] * (j - p). A sink adds
/// exp(sinks[h] - m) to head h's softmax denominator only.
struct AttentionParams {
  float scale = 1.0f;                    ///< Logit scale, finite and > 0 (usually 1/sqrt(head_dim)).
  float softcap = 0.0f;                  ///< Soft-cap; 0 disables, otherwise finite and > 0.
  ArrayView<float> alibi_slopes;         ///< Empty, or one finite slope per query head.
  ArrayView<float> sinks;                ///< Empty, or one finite sink logit per query head.
  /// Dequantisation scale of an FP8 K cache (> 0, finite); ignored (any value) for other caches.
  float k_scale = 1.0f;
  /// Dequantisation scale of an FP8 V cache (> 0, finite); ignored (any value) for other caches.
  float v_scale = 1.0f;
};

/// Validates `params` for a layer group with `num_query_heads` query heads; k_scale and v_scale
/// only when `fp8_cache` (other caches ignore them).
inline Status validate_params(const AttentionParams& params, std::int64_t num_query_heads, bool fp8_cache) {
  using detail::make_error;
  using detail::is_positive_finite;  // by the bits: the verdict ignores the caller's MXCSR (DAZ)
  if (!is_positive_finite(params.scale)) {
    return make_error(Errc::invalid_argument, "params.scale", params.scale, "must be positive and finite");
  }
  if (!detail::is_zero_or_positive_finite(params.softcap)) {
    return make_error(Errc::invalid_argument, "params.softcap", params.softcap,
                      "must be 0 (off) or positive and finite");
  }
  if (fp8_cache && !is_positive_finite(params.k_scale)) {
    return make_error(Errc::invalid_argument, "params.k_scale", params.k_scale, "must be positive and finite");
  }
  if (fp8_cache && !is_positive_finite(params.v_scale)) {
    return make_error(Errc::invalid_argument, "params.v_scale", params.v_scale, "must be positive and finite");
  }
  for (const auto& [values, name] : {std::pair{params.alibi_slopes, "params.alibi_slopes"},
                                     std::pair{params.sinks, "params.sinks"}}) {
    if (!values.empty() && static_cast<std::int64_t>(values.size()) != num_query_heads) {
      return make_error(Errc::size_mismatch, std::string(name) + ".size()", values.size(),
                        "must be 0 or num_query_heads = " + std::to_string(num_query_heads));
    }
    for (std::size_t h = 0; h < values.size(); ++h) {
      if (!std::isfinite(values[h])) {
        return make_error(Errc::invalid_argument, std::string(name) + "[" + std::to_string(h) + "]",
                          values[h], "must be finite");
      }
    }
  }
  return {};
}

}  // namespace pagedattn
