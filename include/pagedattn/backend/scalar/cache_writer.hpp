// Scalar reshape_and_cache: the readable reference every vector back-end must match byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pagedattn/backend/cache_writer.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Scalar specialisation: element by element, placed with KvBlockLayout's key_index/value_index.
template <>
struct CacheWriter<isa::scalar> {
  /// See the primary template.
  template <class InputT, class CacheT>
  static void run(const CacheWriteArgs<InputT, CacheT>& args) noexcept {
    using Layout = KvBlockLayout<CacheT>;
    for (std::size_t token = 0; token < args.num_tokens; ++token) {
      const std::int64_t slot = args.slot_mapping[token];
      if (slot < 0) continue;  // padding
      const std::int64_t block = slot / args.block_size;
      const int offset = static_cast<int>(slot % args.block_size);
      for (int head = 0; head < args.num_kv_heads; ++head) {
        const InputT* key = args.key_row(token, head);
        const InputT* value = args.value_row(token, head);
        CacheT* key_block = args.key_block(block, head);
        CacheT* value_block = args.value_block(block, head);
        for (int dim = 0; dim < args.head_dim; ++dim) {
          key_block[Layout::key_index(args.head_dim, offset, dim)] =
              to_cache<InputT, CacheT>(key[dim], args.k_scale);
          value_block[Layout::value_index(args.block_size, args.head_dim, offset, dim)] =
              to_cache<InputT, CacheT>(value[dim], args.v_scale);
        }
      }
    }
  }

 private:
  /// The stored form of `x`: CacheT(float(x) / scale) for FP8 caches, `x` itself otherwise.
  template <class InputT, class CacheT>
  static CacheT to_cache(InputT x, float scale) noexcept {
    if constexpr (is_fp8_v<CacheT>) {
      return CacheT(to_float(x) / scale);
    } else {
      static_assert(std::is_same_v<InputT, CacheT>);
      return x;
    }
  }
};

}  // namespace pagedattn::backend
