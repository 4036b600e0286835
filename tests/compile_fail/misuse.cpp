// Must not compile (tests/CMakeLists.txt builds it once per case): API misuse that would dangle or
// swap sizes. PAGEDATTN_TEST_CASE selects the misuse; 0 is the control, which must compile.
#include <cstdint>
#include <vector>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/paged_attention.hpp"

#if !defined(PAGEDATTN_TEST_CASE)
/// The control: the same statements in their correct form.
#define PAGEDATTN_TEST_CASE 0
#endif

namespace pagedattn::compile_check {

/// Fills `batch` and returns a block table, in the form the case selects.
BlockTableView misuse(AttentionBatch& batch, const std::vector<std::int32_t>& named, const std::int32_t* table) {
#if PAGEDATTN_TEST_CASE == 1
  batch.seq_lens = std::vector<std::int32_t>{1, 2};  // a temporary: would dangle
#elif PAGEDATTN_TEST_CASE == 2
  batch.query_start_loc = {0, 1, 2};  // an initializer list: would dangle
#else
  batch.seq_lens = named;
  batch.query_start_loc = named;
#endif
#if PAGEDATTN_TEST_CASE == 3
  return BlockTableView{table, 2, 4, 4};  // positional sizes: easy to swap
#else
  return BlockTableView::row_major(table, 2, 4);
#endif
}

}  // namespace pagedattn::compile_check
