// Definitions of the per-ISA entry points. Included where an ISA's code is compiled: by
// dispatch/instantiate.hpp in runtime-dispatch builds, by the public headers in static builds.
#pragma once

#include <type_traits>

#include "pagedattn/backend/kernels.hpp"
#include "pagedattn/core/float_environment.hpp"
#include "pagedattn/dispatch/entry_points.hpp"

namespace pagedattn::detail {

template <class Isa>
void run_scaled_conversion(const ScaledConversion& job) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the caller's MXCSR
  visit_dtype(job.from, [&]<class From>(std::type_identity<From>) {
    visit_dtype(job.to, [&]<class To>(std::type_identity<To>) {
      if constexpr (is_fp8_v<From> != is_fp8_v<To>) {
        backend::Fp8Converter<Isa>::template run<From, To>(
            static_cast<const From*>(job.input), static_cast<To*>(job.output), job.count,
            job.scale);
      }
    });
  });
}

template <class Isa>
void run_cache_write(const CacheWrite& job) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the caller's MXCSR
  visit_dtype(job.input_type, [&]<class InputT>(std::type_identity<InputT>) {
    visit_dtype(job.cache_type, [&]<class CacheT>(std::type_identity<CacheT>) {
      if constexpr (!is_fp8_v<InputT> && (std::is_same_v<InputT, CacheT> || is_fp8_v<CacheT>)) {
        const backend::CacheWriteArgs<InputT, CacheT> args{
            static_cast<const InputT*>(job.key), job.key_token_stride, job.key_head_stride,
            static_cast<const InputT*>(job.value), job.value_token_stride, job.value_head_stride,
            job.slot_mapping, job.num_tokens, static_cast<CacheT*>(job.cache), job.num_kv_heads,
            job.block_size, job.head_dim, job.k_scale, job.v_scale};
        backend::CacheWriter<Isa>::template run<InputT, CacheT>(args);
      }
    });
  });
}

}  // namespace pagedattn::detail
