// Declarations of the per-ISA entry points: the only functions that cross from the caller's
// translation units into an ISA's code. In runtime-dispatch builds their definitions come from
// the translation units made by pagedattn_add_runtime_dispatch (dispatch/instantiate.hpp).
#pragma once

#include <cstddef>

#include "pagedattn/core/dtype.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::detail {

/// A validated scaled conversion between an FP8 type and float/bf16/fp16 (see Fp8Converter).
struct ScaledConversion {
  DType from;          ///< Element type of `input`.
  DType to;            ///< Element type of `output`; exactly one of from/to is FP8.
  const void* input;   ///< `count` elements of `from`.
  void* output;        ///< `count` elements of `to`; must not overlap `input`.
  std::size_t count;   ///< Number of elements.
  float scale;         ///< Positive, finite.
};

/// Runs `job` with the kernels of tier `Isa`.
template <class Isa>
void run_scaled_conversion(const ScaledConversion& job) noexcept;

#if defined(PAGEDATTN_RUNTIME_DISPATCH)
extern template void run_scaled_conversion<isa::scalar>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::avx2>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::avx512>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::amx>(const ScaledConversion&) noexcept;
#endif

}  // namespace pagedattn::detail
