// Declarations of the attention entry points (one attention task, one reduction) that cross from
// paged_attention into an ISA's code, and the type-erased job they receive.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/attention/plan.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::detail {

/// One validated paged_attention call, type-erased (element types as DType).
struct AttentionJob {
  DType query_type;                     ///< Query and output element type.
  DType cache_type;                     ///< Cache element type.
  const PlanData* plan;                 ///< The plan (batch copy, items, sizes).
  const void* query;                    ///< Query element (0, 0, 0).
  std::int64_t query_token_stride;      ///< Elements between query tokens.
  std::int64_t query_head_stride;       ///< Elements between query heads.
  void* output;                         ///< Output element (0, 0, 0).
  std::int64_t output_token_stride;     ///< Elements between output tokens.
  std::int64_t output_head_stride;      ///< Elements between output heads.
  const void* cache;                    ///< First cache element.
  int block_size;                       ///< Tokens per cache block.
  const std::int32_t* block_table;      ///< Block table entry (0, 0).
  std::int64_t block_table_stride;      ///< Elements between block-table rows.
  float scale;                          ///< Logit scale.
  float softcap;                        ///< Soft-cap (0 = off).
  const float* alibi_slopes;            ///< Per query head, or null.
  const float* sinks;                   ///< Per query head, or null.
  float k_scale;                        ///< K dequantisation scale (applied to FP8 caches only).
  float v_scale;                        ///< V dequantisation scale (applied to FP8 caches only).
  std::byte* workspace;                 ///< plan->workspace_bytes bytes, 64-byte aligned.
};

/// Runs work item `item` of the job's plan as worker `worker` (which owns scratch slot `worker`),
/// under the default MXCSR (DefaultFloatEnvironment; the thread's is restored), so the result
/// does not depend on which thread's floating-point settings it ran under.
template <class Isa>
void run_attention_item(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept;

/// Runs reduction item `item` of the job's plan as worker `worker` (in its scratch slot), under
/// the default MXCSR as run_attention_item.
template <class Isa>
void run_attention_reduction(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept;

/// run_attention_item for a job whose element types are Q and CacheT: with runtime dispatch the
/// compiled entry point above; otherwise only the kernel of (Isa, Q, CacheT) is instantiated (not
/// every type pair's), so a translation unit pays for the types it uses.
template <class Isa, class Q, class CacheT>
void run_attention_item(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept;

/// run_attention_reduction for a job whose element types are Q and CacheT (as run_attention_item).
template <class Isa, class Q, class CacheT>
void run_attention_reduction(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept;

#if defined(PAGEDATTN_RUNTIME_DISPATCH)
template <class Isa, class Q, class CacheT>
void run_attention_item(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  run_attention_item<Isa>(job, item, worker);
}

template <class Isa, class Q, class CacheT>
void run_attention_reduction(const AttentionJob& job, std::size_t item, std::size_t worker) noexcept {
  run_attention_reduction<Isa>(job, item, worker);
}

extern template void run_attention_item<isa::scalar>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_item<isa::avx2>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_item<isa::avx512>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_item<isa::avx512bf16>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_item<isa::amx>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_item<isa::amx_emulated>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::scalar>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::avx2>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::avx512>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::avx512bf16>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::amx>(const AttentionJob&, std::size_t, std::size_t) noexcept;
extern template void run_attention_reduction<isa::amx_emulated>(const AttentionJob&, std::size_t, std::size_t) noexcept;
#endif

}  // namespace pagedattn::detail
