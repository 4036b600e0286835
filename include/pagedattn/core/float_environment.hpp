// DefaultFloatEnvironment: runs a scope under the default x86 MXCSR (round to nearest even, no
// DAZ/FTZ, exceptions masked) and then restores the caller's, so that what the scope computes does
// not depend on the caller's floating-point settings. Internal (used by the dispatch entry points).
#pragma once

#include "pagedattn/config.hpp"

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace pagedattn::detail {

#if defined(__SSE__) || defined(_M_X64)

/// MXCSR's power-on value: round to nearest even, all six exceptions masked, DAZ and FTZ off,
/// no exception flag set.
inline constexpr unsigned default_mxcsr = 0x1F80u;

/// For its lifetime, sets the calling thread's MXCSR to default_mxcsr; the destructor restores
/// the value found at construction exactly (control bits and exception flags: flags raised inside
/// the scope do not reach the caller). Compiler barriers keep memory accesses inside the scope.
/// Always inline: no out-of-line copy exists to be shared between ISA objects.
class DefaultFloatEnvironment {
 public:
  /// Saves the caller's MXCSR and loads default_mxcsr.
  PAGEDATTN_ALWAYS_INLINE DefaultFloatEnvironment() noexcept : saved_(_mm_getcsr()) {
    _mm_setcsr(default_mxcsr);
    asm volatile("" ::: "memory");
  }
  /// Restores the caller's MXCSR.
  PAGEDATTN_ALWAYS_INLINE ~DefaultFloatEnvironment() {
    asm volatile("" ::: "memory");
    _mm_setcsr(saved_);
  }
  DefaultFloatEnvironment(const DefaultFloatEnvironment&) = delete;
  DefaultFloatEnvironment& operator=(const DefaultFloatEnvironment&) = delete;

 private:
  unsigned saved_;  ///< The caller's MXCSR.
};

#else

/// No-op outside x86: there is no MXCSR, and the floating-point environment of other
/// architectures (e.g. AArch64's FPCR) is left as the caller set it.
class DefaultFloatEnvironment {
 public:
  /// Does nothing.
  PAGEDATTN_ALWAYS_INLINE DefaultFloatEnvironment() noexcept {}
  DefaultFloatEnvironment(const DefaultFloatEnvironment&) = delete;
  DefaultFloatEnvironment& operator=(const DefaultFloatEnvironment&) = delete;
};

#endif

}  // namespace pagedattn::detail
