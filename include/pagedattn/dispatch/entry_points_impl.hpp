// Definitions of the per-ISA entry points. Included where an ISA's code is compiled: by
// dispatch/instantiate.hpp in runtime-dispatch builds, by the public headers in static builds.
#pragma once

#include <type_traits>

#include "pagedattn/backend/kernels.hpp"
#include "pagedattn/dispatch/entry_points.hpp"

namespace pagedattn::detail {

template <class Isa>
void run_scaled_conversion(const ScaledConversion& job) noexcept {
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

}  // namespace pagedattn::detail
