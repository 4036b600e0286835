// Primary template of the per-ISA online-softmax row update used between QK^T and P.V.
#pragma once

#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::backend {

/// Online-softmax update of one query row over one KV tile, for ISA tier `Isa`. Provides
///   static float update(float* s, int n, int lo, int hi, float logit_scale, float softcap,
///                       float alibi_slope, float alibi_base, float& row_max, float& row_sum,
///                       bf16_t* probs = nullptr) noexcept;
/// `s[0..n)` holds the tile's dot products; the logits are logit_scale * s (logit_scale > 0).
/// Only lanes [lo, hi) are visible (0 <= lo <= hi <= n). On visible lanes: if softcap > 0,
/// logit = softcap * tanh(logit / softcap); then logit += alibi_slope * (lane + alibi_base)
/// (alibi_slope 0 = no ALiBi). With m' = max(row_max, max visible logit) (NaN logits may or may
/// not win the max) and shift c = m', or 0 when m' is -infinity (every visible logit so far
/// -inf: they get probability exp(-inf) = 0, not NaN): row_sum = row_sum * exp(row_max - m') +
/// sum exp(logit - c), row_max = m', and the probabilities are exp(logit - c) on visible lanes
/// (to within a few float ulps; one 87 or more below c may give 0), exactly 0 on the
/// others; a NaN logit makes its probability and row_sum NaN. They go to s[0..n), or where
/// `probs` is given, rounded to bf16 (nearest even) to probs[0..n) (s[0..n) then unspecified).
/// Returns exp(old row_max - m') (1 when the maximum is unchanged), the factor the caller must
/// apply to the row's accumulators (1 when nothing is visible, in which case row_max and
/// row_sum are unchanged and the n probabilities are 0). row_max starts at -infinity.
template <class Isa>
struct RowSoftmax;

}  // namespace pagedattn::backend
