// Scalar TileGemm: plain loops over KvBlockLayout indices; the readable reference for what every
// vector back-end's QK^T and P.V compute.
#pragma once

#include <cstddef>

#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/gemm/tile_gemm.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::backend {

/// Scalar loops, templated on the ISA tag that compiles them (distinct symbols per ISA).
template <class Isa, class CacheT>
struct ScalarTileGemm {
  using layout = KvBlockLayout<CacheT>;
  /// Values are used as stored.
  static constexpr float value_scale = 1.0f;
  /// See TileGemm::widens: each conversion is a call here, so every converted (paired) type's
  /// tiles of many rows convert once.
  static constexpr bool widens = layout::paired;
  /// See TileGemm::dots_bf16_queries: no qk_bf16 here.
  static constexpr bool dots_bf16_queries = false;
  /// See TileGemm::uses_tiles: no tiles here.
  static constexpr bool uses_tiles(int /*rows*/, int /*head_dim*/) noexcept { return false; }
  /// See TileGemm::begin: nothing to set up.
  static void begin(const TileScratch& /*scratch*/) noexcept {}
  /// See TileGemm::end: nothing to tear down.
  static void end(const TileScratch& /*scratch*/) noexcept {}

  /// See TileGemm::qk_blocks: one block a row.
  static constexpr int qk_blocks(int rows, int /*head_dim*/, int /*num_tokens*/) noexcept { return rows; }

  /// See TileGemm::pv_blocks: one block a token.
  static constexpr int pv_blocks(int /*rows*/, int /*head_dim*/, int num_tokens) noexcept { return num_tokens; }

  /// See TileGemm::qk.
  template <class AfterBlock = NoBlockHook>
  static void qk(const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                 int token_begin, int num_tokens, float* scores, int score_stride,
                 std::ptrdiff_t /*prefetch_bytes*/ = 0, AfterBlock&& after_block = {}) noexcept {
    for (int r = 0; r < rows; ++r) {
      for (int t = 0; t < num_tokens; ++t) {
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) {
          dot += q[r * q_stride + d] *
                 to_float(k_block[layout::key_index(head_dim, token_begin + t, d)]);
        }
        scores[r * score_stride + t] = dot;
      }
      after_block();
    }
  }

  /// See TileGemm::pv.
  template <class AfterBlock = NoBlockHook>
  static void pv(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size,
                 int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride,
                 std::ptrdiff_t /*prefetch_bytes*/ = 0, AfterBlock&& after_block = {}) noexcept {
    for (int t = 0; t < num_tokens; ++t) {
      for (int d = 0; d < head_dim; ++d) {
        const float v = to_float(v_block[layout::value_index(block_size, head_dim, token_begin + t, d)]);
        for (int r = 0; r < rows; ++r) acc[r * acc_stride + d] += p[r * p_stride + t] * v;
      }
      after_block();
    }
  }

  /// See TileGemm::widen_keys.
  static void widen_keys(const CacheT* k_block, int head_dim, int token_begin, int num_tokens,
                         float* k_tile) noexcept {
    for (int t = 0; t < num_tokens; ++t) {
      for (int d = 0; d < head_dim; ++d) {
        k_tile[KvBlockLayout<float>::key_index(head_dim, t, d)] =
            to_float(k_block[layout::key_index(head_dim, token_begin + t, d)]);
      }
    }
  }

  /// See TileGemm::widen_values.
  static void widen_values(const CacheT* v_block, int block_size, int head_dim, int token_begin,
                           int num_tokens, float* v_tile) noexcept {
    for (int t = 0; t < num_tokens; ++t) {
      for (int d = 0; d < head_dim; ++d) {
        v_tile[KvBlockLayout<float>::value_index(num_tokens, head_dim, t, d)] =
            to_float(v_block[layout::value_index(block_size, head_dim, token_begin + t, d)]);
      }
    }
  }
};

/// Scalar specialisation (see the primary template for the contract).
template <class CacheT>
struct TileGemm<isa::scalar, CacheT> : ScalarTileGemm<isa::scalar, CacheT> {};

}  // namespace pagedattn::backend
