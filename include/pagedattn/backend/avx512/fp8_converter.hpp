// AVX-512 FP8 quantize/dequantize (serves the avx512 and amx tiers): 16 elements per step through
// the generic minifloat codec on U32x16 lanes, masked tails; bit-exact with the scalar kernel.
#pragma once

#include <cstddef>
#include <type_traits>

#include "pagedattn/backend/avx512/lanes.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/core/minifloat_codec.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx512 {
/// Float bits of 16 elements of type T (float or a Minifloat) loaded under `mask`.
template <class T>
PAGEDATTN_ALWAYS_INLINE U32x16 load_float_bits(const T* source, __mmask16 mask) noexcept {
  const U32x16 raw = load_widened<sizeof(T)>(source, mask);
  if constexpr (std::is_same_v<T, float>) {
    return raw;
  } else {
    return detail::decode_minifloat<typename T::format>(raw);
  }
}

/// Stores 16 float bit patterns as elements of type T (rounding to nearest even) under `mask`.
template <class T>
PAGEDATTN_ALWAYS_INLINE void store_float_bits(T* target, U32x16 float_bits, __mmask16 mask) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    store_narrowed<4>(target, float_bits, mask);
  } else {
    store_narrowed<sizeof(T)>(target, detail::encode_minifloat<typename T::format>(float_bits), mask);
  }
}
}  // namespace avx512

/// AVX-512 specialisation for the avx512 and amx tiers.
template <Avx512FamilyTag Isa>
struct Fp8Converter<Isa> {
  /// See the primary template.
  template <class From, class To>
  static void run(const From* input, To* output, std::size_t count, float scale) noexcept {
    const __m512 scale_lanes = _mm512_set1_ps(scale);
    for (std::size_t i = 0; i < count; i += 16) {
      const __mmask16 mask = avx512::first_lanes(count - i);
      const __m512 value = _mm512_castsi512_ps(avx512::load_float_bits(input + i, mask).v);
      const __m512 scaled = apply_scale<From, To>(value, scale_lanes);
      avx512::store_float_bits(output + i, avx512::U32x16(_mm512_castps_si512(scaled)), mask);
    }
  }
};

}  // namespace pagedattn::backend
