// The cache line as the back-ends assume it: the unit of their prefetches and streaming stores.
#pragma once

#include <cstddef>

namespace pagedattn::backend {

/// Bytes of a cache line (64 on the x86-64 cores the back-ends target).
inline constexpr std::size_t cache_line_bytes = 64;

}  // namespace pagedattn::backend
