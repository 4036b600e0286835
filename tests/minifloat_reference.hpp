// Independent reference model of float <-> bf16 / fp16 / OCP FP8 (E4M3FN, E5M2) conversion, written
// from the format specification alone (no pagedattn code) so that test_minifloat_exhaustive.cpp can
// check the library's codec against it. Encoding works on exact double values, not on bit fields.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace mfref {

/// The double 2^k, built from its exponent field; exact for -1022 <= k <= 1023.
constexpr double pow2(int k) noexcept {
  return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + k) << 52);
}

/// bfloat16: 8-bit exponent (bias 127), 7-bit mantissa, IEEE infinities and NaNs, overflow to inf.
struct Bf16 {
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 7;
  static constexpr int bias = 127;
  static constexpr bool has_infinity = true;
  static constexpr bool saturating = false;
  /// Magnitude code (no sign) of the largest finite value, and that value.
  static constexpr std::uint32_t max_finite_code = 0x7F7F;
  static constexpr double max_finite = 0x1.FEp127;
  /// Magnitude code produced for a float NaN whose 23-bit mantissa field is `m`.
  static constexpr std::uint32_t encoded_nan(std::uint32_t m) noexcept {
    return 0x7F80u | 0x40u | (m >> 16);
  }
  /// Float bits (no sign) of the NaN with magnitude code `mag`: bit for bit, no quieting.
  static constexpr std::uint32_t decoded_nan(std::uint32_t mag) noexcept { return mag << 16; }
};

/// IEEE binary16: 5-bit exponent (bias 15), 10-bit mantissa, overflow to inf.
struct Fp16 {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 10;
  static constexpr int bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr bool saturating = false;
  static constexpr std::uint32_t max_finite_code = 0x7BFF;
  static constexpr double max_finite = 65504.0;
  static constexpr std::uint32_t encoded_nan(std::uint32_t m) noexcept {
    return 0x7C00u | 0x200u | (m >> 13);
  }
  static constexpr std::uint32_t decoded_nan(std::uint32_t mag) noexcept {
    return 0x7FC00000u | ((mag & 0x3FFu) << 13);
  }
};

/// OCP FP8 E4M3FN: bias 7, 3-bit mantissa, no infinities, NaN only S.1111.111, saturating.
struct E4M3 {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool has_infinity = false;
  static constexpr bool saturating = true;
  static constexpr std::uint32_t max_finite_code = 0x7E;
  static constexpr double max_finite = 448.0;
  static constexpr std::uint32_t encoded_nan(std::uint32_t) noexcept { return 0x7F; }
  static constexpr std::uint32_t decoded_nan(std::uint32_t mag) noexcept {
    return 0x7FC00000u | ((mag & 0x7u) << 20);
  }
};

/// OCP FP8 E5M2: bias 15, 2-bit mantissa, IEEE infinities and NaNs, saturating (also for +-inf).
struct E5M2 {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr bool saturating = true;
  static constexpr std::uint32_t max_finite_code = 0x7B;
  static constexpr double max_finite = 57344.0;
  static constexpr std::uint32_t encoded_nan(std::uint32_t) noexcept { return 0x7F; }
  static constexpr std::uint32_t decoded_nan(std::uint32_t mag) noexcept {
    return 0x7FC00000u | ((mag & 0x3u) << 21);
  }
};

/// Number of bits in a code of format `S` (sign included).
template <class S>
inline constexpr int total_bits = 1 + S::exponent_bits + S::mantissa_bits;

/// Magnitude code of +inf (all-ones exponent, zero mantissa); only meaningful with infinities.
template <class S>
inline constexpr std::uint32_t infinity_code = ((1u << S::exponent_bits) - 1u) << S::mantissa_bits;

/// Magnitude code that finite overflow and infinities encode to.
template <class S>
inline constexpr std::uint32_t overflow_code =
    S::saturating ? S::max_finite_code : infinity_code<S>;

/// True when magnitude code `mag` is a NaN of format `S`.
template <class S>
constexpr bool is_nan_code(std::uint32_t mag) noexcept {
  constexpr std::uint32_t all_ones = (1u << (S::exponent_bits + S::mantissa_bits)) - 1u;
  if constexpr (S::has_infinity) {
    return mag > infinity_code<S> && mag <= all_ones;
  } else {
    return mag == all_ones;
  }
}

/// Value of magnitude code `mag` by the plain formula (subnormal for exponent field 0, normal
/// otherwise), ignoring which codes are special. `mag` may exceed the format's range by one step,
/// which gives the value the next code would have if the format continued.
template <class S>
inline double finite_value(std::uint32_t mag) noexcept {
  constexpr int m_bits = S::mantissa_bits;
  const int exponent_field = static_cast<int>(mag >> m_bits);
  const double mantissa = static_cast<double>(mag & ((1u << m_bits) - 1u));
  if (exponent_field == 0) return std::ldexp(mantissa, 1 - S::bias - m_bits);
  return std::ldexp(std::ldexp(1.0, m_bits) + mantissa, exponent_field - S::bias - m_bits);
}

/// Float bit pattern that code `code` of format `S` decodes to: the exact value, +-inf, or the
/// specified NaN pattern (sign kept).
template <class S>
inline std::uint32_t decode(std::uint32_t code) noexcept {
  constexpr int magnitude_bits = S::exponent_bits + S::mantissa_bits;
  const std::uint32_t sign = ((code >> magnitude_bits) & 1u) << 31;
  const std::uint32_t mag = code & ((1u << magnitude_bits) - 1u);
  if (is_nan_code<S>(mag)) return sign | S::decoded_nan(mag);
  if (S::has_infinity && mag == infinity_code<S>) return sign | 0x7F800000u;
  // Every finite value of these formats is a float (at worst a float subnormal), so this is exact.
  const float value = static_cast<float>(finite_value<S>(mag));
  return sign | std::bit_cast<std::uint32_t>(value);
}

/// Exact value of the non-negative, finite float with bit pattern `mag`, computed from its fields
/// with integer-to-double conversion (so no float subnormal ever reaches the FPU).
inline double float_magnitude(std::uint32_t mag) noexcept {
  const int exponent_field = static_cast<int>(mag >> 23);
  const std::uint32_t fraction = mag & 0x7FFFFFu;
  if (exponent_field == 0) return static_cast<double>(fraction) * pow2(-149);
  return static_cast<double>(fraction | 0x800000u) * pow2(exponent_field - 150);
}

/// Code of format `S` for the float with bit pattern `float_bits`: round to nearest, ties to even;
/// gradual underflow; overflow to inf (IEEE formats) or to the largest finite (saturating formats,
/// which also map +-inf there); NaN to the specified NaN code; sign always kept.
template <class S>
inline std::uint32_t encode(std::uint32_t float_bits) noexcept {
  constexpr int m_bits = S::mantissa_bits;
  constexpr int min_exponent = 1 - S::bias;  // exponent of the smallest normal number
  // Below a quarter of the smallest subnormal everything rounds to zero; from twice the largest
  // finite up everything overflows. Between these bounds the exact rounding below decides.
  constexpr double zero_below = pow2(min_exponent - m_bits - 2);
  constexpr double overflow_from = 2.0 * S::max_finite;

  const std::uint32_t sign = (float_bits >> 31) << (total_bits<S> - 1);
  const std::uint32_t mag = float_bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | S::encoded_nan(mag & 0x7FFFFFu);
  if (mag == 0x7F800000u) return sign | overflow_code<S>;

  const double value = float_magnitude(mag);
  if (value < zero_below) return sign;
  if (value >= overflow_from) return sign | overflow_code<S>;

  // floor(log2(value)) from the double's exponent field (value is a normal double here), clamped
  // up to the smallest normal exponent so that small values land on the subnormal grid.
  const int exponent = static_cast<int>((std::bit_cast<std::uint64_t>(value) >> 52) & 0x7FF) - 1023;
  int quantum_exponent = exponent < min_exponent ? min_exponent : exponent;
  // Value in units of the target's spacing at this exponent: exact, and below 2^(m_bits + 1).
  const double scaled = value * pow2(m_bits - quantum_exponent);
  // Adding and subtracting 2^52 rounds a double in [0, 2^51) to an integer, to nearest with ties
  // to even (the default rounding mode; these tests never change it).
  const double rounded = (scaled + 0x1p52) - 0x1p52;
  std::uint32_t significand = static_cast<std::uint32_t>(rounded);

  std::uint32_t code;
  if (significand < (1u << m_bits)) {
    // Only possible at the smallest exponent: a subnormal (or zero), exponent field 0.
    code = significand;
  } else {
    if (significand == (2u << m_bits)) {  // rounding carried into the next binade
      significand >>= 1;
      ++quantum_exponent;
    }
    const auto exponent_field = static_cast<std::uint32_t>(quantum_exponent + S::bias);
    code = (exponent_field << m_bits) | (significand - (1u << m_bits));
  }
  // Anything that rounded beyond the largest finite value (possibly into the inf/NaN codes or past
  // the field) overflows.
  if (code > S::max_finite_code) code = overflow_code<S>;
  return sign | code;
}

}  // namespace mfref
