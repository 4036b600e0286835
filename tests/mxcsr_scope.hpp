// MXCSR settings for the tests that require results independent of the caller's floating-point
// environment (x86 only): the values a caller may leave in MXCSR and a scope that sets one.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace pagedattn::test {

/// The MXCSR control bits (everything but the six sticky exception flags).
inline constexpr unsigned mxcsr_control_bits = ~0x3Fu;
/// The power-on MXCSR: round to nearest even, all exceptions masked, no DAZ, no FTZ.
inline constexpr unsigned default_mxcsr = 0x1F80u;
/// MXCSR bit: denormal inputs read as zero.
inline constexpr unsigned daz = 0x0040u;
/// MXCSR bit: denormal results flushed to zero.
inline constexpr unsigned ftz = 0x8000u;
/// MXCSR rounding control (bits 13-14): toward -infinity.
inline constexpr unsigned round_down = 0x2000u;
/// MXCSR rounding control: toward +infinity.
inline constexpr unsigned round_up = 0x4000u;
/// MXCSR rounding control: toward zero.
inline constexpr unsigned round_toward_zero = 0x6000u;

/// The caller's MXCSR values a conversion must ignore: the default first, every other rounding
/// mode, DAZ with FTZ, and both together.
inline constexpr unsigned caller_mxcsr_values[] = {default_mxcsr,
                                                   default_mxcsr | round_down,
                                                   default_mxcsr | round_up,
                                                   default_mxcsr | round_toward_zero,
                                                   default_mxcsr | daz | ftz,
                                                   default_mxcsr | round_toward_zero | daz | ftz};

/// Sets MXCSR to `value` for the scope's lifetime and then restores the previous value, also when
/// a check inside the scope fails.
class MxcsrScope {
 public:
  /// Sets MXCSR to `value`.
  explicit MxcsrScope(unsigned value) : saved_(_mm_getcsr()) { _mm_setcsr(value); }
  ~MxcsrScope() { _mm_setcsr(saved_); }
  MxcsrScope(const MxcsrScope&) = delete;
  MxcsrScope& operator=(const MxcsrScope&) = delete;

 private:
  unsigned saved_;
};

}  // namespace pagedattn::test
#endif
