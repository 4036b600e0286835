// Which ISA back-ends this program contains, which one runs (best_isa), and the switch from a
// run-time IsaId to a compile-time tag that only instantiates back-ends that exist.
//
// Two build modes:
//  - static (default): the back-ends are those the translation unit's compiler flags enable
//    (e.g. -march=native); everything is inline.
//  - runtime dispatch (PAGEDATTN_RUNTIME_DISPATCH, set by the CMake helper
//    pagedattn_add_runtime_dispatch): each ISA's code lives in its own translation unit compiled
//    with that ISA's flags; PAGEDATTN_DISPATCH_<ISA> says which were added.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "pagedattn/core/error.hpp"
#include "pagedattn/isa/cpu_features.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn {

/// True when the current translation unit's compiler flags enable the instructions of `id`.
constexpr bool isa_enabled_by_flags(IsaId id) noexcept {
  constexpr bool avx2 =
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
      true;
#else
      false;
#endif
  constexpr bool avx512 = avx2 &&
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
                          true;
#else
                          false;
#endif
  constexpr bool avx512bf16 = avx512 &&
#if defined(__AVX512BF16__) && defined(__AVX512VBMI__)
                              true;
#else
                              false;
#endif
  // GCC spells the AMX macros __AMX_TILE__/__AMX_BF16__, Clang __AMXTILE__/__AMXBF16__.
  constexpr bool amx = avx512bf16 &&
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
                       true;
#else
                       false;
#endif
  switch (id) {
    case IsaId::scalar: return true;
    case IsaId::avx2: return avx2;
    case IsaId::avx512: return avx512;
    case IsaId::avx512bf16: return avx512bf16;
    case IsaId::amx: return amx;
    case IsaId::amx_emulated: return avx512bf16;  // no AMX instruction is used
  }
  return false;
}

/// True when code for `id` is part of this program (see the modes above; in static builds
/// amx_emulated only with PAGEDATTN_ENABLE_AMX_EMULATION defined).
constexpr bool isa_compiled(IsaId id) noexcept {
#if defined(PAGEDATTN_RUNTIME_DISPATCH)
  switch (id) {
    case IsaId::scalar: return true;
#if defined(PAGEDATTN_DISPATCH_AVX2)
    case IsaId::avx2: return true;
#endif
#if defined(PAGEDATTN_DISPATCH_AVX512)
    case IsaId::avx512: return true;
#endif
#if defined(PAGEDATTN_DISPATCH_AVX512BF16)
    case IsaId::avx512bf16: return true;
#endif
#if defined(PAGEDATTN_DISPATCH_AMX)
    case IsaId::amx: return true;
#endif
#if defined(PAGEDATTN_DISPATCH_AMX_EMULATED)
    case IsaId::amx_emulated: return true;
#endif
    default: return false;
  }
#else
  // The emulation is opt-in in static builds (a test tool; runtime dispatch adds it by name).
#if defined(PAGEDATTN_ENABLE_AMX_EMULATION)
  constexpr bool emulation = true;
#else
  constexpr bool emulation = false;
#endif
  return isa_enabled_by_flags(id) && (id != IsaId::amx_emulated || emulation);
#endif
}

namespace detail {
/// The cap set by the environment variable PAGEDATTN_MAX_ISA (e.g. "avx2"), read once.
inline std::optional<IsaId> isa_cap_from_environment() noexcept {
  static const std::optional<IsaId> cap = []() -> std::optional<IsaId> {
    const char* value = std::getenv("PAGEDATTN_MAX_ISA");
    if (value == nullptr || *value == '\0') return std::nullopt;
    const std::optional<IsaId> parsed = parse_isa(value);
    if (!parsed) {
      std::fprintf(stderr,
                   "pagedattn: PAGEDATTN_MAX_ISA = '%s' is not one of scalar, avx2, avx512, avx512bf16, amx, "
                   "amx_emulated; ignored\n",
                   value);
    }
    return parsed;
  }();
  return cap;
}
}  // namespace detail

/// True when `id` may run here: compiled into this program, supported by the CPU, and not above
/// the environment variable PAGEDATTN_MAX_ISA when that is set (amx_emulated counts as above amx).
inline bool isa_available(IsaId id) noexcept {
  const std::optional<IsaId> cap = detail::isa_cap_from_environment();
  return isa_compiled(id) && cpu_supports(id) && (!cap || id <= *cap);
}

/// The highest available tier (see isa_available). This is what the library runs by default.
inline IsaId best_isa() noexcept {
  IsaId best = IsaId::scalar;
  for (IsaId id : all_isas) {
    if (isa_available(id)) best = id;
  }
  return best;
}

/// ok() when `id` is available (see isa_available); otherwise an Errc::unsupported status saying
/// why.
inline Status check_isa(IsaId id) {
  if (!isa_compiled(id)) {
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              "not compiled into this program (build with matching -march flags "
                              "or add it with pagedattn_add_runtime_dispatch)");
  }
  if (!cpu_supports(id)) {
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              "this CPU (or its operating system) does not support it");
  }
  if (!isa_available(id)) {
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              "above the limit set by the environment variable PAGEDATTN_MAX_ISA");
  }
  return {};
}

/// Calls `f(tag)` with the tag of `id`, instantiating `f` only for compiled ISAs.
/// Precondition: isa_compiled(id) (check_isa(id).ok() before running code).
template <class F>
void dispatch_isa(IsaId id, F&& f) {
  visit_isa(id, [&]<class Tag>(Tag tag) {
    if constexpr (isa_compiled(Tag::id)) f(tag);
  });
}

}  // namespace pagedattn
