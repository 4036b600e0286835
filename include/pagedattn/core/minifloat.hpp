// Storage types for bf16, fp16 and OCP FP8 (E4M3FN, E5M2): one class template over a format.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "pagedattn/core/minifloat_codec.hpp"

namespace pagedattn {

/// A trivially copyable 1- or 2-byte floating-point storage type described by `Format`
/// (detail::MinifloatFormat). It has no arithmetic: convert to float to compute.
/// Construction from float rounds to nearest even; FP8 formats saturate to the largest finite
/// value (also for +-inf); NaN stays NaN; signed zero and subnormals are kept exactly.
template <class Format>
class Minifloat {
 public:
  /// Unsigned integer type holding the bits: uint8_t or uint16_t.
  using storage_type = std::conditional_t<Format::total_bits == 8, std::uint8_t, std::uint16_t>;
  /// The format's static description.
  using format = Format;

  /// Leaves the bits uninitialised (like a built-in arithmetic type).
  Minifloat() = default;

  /// Rounds `value` to this format (round to nearest, ties to even).
  PAGEDATTN_ALWAYS_INLINE constexpr explicit Minifloat(float value) noexcept
      : bits_(static_cast<storage_type>(
            detail::encode_minifloat<Format>(std::bit_cast<std::uint32_t>(value)))) {}

  /// The exact float value of this code (NaN codes give a quiet NaN).
  PAGEDATTN_ALWAYS_INLINE constexpr explicit operator float() const noexcept {
    return std::bit_cast<float>(detail::decode_minifloat<Format>(std::uint32_t{bits_}));
  }

  /// The raw code.
  [[nodiscard]] constexpr storage_type bits() const noexcept { return bits_; }

  /// The value whose raw code is `bits`.
  [[nodiscard]] static constexpr Minifloat from_bits(storage_type bits) noexcept {
    Minifloat result;
    result.bits_ = bits;
    return result;
  }

 private:
  storage_type bits_;
};

/// bfloat16 (8-bit exponent, 7-bit mantissa); overflow rounds to inf as in IEEE.
using bf16_t = Minifloat<detail::Bf16Format>;
/// IEEE 754 binary16; overflow rounds to inf.
using fp16_t = Minifloat<detail::Fp16Format>;
/// OCP FP8 E4M3FN: largest finite 448, no infinities, NaN = S.1111.111.
using fp8_e4m3_t = Minifloat<detail::Fp8E4M3Format>;
/// OCP FP8 E5M2: largest finite 57344, infinities and NaNs as in IEEE (saturating conversion).
using fp8_e5m2_t = Minifloat<detail::Fp8E5M2Format>;

static_assert(sizeof(bf16_t) == 2 && sizeof(fp16_t) == 2);
static_assert(sizeof(fp8_e4m3_t) == 1 && sizeof(fp8_e5m2_t) == 1);
static_assert(std::is_trivially_copyable_v<bf16_t> && std::is_trivially_copyable_v<fp8_e4m3_t>);

/// True for the two FP8 storage types.
template <class T>
inline constexpr bool is_fp8_v = std::is_same_v<T, fp8_e4m3_t> || std::is_same_v<T, fp8_e5m2_t>;

/// Satisfied by the two FP8 storage types.
template <class T>
concept Fp8Type = is_fp8_v<T>;

}  // namespace pagedattn
