// The vector tiers' FP8 encoders, written once over an ISA's lane types: float -> FP8 in 32-bit
// lanes, and bf16 times a power of two -> FP8 in 16-bit lanes (twice the lanes per register).
// Both give the codes of detail::encode_minifloat (the tests compare them on every input).
#pragma once

#include <cstdint>
#include <optional>

#include "pagedattn/backend/fp8_converter.hpp"
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

/// Constants of encode_fp8_from_bf16 for one FP8 format and one scale: the bf16 input `x` is
/// stored as Format(float(x) * 2^j), with the power of two folded into the thresholds.
template <class Format>
struct Bf16ToFp8Constants {
  std::uint16_t max_bits;         ///< bf16 bits of (largest finite) * 2^-j.
  std::uint16_t min_normal_bits;  ///< bf16 bits of (smallest normal) * 2^-j.
  std::uint16_t round_offset;     ///< Added before the normal range's round-shift (mod 2^16).
  float subnormal_factor;         ///< 2^(j + bias - 1 + mantissa bits): x times it = code.

  /// Largest |j| served: within it no product of a finite bf16 and 2^j that the format can
  /// tell from zero is a float subnormal, and no bf16 subnormal can reach the format's range,
  /// so MXCSR's FTZ/DAZ cannot change any result of the scalar conversion either.
  static constexpr int max_exponent = 64;

  /// The constants for multiplying by `factor` (see with_scale_factor) when it is 2^j with
  /// |j| <= max_exponent; otherwise nullopt (then the float path applies).
  static constexpr std::optional<Bf16ToFp8Constants> for_factor(float factor) noexcept {
    const auto bits = __builtin_bit_cast(std::uint32_t, factor);
    const int j = static_cast<int>((bits >> 23) & 0xffu) - 127;
    if ((bits & 0x807fffffu) != 0 || j < -max_exponent || j > max_exponent) return std::nullopt;
    constexpr int bias = Format::exponent_bias;
    constexpr int mantissa = Format::mantissa_bits;
    constexpr int shift = 7 - mantissa;  // bf16 mantissa -> format mantissa
    // bf16 bits of the largest finite value (exactly a bf16: at most 3 mantissa bits).
    constexpr int max_finite_bits = static_cast<int>(
        ((Format::max_finite << Format::mantissa_shift) + ((127u - bias) << 23)) >> 16);
    // Normal range: the format's code is (bits - ((127 - bias - j) << 7)) >> shift, rounded.
    const int rebias = (127 - bias - j) << 7;
    Bf16ToFp8Constants constants{};
    constants.max_bits = static_cast<std::uint16_t>(max_finite_bits - (j << 7));
    constants.min_normal_bits = static_cast<std::uint16_t>((128 - bias - j) << 7);
    constants.round_offset = static_cast<std::uint16_t>(((1 << (shift - 1)) - 1 - rebias) & 0xffff);
    constants.subnormal_factor =
        __builtin_bit_cast(float, static_cast<std::uint32_t>(127 + j + bias - 1 + mantissa) << 23);
    return constants;
  }

  /// The constants for storing x / `scale` (positive, finite): for_factor of its exact
  /// reciprocal, so nullopt unless `scale` is 2^-j with |j| <= max_exponent.
  static constexpr std::optional<Bf16ToFp8Constants> for_scale(float scale) noexcept {
    return for_factor(exact_reciprocal(scale));
  }
};

/// Encodes bf16 bit patterns (one per 16-bit lane) times 2^j as `Format` codes in the low 8 bits
/// of each lane, bit-exact with detail::encode_minifloat<Format>(float(x) * 2^j) (and so with
/// the scalar Format(float(x) / scale) for scale = 2^-j). `Lane` (U16x16, U16x32) needs +, -, &,
/// |, shifts by a constant, signed < and >, select, unsigned `min` and `round_scaled_to_int`
/// (exact for products below 2^15, and only those lanes are used; U16x16's needs MXCSR to round
/// to nearest: the dispatch entry points run under the default MXCSR, DefaultFloatEnvironment).
/// Same steps as encode_fp8_saturating, in bf16's 7-bit mantissa: clamp the magnitude, integer
/// round-shift for the normal range, float rounding for the subnormal range, NaN, sign.
template <class Format, class Lane>
PAGEDATTN_ALWAYS_INLINE Lane encode_fp8_from_bf16(Lane bf16_bits,
                                                  const Bf16ToFp8Constants<Format>& constants) noexcept {
  static_assert(Format::total_bits == 8 && Format::saturating,
                "the fast path serves the saturating FP8 formats only");
  static_assert(Format::quiet_nan == Format::mantissa_mask,
                "every NaN encodes to one code only when the quiet bits fill the mantissa");
  constexpr std::uint32_t shift = 7 - Format::mantissa_bits;
  constexpr auto nan_code = static_cast<std::uint16_t>(Format::top_exponent_code | Format::mantissa_mask);

  const Lane magnitude = bf16_bits & Lane(std::uint16_t{0x7fff});
  const Lane clamped = min(magnitude, Lane(constants.max_bits));  // NaN lanes too (patched below)
  const Lane lsb = (clamped >> shift) & Lane(std::uint16_t{1});
  const Lane normal = (clamped + Lane(constants.round_offset) + lsb) >> shift;
  const Lane subnormal = round_scaled_to_int(clamped, constants.subnormal_factor);
  Lane code = select(clamped < Lane(constants.min_normal_bits), subnormal, normal);
  code = select(magnitude > Lane(std::uint16_t{0x7f80}), Lane(nan_code), code);
  return code | ((bf16_bits >> 8) & Lane(std::uint16_t{0x80}));
}

}  // namespace pagedattn::backend
