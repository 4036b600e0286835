// Scalar FP8 quantize/dequantize: the readable reference every vector back-end must match bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Scalar specialisation: one element at a time through the storage types' constructors.
template <>
struct Fp8Converter<isa::scalar> {
  /// See the primary template.
  template <class From, class To>
  static void run(const From* input, To* output, std::size_t count, float scale) noexcept {
    for (std::size_t i = 0; i < count; ++i) {
      output[i] = To(apply_scale<From, To>(to_float(input[i]), scale));
    }
  }

  /// See the primary template.
  template <class From, class To>
  static void run_rows(const From* input, std::int64_t input_stride, std::size_t rows,
                       std::size_t length, To* output, float scale) noexcept {
    for (std::size_t r = 0; r < rows; ++r) {
      run(input + static_cast<std::int64_t>(r) * input_stride, output + r * length, length, scale);
    }
  }
};

}  // namespace pagedattn::backend
