// AVX2 FP8 quantize/dequantize: 8 elements per step through the generic minifloat codec on U32x8
// lanes; the tail goes through a zero-padded local block. Bit-exact with the scalar kernel.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "pagedattn/backend/avx2/lanes.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/core/minifloat_codec.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

namespace avx2 {
/// Float bits of 8 elements of type T (float or a Minifloat).
template <class T>
PAGEDATTN_ALWAYS_INLINE U32x8 load_float_bits(const T* source) noexcept {
  const U32x8 raw = load_widened<sizeof(T)>(source);
  if constexpr (std::is_same_v<T, float>) {
    return raw;
  } else {
    return detail::decode_minifloat<typename T::format>(raw);
  }
}

/// Stores 8 float bit patterns as elements of type T (rounding to nearest even).
template <class T>
PAGEDATTN_ALWAYS_INLINE void store_float_bits(T* target, U32x8 float_bits) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    store_narrowed<4>(target, float_bits);
  } else {
    store_narrowed<sizeof(T)>(target, detail::encode_minifloat<typename T::format>(float_bits));
  }
}

/// Converts one block of 8 elements.
template <class From, class To>
PAGEDATTN_ALWAYS_INLINE void convert_block(const From* input, To* output, __m256 scale) noexcept {
  const __m256 value = _mm256_castsi256_ps(load_float_bits(input).v);
  const __m256 scaled = apply_scale<From, To>(value, scale);
  store_float_bits(output, U32x8(_mm256_castps_si256(scaled)));
}
}  // namespace avx2

/// AVX2 specialisation.
template <>
struct Fp8Converter<isa::avx2> {
  /// See the primary template.
  template <class From, class To>
  static void run(const From* input, To* output, std::size_t count, float scale) noexcept {
    constexpr std::size_t lanes = 8;
    const __m256 scale_lanes = _mm256_set1_ps(scale);
    std::size_t i = 0;
    for (; i + lanes <= count; i += lanes) {
      avx2::convert_block(input + i, output + i, scale_lanes);
    }
    if (i < count) {
      From in_block[lanes];
      To out_block[lanes];
      std::memset(static_cast<void*>(in_block), 0, sizeof(in_block));
      std::memcpy(static_cast<void*>(in_block), input + i, (count - i) * sizeof(From));
      avx2::convert_block(in_block, out_block, scale_lanes);
      std::memcpy(static_cast<void*>(output + i), out_block, (count - i) * sizeof(To));
    }
  }
};

}  // namespace pagedattn::backend
