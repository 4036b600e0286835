// Which format of the independent reference codec (minifloat_reference.hpp) describes each of
// pagedattn's storage types: the one bridge from the library's types to the reference.
#pragma once

#include "minifloat_reference.hpp"
#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::test {

/// The reference format (mfref::Bf16, Fp16, E4M3, E5M2) of storage type T.
template <class T>
struct ReferenceFormat;
/// bf16_t.
template <>
struct ReferenceFormat<bf16_t> { using type = mfref::Bf16; };
/// fp16_t.
template <>
struct ReferenceFormat<fp16_t> { using type = mfref::Fp16; };
/// fp8_e4m3_t.
template <>
struct ReferenceFormat<fp8_e4m3_t> { using type = mfref::E4M3; };
/// fp8_e5m2_t.
template <>
struct ReferenceFormat<fp8_e5m2_t> { using type = mfref::E5M2; };

/// The reference format of T.
template <class T>
using reference_format_t = typename ReferenceFormat<T>::type;

}  // namespace pagedattn::test
