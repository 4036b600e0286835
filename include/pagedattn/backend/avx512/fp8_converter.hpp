// AVX-512 FP8 quantize/dequantize (serves the avx512 and amx tiers): 16 elements per step (32 for
// bf16 with a power-of-two scale), FP8 codes from the vector FP8 encoders, wider types through the
// generic minifloat codec, masked tails; bit-exact with the scalar kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pagedattn/backend/avx512/lanes.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/backend/vector/fp8_encode.hpp"
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
  } else if constexpr (is_fp8_v<T>) {
    store_narrowed<1>(target, encode_fp8_saturating<typename T::format>(float_bits), mask);
  } else {
    store_narrowed<sizeof(T)>(target, detail::encode_minifloat<typename T::format>(float_bits), mask);
  }
}

/// Converts 16 elements under `mask`, applying `factor` as with_scale_factor says.
template <bool Divide, class From, class To>
PAGEDATTN_ALWAYS_INLINE void convert_block(const From* input, To* output, __m512 factor,
                                           __mmask16 mask) noexcept {
  const __m512 value = _mm512_castsi512_ps(load_float_bits(input, mask).v);
  store_float_bits(output, U32x16(_mm512_castps_si512(apply_factor<Divide>(value, factor))), mask);
}

/// Quantizes `count` bf16 elements with a power-of-two scale, 32 per step (encode_fp8_from_bf16).
template <class Format>
PAGEDATTN_ALWAYS_INLINE void quantize_bf16(const bf16_t* input, Minifloat<Format>* output, std::size_t count,
                                           const Bf16ToFp8Constants<Format>& constants) noexcept {
  std::size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    store_low_bytes(output + i, encode_fp8_from_bf16(load_u16x32(input + i), constants), 0xffffffffu);
  }
  if (i < count) {
    const __mmask32 mask = first_lanes32(count - i);
    store_low_bytes(output + i, encode_fp8_from_bf16(U16x32(_mm512_maskz_loadu_epi16(mask, input + i)), constants),
                    mask);
  }
}

/// Converts `count` elements, applying `factor` as with_scale_factor says.
template <bool Divide, class From, class To>
PAGEDATTN_ALWAYS_INLINE void convert(const From* input, To* output, std::size_t count, __m512 factor) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) convert_block<Divide>(input + i, output + i, factor, 0xFFFF);
  if (i < count) convert_block<Divide>(input + i, output + i, factor, first_lanes(count - i));
}
}  // namespace avx512

/// AVX-512 specialisation for the avx512, avx512bf16 and amx tiers.
template <Avx512FamilyTag Isa>
struct Fp8Converter<Isa> {
  /// See the primary template.
  template <class From, class To>
  static void run_rows(const From* input, std::int64_t input_stride, std::size_t rows,
                       std::size_t length, To* output, float scale) noexcept {
    const auto row = [&](std::size_t r) { return input + static_cast<std::int64_t>(r) * input_stride; };
    if constexpr (std::is_same_v<From, bf16_t> && is_fp8_v<To>) {
      if (const auto constants = Bf16ToFp8Constants<typename To::format>::for_scale(scale)) {
        for (std::size_t r = 0; r < rows; ++r) {
          avx512::quantize_bf16(row(r), output + r * length, length, *constants);
        }
        return;
      }
    }
    with_scale_factor<From, To>(scale, [&]<bool Divide>(std::bool_constant<Divide>, float factor) {
      const __m512 factor_lanes = _mm512_set1_ps(factor);
      for (std::size_t r = 0; r < rows; ++r) {
        avx512::convert<Divide>(row(r), output + r * length, length, factor_lanes);
      }
    });
  }

  /// See the primary template.
  template <class From, class To>
  static void run(const From* input, To* output, std::size_t count, float scale) noexcept {
    run_rows(input, 0, 1, count, output, scale);
  }
};

}  // namespace pagedattn::backend
