// Primary template of the per-ISA FP8 quantize/dequantize kernels; each back-end specialises it.
#pragma once

#include <cstddef>

#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::backend {

/// Scaled conversion kernels of ISA tier `Isa` (a pagedattn::isa tag). A specialisation provides
///   template <class From, class To>
///   static void run(const From* input, To* output, std::size_t count, float scale) noexcept;
/// with exactly one of From, To an FP8 type and the other float, bf16_t or fp16_t:
///   to FP8:   output[i] = To(float(input[i]) / scale)   (quantize)
///   from FP8: output[i] = To(float(input[i]) * scale)   (dequantize)
/// Every specialisation gives the same bits as the scalar one. Preconditions: validated input
/// (count elements readable and writable, scale positive and finite).
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

}  // namespace pagedattn::backend
