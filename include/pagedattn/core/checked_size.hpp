// 64-bit size arithmetic that reports overflow instead of wrapping: every buffer size in pagedattn
// is computed with these, so an absurd shape is an error, never a small wrapped allocation.
#pragma once

#include <cstdint>
#include <optional>

namespace pagedattn {

/// a * b, or nullopt when it does not fit in 64 bits.
constexpr std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

/// a + b, or nullopt when it does not fit in 64 bits.
constexpr std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

/// `value` rounded up to a multiple of `alignment` (a power of two), or nullopt on overflow.
constexpr std::optional<std::uint64_t> checked_align_up(std::uint64_t value,
                                                        std::uint64_t alignment) noexcept {
  const auto padded = checked_add(value, alignment - 1);
  if (!padded) return std::nullopt;
  return *padded & ~(alignment - 1);
}

/// A byte or element count that remembers whether any step overflowed. Combine with * and +;
/// read with value() (nullopt once anything overflowed).
class CheckedSize {
 public:
  /// Zero.
  constexpr CheckedSize() = default;
  /// Exactly `value`.
  constexpr CheckedSize(std::uint64_t value) noexcept : value_(value) {}  // NOLINT: a number

  /// The size, or nullopt when a step overflowed.
  [[nodiscard]] constexpr std::optional<std::uint64_t> value() const noexcept {
    if (overflowed_) return std::nullopt;
    return value_;
  }
  /// True when a step overflowed.
  [[nodiscard]] constexpr bool overflowed() const noexcept { return overflowed_; }

  /// Product (overflow propagates).
  friend constexpr CheckedSize operator*(CheckedSize a, CheckedSize b) noexcept {
    return combine(a, b, checked_mul(a.value_, b.value_));
  }
  /// Sum (overflow propagates).
  friend constexpr CheckedSize operator+(CheckedSize a, CheckedSize b) noexcept {
    return combine(a, b, checked_add(a.value_, b.value_));
  }
  /// Rounded up to a multiple of `alignment` (a power of two).
  [[nodiscard]] constexpr CheckedSize aligned(std::uint64_t alignment) const noexcept {
    return combine(*this, *this, checked_align_up(value_, alignment));
  }

 private:
  static constexpr CheckedSize combine(CheckedSize a, CheckedSize b,
                                       std::optional<std::uint64_t> result) noexcept {
    CheckedSize out;
    out.overflowed_ = a.overflowed_ || b.overflowed_ || !result;
    out.value_ = result.value_or(0);
    return out;
  }

  std::uint64_t value_ = 0;
  bool overflowed_ = false;
};

}  // namespace pagedattn
