// Body of one runtime-dispatch translation unit: defines every entry point for the ISA named by
// PAGEDATTN_DISPATCH_ISA (scalar, avx2, avx512, avx512bf16, amx or
// amx_emulated). pagedattn_add_runtime_dispatch
// generates one such file per ISA and compiles it with that ISA's flags; users do not include it.
#pragma once

#if !defined(PAGEDATTN_DISPATCH_ISA)
#error "define PAGEDATTN_DISPATCH_ISA (one of scalar, avx2, avx512, avx512bf16, amx, amx_emulated) before including this file"
#endif

#include "pagedattn/dispatch/attention_entry_impl.hpp"
#include "pagedattn/dispatch/entry_points_impl.hpp"
#include "pagedattn/dispatch/gemm_entry_impl.hpp"

namespace pagedattn::detail {

/// The tier this translation unit instantiates.
using instantiated_isa = isa::PAGEDATTN_DISPATCH_ISA;
static_assert(isa_enabled_by_flags(instantiated_isa::id),
              "this translation unit is not compiled with the flags of its ISA");

template void run_scaled_conversion<instantiated_isa>(const ScaledConversion&) noexcept;
template void run_cache_write<instantiated_isa>(const CacheWrite&) noexcept;
template void run_attention_item<instantiated_isa>(const AttentionJob&, std::size_t, std::size_t) noexcept;
template void run_attention_reduction<instantiated_isa>(const AttentionJob&, std::size_t, std::size_t) noexcept;
template void run_gemm_item<instantiated_isa>(const GemmJob&, std::size_t, std::size_t) noexcept;

}  // namespace pagedattn::detail
