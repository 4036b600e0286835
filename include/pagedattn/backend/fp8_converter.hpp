// Primary template of the per-ISA FP8 quantize/dequantize kernels; each back-end specialises it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::backend {

/// Scaled conversion kernels of ISA tier `Isa` (a pagedattn::isa tag). A specialisation provides
///   template <class From, class To>
///   static void run_rows(const From* input, std::int64_t input_stride, std::size_t rows,
///                        std::size_t length, To* output, float scale) noexcept;
///   template <class From, class To>
///   static void run(const From* input, To* output, std::size_t count, float scale) noexcept;
/// with exactly one of From, To an FP8 type and the other float, bf16_t or fp16_t:
///   to FP8:   output[i] = To(float(input[i]) / scale)   (quantize)
///   from FP8: output[i] = To(float(input[i]) * scale)   (dequantize)
/// run_rows converts `rows` rows of `length` elements, row r read from input + r * input_stride
/// and written densely to output + r * length; one set-up serves all rows. run is one row.
/// Every specialisation gives the same bits as the scalar one. Preconditions: validated input
/// (the elements readable and writable, scale positive and finite).
template <class Isa>
struct Fp8Converter;

/// Float value of a storage element (identity for float).
template <class T>
PAGEDATTN_ALWAYS_INLINE constexpr float to_float(T value) noexcept {
  return static_cast<float>(value);
}

/// Applies the scale the way the conversion direction requires (divide to FP8, multiply from FP8).
template <class From, class To, class V>
PAGEDATTN_ALWAYS_INLINE V apply_scale(V value, V scale) noexcept {
  if constexpr (is_fp8_v<To>) {
    return value / scale;
  } else {
    return value * scale;
  }
}

/// 1 / scale when it is exact and a normal float (`scale` a power of two in [2^-126, 2^126]),
/// else 0. Then x * exact_reciprocal(scale) has the same bits as x / scale for every float x
/// (both are x * 2^-k rounded once), whatever the MXCSR flags.
PAGEDATTN_ALWAYS_INLINE constexpr float exact_reciprocal(float scale) noexcept {
  const auto bits = __builtin_bit_cast(std::uint32_t, scale);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  if ((bits & 0x807fffffu) != 0 || exponent < 1 || exponent > 253) return 0.0f;
  return __builtin_bit_cast(float, (254u - exponent) << 23);
}

/// Runs `body(divide, factor)` with the vector kernels' form of apply_scale for From -> To:
/// `divide` a std::bool_constant, `factor` a float such that `divide ? x / factor : x * factor`
/// equals apply_scale<From, To>(x, scale) bit for bit (quantizing multiplies by the exact
/// reciprocal where there is one: a multiply is several times cheaper than a divide).
template <class From, class To, class Body>
PAGEDATTN_ALWAYS_INLINE void with_scale_factor(float scale, Body&& body) noexcept {
  if constexpr (is_fp8_v<To>) {
    if (const float reciprocal = exact_reciprocal(scale); reciprocal != 0.0f) {
      body(std::false_type{}, reciprocal);
    } else {
      body(std::true_type{}, scale);
    }
  } else {
    body(std::false_type{}, scale);
  }
}

/// `value / factor` when `Divide`, else `value * factor` (see with_scale_factor).
template <bool Divide, class V>
PAGEDATTN_ALWAYS_INLINE V apply_factor(V value, V factor) noexcept {
  if constexpr (Divide) {
    return value / factor;
  } else {
    return value * factor;
  }
}

}  // namespace pagedattn::backend
