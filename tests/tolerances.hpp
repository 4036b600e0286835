// The error bars of the attention tests: the largest absolute difference allowed between a
// paged_attention output and the float64 oracle, per (query type, cache type). The only copy.
#pragma once

#include <type_traits>

#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::test {

/// Largest |output - reference| allowed for query/output type `Q` and cache type `CacheT`, with
/// unit-variance inputs. FP8 caches are judged against the oracle run on the dequantised cache
/// (what the cache holds), so their bar covers only the kernels' arithmetic, not quantisation.
///  - float queries on a float cache: 1e-4;
///  - bf16 or fp16 queries/caches: 8e-3 (bf16 output rounding alone is up to 3.9e-3 for |x| < 2);
///  - FP8 caches (any query type): 8e-3.
template <class Q, class CacheT>
constexpr double tolerance() {
  static_assert(std::is_same_v<Q, float> || std::is_same_v<Q, bf16_t> || std::is_same_v<Q, fp16_t>,
                "query type must be float, bf16_t or fp16_t");
  static_assert(std::is_same_v<Q, CacheT> || is_fp8_v<CacheT>,
                "cache type must be the query type or an FP8 type");
  if constexpr (std::is_same_v<Q, float> && std::is_same_v<CacheT, float>) {
    return 1e-4;
  } else if constexpr (is_fp8_v<CacheT>) {
    return 8e-3;
  } else {
    return 8e-3;
  }
}

}  // namespace pagedattn::test
