// Control for plan_traits_mismatch.cpp: the same source with the cache type matching the plan's
// traits. It is built with the normal build, so the mismatch tests fail only on the types.
#define PAGEDATTN_TEST_CACHE_ELEMENT pagedattn::bf16_t
#define PAGEDATTN_TEST_QUERY_ELEMENT pagedattn::bf16_t
#include "plan_traits_mismatch.cpp"
