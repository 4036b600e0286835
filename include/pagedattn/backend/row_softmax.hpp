// Primary template of the per-ISA online-softmax row update used between QK^T and P.V.
#pragma once

namespace pagedattn::backend {

/// Online-softmax update of one query row over one KV tile, for ISA tier `Isa`. Provides
///   static float update(float* s, int n, int lo, int hi, float softcap, float alibi_slope,
///                       float alibi_base, float& row_max, float& row_sum) noexcept;
/// `s[0..n)` holds the tile's logits (scale already applied). Only lanes [lo, hi) are visible
/// (0 <= lo <= hi <= n). On visible lanes: if softcap > 0, s = softcap * tanh(s / softcap); then
/// s += alibi_slope * (lane + alibi_base) (alibi_slope 0 = no ALiBi). With m' = max(row_max,
/// max visible s) (NaN logits may or may not win the max) and shift c = m', or 0 when m' is
/// -infinity (every visible logit so far -inf: they get probability exp(-inf) = 0, not NaN):
/// row_sum = row_sum * exp(row_max - m') + sum exp(s - c), row_max = m', and s[t] = exp(s - c) on
/// visible lanes, 0 on the others; a NaN logit makes row_sum NaN. Returns exp(old row_max - m')
/// (1 when the maximum is unchanged), the factor the caller must apply to the row's accumulators
/// (1 when nothing is visible, in which case row_max and row_sum are unchanged and s[0..n) is
/// zeroed). row_max starts at -infinity.
template <class Isa>
struct RowSoftmax;

}  // namespace pagedattn::backend
