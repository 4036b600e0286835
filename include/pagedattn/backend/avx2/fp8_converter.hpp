// AVX2 FP8 quantize/dequantize: 8 elements per step (32 for bf16 with a power-of-two scale), FP8
// codes from the vector FP8 encoders, wider types through the generic minifloat codec on U32x8
// lanes; tails go through zero-padded local blocks. Bit-exact with the scalar kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "pagedattn/backend/avx2/lanes.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/backend/vector/fp8_encode.hpp"
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
  } else if constexpr (is_fp8_v<T>) {
    store_narrowed<1>(target, encode_fp8_saturating<typename T::format>(float_bits));
  } else {
    store_narrowed<sizeof(T)>(target, detail::encode_minifloat<typename T::format>(float_bits));
  }
}

/// Converts one block of 8 elements, applying `factor` as with_scale_factor says.
template <bool Divide, class From, class To>
PAGEDATTN_ALWAYS_INLINE void convert_block(const From* input, To* output, __m256 factor) noexcept {
  const __m256 value = _mm256_castsi256_ps(load_float_bits(input).v);
  store_float_bits(output, U32x8(_mm256_castps_si256(apply_factor<Divide>(value, factor))));
}

/// FP8 codes of the 16 bf16 elements at `input` (times the constants' power of two), one per
/// 16-bit lane.
template <class Format>
PAGEDATTN_ALWAYS_INLINE U16x16 quantize_bf16x16(const bf16_t* input,
                                                const Bf16ToFp8Constants<Format>& constants) noexcept {
  return encode_fp8_from_bf16(load_u16x16(input), constants);
}

/// FP8 codes of the 32 bf16 elements at `input` (times the constants' power of two), in order.
template <class Format>
PAGEDATTN_ALWAYS_INLINE __m256i quantize_bf16x32(const bf16_t* input,
                                                 const Bf16ToFp8Constants<Format>& constants) noexcept {
  return pack_low_bytes(quantize_bf16x16(input, constants), quantize_bf16x16(input + 16, constants));
}

/// Quantizes `count` bf16 elements with a power-of-two scale, 32 per step (encode_fp8_from_bf16);
/// the tail goes through a zero-padded local block. Takes the constants by value: through a
/// reference, the byte stores (which may alias anything) made each step reload them.
template <class Format>
PAGEDATTN_ALWAYS_INLINE void quantize_bf16(const bf16_t* input, Minifloat<Format>* output, std::size_t count,
                                           const Bf16ToFp8Constants<Format> constants) noexcept {
  constexpr std::size_t lanes = 16;
  std::size_t i = 0;
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(output + i), quantize_bf16x32(input + i, constants));
  }
  if (i + lanes <= count) {
    store_low_bytes(output + i, quantize_bf16x16(input + i, constants));
    i += lanes;
  }
  if (i < count) {
    bf16_t in_block[lanes] = {};
    Minifloat<Format> out_block[lanes];
    std::memcpy(static_cast<void*>(in_block), input + i, (count - i) * sizeof(bf16_t));
    store_low_bytes(out_block, quantize_bf16x16(in_block, constants));
    std::memcpy(static_cast<void*>(output + i), out_block, (count - i) * sizeof(Minifloat<Format>));
  }
}

/// Converts `count` elements, applying `factor` as with_scale_factor says; the tail goes through
/// a zero-padded local block.
template <bool Divide, class From, class To>
PAGEDATTN_ALWAYS_INLINE void convert(const From* input, To* output, std::size_t count, __m256 factor) noexcept {
  constexpr std::size_t lanes = 8;
  std::size_t i = 0;
  for (; i + lanes <= count; i += lanes) convert_block<Divide>(input + i, output + i, factor);
  if (i < count) {
    From in_block[lanes];
    To out_block[lanes];
    std::memset(static_cast<void*>(in_block), 0, sizeof(in_block));
    std::memcpy(static_cast<void*>(in_block), input + i, (count - i) * sizeof(From));
    convert_block<Divide>(in_block, out_block, factor);
    std::memcpy(static_cast<void*>(output + i), out_block, (count - i) * sizeof(To));
  }
}
}  // namespace avx2

/// AVX2 specialisation for the avx2 tier and amx_emulated.
template <Avx2FamilyTag Isa>
struct Fp8Converter<Isa> {
  /// See the primary template.
  template <class From, class To>
  static void run_rows(const From* input, std::int64_t input_stride, std::size_t rows,
                       std::size_t length, To* output, float scale) noexcept {
    const auto row = [&](std::size_t r) { return input + static_cast<std::int64_t>(r) * input_stride; };
    if constexpr (std::is_same_v<From, bf16_t> && is_fp8_v<To>) {
      const auto constants = Bf16ToFp8Constants<typename To::format>::for_scale(scale);
      if (constants) {  // the entry point runs under the default MXCSR: rounds to nearest
        for (std::size_t r = 0; r < rows; ++r) {
          avx2::quantize_bf16(row(r), output + r * length, length, *constants);
        }
        return;
      }
    }
    with_scale_factor<From, To>(scale, [&]<bool Divide>(std::bool_constant<Divide>, float factor) {
      const __m256 factor_lanes = _mm256_set1_ps(factor);
      for (std::size_t r = 0; r < rows; ++r) {
        avx2::convert<Divide>(row(r), output + r * length, length, factor_lanes);
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
