// read_cache_token: reads one cached token's K and V back as floats (dequantised), for engines that
// swap, migrate or inspect caches; the inverse of what reshape_and_cache stores for one slot.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/float_checks.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/minifloat.hpp"

namespace pagedattn {

/// Checks the arguments of read_cache_token (same meaning): "slot" in [0, num_blocks *
/// block_size) (Errc::out_of_range), "kv_head" in [0, num_kv_heads) (Errc::out_of_range),
/// "key.size()" and "value.size()" 0 or cache.head_dim() (Errc::size_mismatch), and for FP8 caches
/// "k_scale" / "v_scale" positive and finite.
template <class T, int HeadDim>
Status validate_read_cache_token(const KvCacheView<T, HeadDim>& cache, std::int64_t slot, int kv_head,
                                 std::span<float> key, std::span<float> value, float k_scale = 1.0f,
                                 float v_scale = 1.0f) {
  using detail::make_error;
  const std::int64_t num_slots = cache.num_blocks() * cache.block_size();
  if (slot < 0 || slot >= num_slots) {
    return make_error(Errc::out_of_range, "slot", slot,
                      "must be in [0, num_blocks * block_size = " + std::to_string(num_slots) + ")");
  }
  if (kv_head < 0 || kv_head >= cache.num_kv_heads()) {
    return make_error(Errc::out_of_range, "kv_head", kv_head,
                      "must be in [0, num_kv_heads = " + std::to_string(cache.num_kv_heads()) + ")");
  }
  for (const auto& [out, name] : {std::pair{key, "key.size()"}, std::pair{value, "value.size()"}}) {
    if (!out.empty() && out.size() != static_cast<std::size_t>(cache.head_dim())) {
      return make_error(Errc::size_mismatch, name, out.size(),
                        "must be 0 (skip) or the head dim " + std::to_string(cache.head_dim()));
    }
  }
  if constexpr (is_fp8_v<std::remove_const_t<T>>) {
    for (const auto& [scale, name] : {std::pair{k_scale, "k_scale"}, std::pair{v_scale, "v_scale"}}) {
      if (!detail::is_positive_finite(scale)) {
        return make_error(Errc::invalid_argument, name, scale, "must be positive and finite for an FP8 cache");
      }
    }
  }
  return {};
}

/// Reads K and V of cache slot `slot` (`physical_block * block_size + offset`, the numbering of
/// reshape_and_cache's slot_mapping) for KV head `kv_head`: key[d] = float(K[d]) * k_scale and
/// value[d] = float(V[d]) * v_scale for FP8 caches (the values attention uses), float(K[d]) and
/// float(V[d]) exactly for other caches (scales ignored, any value). `key` / `value`:
/// cache.head_dim() floats, or empty to skip. Throws Error (nothing written) for what validate_read_cache_token
/// reports. Reads the cache only; safe alongside concurrent readers.
template <class T, int HeadDim>
void read_cache_token(const KvCacheView<T, HeadDim>& cache, std::int64_t slot, int kv_head, std::span<float> key,
                      std::span<float> value, float k_scale = 1.0f, float v_scale = 1.0f) {
  detail::throw_if_error(validate_read_cache_token(cache, slot, kv_head, key, value, k_scale, v_scale));
  using element = std::remove_const_t<T>;
  using layout = KvBlockLayout<element>;
  const std::int64_t block = slot / cache.block_size();
  const int offset = static_cast<int>(slot % cache.block_size());
  const float key_factor = is_fp8_v<element> ? k_scale : 1.0f;
  const float value_factor = is_fp8_v<element> ? v_scale : 1.0f;
  const T* key_block = cache.key_block(block, kv_head);
  const T* value_block = cache.value_block(block, kv_head);
  for (std::size_t d = 0; d < key.size(); ++d) {
    key[d] = static_cast<float>(key_block[layout::key_index(cache.head_dim(), offset, static_cast<int>(d))]) * key_factor;
  }
  for (std::size_t d = 0; d < value.size(); ++d) {
    value[d] = static_cast<float>(value_block[layout::value_index(cache.block_size(), cache.head_dim(), offset, static_cast<int>(d))]) *
               value_factor;
  }
}

}  // namespace pagedattn
