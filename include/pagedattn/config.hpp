// Compiler and platform configuration macros shared by every header.
#pragma once

#if !defined(__GNUC__) && !defined(__clang__)
#error "pagedattn needs GCC or Clang (it relies on their intrinsics and attributes)"
#endif

#if __cplusplus < 202002L
#error "pagedattn needs C++20"
#endif

/// Forces inlining of a small function. Used on the scalar helpers that ISA code also calls, so
/// that no out-of-line copy compiled with one ISA's flags can be picked by the linker for another.
#define PAGEDATTN_ALWAYS_INLINE inline __attribute__((always_inline))
/// The same for a lambda (placed after its parameter list).
#define PAGEDATTN_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))

/// 1 when exceptions are enabled (then errors throw pagedattn::Error), else 0 (errors abort; use
/// the Status-returning validate functions instead).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define PAGEDATTN_HAS_EXCEPTIONS 1
#else
#define PAGEDATTN_HAS_EXCEPTIONS 0
#endif

/// 1 on x86-64, where the avx2 and avx512 back-ends (avx2, avx512, avx512bf16 and amx
/// tiers) exist.
#if defined(__x86_64__)
#define PAGEDATTN_ARCH_X86_64 1
#else
#define PAGEDATTN_ARCH_X86_64 0
#endif
