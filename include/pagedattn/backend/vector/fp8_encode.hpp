// The vector tiers' float -> FP8 encoder: the same codes as detail::encode_minifloat for the
// saturating FP8 formats in about half the lane operations (clamp first, float rounding for the
// subnormal range). Written once over an ISA's lane type; tests compare it on all 2^32 inputs.
#pragma once

#include <cstdint>

#include "pagedattn/config.hpp"
#include "pagedattn/core/minifloat_codec.hpp"

namespace pagedattn::backend {

/// Encodes float bit patterns (one per 32-bit lane) as `Format` codes in the low 8 bits of each
/// lane, bit-exact with detail::encode_minifloat<Format>: round to nearest even, subnormals
/// exact, finite overflow and +-inf saturate to the largest finite value, NaN becomes S.1111111.
/// `Lane` (U32x8, U32x16) needs, besides the codec's operators: `min(a, b)` (signed, lanes below
/// 2^31) and `round_scaled_to_int(float_bits, factor)` (the integer nearest, ties to even, to
/// float(lane) * factor for non-negative floats and products below 2^24, whatever the MXCSR
/// rounding mode).
/// Steps: clamp the magnitude to the largest finite value (as integers: the order of
/// non-negative floats), so every rounding stays in range and saturates by itself; normal range
/// = integer rebias and round-shift of the mantissa; subnormal range = magnitude * 2^(bias - 1 +
/// mantissa bits) rounded to an integer (the product by a power of two is exact, and whatever
/// MXCSR's FTZ/DAZ could flush is far below half the smallest code, so it rounds to 0 anyway);
/// NaN and the sign patched last.
template <class Format, class Lane>
PAGEDATTN_ALWAYS_INLINE Lane encode_fp8_saturating(Lane float_bits) noexcept {
  static_assert(Format::total_bits == 8 && Format::saturating,
                "the fast path serves the saturating FP8 formats only");
  static_assert(Format::quiet_nan == Format::mantissa_mask,
                "every NaN encodes to one code only when the quiet bits fill the mantissa");
  constexpr std::uint32_t shift = Format::mantissa_shift;
  constexpr std::uint32_t rebias = 127u - Format::exponent_bias;
  constexpr std::uint32_t min_normal_bits = (rebias + 1u) << 23;
  // Float bits of the largest finite value: its code moved back to float's bias and mantissa.
  constexpr std::uint32_t max_finite_bits = (Format::max_finite << shift) + (rebias << 23);
  // 2^(bias - 1 + mantissa bits): the subnormal spacing is its reciprocal.
  constexpr float subnormal_factor =
      static_cast<float>(1u << (Format::exponent_bias - 1 + Format::mantissa_bits));
  constexpr std::uint32_t nan_code = Format::top_exponent_code | Format::mantissa_mask;

  const Lane magnitude = float_bits & Lane(0x7fffffffu);
  const Lane clamped = min(magnitude, Lane(max_finite_bits));  // NaN lanes too (patched below)
  // Normal: (clamped - rebias) >> shift rounded to nearest even; the rebias has no bits at or
  // below `shift`, so the tie-breaking bit is read from `clamped` directly.
  const Lane lsb = (clamped >> shift) & Lane(1u);
  const Lane normal =
      (clamped + Lane((1u << (shift - 1)) - 1u - (rebias << 23)) + lsb) >> shift;
  // Capped at the smallest normal so that the product stays small in every lane (lanes at or
  // above it take `normal`): no float exception can be raised.
  const Lane subnormal =
      round_scaled_to_int(min(clamped, Lane(min_normal_bits)), subnormal_factor);
  Lane code = select(clamped < Lane(min_normal_bits), subnormal, normal);
  code = select(magnitude > Lane(0x7f800000u), Lane(nan_code), code);
  return code | ((float_bits >> 31) << 7);
}

}  // namespace pagedattn::backend
