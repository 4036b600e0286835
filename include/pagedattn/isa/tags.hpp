// ISA tags (types that select a back-end at compile time) and IsaId (the same choice at run time).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace pagedattn {

/// Instruction-set tiers, ordered: each one's CPU requirements include the previous one's.
enum class IsaId : std::uint8_t {
  scalar = 0,  ///< Portable C++; always available.
  avx2 = 1,    ///< AVX2 + FMA + F16C.
  avx512 = 2,      ///< AVX-512 F/BW/DQ/VL (+ the avx2 set).
  avx512bf16 = 3,  ///< AVX512_BF16 and AVX512_VBMI (+ the avx512 set): bf16 pair dot products.
  amx = 4,         ///< AMX-TILE + AMX-BF16 (+ the avx512bf16 set), with the OS permission granted.
  /// The amx tier's kernels with every tile instruction run by pagedattn's software emulation
  /// (backend/amx/emulated_tiles.hpp) instead of the CPU: for testing the AMX code on CPUs without
  /// AMX. It needs only the avx2 set: its vector code (rows too few for tiles, softmax, cache
  /// writes) is the avx2 back-end's, with bf16 pair products done in FMA. Not a tier: best_isa()
  /// never picks it; ask for it by name.
  amx_emulated = 5,
};

/// Every tier, lowest first: what best_isa() chooses from (amx_emulated is not among them).
inline constexpr IsaId all_isas[] = {IsaId::scalar, IsaId::avx2, IsaId::avx512, IsaId::avx512bf16,
                                     IsaId::amx};

/// Every IsaId: the tiers, then amx_emulated.
inline constexpr IsaId all_isa_ids[] = {IsaId::scalar, IsaId::avx2,       IsaId::avx512,
                                        IsaId::avx512bf16, IsaId::amx, IsaId::amx_emulated};

namespace isa {
/// Compile-time tag for IsaId::scalar.
struct scalar { static constexpr IsaId id = IsaId::scalar; };
/// Compile-time tag for IsaId::avx2.
struct avx2 { static constexpr IsaId id = IsaId::avx2; };
/// Compile-time tag for IsaId::avx512.
struct avx512 { static constexpr IsaId id = IsaId::avx512; };
/// Compile-time tag for IsaId::avx512bf16.
struct avx512bf16 { static constexpr IsaId id = IsaId::avx512bf16; };
/// Compile-time tag for IsaId::amx.
struct amx { static constexpr IsaId id = IsaId::amx; };
/// Compile-time tag for IsaId::amx_emulated.
struct amx_emulated { static constexpr IsaId id = IsaId::amx_emulated; };
}  // namespace isa

/// Satisfied by the ISA tag types in pagedattn::isa.
template <class T>
concept IsaTag = requires {
  { T::id } -> std::convertible_to<IsaId>;
};

/// Satisfied by tags whose vector code is the avx2 back-end's: avx2, and amx_emulated (the AMX
/// kernels on software tiles, which need no more than the avx2 set).
template <class T>
concept Avx2FamilyTag = IsaTag<T> && (T::id == IsaId::avx2 || T::id == IsaId::amx_emulated);

/// Satisfied by tags whose vector code is the avx512 back-end's: avx512, avx512bf16 and amx.
template <class T>
concept Avx512FamilyTag =
    IsaTag<T> && (T::id == IsaId::avx512 || T::id == IsaId::avx512bf16 || T::id == IsaId::amx);

/// Satisfied by tags whose vector kit multiplies bf16 pairs directly: avx512bf16 and amx with
/// AVX512_BF16's pair dot products (and VBMI's byte permutes), amx_emulated with FMA on the
/// pairs' halves.
template <class T>
concept Bf16DotTag =
    IsaTag<T> && (T::id == IsaId::avx512bf16 || T::id == IsaId::amx || T::id == IsaId::amx_emulated);

/// Satisfied by the tags whose kernels multiply in AMX tiles (amx natively, amx_emulated in
/// software): the back-end in backend/amx/ serves them.
template <class T>
concept AmxTag = IsaTag<T> && (T::id == IsaId::amx || T::id == IsaId::amx_emulated);

/// True when `id` is one of all_isa_ids (an IsaId cast from an arbitrary integer may be none).
constexpr bool is_isa_id(IsaId id) noexcept {
  for (IsaId known : all_isa_ids) {
    if (id == known) return true;
  }
  return false;
}

/// Lower-case name of `id` ("scalar", "avx2", "avx512", "avx512bf16", "amx", "amx_emulated"), or
/// "unknown" for a value that is no IsaId.
constexpr std::string_view isa_name(IsaId id) noexcept {
  switch (id) {
    case IsaId::scalar: return "scalar";
    case IsaId::avx2: return "avx2";
    case IsaId::avx512: return "avx512";
    case IsaId::avx512bf16: return "avx512bf16";
    case IsaId::amx: return "amx";
    case IsaId::amx_emulated: return "amx_emulated";
  }
  return "unknown";
}

/// The IsaId named `name` (as printed by isa_name), or nullopt.
constexpr std::optional<IsaId> parse_isa(std::string_view name) noexcept {
  for (IsaId id : all_isa_ids) {
    if (isa_name(id) == name) return id;
  }
  return std::nullopt;
}

/// Calls `f(tag)` with the tag type of `id`; returns what `f` returns.
/// Precondition: is_isa_id(id) (check_isa rejects other values); otherwise prints the value and
/// aborts rather than run any back-end.
template <class F>
constexpr decltype(auto) visit_isa(IsaId id, F&& f) {
  switch (id) {
    case IsaId::scalar: return f(isa::scalar{});
    case IsaId::avx2: return f(isa::avx2{});
    case IsaId::avx512: return f(isa::avx512{});
    case IsaId::avx512bf16: return f(isa::avx512bf16{});
    case IsaId::amx: return f(isa::amx{});
    case IsaId::amx_emulated: return f(isa::amx_emulated{});
  }
  std::fprintf(stderr, "pagedattn: visit_isa: isa = %u is not a known IsaId\n", static_cast<unsigned>(id));
  std::abort();
}

}  // namespace pagedattn
