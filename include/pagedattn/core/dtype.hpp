// Runtime names for the element types (DType), their sizes, and a visitor from DType to type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "pagedattn/core/minifloat.hpp"

namespace pagedattn {

/// Element types the library stores or computes with.
enum class DType : std::uint8_t { f32, bf16, fp16, fp8_e4m3, fp8_e5m2 };

/// The DType of a C++ element type (float, bf16_t, fp16_t, fp8_e4m3_t, fp8_e5m2_t).
template <class T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, bf16_t>) return DType::bf16;
  else if constexpr (std::is_same_v<T, fp16_t>) return DType::fp16;
  else if constexpr (std::is_same_v<T, fp8_e4m3_t>) return DType::fp8_e4m3;
  else if constexpr (std::is_same_v<T, fp8_e5m2_t>) return DType::fp8_e5m2;
  else static_assert(!sizeof(T), "not a pagedattn element type");
}();

/// Calls `f(std::type_identity<T>{})` with the C++ type of `dtype`; returns what `f` returns.
template <class F>
constexpr decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::bf16: return f(std::type_identity<bf16_t>{});
    case DType::fp16: return f(std::type_identity<fp16_t>{});
    case DType::fp8_e4m3: return f(std::type_identity<fp8_e4m3_t>{});
    case DType::fp8_e5m2: return f(std::type_identity<fp8_e5m2_t>{});
    case DType::f32: break;
  }
  return f(std::type_identity<float>{});
}

/// Bytes per element of `dtype`.
constexpr std::size_t dtype_size(DType dtype) noexcept {
  return visit_dtype(dtype, []<class T>(std::type_identity<T>) { return sizeof(T); });
}

/// Lower-case name of `dtype`, e.g. "fp8_e4m3".
constexpr std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::f32: break;
  }
  return "f32";
}

}  // namespace pagedattn
