// FP8 quantize/dequantize helpers over contiguous spans, with a scale, on the best ISA (or a chosen
// one): quantize q = fp8(x / scale), dequantize x = float(q) * scale. Bit-exact on every ISA.
#pragma once

#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>

#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/float_checks.hpp"
#include "pagedattn/dispatch/entry_points.hpp"
#include "pagedattn/isa/dispatch.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/entry_points_impl.hpp"
#endif

namespace pagedattn {

/// Satisfied by float, bf16_t and fp16_t: the types FP8 values are quantized from / dequantized to.
template <class T>
concept Fp8WideType =
    std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, fp16_t>;

/// Element type of a contiguous container or span (what std::data points to, without const).
template <class Range>
using range_element_t = std::remove_cvref_t<decltype(*std::data(std::declval<Range&>()))>;

/// ok() when a scale can be used for FP8 conversion (positive and finite, subnormals included,
/// whatever the caller's MXCSR); names `argument`.
inline Status check_scale(float scale, std::string_view argument = "scale") {
  if (!detail::is_positive_finite(scale)) {
    return detail::make_error(Errc::invalid_argument, argument, scale,
                              "must be positive and finite");
  }
  return {};
}

/// Validates a scaled conversion of `input_size` elements into `output_size` elements.
inline Status validate_scaled_conversion(std::size_t input_size, std::size_t output_size,
                                         float scale, IsaId isa) {
  if (output_size != input_size) {
    return detail::make_error(Errc::size_mismatch, "output.size()", output_size,
                              "must equal input.size() = " + std::to_string(input_size));
  }
  if (Status status = check_scale(scale); !status.ok()) return status;
  return check_isa(isa);
}

namespace detail {
/// Validates, then runs one conversion on `isa`. Throws Error before writing on bad input.
template <class From, class To>
void scaled_convert(const From* input, std::size_t input_size, To* output,
                    std::size_t output_size, float scale, IsaId isa) {
  throw_if_error(validate_scaled_conversion(input_size, output_size, scale, isa));
  if (input_size == 0) return;
  const ScaledConversion job{dtype_of<From>, dtype_of<To>, input, output, input_size, scale};
  dispatch_isa(isa, [&]<class Tag>(Tag) { run_scaled_conversion<Tag>(job); });
}
}  // namespace detail

/// Quantizes: output[i] = To(float(input[i]) / scale), round to nearest even, saturating.
/// The float division rounds to nearest even with subnormals kept (no DAZ/FTZ) whatever the
/// caller's MXCSR, which the call leaves as it was (see detail::DefaultFloatEnvironment).
/// `input`: contiguous range of float, bf16_t or fp16_t. `output`: contiguous range of
/// fp8_e4m3_t or fp8_e5m2_t of the same size, not overlapping `input`.
/// Throws Error (nothing written) for a size mismatch, a scale that is not positive and finite,
/// or an `isa` this program or CPU cannot run.
template <class Input, class Output>
  requires Fp8WideType<range_element_t<const Input>> && Fp8Type<range_element_t<Output>>
void quantize(const Input& input, Output&& output, float scale, IsaId isa = best_isa()) {
  detail::scaled_convert(std::data(input), std::size(input), std::data(output), std::size(output),
                         scale, isa);
}

/// Dequantizes: output[i] = To(float(input[i]) * scale), To rounding to nearest even; the float
/// product too, with subnormals kept, whatever the caller's MXCSR (as for quantize()).
/// `input`: contiguous range of fp8_e4m3_t or fp8_e5m2_t. `output`: contiguous range of float,
/// bf16_t or fp16_t of the same size, not overlapping `input`.
/// Throws Error (nothing written) for the same conditions as quantize().
template <class Input, class Output>
  requires Fp8Type<range_element_t<const Input>> && Fp8WideType<range_element_t<Output>>
void dequantize(const Input& input, Output&& output, float scale, IsaId isa = best_isa()) {
  detail::scaled_convert(std::data(input), std::size(input), std::data(output), std::size(output),
                         scale, isa);
}

}  // namespace pagedattn
