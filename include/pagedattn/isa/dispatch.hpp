// Which ISA back-ends this program contains, which one runs (best_isa, under the caps of
// set_isa_cap and PAGEDATTN_MAX_ISA), and the switch from a run-time IsaId to a compile-time tag
// that only instantiates back-ends that exist.
//
// Two build modes:
//  - static (default): the back-ends are those the translation unit's compiler flags enable
//    (e.g. -march=native); everything is inline.
//  - runtime dispatch (PAGEDATTN_RUNTIME_DISPATCH, set by the CMake helper
//    pagedattn_add_runtime_dispatch): each ISA's code lives in its own translation unit compiled
//    with that ISA's flags; PAGEDATTN_DISPATCH_<ISA> says which were added.
#pragma once

#include <atomic>
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
    case IsaId::amx_emulated: return avx2;  // no AMX instruction is used; the vector code is avx2's
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
/// The cap set by the environment variable PAGEDATTN_MAX_ISA (e.g. "avx2"): read once per
/// process, at the first call (later changes to the environment are not seen).
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

/// The cap set with set_isa_cap: -1 for none, else the IsaId's value.
inline std::atomic<int>& programmatic_isa_cap() noexcept {
  static std::atomic<int> cap{-1};
  return cap;
}

/// The cap in force and what set it.
struct IsaCapInForce {
  std::optional<IsaId> cap;  ///< Highest IsaId that may run; nullopt = no cap.
  bool from_set_isa_cap;     ///< True: set_isa_cap set it; false: PAGEDATTN_MAX_ISA (or none).

  /// True when the cap keeps `id` from running.
  [[nodiscard]] bool excludes(IsaId id) const noexcept { return cap && id > *cap; }
};

/// set_isa_cap's cap when one is set, else the environment's.
inline IsaCapInForce isa_cap_in_force() noexcept {
  const int programmatic = programmatic_isa_cap().load(std::memory_order_acquire);
  if (programmatic >= 0) return {static_cast<IsaId>(programmatic), true};
  return {isa_cap_from_environment(), false};
}

/// "not a known IsaId (0 scalar, 1 avx2, ...)": the requirement an IsaId value failed.
inline std::string unknown_isa_id_requirement() {
  std::string requirement = "not a known IsaId (";
  for (IsaId id : all_isa_ids) {
    if (id != all_isa_ids[0]) requirement += ", ";
    requirement += std::to_string(static_cast<int>(id)) + " " + std::string(isa_name(id));
  }
  return requirement + ")";
}
}  // namespace detail

/// Caps the ISAs that may run (isa_available, best_isa, check_isa, and so every default
/// `isa` argument) at `cap` (amx_emulated counts as above amx), for the whole process; nullopt
/// removes this cap. While set, it replaces the environment variable PAGEDATTN_MAX_ISA's cap (it
/// may lift it as well as lower it); once removed, that variable's cap applies again. Meant for
/// tests and tools. Schedulers and plans made earlier keep their ISA: running one above a new
/// cap fails check_isa. Thread-safe (an atomic). Throws Error (Errc::invalid_argument, nothing
/// changes) when `cap` holds a value that is no IsaId (see is_isa_id).
inline void set_isa_cap(std::optional<IsaId> cap) {
  if (cap && !is_isa_id(*cap)) {
    detail::throw_if_error(
        detail::make_error(Errc::invalid_argument, "cap", *cap, detail::unknown_isa_id_requirement()));
  }
  detail::programmatic_isa_cap().store(cap ? static_cast<int>(*cap) : -1, std::memory_order_release);
}

/// The cap set with set_isa_cap, or nullopt when none is (PAGEDATTN_MAX_ISA's is not reported
/// here). Thread-safe.
inline std::optional<IsaId> isa_cap() noexcept {
  const int cap = detail::programmatic_isa_cap().load(std::memory_order_acquire);
  if (cap < 0) return std::nullopt;
  return static_cast<IsaId>(cap);
}

/// True when `id` may run here: a known IsaId (is_isa_id), compiled into this program, supported
/// by the CPU, and not above the cap in force (amx_emulated counts as above amx): set_isa_cap's
/// when set, else the environment variable PAGEDATTN_MAX_ISA's (read once per process, at the
/// first call), else none.
inline bool isa_available(IsaId id) noexcept {
  return is_isa_id(id) && isa_compiled(id) && cpu_supports(id) && !detail::isa_cap_in_force().excludes(id);
}

/// The highest available tier (see isa_available). This is what the library runs by default.
inline IsaId best_isa() noexcept {
  IsaId best = IsaId::scalar;
  for (IsaId id : all_isas) {
    if (isa_available(id)) best = id;
  }
  return best;
}

/// ok() when `id` is available (see isa_available). Otherwise a Status naming "isa" and saying
/// why: Errc::invalid_argument for a value that is no IsaId ("isa = 9: not a known IsaId ..."),
/// Errc::unsupported for one not compiled in, not supported by the CPU, or above the cap (the
/// message names what set the cap: set_isa_cap or the environment variable PAGEDATTN_MAX_ISA).
inline Status check_isa(IsaId id) {
  if (!is_isa_id(id)) {
    return detail::make_error(Errc::invalid_argument, "isa", id, detail::unknown_isa_id_requirement());
  }
  if (!isa_compiled(id)) {
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              "not compiled into this program (build with matching -march flags "
                              "or add it with pagedattn_add_runtime_dispatch)");
  }
  if (!cpu_supports(id)) {
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              "this CPU (or its operating system) does not support it");
  }
  const detail::IsaCapInForce limit = detail::isa_cap_in_force();
  if (limit.excludes(id)) {
    const std::string cap_name(isa_name(*limit.cap));
    return detail::make_error(Errc::unsupported, "isa", isa_name(id),
                              limit.from_set_isa_cap
                                  ? "above the limit set by set_isa_cap(" + cap_name + ")"
                                  : "above the limit set by the environment variable "
                                    "PAGEDATTN_MAX_ISA = " + cap_name);
  }
  return {};
}

/// Calls `f(tag)` with the tag of `id`, instantiating `f` only for compiled ISAs.
/// Precondition: isa_compiled(id) (check_isa(id).ok() before running code); a value that is no
/// IsaId aborts (visit_isa), a known one not compiled in calls nothing.
template <class F>
void dispatch_isa(IsaId id, F&& f) {
  visit_isa(id, [&]<class Tag>(Tag tag) {
    if constexpr (isa_compiled(Tag::id)) f(tag);
  });
}

}  // namespace pagedattn
