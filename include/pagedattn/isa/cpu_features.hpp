// Run-time CPU feature detection: CPUID bits, OS-enabled register state (XCR0), and on Linux the
// permission request AMX needs. Answers which IsaId tiers this CPU can run, and whether its cores
// multiply subnormal floats at full speed (a route choice of the FP8 products reads it).
#pragma once

#include <atomic>

#include "pagedattn/config.hpp"
#include "pagedattn/isa/tags.hpp"

#if PAGEDATTN_ARCH_X86_64
#include <cpuid.h>
#endif
#if PAGEDATTN_ARCH_X86_64 && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagedattn {

/// What the CPU and operating system provide. Instruction bits are only set when the OS also
/// saves the registers they use (XCR0), so every true flag is usable.
struct CpuFeatures {
  bool avx2 = false;         ///< AVX2 with OS-enabled YMM state.
  bool fma = false;          ///< FMA3.
  bool f16c = false;         ///< F16C half-precision conversions.
  bool avx512f = false;      ///< AVX-512 Foundation with OS-enabled ZMM/opmask state.
  bool avx512bw = false;     ///< AVX-512 byte/word.
  bool avx512dq = false;     ///< AVX-512 dword/qword.
  bool avx512vl = false;     ///< AVX-512 vector-length extensions.
  bool avx512_vbmi = false;  ///< AVX512_VBMI (byte permutes).
  bool avx512_bf16 = false;  ///< AVX512_BF16 (bf16 dot products and conversions).
  bool avx512_fp16 = false;  ///< AVX512_FP16.
  bool amx_tile = false;     ///< AMX-TILE, with tile state OS-enabled and permission granted.
  bool amx_bf16 = false;     ///< AMX-BF16 (same conditions as amx_tile).
  bool amx_int8 = false;     ///< AMX-INT8 (same conditions as amx_tile).
  /// Whether the cores multiply subnormal float operands at full speed with MXCSR's DAZ clear:
  /// true on AMD and Hygon x86 cores (CPUID vendor "AuthenticAMD", "HygonGenuine"); false on
  /// Intel's, which take a microcode assist per such instruction (an AVX2 FMA with one subnormal
  /// lane: about 100 cycles on an Ice Lake Xeon), and on unknown vendors. Only chooses between
  /// routes with the same results (VectorKit::pair_rows_usable).
  bool fast_subnormal_operands = false;
};

namespace detail {

#if PAGEDATTN_ARCH_X86_64
/// Reads extended control register 0 (the OS-enabled state components).
inline unsigned long long read_xcr0() noexcept {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

/// Asks Linux for permission to use AMX tile data (needed once per process before any tile use).
inline bool request_amx_permission() noexcept {
#if defined(__linux__)
  constexpr long arch_req_xcomp_perm = 0x1023;
  constexpr long xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
  return false;
#endif
}
#endif

/// Queries the CPU (no caching; see cpu_features()).
inline CpuFeatures detect_cpu_features() noexcept {
  CpuFeatures f;
#if PAGEDATTN_ARCH_X86_64
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    constexpr unsigned amd[3] = {0x68747541u, 0x69746e65u, 0x444d4163u};    // "Auth", "enti", "cAMD"
    constexpr unsigned hygon[3] = {0x6f677948u, 0x6e65476eu, 0x656e6975u};  // "Hygo", "nGen", "uine"
    const auto vendor_is = [&](const unsigned(&name)[3]) {
      return ebx == name[0] && edx == name[1] && ecx == name[2];
    };
    f.fast_subnormal_operands = vendor_is(amd) || vendor_is(hygon);
  }
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  const bool has_fma = (ecx >> 12) & 1;
  const bool has_f16c = (ecx >> 29) & 1;
  if (!osxsave) return f;
  const unsigned long long xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;         // SSE and AVX state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;    // XTILECFG, XTILEDATA
  if (!os_ymm) return f;
  f.fma = has_fma;
  f.f16c = has_f16c;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned leaf7_ebx = ebx, leaf7_ecx = ecx, leaf7_edx = edx;
  f.avx2 = (leaf7_ebx >> 5) & 1;
  if (os_zmm) {
    f.avx512f = (leaf7_ebx >> 16) & 1;
    f.avx512dq = (leaf7_ebx >> 17) & 1;
    f.avx512bw = (leaf7_ebx >> 30) & 1;
    f.avx512vl = (leaf7_ebx >> 31) & 1;
    f.avx512_vbmi = (leaf7_ecx >> 1) & 1;
    f.avx512_fp16 = (leaf7_edx >> 23) & 1;
    if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512_bf16 = (eax >> 5) & 1;
  }
  const bool cpu_tiles = (leaf7_edx >> 24) & 1;
  if (cpu_tiles && os_tiles && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_bf16 = (leaf7_edx >> 22) & 1;
    f.amx_int8 = (leaf7_edx >> 25) & 1;
  }
#endif
  return f;
}

}  // namespace detail

namespace detail {
/// Whether the products may give subnormal floats to the multipliers (the avx2 FP8 row split,
/// VectorKit::pair_rows_usable): 1 yes, 0 no, -1 not known yet (read as no). cpu_features()
/// publishes CpuFeatures::fast_subnormal_operands here when it first runs, unless a value is
/// already set; tests set it to run every route on every CPU (the routes give the same results).
/// Constant-initialised data, so the ISA objects read it without sharing any code.
inline constinit std::atomic<int> subnormal_operands_allowed{-1};
}  // namespace detail

/// The features of the CPU this process runs on (detected once, then cached; the first call
/// also publishes fast_subnormal_operands, see detail::subnormal_operands_allowed).
inline const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures features = [] {
    const CpuFeatures detected = detail::detect_cpu_features();
    int unknown = -1;
    detail::subnormal_operands_allowed.compare_exchange_strong(unknown, detected.fast_subnormal_operands ? 1 : 0);
    return detected;
  }();
  return features;
}

/// True when the CPU (and OS) can run code of tier `id`.
inline bool cpu_supports(IsaId id, const CpuFeatures& f = cpu_features()) noexcept {
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
  const bool avx512bf16 = avx512 && f.avx512_bf16 && f.avx512_vbmi;
  switch (id) {
    case IsaId::scalar: return true;
    case IsaId::avx2: return avx2;
    case IsaId::avx512: return avx512;
    case IsaId::avx512bf16: return avx512bf16;
    case IsaId::amx: return avx512bf16 && f.amx_tile && f.amx_bf16;
    case IsaId::amx_emulated: return avx2;  // the tile instructions run in software, on AVX2 + FMA
  }
  return false;
}

/// The highest tier the CPU supports (regardless of what this program was compiled with; never
/// amx_emulated).
inline IsaId cpu_best_isa(const CpuFeatures& f = cpu_features()) noexcept {
  IsaId best = IsaId::scalar;
  for (IsaId id : all_isas) {
    if (cpu_supports(id, f)) best = id;
  }
  return best;
}

}  // namespace pagedattn
