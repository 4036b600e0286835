// Definitions of the attention entry points: pick the kernel for the job's element types and run
// one work item or reduction. Included where an ISA's code is compiled (see entry_points_impl.hpp).
#pragma once

#include <type_traits>

#include "pagedattn/attention/traits.hpp"
#include "pagedattn/backend/attention_kernel.hpp"
#include "pagedattn/backend/kernels.hpp"
#include "pagedattn/core/float_environment.hpp"
#include "pagedattn/dispatch/attention_entry.hpp"

namespace pagedattn::detail {

/// Calls `f(kernel_tag)` with AttentionKernel<Isa, Q, CacheT> for the job's element types.
template <class Isa, class F>
void with_attention_kernel(const AttentionJob& job, F&& f) noexcept {
  visit_dtype(job.query_type, [&]<class Q>(std::type_identity<Q>) {
    visit_dtype(job.cache_type, [&]<class CacheT>(std::type_identity<CacheT>) {
      if constexpr (CacheTypeFor<Q, CacheT>) {
        f(std::type_identity<backend::AttentionKernel<Isa, Q, CacheT>>{});
      }
    });
  });
}

#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
template <class Isa, class Q, class CacheT>
void run_attention_item(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the worker's MXCSR
  backend::AttentionKernel<Isa, Q, CacheT>::run_item(job, job.plan->work_items[item], worker);
}

template <class Isa, class Q, class CacheT>
void run_attention_reduction(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the worker's MXCSR
  backend::AttentionKernel<Isa, Q, CacheT>::run_reduction(job, job.plan->reductions[item], worker);
}
#endif

template <class Isa>
void run_attention_item(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the worker's MXCSR
  with_attention_kernel<Isa>(job, [&]<class Kernel>(std::type_identity<Kernel>) {
    Kernel::run_item(job, job.plan->work_items[item], worker);
  });
}

template <class Isa>
void run_attention_reduction(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  const DefaultFloatEnvironment float_environment;  // results independent of the worker's MXCSR
  with_attention_kernel<Isa>(job, [&]<class Kernel>(std::type_identity<Kernel>) {
    Kernel::run_reduction(job, job.plan->reductions[item], worker);
  });
}

}  // namespace pagedattn::detail
