// Must NOT compile: paged_attention with a plan of AttentionTraits<bf16_t, bf16_t, 128, isa::scalar>
// and a cache (or query) of another element type, or run as the traits of another ISA (the plan's
// tiles and workspace are that ISA's). plan_traits_match.cpp is the same call with matching types.
#include <cstddef>
#include <span>

#include "pagedattn/attention/paged_attention.hpp"
#include "pagedattn/attention/traits.hpp"
#include "pagedattn/exec/serial_executor.hpp"

#if !defined(PAGEDATTN_TEST_CACHE_ELEMENT)
/// Cache element type of the call: fp8_e4m3_t here (the mismatch); the control sets bf16_t.
#define PAGEDATTN_TEST_CACHE_ELEMENT pagedattn::fp8_e4m3_t
#endif
#if !defined(PAGEDATTN_TEST_RUN_ISA)
/// ISA tag of the traits the call runs as (the plan's isa::scalar unless a test sets another).
#define PAGEDATTN_TEST_RUN_ISA pagedattn::isa::scalar
#endif
#if !defined(PAGEDATTN_TEST_QUERY_ELEMENT)
/// Query element type of the call (the plan's bf16_t unless a test sets another).
#define PAGEDATTN_TEST_QUERY_ELEMENT pagedattn::bf16_t
#endif

namespace pagedattn::compile_check {

/// The plan's traits.
using Traits = AttentionTraits<bf16_t, bf16_t, 128, isa::scalar>;

/// Calls paged_attention with the plan above and the element types chosen by the macros.
void call_paged_attention(const AttentionPlan<Traits>& plan, const AttentionBatch& batch,
                          TokenHeadsView<const PAGEDATTN_TEST_QUERY_ELEMENT> query,
                          const KvCacheView<const PAGEDATTN_TEST_CACHE_ELEMENT, 128>& cache,
                          const BlockTableView& block_table, TokenHeadsView<bf16_t> output,
                          const AttentionParams& params, std::span<std::byte> workspace) {
  SerialExecutor executor;
  paged_attention<AttentionTraits<bf16_t, bf16_t, 128, PAGEDATTN_TEST_RUN_ISA>>(plan, batch, query, cache, block_table, output,
                                                                              params, workspace, executor);
}

}  // namespace pagedattn::compile_check
