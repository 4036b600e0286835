// Checks of float arguments that read the value's bits, so that a check's verdict does not depend
// on the caller's MXCSR (with DAZ set, a comparison reads a subnormal as zero).
#pragma once

#include <bit>
#include <cstdint>

namespace pagedattn::detail {

/// True when `x` is positive and finite, subnormals included, whatever the floating-point
/// environment.
constexpr bool is_positive_finite(float x) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  return bits != 0 && bits < 0x7F800000u;  // sign clear, not +0, exponent not all ones
}

/// True when `x` is +0, -0 or positive and finite, whatever the floating-point environment.
constexpr bool is_zero_or_positive_finite(float x) noexcept {
  return (std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu) == 0 || is_positive_finite(x);
}

}  // namespace pagedattn::detail
