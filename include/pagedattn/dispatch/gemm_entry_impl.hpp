// Definitions of the GEMM entry point: pick the kernel for the job's element types and run one
// work item. Included where an ISA's code is compiled (see entry_points_impl.hpp).
#pragma once

#include <type_traits>

#include "pagedattn/backend/gemm_kernel.hpp"
#include "pagedattn/backend/kernels.hpp"
#include "pagedattn/core/float_environment.hpp"
#include "pagedattn/dispatch/gemm_entry.hpp"

namespace pagedattn::detail {

#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
template <class Isa, class X, class W, class Out>
void run_gemm_item(const GemmJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the caller's MXCSR
  backend::GemmKernel<Isa, X, W, Out>::run_item(job, item, worker);
}
#endif

template <class Isa>
void run_gemm_item(const GemmJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the caller's MXCSR
  visit_dtype(job.x_type, [&]<class X>(std::type_identity<X>) {
    visit_dtype(job.weight_type, [&]<class W>(std::type_identity<W>) {
      visit_dtype(job.out_type, [&]<class Out>(std::type_identity<Out>) {
        if constexpr (GemmElement<X> && PackedWeightType<W> && GemmElement<Out>) {
          backend::GemmKernel<Isa, X, W, Out>::run_item(job, item, worker);
        }
      });
    });
  });
}

}  // namespace pagedattn::detail
