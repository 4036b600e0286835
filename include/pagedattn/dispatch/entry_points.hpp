// Declarations of the per-ISA entry points: the only functions that cross from the caller's
// translation units into an ISA's code. In runtime-dispatch builds their definitions come from
// the translation units made by pagedattn_add_runtime_dispatch (dispatch/instantiate.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagedattn/core/dtype.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::detail {

/// A validated scaled conversion between an FP8 type and float/bf16/fp16 (see Fp8Converter).
struct ScaledConversion {
  DType from;          ///< Element type of `input`.
  DType to;            ///< Element type of `output`; exactly one of from/to is FP8.
  const void* input;   ///< `count` elements of `from`.
  void* output;        ///< `count` elements of `to`; must not overlap `input`.
  std::size_t count;   ///< Number of elements.
  float scale;         ///< Positive, finite.
};

/// Runs `job` with the kernels of tier `Isa`, under the default MXCSR whatever the caller's
/// (DefaultFloatEnvironment; the caller's is restored).
template <class Isa>
void run_scaled_conversion(const ScaledConversion& job) noexcept;

#if defined(PAGEDATTN_RUNTIME_DISPATCH)
extern template void run_scaled_conversion<isa::scalar>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::avx2>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::avx512>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::avx512bf16>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::amx>(const ScaledConversion&) noexcept;
extern template void run_scaled_conversion<isa::amx_emulated>(const ScaledConversion&) noexcept;
#endif

/// A validated reshape_and_cache call, type-erased (see backend::CacheWriter). Strides are in
/// elements; the cache is `[num_blocks][num_kv_heads][2][block_size * head_dim]` elements.
struct CacheWrite {
  DType input_type;                 ///< Element type of key and value (f32, bf16 or fp16).
  DType cache_type;                 ///< Cache element type: input_type or an FP8 type.
  const void* key;                  ///< Key element (0, 0, 0).
  std::int64_t key_token_stride;    ///< Elements between key tokens.
  std::int64_t key_head_stride;     ///< Elements between key heads.
  const void* value;                ///< Value element (0, 0, 0).
  std::int64_t value_token_stride;  ///< Elements between value tokens.
  std::int64_t value_head_stride;   ///< Elements between value heads.
  const std::int64_t* slot_mapping; ///< num_tokens slots: in range, distinct; negative = skip.
  std::size_t num_tokens;           ///< Tokens to store (> 0).
  void* cache;                      ///< First cache element.
  int num_kv_heads;                 ///< Heads per token and in the cache.
  int block_size;                   ///< Tokens per cache block.
  int head_dim;                     ///< Elements per head.
  float k_scale;                    ///< FP8 K scale (positive, finite; unused for other caches).
  float v_scale;                    ///< FP8 V scale (positive, finite; unused for other caches).
};

/// Runs `job` with the kernels of tier `Isa`, under the default MXCSR whatever the caller's
/// (DefaultFloatEnvironment; the caller's is restored).
template <class Isa>
void run_cache_write(const CacheWrite& job) noexcept;

#if defined(PAGEDATTN_RUNTIME_DISPATCH)
extern template void run_cache_write<isa::scalar>(const CacheWrite&) noexcept;
extern template void run_cache_write<isa::avx2>(const CacheWrite&) noexcept;
extern template void run_cache_write<isa::avx512>(const CacheWrite&) noexcept;
extern template void run_cache_write<isa::avx512bf16>(const CacheWrite&) noexcept;
extern template void run_cache_write<isa::amx>(const CacheWrite&) noexcept;
extern template void run_cache_write<isa::amx_emulated>(const CacheWrite&) noexcept;
#endif

}  // namespace pagedattn::detail
