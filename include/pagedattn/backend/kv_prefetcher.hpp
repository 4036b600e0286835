// KvPrefetcher: walks the cache lines of one KV tile (its K run and V runs, per KvBlockLayout) and
// hints them into L2 a few at a time, so that fetching the next tile overlaps the current tile's
// arithmetic instead of stalling on a burst that fills every line-fill buffer.
#pragma once

#include <array>
#include <cstddef>

#include "pagedattn/backend/cache_line.hpp"
#include "pagedattn/config.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"

namespace pagedattn::backend {

/// Prefetch cursor over tokens [token_begin, token_begin + tokens) of one (block, KV head).
/// Templated on the ISA tag that compiles it (distinct symbols per ISA).
template <class Isa, class CacheT>
class KvPrefetcher {
 public:
  /// Bytes per hinted line.
  static constexpr std::size_t line_bytes = cache_line_bytes;

  /// Nothing to prefetch.
  KvPrefetcher() = default;

  /// The K and V lines of tokens [token_begin, token_begin + tokens) (multiples of
  /// kv_token_group) of the sub-blocks `k_block` and `v_block` (block_size tokens, head_dim dims).
  KvPrefetcher(const CacheT* k_block, const CacheT* v_block, int block_size, int head_dim,
               int token_begin, int tokens) noexcept {
    KvBlockLayout<CacheT>::for_each_token_run(
        block_size, head_dim, token_begin, tokens,
        [&](std::size_t first, std::size_t count, bool is_value) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          runs_[static_cast<std::size_t>(run_count_++)] = {
              reinterpret_cast<const char*>((is_value ? v_block : k_block) + first), count * sizeof(CacheT)};
          lines_ += (count * sizeof(CacheT) + line_bytes - 1) / line_bytes;
        });
  }

  /// Lines of the tile (a run's partial lines count whole).
  std::size_t lines() const noexcept { return lines_; }

  /// Lines hinted so far.
  std::size_t issued() const noexcept { return issued_; }

  /// Hints the next `count` lines (fewer when the tile runs out) into L2. Never dereferences.
  PAGEDATTN_ALWAYS_INLINE void issue(std::size_t count) noexcept {
    for (; count > 0 && run_ < run_count_; --count) {
      const Run& r = runs_[static_cast<std::size_t>(run_)];
      __builtin_prefetch(r.bytes + offset_, 0, 2);
      ++issued_;
      offset_ += line_bytes;
      if (offset_ >= r.bytes_count) {
        ++run_;
        offset_ = 0;
      }
    }
  }

 private:
  struct Run {
    const char* bytes = nullptr;
    std::size_t bytes_count = 0;
  };
  /// One K run plus at most one V run per 16 dims (KvBlockLayout::for_each_token_run).
  std::array<Run, 1 + max_head_dim / 16> runs_{};
  int run_count_ = 0;
  int run_ = 0;
  std::size_t offset_ = 0;
  std::size_t lines_ = 0;
  std::size_t issued_ = 0;
};

}  // namespace pagedattn::backend
