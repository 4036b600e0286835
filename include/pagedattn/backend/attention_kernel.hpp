// The per-work-item attention algorithm (DESIGN.md section 3), written once for every ISA: load
// the scaled query tile, stream the KV range tile by tile through TileGemm (QK^T), RowSoftmax and
// TileGemm (P.V), then normalise into the output or store a partial for the reduction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/backend/kv_prefetcher.hpp"
#include "pagedattn/backend/row_softmax.hpp"
#include "pagedattn/backend/step_geometry.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/dispatch/attention_entry.hpp"
#include "pagedattn/gemm/tile_gemm.hpp"

namespace pagedattn::backend {

/// Attention kernel of ISA tier `Isa` for query type `Q` and cache type `CacheT`.
template <class Isa, class Q, class CacheT>
struct AttentionKernel {
  using gemm = TileGemm<Isa, CacheT>;
  using float_gemm = TileGemm<Isa, float>;
  using softmax = RowSoftmax<Isa>;
  /// The back-end step's geometry: tile shape and scratch (the plan was built with the same).
  using step = StepGeometry<Isa, Q, CacheT>;
  static constexpr TileShape shape = step::shape;
  static constexpr int tile_stride = shape.kv_tile_tokens;
  /// Tiles with at least this many rows widen each KV tile to floats once (TileGemm::widen_*)
  /// rather than converting it in every register block of rows, where gemm::widens says that
  /// pays; results are bit-identical.
  static constexpr int widen_min_rows = 16;
  /// Whether QK^T multiplies the bf16 queries as they are (TileGemm::qk_bf16), the scale applied
  /// to the sums: bf16 queries on a tier with bf16 pair dot products for this cache type. K is
  /// then never widened (only V is, where gemm::widens), and P.V of tiles not widened rounds the
  /// probabilities to bf16 for the same dot products (TileGemm::pv_bf16; the output is bf16).
  static constexpr bool dots_queries = std::is_same_v<Q, bf16_t> && gemm::dots_bf16_queries;
  /// Tokens widened (and multiplied) at a time: at most 32 KiB of floats, so that the widened part
  /// stays in L1 (sized on a 48 KiB L1d; on a 32 KiB one it fills L1, not re-measured) (128 tokens
  /// at head dim 64, 64 at 128, 32 at 256, 16 at 512); a multiple of kv_token_group.
  static constexpr int widen_part_tokens(int head_dim) noexcept {
    const int fit = (32 * 1024 / (static_cast<int>(sizeof(float)) * head_dim)) / kv_token_group * kv_token_group;
    // Copies, not references: binding the constants to std::clamp's const& would emit them as
    // symbols in every ISA's object (tests/check_isa_symbols.cmake).
    constexpr int lowest = kv_token_group, highest = shape.kv_tile_tokens;
    return fit < lowest ? lowest : (fit > highest ? highest : fit);
  }

  /// Rows, tokens and heads of a tile, and where its request's rows start. The rows are
  /// KV-head-major: lane l (KV head item.kv_head + l) holds rows [l * lane_rows, (l + 1) *
  /// lane_rows), token-major within the lane.
  struct TileRows {
    int lanes;        ///< KV heads.
    int lane_rows;    ///< Rows per KV head: tokens x heads.
    int rows;         ///< lanes x lane_rows.
    int heads;        ///< Query heads per token and KV head in the tile.
    int group;        ///< Query heads per KV head.
    std::int64_t query_start;  ///< First query row of the request.
    int q_len;        ///< Query tokens of the request.
    int seq_len;      ///< KV positions of the request.

    /// Query token (within the request) of tile row `row`.
    int token(const auto& item, int row) const noexcept { return item.token_begin + row % lane_rows / heads; }
    /// Query head (absolute) of tile row `row`.
    int query_head(const auto& item, int row) const noexcept {
      return lane_head(item, row / lane_rows, row % lane_rows % heads);
    }
    /// Query head (absolute) of head `h` (of `heads`) in lane `lane`.
    int lane_head(const auto& item, int lane, int h) const noexcept {
      return (item.kv_head + lane) * group + item.head_begin + h;
    }
  };

  /// Rows of `item`'s tile and its request's extents.
  template <class Item>
  static TileRows tile_rows(const detail::AttentionJob& job, const Item& item) noexcept {
    const detail::PlanData& plan = *job.plan;
    const auto r = static_cast<std::size_t>(item.request);
    TileRows t{};
    t.lanes = item.kv_head_end - item.kv_head;
    t.heads = item.head_end - item.head_begin;
    t.lane_rows = (item.token_end - item.token_begin) * t.heads;
    t.rows = t.lanes * t.lane_rows;
    t.group = plan.num_query_heads / plan.num_kv_heads;
    t.query_start = plan.query_start_loc[r];
    t.q_len = plan.query_start_loc[r + 1] - plan.query_start_loc[r];
    t.seq_len = plan.seq_lens[r];
    return t;
  }

  /// Whether a row whose online softmax ended at (`row_max`, `row_sum`) saw nothing: no visible
  /// position, or only -inf logits (exp gave 0 everywhere). A NaN it saw leaves row_sum NaN, so
  /// the row is not "nothing" and its output is NaN.
  static bool saw_nothing(float row_max, float row_sum) noexcept {
    return row_max == -std::numeric_limits<float>::infinity() && row_sum == 0.0f;
  }

  /// Scale that turns the products' values into the cache's true values.
  static float true_value_scale(float fp8_scale) noexcept {
    return (is_fp8_v<CacheT> ? fp8_scale : 1.0f) / gemm::value_scale;
  }

  /// Output row of (`token`, `head`).
  static Q* output_row(const detail::AttentionJob& job, std::int64_t token, int head) noexcept {
    return static_cast<Q*>(job.output) + token * job.output_token_stride + head * job.output_head_stride;
  }

  /// Writes `value * factor` (head_dim elements) as Q.
  static void store_row(Q* out, const float* value, float factor, int head_dim) noexcept {
    for (int d = 0; d < head_dim; ++d) out[d] = Q(value[d] * factor);
  }

  /// Writes head_dim zeros as Q.
  static void store_zero_row(Q* out, int head_dim) noexcept {
    for (int d = 0; d < head_dim; ++d) out[d] = Q(0.0f);
  }

  /// One KV tile: tokens [position, position + n) of the request, all in one block, starting at
  /// `offset` in it; n is a multiple of kv_token_group (tokens past kv_end are padding).
  struct KvTile {
    int position;
    int offset;
    int n;
    const CacheT* k_block;  ///< The block's K sub-block for this KV head.
    const CacheT* v_block;  ///< The block's V sub-block for this KV head.

    /// Index in k_block of the tile's first element.
    std::size_t key_first(int head_dim) const noexcept {
      return KvBlockLayout<CacheT>::key_index(head_dim, offset, 0);
    }
    /// Index in v_block of the tile's first element.
    std::size_t value_first(int block_size, int head_dim) const noexcept {
      return KvBlockLayout<CacheT>::value_index(block_size, head_dim, offset, 0);
    }
  };

  /// Byte distance from `from` to `to` (pointers into different blocks: no pointer subtraction).
  static std::ptrdiff_t bytes_between(const CacheT* from, const CacheT* to) noexcept {
    return static_cast<std::ptrdiff_t>(reinterpret_cast<std::uintptr_t>(to) - reinterpret_cast<std::uintptr_t>(from));
  }

  /// The tile starting at `position` (a multiple of kv_token_group) of a request whose block-table
  /// row is `block_row`, for KV head `kv_head`, ending by `kv_end` (rounded up to the group).
  static KvTile kv_tile(const detail::AttentionJob& job, const std::int32_t* block_row, int kv_head,
                        int kv_end, int position) noexcept {
    const detail::PlanData& plan = *job.plan;
    KvTile t{};
    t.position = position;
    t.offset = position % job.block_size;
    const int padded_end = (kv_end - position + kv_token_group - 1) / kv_token_group * kv_token_group;
    t.n = std::min({shape.kv_tile_tokens, job.block_size - t.offset, padded_end});
    if (position >= kv_end) return t;  // past the end: block_row[] may not exist
    const std::size_t sub_block = KvBlockLayout<CacheT>::sub_block_elements(job.block_size, plan.geometry.head_dim);
    const std::int64_t physical = block_row[position / job.block_size];
    t.k_block = static_cast<const CacheT*>(job.cache) +
                (physical * plan.num_kv_heads + kv_head) * 2 * static_cast<std::int64_t>(sub_block);
    t.v_block = t.k_block + sub_block;
    return t;
  }

  /// KV positions [lo, hi) a query row sees within a work item's range (64-bit: windows may be as
  /// large as INT32_MAX).
  struct VisibleRange {
    std::int64_t lo;  ///< First visible position.
    std::int64_t hi;  ///< One past the last.

    /// The range as lanes [lo, hi) of the tile of `n` lanes starting at `position`.
    std::pair<int, int> within(int position, int n) const noexcept {
      return {static_cast<int>(std::clamp<std::int64_t>(lo - position, 0, n)),
              static_cast<int>(std::clamp<std::int64_t>(hi - position, 0, n))};
    }
  };

  /// What the row of query position `p` sees of `item`'s KV range (causal mask and window).
  static VisibleRange visible_range(const detail::PlanData& plan, const WorkItem& item, bool causal, int p) noexcept {
    std::int64_t lo = item.kv_begin;
    if (plan.window_left >= 0) lo = std::max<std::int64_t>(lo, std::int64_t{p} - plan.window_left);
    std::int64_t hi = item.kv_end;
    if (causal) hi = std::min<std::int64_t>(hi, std::int64_t{p} + 1);
    if (plan.window_right >= 0) hi = std::min<std::int64_t>(hi, std::int64_t{p} + plan.window_right + 1);
    return {lo, hi};
  }

  /// Whether V of tile `kv` holds a non-finite element (NaN, or inf) at a tile position in
  /// [from, to) (for paired layouts also in the partner of a pair the range cuts: a superset).
  static bool any_non_finite_value(const KvTile& kv, int block_size, int head_dim, int from, int to) noexcept {
    if (from >= to) return false;
    using layout = KvBlockLayout<CacheT>;
    using bits_type = std::conditional_t<sizeof(CacheT) == 1, std::uint8_t,
                                         std::conditional_t<sizeof(CacheT) == 2, std::uint16_t, std::uint32_t>>;
    // A magnitude's bits above the largest finite one's: inf or NaN.
    constexpr auto magnitude_mask = [] {
      if constexpr (std::is_same_v<CacheT, float>) return bits_type{0x7FFFFFFFu};
      else return static_cast<bits_type>(CacheT::format::magnitude_mask);
    }();
    constexpr auto max_finite = [] {
      if constexpr (std::is_same_v<CacheT, float>) return bits_type{0x7F7FFFFFu};
      else return static_cast<bits_type>(CacheT::format::max_finite);
    }();
    const auto scan = [&](std::size_t first, std::size_t count) {
      const auto* bits = reinterpret_cast<const bits_type*>(kv.v_block + first);
      // The largest magnitude's bits: an unsigned maximum, which vectorises (a flag or-ed from
      // comparisons stayed scalar and held 5% of the AMX step's samples).
      bits_type largest = 0;
      for (std::size_t i = 0; i < count; ++i) largest = std::max(largest, static_cast<bits_type>(bits[i] & magnitude_mask));
      return largest > max_finite;
    };
    const int first = kv.offset + from, last = kv.offset + to;  // block positions [first, last)
    if constexpr (layout::paired) {
      // Each 16-dim strip holds the block's positions as pairs of 32 elements.
      const std::size_t begin = layout::value_index(block_size, head_dim, first / 2 * 2, 0);
      const std::size_t end = layout::value_index(block_size, head_dim, (last + 1) / 2 * 2 - 2, 0) + 32;
      const std::size_t strip = layout::value_index(block_size, head_dim, 0, 16);
      bool found = false;
      for (int d = 0; d < head_dim; d += 16) found |= scan(begin + d / 16 * strip, end - begin);
      return found;
    } else {
      const std::size_t begin = layout::value_index(block_size, head_dim, first, 0);
      return scan(begin, layout::value_index(block_size, head_dim, last - 1, 0) + head_dim - begin);
    }
  }

  /// acc[d] += value_scale * sum_{t in [lo, hi)} p[t] * V[t][d] over tile `kv`'s positions, in
  /// scalar order: the exact sum of a row over only the positions it sees.
  static void accumulate_values(const KvTile& kv, int block_size, int head_dim, const float* p, int lo, int hi,
                                float* acc) noexcept {
    for (int t = lo; t < hi; ++t) {
      const float weight = p[t] * gemm::value_scale;
      for (int d = 0; d < head_dim; ++d) {
        acc[d] += weight * to_float(kv.v_block[KvBlockLayout<CacheT>::value_index(block_size, head_dim, kv.offset + t, d)]);
      }
    }
  }

  /// Prefetch cursor over tile `kv`'s K and V lines (nothing past the item's KV range).
  static KvPrefetcher<Isa, CacheT> prefetcher(const KvTile& kv, int kv_end, int block_size, int head_dim) noexcept {
    if (kv.position >= kv_end) return {};
    return {kv.k_block, kv.v_block, block_size, head_dim, kv.offset, kv.n};
  }

  /// Runs one work item (see WorkItem) as worker `worker`, in its scratch of the job's workspace
  /// (laid out by step::geometry).
  static void run_item(const detail::AttentionJob& job, const WorkItem& item, std::size_t worker) noexcept {
    const detail::PlanData& plan = *job.plan;
    const int head_dim = plan.geometry.head_dim;
    const TileGeometry geometry = step::geometry(head_dim);
    const WorkerScratch& layout = geometry.worker;
    std::byte* scratch = job.workspace + geometry.worker_offset(worker);
    const TileScratch step_scratch = TileScratch::in(scratch, layout);
    float* q_tile = reinterpret_cast<float*>(scratch + layout.query);
    bf16_t* q_pairs = reinterpret_cast<bf16_t*>(scratch + layout.query);  // dots_queries: the same region
    float* acc = reinterpret_cast<float*>(scratch + layout.acc);
    float* scores = reinterpret_cast<float*>(scratch + layout.scores);
    float* row_max = reinterpret_cast<float*>(scratch + layout.row_max);
    float* row_sum = reinterpret_cast<float*>(scratch + layout.row_sum);
    float* kv_floats = reinterpret_cast<float*>(scratch + layout.kv_tile);
    const TileRows tile = tile_rows(job, item);
    const int r = item.request;
    const bool causal = plan.causal[static_cast<std::size_t>(r)] != 0;
    const float q_multiplier = job.scale * true_value_scale(job.k_scale);
    // bf16 queries are multiplied as they are: the softmax applies their scale to the sums.
    const float logit_scale = dots_queries ? q_multiplier : 1.0f;

    for (int row = 0; row < tile.rows; ++row) {
      const Q* q = static_cast<const Q*>(job.query) +
                   (tile.query_start + tile.token(item, row)) * job.query_token_stride +
                   static_cast<std::int64_t>(tile.query_head(item, row)) * job.query_head_stride;
      if constexpr (dots_queries) {
        std::memcpy(static_cast<void*>(q_pairs + row * head_dim), q, sizeof(Q) * static_cast<std::size_t>(head_dim));
      } else {
        for (int d = 0; d < head_dim; ++d) q_tile[row * head_dim + d] = to_float(q[d]) * q_multiplier;
      }
      row_max[row] = -std::numeric_limits<float>::infinity();
      row_sum[row] = 0.0f;
    }
    std::memset(static_cast<void*>(acc), 0, sizeof(float) * static_cast<std::size_t>(tile.rows) * static_cast<std::size_t>(head_dim));

    const std::int32_t* block_row = job.block_table + static_cast<std::int64_t>(r) * job.block_table_stride;
    // Tiles in order (position, lane): each block's sub-blocks of the item's KV heads one after
    // the other, in address order.
    const auto tile_at = [&](int position, int lane) {
      return kv_tile(job, block_row, item.kv_head + lane, item.kv_end, position);
    };
    // Decode streams every byte from memory, and a block's runs are too short for the hardware
    // prefetcher to ramp up: the first tile is prefetched at once, each later one while the tile
    // before it runs (two or three tiles ahead measured no better).
    const int lane_rows = tile.lane_rows;
    // A lane's rows are its tokens' heads: row row0 + k * heads + h is head h of token k.
    const int lane_tokens = lane_rows / tile.heads;
    // KV position of the lane's token k (the same in every lane).
    const auto token_position = [&](int k) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
      return tile.seq_len - tile.q_len + item.token_begin + k;
    };
    // Where the step multiplies whole tiles (AMX), nothing is widened: it converts what it needs.
    const bool in_tiles = dots_queries && gemm::uses_tiles(lane_rows, head_dim);
    const bool widen = !in_tiles && gemm::widens && lane_rows >= widen_min_rows;
    const bool widen_keys = widen && !dots_queries;
    const int part = widen_part_tokens(head_dim);
    int lane = 0;
    if (in_tiles) gemm::begin(step_scratch);  // the step's tiles (AMX): set up once per item
    KvTile kv = tile_at(item.kv_begin / kv_token_group * kv_token_group, lane);
    prefetcher(kv, item.kv_end, job.block_size, head_dim).issue(std::numeric_limits<std::size_t>::max());
    while (kv.position < item.kv_end) {
      const int next_lane = lane + 1 < tile.lanes ? lane + 1 : 0;
      const KvTile next = tile_at(next_lane != 0 ? kv.position : kv.position + kv.n, next_lane);
      const int position = kv.position, n = kv.n;
      // Positions [lo, hi) of this tile that the lane's token k sees.
      const auto token_range = [&](int k) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
        return visible_range(plan, item, causal, token_position(k)).within(position, n);
      };
      const int valid = std::min(n, item.kv_end - position);
      const int row0 = lane * lane_rows;  // the lane's first row
      const float* lane_q_tile = q_tile + row0 * head_dim;
      const bf16_t* lane_q_pairs = q_pairs + row0 * head_dim;
      float* lane_acc = acc + row0 * head_dim;
      float* lane_scores = scores + row0 * tile_stride;
      // Many rows (widened tiles): the next tile's lines are hinted a few after each register
      // block of the float products, spread evenly over the tile.
      KvPrefetcher<Isa, CacheT> ahead = widen ? prefetcher(next, item.kv_end, job.block_size, head_dim)
                                         : KvPrefetcher<Isa, CacheT>{};
      std::size_t lines_per_hook = 0;
      if (widen) {
        std::size_t hooks = 0;
        for (int t = 0; t < n; t += part) {
          if (widen_keys) hooks += static_cast<std::size_t>(float_gemm::qk_blocks(lane_rows, head_dim, std::min(part, n - t)));
          if (t < valid) hooks += static_cast<std::size_t>(float_gemm::pv_blocks(lane_rows, head_dim, std::min(part, valid - t)));
        }
        lines_per_hook = (ahead.lines() + hooks - 1) / hooks;  // hooks >= 1: valid >= 1
      }
      const auto prefetch_some = [&]() PAGEDATTN_ALWAYS_INLINE_LAMBDA { ahead.issue(lines_per_hook); };
      if (widen_keys) {
        for (int t = 0; t < n; t += part) {
          const int m = std::min(part, n - t);
          gemm::widen_keys(kv.k_block, head_dim, kv.offset + t, m, kv_floats);
          float_gemm::qk(lane_q_tile, lane_rows, head_dim, kv_floats, head_dim, 0, m, lane_scores + t, tile_stride, 0,
                         prefetch_some);
        }
      } else {
        // K not widened: the next tile's K bytes are hinted alongside this tile's loads.
        const std::ptrdiff_t ahead_bytes =
            next.position < item.kv_end
                ? bytes_between(kv.k_block + kv.key_first(head_dim), next.k_block + next.key_first(head_dim))
                : 0;
        if constexpr (dots_queries) {
          gemm::qk_bf16(lane_q_pairs, lane_rows, head_dim, kv.k_block, head_dim, kv.offset, n, 1.0f, lane_scores,
                        tile_stride, step_scratch, ahead_bytes);
        } else {
          gemm::qk(lane_q_tile, lane_rows, head_dim, kv.k_block, head_dim, kv.offset, n, lane_scores, tile_stride,
                   ahead_bytes);
        }
      }
      // Positions [0, valid) of the tile that every row of the lane sees: [common_lo, common_hi).
      bool any_visible = false;
      int common_lo = 0, common_hi = valid;
      for (int k = 0; k < lane_tokens; ++k) {
        const auto [lane_lo, lane_hi] = token_range(k);
        any_visible = any_visible || lane_lo < lane_hi;
        common_lo = std::max(common_lo, lane_lo);
        common_hi = std::min(common_hi, lane_hi);
      }
      // A position some row of the lane cannot see meets that row in P.V with probability 0; a
      // non-finite V there would make it NaN (0 x NaN, 0 x inf). Where the lane's V holds one at
      // such a position, each row sums exactly the positions it sees instead.
      const bool exact_rows = any_visible && (common_lo > 0 || common_hi < valid) &&
                              (common_lo >= common_hi ? any_non_finite_value(kv, job.block_size, head_dim, 0, valid)
                                                      : any_non_finite_value(kv, job.block_size, head_dim, 0, common_lo) ||
                                                            any_non_finite_value(kv, job.block_size, head_dim, common_hi, valid));
      // P.V of bf16 pair products (not widened, not row by row) takes the probabilities as the
      // softmax rounds them, in the step's probs rows.
      bf16_t* lane_probs = dots_queries && any_visible && !widen && !exact_rows ? step_scratch.probs : nullptr;
      for (int k = 0; k < lane_tokens; ++k) {
        const auto [lane_lo, lane_hi] = token_range(k);
        const float alibi_base = static_cast<float>(position - token_position(k));
        for (int h = 0; h < tile.heads; ++h) {
          const int row = row0 + k * tile.heads + h;
          const float slope = job.alibi_slopes != nullptr ? job.alibi_slopes[tile.lane_head(item, lane, h)] : 0.0f;
          const float correction = softmax::update(
              scores + row * tile_stride, n, lane_lo, lane_hi, logit_scale, job.softcap, slope, alibi_base,
              row_max[row], row_sum[row], lane_probs != nullptr ? lane_probs + (row - row0) * tile_stride : nullptr);
          if (correction != 1.0f) {
            float* acc_row = acc + row * head_dim;
            for (int d = 0; d < head_dim; ++d) acc_row[d] *= correction;
          }
        }
      }
      if (exact_rows) {
        for (int k = 0; k < lane_tokens; ++k) {
          const auto [lane_lo, lane_hi] = token_range(k);
          for (int h = 0; h < tile.heads; ++h) {
            const int row = row0 + k * tile.heads + h;
            accumulate_values(kv, job.block_size, head_dim, scores + row * tile_stride, lane_lo, lane_hi,
                              acc + row * head_dim);
          }
        }
      } else if (any_visible && widen) {
        // Parts in token order: each acc element sees the same sequence of products as in one call.
        for (int t = 0; t < valid; t += part) {
          const int m = std::min(part, n - t);
          gemm::widen_values(kv.v_block, job.block_size, head_dim, kv.offset + t, m, kv_floats);
          float_gemm::pv(lane_scores + t, lane_rows, tile_stride, kv_floats, m, head_dim, 0, std::min(m, valid - t),
                         lane_acc, head_dim, 0, prefetch_some);
        }
      } else if (any_visible) {
        const std::ptrdiff_t ahead_bytes =
            next.position < item.kv_end ? bytes_between(kv.v_block + kv.value_first(job.block_size, head_dim),
                                                        next.v_block + next.value_first(job.block_size, head_dim))
                                        : 0;
        if constexpr (dots_queries) {
          gemm::pv_bf16(lane_probs, lane_rows, tile_stride, kv.v_block, job.block_size, head_dim, kv.offset, valid,
                        lane_acc, head_dim, step_scratch, ahead_bytes);
        } else {
          gemm::pv(lane_scores, lane_rows, tile_stride, kv.v_block, job.block_size, head_dim, kv.offset, valid,
                   lane_acc, head_dim, ahead_bytes);
        }
      }
      ahead.issue(std::numeric_limits<std::size_t>::max());  // what is left (nothing was visible)
      kv = next;
      lane = next_lane;
    }
    if (in_tiles) gemm::end(step_scratch);

    if (item.partial < 0) {
      const float value_factor = true_value_scale(job.v_scale);
      for (int row = 0; row < tile.rows; ++row) {
        const int head = tile.query_head(item, row);
        Q* out = output_row(job, tile.query_start + tile.token(item, row), head);
        const float m = row_max[row];
        if (saw_nothing(m, row_sum[row])) {  // (sink or not)
          store_zero_row(out, head_dim);
          continue;
        }
        float sum = row_sum[row];  // NaN inputs stay NaN
        float acc_factor = 1.0f;
        if (job.sinks != nullptr) {
          const float top = std::fmax(m, job.sinks[head]);
          acc_factor = std::exp(m - top);
          sum = sum * acc_factor + std::exp(job.sinks[head] - top);
        }
        store_row(out, acc + row * head_dim, acc_factor * value_factor / sum, head_dim);
      }
    } else {
      const PartialSlot& slot = geometry.partial;
      std::byte* base = job.workspace + geometry.partial_offset(plan.num_workers, static_cast<std::size_t>(item.partial));
      std::memcpy(base + slot.acc, acc, sizeof(float) * static_cast<std::size_t>(tile.rows * head_dim));
      std::memcpy(base + slot.row_max, row_max, sizeof(float) * static_cast<std::size_t>(tile.rows));
      std::memcpy(base + slot.row_sum, row_sum, sizeof(float) * static_cast<std::size_t>(tile.rows));
    }
  }

  /// Merges one reduction item's partial slots into the output, as worker `worker` (its scratch
  /// holds the merged row).
  static void run_reduction(const detail::AttentionJob& job, const ReductionItem& item, std::size_t worker) noexcept {
    const detail::PlanData& plan = *job.plan;
    const int head_dim = plan.geometry.head_dim;
    const TileGeometry geometry = step::geometry(head_dim);
    const PartialSlot& slot = geometry.partial;
    // One row's merged output: the first row of the worker's accumulators.
    float* merged = reinterpret_cast<float*>(job.workspace + geometry.worker_offset(worker) + geometry.worker.acc);
    const TileRows tile = tile_rows(job, item);
    const float value_factor = true_value_scale(job.v_scale);
    const auto slot_floats = [&](int s, std::size_t offset) {
      return reinterpret_cast<const float*>(
          job.workspace + geometry.partial_offset(plan.num_workers, static_cast<std::size_t>(item.first_partial + s)) +
          offset);
    };
    for (int row = 0; row < tile.rows; ++row) {
      const int head = tile.query_head(item, row);
      Q* out = output_row(job, tile.query_start + tile.token(item, row), head);
      // The row's output is zero when no slot saw anything (as in one unsplit item).
      float top = -std::numeric_limits<float>::infinity();
      bool saw_something = false;
      for (int s = 0; s < item.num_partials; ++s) {
        top = std::fmax(top, slot_floats(s, slot.row_max)[row]);
        saw_something = saw_something || !saw_nothing(slot_floats(s, slot.row_max)[row], slot_floats(s, slot.row_sum)[row]);
      }
      if (!saw_something) {
        store_zero_row(out, head_dim);
        continue;
      }
      float sum = 0.0f;
      if (job.sinks != nullptr) {
        top = std::fmax(top, job.sinks[head]);
        sum = std::exp(job.sinks[head] - top);
      }
      // Accumulate in the output row's order of slots (fixed: deterministic).
      for (int d = 0; d < head_dim; ++d) merged[d] = 0.0f;
      for (int s = 0; s < item.num_partials; ++s) {
        // A slot whose visible logits were all -inf (or that saw nothing) weighs 0, as its
        // positions would in one item (its accumulators may still carry a NaN it saw).
        const float partial_max = slot_floats(s, slot.row_max)[row];
        const float partial_sum = slot_floats(s, slot.row_sum)[row];
        const float weight = partial_max == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(partial_max - top);
        sum += partial_sum * weight;
        const float* partial_acc = slot_floats(s, slot.acc) + row * head_dim;
        for (int d = 0; d < head_dim; ++d) merged[d] += partial_acc[d] * weight;
      }
      store_row(out, merged, value_factor / sum, head_dim);
    }
  }
};

}  // namespace pagedattn::backend
