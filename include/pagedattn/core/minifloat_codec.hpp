// The one definition of float <-> narrow-float rounding (bf16, fp16, fp8): a format description and
// an encode/decode algorithm written once over "lanes", used by the scalar types and every ISA.
#pragma once

#include <cstdint>

#include "pagedattn/config.hpp"

namespace pagedattn::detail {

/// Static description of a binary floating-point storage format narrower than float.
/// `Exponent` and `Mantissa` are field widths in bits; one sign bit precedes them.
/// `HasInfinity`: IEEE-style (all-ones exponent holds inf and NaNs); otherwise only the all-ones
/// code is NaN (OCP E4M3FN). `Saturating`: finite overflow and +-inf become the largest finite.
/// `QuietNan`: mantissa bits or-ed into every NaN produced (quiet bit, or all bits for FP8).
template <int Exponent, int Mantissa, bool HasInfinity, bool Saturating, std::uint32_t QuietNan>
struct MinifloatFormat {
  static constexpr int exponent_bits = Exponent;
  static constexpr int mantissa_bits = Mantissa;
  static constexpr int total_bits = 1 + Exponent + Mantissa;
  static constexpr int exponent_bias = (1 << (Exponent - 1)) - 1;
  static constexpr bool has_infinity = HasInfinity;
  static constexpr bool saturating = Saturating;
  static constexpr std::uint32_t quiet_nan = QuietNan;
  static constexpr std::uint32_t mantissa_mask = (1u << Mantissa) - 1;
  static constexpr std::uint32_t magnitude_mask = (1u << (Exponent + Mantissa)) - 1;
  /// Code of +inf for IEEE-style formats; code of the all-ones exponent with zero mantissa.
  static constexpr std::uint32_t top_exponent_code = ((1u << Exponent) - 1) << Mantissa;
  /// Code of the largest finite magnitude.
  static constexpr std::uint32_t max_finite =
      HasInfinity ? top_exponent_code - 1 : magnitude_mask - 1;
  /// Code that finite overflow (and infinity) rounds to.
  static constexpr std::uint32_t overflow_code = Saturating ? max_finite : top_exponent_code;
  /// Right shift from a float mantissa to this format's mantissa.
  static constexpr std::uint32_t mantissa_shift = 23 - Mantissa;
};

/// bfloat16: float's exponent, 7-bit mantissa, IEEE overflow to inf.
using Bf16Format = MinifloatFormat<8, 7, true, false, 0x40>;
/// IEEE binary16.
using Fp16Format = MinifloatFormat<5, 10, true, false, 0x200>;
/// OCP FP8 E4M3FN: no infinities, NaN = S.1111.111, largest finite 448, saturating.
using Fp8E4M3Format = MinifloatFormat<4, 3, false, true, 0x7>;
/// OCP FP8 E5M2: IEEE-style specials, largest finite 57344, saturating (also for +-inf).
using Fp8E5M2Format = MinifloatFormat<5, 2, true, true, 0x3>;

/// Scalar lane operations the generic algorithm needs beyond the built-in operators.
/// Vector lane types (backend/<isa>/lanes.hpp) provide the same names, found by ADL.
PAGEDATTN_ALWAYS_INLINE constexpr std::uint32_t select(bool take_first, std::uint32_t first,
                                                       std::uint32_t second) noexcept {
  return take_first ? first : second;
}
/// Bits of the float nearest to the integer `value` (exact for value < 2^24).
PAGEDATTN_ALWAYS_INLINE constexpr std::uint32_t int_to_float_bits(std::uint32_t value) noexcept {
  return __builtin_bit_cast(std::uint32_t, static_cast<float>(static_cast<std::int32_t>(value)));
}

/// `value >> shift` rounded to nearest, ties to even. `shift` is in [1, 31] (lane or constant).
template <class Lane, class Shift>
PAGEDATTN_ALWAYS_INLINE constexpr Lane round_shift_right_even(Lane value, Shift shift) noexcept {
  const Lane one = Lane(1u);
  const Lane half_minus_one = (one << (shift - Shift(1u))) - one;
  const Lane lsb = (value >> shift) & one;
  return (value + half_minus_one + lsb) >> shift;
}

/// Encodes float bit patterns (one per 32-bit lane) as `Format` codes in the low bits of each lane:
/// round to nearest even, subnormals exact, NaN kept (quieted), overflow per `Format::overflow_code`.
/// Lane values compared here stay below 2^31, so vector lanes may use signed compares.
template <class Format, class Lane>
PAGEDATTN_ALWAYS_INLINE constexpr Lane encode_minifloat(Lane float_bits) noexcept {
  constexpr std::uint32_t shift = Format::mantissa_shift;
  constexpr std::uint32_t rebias = 127u - Format::exponent_bias;
  // Biased float exponent of the format's smallest normal number.
  constexpr std::uint32_t min_normal_exponent = rebias + 1u;

  const Lane sign = (float_bits >> 31) << (Format::total_bits - 1);
  const Lane magnitude = float_bits & Lane(0x7fffffffu);
  const Lane exponent = magnitude >> 23;

  // Normal range: move the exponent to the new bias, round the mantissa (a carry correctly
  // increments the exponent).
  const Lane normal = round_shift_right_even(magnitude - Lane(rebias << 23), shift);

  // Subnormal range: shift the full significand right by the extra exponent distance.
  const auto float_is_subnormal = magnitude < Lane(1u << 23);
  const Lane significand = select(float_is_subnormal, magnitude & Lane(0x7fffffu),
                                  (magnitude & Lane(0x7fffffu)) | Lane(0x800000u));
  // Exponents of the normal range are capped so that `distance` stays in [shift, ...] for every
  // lane (those lanes take the normal result; the cap only keeps every shift defined).
  const Lane capped_exponent = select(exponent > Lane(min_normal_exponent),
                                      Lane(min_normal_exponent), exponent);
  const Lane effective_exponent = select(float_is_subnormal, Lane(1u), capped_exponent);
  const Lane distance = Lane(shift + min_normal_exponent) - effective_exponent;
  // Beyond 24 the result is 0 whatever the shift; clamping keeps shifts below 32.
  const Lane clamped = select(distance > Lane(31u), Lane(31u), distance);
  const Lane subnormal = round_shift_right_even(significand, clamped);

  Lane code = select(magnitude < Lane(min_normal_exponent << 23), subnormal, normal);
  code = select(code > Lane(Format::max_finite), Lane(Format::overflow_code), code);
  const Lane nan_code = Lane(Format::top_exponent_code | Format::quiet_nan) |
                        ((magnitude >> shift) & Lane(Format::mantissa_mask));
  code = select(magnitude > Lane(0x7f800000u), nan_code, code);
  return sign | code;
}

/// Decodes `Format` codes (low bits of each lane) to float bit patterns; exact for every code.
/// NaNs decode to quiet NaNs keeping their payload; bf16 widens bit for bit.
template <class Format, class Lane>
PAGEDATTN_ALWAYS_INLINE constexpr Lane decode_minifloat(Lane code) noexcept {
  constexpr std::uint32_t shift = Format::mantissa_shift;
  if constexpr (Format::exponent_bias == 127) {
    return code << shift;
  } else {
    constexpr std::uint32_t rebias = 127u - Format::exponent_bias;
    const Lane sign = (code >> (Format::total_bits - 1)) << 31;
    const Lane magnitude = code & Lane(Format::magnitude_mask);
    const Lane normal = (magnitude << shift) + Lane(rebias << 23);
    // Subnormal m: the float of the integer m, scaled by 2^(1 - bias - mantissa_bits) through its
    // exponent field (always a normal float, so no denormal arithmetic is involved).
    constexpr std::uint32_t scale_down =
        static_cast<std::uint32_t>(Format::exponent_bias + Format::mantissa_bits - 1) << 23;
    const Lane subnormal =
        select(magnitude == Lane(0u), Lane(0u), int_to_float_bits(magnitude) - Lane(scale_down));
    Lane result = select(magnitude < Lane(1u << Format::mantissa_bits), subnormal, normal);
    const Lane nan = Lane(0x7fc00000u) | ((magnitude & Lane(Format::mantissa_mask)) << shift);
    if constexpr (Format::has_infinity) {
      const auto special = magnitude >= Lane(Format::top_exponent_code);
      const Lane inf_or_nan =
          select(magnitude == Lane(Format::top_exponent_code), Lane(0x7f800000u), nan);
      result = select(special, inf_or_nan, result);
    } else {
      result = select(magnitude == Lane(Format::magnitude_mask), nan, result);
    }
    return sign | result;
  }
}

}  // namespace pagedattn::detail
