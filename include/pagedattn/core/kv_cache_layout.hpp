// The KV-cache element order inside one block (format version 1): the single owner of where K[t][d]
// and V[t][d] of a block live. The same order serves every ISA, so a cache written on one CPU reads
// correctly on any other. Layout change = format change: bump kv_cache_format_version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pagedattn/config.hpp"

namespace pagedattn {

/// Version of the KV-cache block format below; bumped on any change of element order.
inline constexpr int kv_cache_format_version = 1;

/// Tokens per K group: block sizes must be multiples of this.
inline constexpr int kv_token_group = 16;

/// Element order of one (block, KV head) of a cache of `CacheT` elements. The cache tensor is
/// `[num_blocks][num_kv_heads][2][block_size * head_dim]`: the K sub-block, then the V sub-block.
/// 1- and 2-byte types store pairs (the AMX bf16 B-tile order; one 64-byte load on AVX-512):
///   K: `[block_size/16][head_dim/2][16 tokens][2 dims]`
///   V: `[head_dim/16][block_size/2][16 dims][2 tokens]`
/// fp32 skips the pairing:
///   K: `[block_size/16][head_dim][16 tokens]`,  V: `[block_size][head_dim]`
/// Preconditions everywhere: block_size % 16 == 0, head_dim % 16 == 0, 0 <= token < block_size,
/// 0 <= dim < head_dim.
template <class CacheT>
struct KvBlockLayout {
  /// True when consecutive dims (K) or tokens (V) are stored as pairs.
  static constexpr bool paired = sizeof(CacheT) < 4;

  /// Elements in one K or V sub-block.
  static constexpr std::size_t sub_block_elements(int block_size, int head_dim) noexcept {
    return static_cast<std::size_t>(block_size) * static_cast<std::size_t>(head_dim);
  }

  /// Index of K[token][dim] inside a K sub-block.
  static constexpr std::size_t key_index(int head_dim, int token, int dim) noexcept {
    const std::size_t group_base = static_cast<std::size_t>(token / kv_token_group) *
                                   kv_token_group * static_cast<std::size_t>(head_dim);
    const std::size_t lane = static_cast<std::size_t>(token % kv_token_group);
    if constexpr (paired) {
      return group_base + static_cast<std::size_t>(dim / 2) * (2 * kv_token_group) + lane * 2 +
             static_cast<std::size_t>(dim % 2);
    } else {
      return group_base + static_cast<std::size_t>(dim) * kv_token_group + lane;
    }
  }

  /// Index of V[token][dim] inside a V sub-block.
  static constexpr std::size_t value_index(int block_size, int head_dim, int token,
                                           int dim) noexcept {
    if constexpr (paired) {
      return static_cast<std::size_t>(dim / 16) * static_cast<std::size_t>(block_size) * 16 +
             static_cast<std::size_t>(token / 2) * 32 + static_cast<std::size_t>(dim % 16) * 2 +
             static_cast<std::size_t>(token % 2);
    } else {
      return static_cast<std::size_t>(token) * static_cast<std::size_t>(head_dim) +
             static_cast<std::size_t>(dim);
    }
  }

  /// Calls `f(first, count)` for each contiguous run of elements holding K and V of tokens
  /// [token_begin, token_begin + tokens) (both multiples of kv_token_group) in one sub-block pair:
  /// K's run is relative to the K sub-block, V's runs to the V sub-block (`f(first, count, is_value)`).
  template <class F>
  PAGEDATTN_ALWAYS_INLINE static void for_each_token_run(int block_size, int head_dim, int token_begin,
                                                         int tokens, F&& f) noexcept {
    const auto d = static_cast<std::size_t>(head_dim);
    const auto t0 = static_cast<std::size_t>(token_begin);
    const auto n = static_cast<std::size_t>(tokens);
    f(t0 * d, n * d, false);
    if constexpr (paired) {
      for (std::size_t group = 0; group < d / 16; ++group) {
        f(group * static_cast<std::size_t>(block_size) * 16 + t0 * 16, n * 16, true);
      }
    } else {
      f(t0 * d, n * d, true);
    }
  }
};

}  // namespace pagedattn
