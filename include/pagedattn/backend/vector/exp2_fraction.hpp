// 2^f on [0, 1): the one polynomial behind every vector kit's exp2 (VectorKit::exp2), evaluated
// with the kit's own multiply-adds.
#pragma once

#include "pagedattn/config.hpp"

namespace pagedattn::backend {

/// 2^f lane by lane for 0 <= f < 1, by a degree-5 polynomial fitted to relative error: exactly 1
/// at f = 0, within 1.8e-7 (relative) of 2^f in float Horner evaluation. NaN stays NaN. `Kit` is
/// a VectorKit (its vec, broadcast and fma).
template <class Kit>
PAGEDATTN_ALWAYS_INLINE typename Kit::vec exp2_fraction(typename Kit::vec f) noexcept {
  constexpr float c1 = 0.693151295f, c2 = 0.240164444f, c3 = 0.0557999127f, c4 = 0.00901702978f,
                  c5 = 0.00186713017f;
  typename Kit::vec p = Kit::fma(Kit::broadcast(c5), f, Kit::broadcast(c4));
  p = Kit::fma(p, f, Kit::broadcast(c3));
  p = Kit::fma(p, f, Kit::broadcast(c2));
  p = Kit::fma(p, f, Kit::broadcast(c1));
  return Kit::fma(p, f, Kit::broadcast(1.0f));
}

}  // namespace pagedattn::backend
