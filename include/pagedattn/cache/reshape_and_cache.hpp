// reshape_and_cache: stores new tokens' keys and values into the paged KV cache (quantizing to
// FP8 where the cache is FP8) on the best ISA or a chosen one; validate_reshape_and_cache checks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pagedattn/attention/traits.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/dispatch/entry_points.hpp"
#include "pagedattn/fp8/scaled_convert.hpp"
#include "pagedattn/isa/dispatch.hpp"
#if !defined(PAGEDATTN_RUNTIME_DISPATCH)
#include "pagedattn/dispatch/entry_points_impl.hpp"
#endif

namespace pagedattn {

/// Satisfied when keys of `KeyT` and values of `ValueT` (each possibly const) can be stored in a
/// cache of `CacheT`: both have the same input type (float, bf16_t or fp16_t) and `CacheT` is
/// that type or an FP8 type (the CacheTypeFor rule; a const `CacheT` is rejected).
template <class KeyT, class ValueT, class CacheT>
concept CacheWritable = std::is_same_v<std::remove_const_t<KeyT>, std::remove_const_t<ValueT>> &&
                        CacheTypeFor<std::remove_const_t<KeyT>, CacheT>;

/// Checks the arguments of reshape_and_cache (same meaning) without writing anything; returns
/// the first problem as a Status naming the argument and its value, in this order:
///  - `key`, then `value`: validate_token_heads with num_kv_heads = cache.num_kv_heads() and
///    head_dim = cache.head_dim() (argument "key.num_heads", "value.head_dim", ...);
///    "value.num_tokens" must equal key.num_tokens;
///  - "slot_mapping.size()" must equal key.num_tokens;
///  - "k_scale", "v_scale": positive and finite (check_scale), for every cache type;
///  - "isa": runnable here (check_isa);
///  - "slot_mapping[i]": below cache.num_blocks() * cache.block_size() (Errc::out_of_range;
///    any negative slot means "skip token i"), and no slot written by two tokens (a duplicate
///    is an error, Errc::invalid_argument, naming the later token).
/// O(num_tokens) when the non-negative slots increase (prefill); else O(n log n) with one
/// temporary allocation.
template <class CacheT, int HeadDim, class KeyT, class ValueT>
  requires CacheWritable<KeyT, ValueT, CacheT>
Status validate_reshape_and_cache(TokenHeadsView<KeyT> key, TokenHeadsView<ValueT> value,
                                  std::span<const std::int64_t> slot_mapping,
                                  KvCacheView<CacheT, HeadDim> cache, float k_scale = 1.0f,
                                  float v_scale = 1.0f, IsaId isa = best_isa()) {
  using detail::make_error;
  const std::int64_t heads = cache.num_kv_heads();
  if (Status status = validate_token_heads(key, "key", heads, cache.head_dim()); !status.ok()) return status;
  if (Status status = validate_token_heads(value, "value", heads, cache.head_dim()); !status.ok()) {
    return status;
  }
  if (value.num_tokens != key.num_tokens) {
    return make_error(Errc::size_mismatch, "value.num_tokens", value.num_tokens,
                      "must equal key.num_tokens = " + std::to_string(key.num_tokens));
  }
  if (slot_mapping.size() != static_cast<std::uint64_t>(key.num_tokens)) {
    return make_error(Errc::size_mismatch, "slot_mapping.size()", slot_mapping.size(),
                      "must equal key.num_tokens = " + std::to_string(key.num_tokens));
  }
  if (Status status = check_scale(k_scale, "k_scale"); !status.ok()) return status;
  if (Status status = check_scale(v_scale, "v_scale"); !status.ok()) return status;
  if (Status status = check_isa(isa); !status.ok()) return status;

  // Cannot overflow: the cache's element count (a multiple of this) fits in 64 bits.
  const std::int64_t num_slots = cache.num_blocks() * cache.block_size();
  bool increasing = true;
  std::int64_t previous = -1;
  for (std::size_t i = 0; i < slot_mapping.size(); ++i) {
    const std::int64_t slot = slot_mapping[i];
    if (slot < 0) continue;
    if (slot >= num_slots) {
      return make_error(Errc::out_of_range, "slot_mapping[" + std::to_string(i) + "]", slot,
                        "must be below num_blocks * block_size = " + std::to_string(num_slots) +
                            " (a negative slot skips the token)");
    }
    increasing = increasing && slot > previous;
    previous = slot;
  }
  if (!increasing) {
    std::vector<std::pair<std::int64_t, std::size_t>> sorted;  // (slot, token), slot >= 0
    sorted.reserve(slot_mapping.size());
    for (std::size_t i = 0; i < slot_mapping.size(); ++i) {
      if (slot_mapping[i] >= 0) sorted.emplace_back(slot_mapping[i], i);
    }
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i].first == sorted[i - 1].first) {
        return make_error(Errc::invalid_argument,
                          "slot_mapping[" + std::to_string(sorted[i].second) + "]",
                          sorted[i].first,
                          "duplicates slot_mapping[" + std::to_string(sorted[i - 1].second) +
                              "] (each slot may be written by at most one token per call)");
      }
    }
  }
  return {};
}

/// Stores the keys and values of `key.num_tokens` new tokens into the paged KV cache `cache`.
/// `key`, `value`: `[num_tokens][cache.num_kv_heads()][cache.head_dim()]` of float, bf16_t or fp16_t
///   (the same type; views may be const or not), any token and head strides, last dim contiguous.
/// `slot_mapping[i]`: where token i goes, `physical_block * block_size + offset`; any negative
///   value skips token i (padding). Two tokens may not share a slot (that is an error, not
///   "last one wins").
/// `cache`: `CacheT` is the input type (values copied bit for bit; `k_scale` and `v_scale` must
///   still be positive and finite but are not applied) or fp8_e4m3_t / fp8_e5m2_t (stored
///   `CacheT(float(x) / k_scale)` for K and `CacheT(float(x) / v_scale)` for V: round to nearest
///   even, saturating, NaN stays NaN, whatever the caller's MXCSR, exactly like quantize()).
///   Elements land where KvBlockLayout<CacheT> says; nothing else in the cache is written.
/// `isa`: the back-end to run (default best_isa()); every ISA writes the same bytes.
/// Throws Error (nothing written) for any problem validate_reshape_and_cache reports.
/// Preconditions: key and value do not overlap the cache; the cache memory is not accessed
/// concurrently by another writer of the same blocks.
template <class CacheT, int HeadDim, class KeyT, class ValueT>
  requires CacheWritable<KeyT, ValueT, CacheT>
void reshape_and_cache(TokenHeadsView<KeyT> key, TokenHeadsView<ValueT> value,
                       std::span<const std::int64_t> slot_mapping,
                       KvCacheView<CacheT, HeadDim> cache, float k_scale = 1.0f,
                       float v_scale = 1.0f, IsaId isa = best_isa()) {
  detail::throw_if_error(
      validate_reshape_and_cache(key, value, slot_mapping, cache, k_scale, v_scale, isa));
  if (key.num_tokens == 0) return;
  using InputT = std::remove_const_t<KeyT>;
  const detail::CacheWrite job{dtype_of<InputT>,
                               dtype_of<CacheT>,
                               key.data,
                               key.token_stride,
                               key.head_stride,
                               value.data,
                               value.token_stride,
                               value.head_stride,
                               slot_mapping.data(),
                               slot_mapping.size(),
                               cache.data(),
                               cache.num_kv_heads(),
                               cache.block_size(),
                               cache.head_dim(),
                               k_scale,
                               v_scale};
  dispatch_isa(isa, [&]<class Tag>(Tag) { detail::run_cache_write<Tag>(job); });
}

}  // namespace pagedattn
