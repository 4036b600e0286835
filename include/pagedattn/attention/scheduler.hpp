// AttentionScheduler: turns a batch shape into an AttentionPlan (work items, splits, reductions,
// workspace size) for one layer group. Cheap enough to run every step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/geometry.hpp"
#include "pagedattn/attention/plan.hpp"
#include "pagedattn/attention/traits.hpp"
#include "pagedattn/core/checked_size.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/isa/dispatch.hpp"

namespace pagedattn {

/// Validates scheduler options: num_workers >= 1; split_tokens a positive multiple of 16 when the
/// policy is SplitPolicy::fixed, and 0 or a positive multiple of 16 otherwise.
inline Status validate_scheduler_options(const SchedulerOptions& options) {
  using detail::make_error;
  if (options.num_workers == 0) {
    return make_error(Errc::invalid_argument, "num_workers", options.num_workers,
                      "must be at least 1");
  }
  if (options.split_policy != SplitPolicy::automatic && options.split_policy != SplitPolicy::off &&
      options.split_policy != SplitPolicy::fixed) {
    return make_error(Errc::invalid_argument, "split_policy", options.split_policy,
                      "must be SplitPolicy::automatic, off or fixed");
  }
  if (options.split_policy == SplitPolicy::fixed) {
    if (options.split_tokens <= 0 || options.split_tokens % 16 != 0) {
      return make_error(Errc::invalid_argument, "split_tokens", options.split_tokens,
                        "must be a positive multiple of 16 with SplitPolicy::fixed");
    }
  } else if (options.split_tokens < 0 || options.split_tokens % 16 != 0) {
    return make_error(Errc::invalid_argument, "split_tokens", options.split_tokens,
                      "must be 0 or a positive multiple of 16");
  }
  return {};
}

/// Planning rules shared by every AttentionScheduler (public so tests and tools can read them).
struct SchedulingRules {
  /// Shortest piece SplitPolicy::automatic ever makes, in KV positions.
  static constexpr std::int64_t min_split_tokens = 512;
  /// Granularity of automatic cut points: every cut is an absolute KV position that is a multiple
  /// of this (the 16-token K group; block sizes are multiples of it too).
  static constexpr std::int64_t split_alignment = 16;
  /// SplitPolicy::automatic aims at this many tasks per worker.
  static constexpr std::uint64_t tasks_per_worker = 2;
  /// Cost of a work item, used to order work items longest first:
  /// (kv_end - kv_begin) * (rows per KV head + cost_row_constant) * KV heads (of the tile's
  /// largest KV-head chunk). The constant stands for the per-position work that does not scale
  /// with the rows (loading and converting K and V).
  static constexpr std::int64_t cost_row_constant = 16;
  /// Most work items a plan may hold (2^22, about 168 MB of plan): a batch needing more (huge
  /// head counts, very fine fixed splits of long contexts) is refused before anything is allocated.
  static constexpr std::uint64_t max_work_items = std::uint64_t{1} << 22;

  /// KV-head chunks of each tile of a request with `q_len` query tokens, `group` query heads per
  /// KV head and `num_kv_heads` KV heads, for tiles of at most `max_tile_rows` rows (the step's
  /// TileShape): `num_kv_heads` (one KV head per tile) unless `pack` and all of a KV head's
  /// query rows fit one tile (q_len * group <= max_tile_rows); then as few chunks as keep every
  /// chunk within max_tile_rows rows, ceil(num_kv_heads / floor(max_tile_rows / (q_len *
  /// group))), so that a decode item reads each cache block's sub-blocks of its KV heads in
  /// address order instead of one K/V pair per block.
  /// Preconditions: q_len >= 0, group >= 1, num_kv_heads >= 1, max_tile_rows >= 1.
  static constexpr int kv_head_chunks(std::int64_t q_len, int group, int num_kv_heads, bool pack,
                                      int max_tile_rows) noexcept {
    const std::int64_t rows = std::max<std::int64_t>(q_len * group, 1);
    if (!pack || rows > max_tile_rows) return num_kv_heads;
    const std::int64_t heads_per_chunk = max_tile_rows / rows;
    return static_cast<int>((num_kv_heads + heads_per_chunk - 1) / heads_per_chunk);
  }

  /// First KV head of chunk `chunk` of `chunks` over `num_kv_heads` heads (chunk == chunks: one
  /// past the last head); chunk sizes differ by at most one.
  static constexpr std::int32_t kv_head_chunk_begin(int chunk, int chunks, int num_kv_heads) noexcept {
    return static_cast<std::int32_t>(static_cast<std::int64_t>(chunk) * num_kv_heads / chunks);
  }
};

/// Plans paged_attention for the layer group described by `Traits` (see AttentionTraits).
/// Rules: tiles pack all query heads of a KV head (up to the step's R = max_tile_rows rows,
/// Traits::geometry(isa).shape: 64 on the scalar and vector steps, 128 on the AMX step);
/// each tile's KV range is the union of what its rows can see (causal, window); long ranges are
/// split per SplitPolicy and merged by ReductionItems; all sizes are 64-bit and checked.
///
/// Tiles: with G = Hq / Hkv query heads per KV head, a tile holds all G heads and R / G tokens
/// when G <= R, else R heads of one token. Every request with q_len > 0 gets one tile per
/// token chunk, head chunk and KV-head chunk. KV-head chunks (SchedulingRules::kv_head_chunks):
/// where a KV head's q_len x G query rows fit one tile (decode, short chunks), a tile holds as
/// many KV heads as fit R rows (Llama-3-8B decode: all 8 KV heads x 4 rows), so its items read
/// each cache block's sub-blocks of those heads in address order; otherwise one KV head each.
/// The KV heads of every such request are packed, unless W > 1 workers would then get fewer
/// than 2 W work items where one KV head per tile gives more (e.g. a lone decode with splits off):
/// then no request's are. Packing never changes a row's result (each KV head's rows run the same
/// steps either way), so deterministic mode may depend on it. A tile's KV range is the hull of the
/// positions its rows see; a tile whose range is empty would still get one work item with
/// kv_begin == kv_end (with a valid batch that cannot happen: every query token sees at least its
/// own position).
///
/// Splits of a tile's KV range [b, e):
///  - deterministic mode (whatever the policy) and SplitPolicy::fixed: cut at every absolute
///    position that is a multiple of S (S = split_tokens, or deterministic_split_tokens when that
///    is 0 in deterministic mode), so the pieces depend only on the request.
///  - SplitPolicy::off: never.
///  - SplitPolicy::automatic with W workers: never when W == 1. Otherwise, with T = the sum of all
///    tiles' KV lengths, a budget B = max(min_split_tokens + 16, ceil(T / (2 W))) positions per
///    task; a tile of length L >= 2 B is cut into n = floor(L / B) pieces at the positions
///    b + k L / n rounded down to multiples of 16 (k = 1 .. n-1). So a batch whose tiles already
///    give about 2 W equal tasks is not split, a few long tiles are split into about 2 W tasks in
///    all, a long outlier among many short tiles is split so no task dominates, every piece is at
///    least min_split_tokens long, and there are at most 2 W partial slots (bounded workspace).
///    split_tokens is not used.
/// A split tile's pieces fill consecutive partial slots in ascending KV order and one
/// ReductionItem merges them; an unsplit tile writes the output directly (partial = -1).
///
/// Order: work items by decreasing cost (see SchedulingRules::cost_row_constant); ties keep the
/// order (request, token chunk, head chunk, piece, KV-head chunk), so plans are deterministic.
/// Reductions: by request, token chunk, head chunk, KV-head chunk.
///
/// try_plan reuses the plan's vectors, so re-planning into the same plan object allocates nothing
/// once it has held a batch at least as large.
template <class Traits>
class AttentionScheduler {
 public:
  /// A scheduler with `options` for the traits' head dimension. Throws Error when
  /// validate_scheduler_options fails, or when the traits name an ISA this program or CPU cannot
  /// run.
  explicit AttentionScheduler(SchedulerOptions options = {})
    requires(Traits::head_dim != dynamic_head_dim)
      : AttentionScheduler(options, Traits::head_dim, 0) {}

  /// A scheduler with `options` for head dimension `head_dim`, given at run time (traits with
  /// HeadDim = dynamic_head_dim). Throws Error as the other constructor, and for a head_dim that
  /// check_head_dim refuses.
  AttentionScheduler(SchedulerOptions options, int head_dim)
    requires(Traits::head_dim == dynamic_head_dim)
      : AttentionScheduler(options, head_dim, 0) {}

  /// Builds the plan for `batch` into `plan` (reusing its memory). Returns the first problem
  /// (validate_batch, size overflow, more than SchedulingRules::max_work_items, out of memory)
  /// without throwing; `plan` is unspecified on failure.
  /// Thread-safe: a scheduler may plan into distinct plans concurrently.
  Status try_plan(const AttentionBatch& batch, AttentionPlan<Traits>& plan) const;

  /// Builds the plan for `batch`. Throws Error on bad input or size overflow.
  [[nodiscard]] AttentionPlan<Traits> plan(const AttentionBatch& batch) const;

  /// The options in use.
  [[nodiscard]] const SchedulerOptions& options() const noexcept { return options_; }
  /// The ISA plans will run on.
  [[nodiscard]] IsaId isa() const noexcept { return isa_; }
  /// The head dimension plans are made for.
  [[nodiscard]] int head_dim() const noexcept { return head_dim_; }

 private:
  /// The constructors' common part (the int only tells it apart from the public ones).
  AttentionScheduler(SchedulerOptions options, int head_dim, int);

  /// The ISA of Traits::isa_tag, or for isa::dispatched options.isa (best_isa() when unset);
  /// throws Error when unavailable or when a concrete tag and options.isa disagree.
  static IsaId resolve_isa(const SchedulerOptions& options);

  SchedulerOptions options_;
  IsaId isa_;
  int head_dim_;
};

namespace detail {

/// Largest value of an int32 field of a plan.
inline constexpr std::int64_t plan_int32_max = std::numeric_limits<std::int32_t>::max();

/// Sort key of a phase-1 representative (kv_head_end holding the KV heads of its tile's largest
/// KV-head chunk): decreasing cost, then generation order. A strict total order over the
/// representatives the scheduler sorts (they differ in request, token, head or KV begin).
inline bool work_item_before(const WorkItem& a, const WorkItem& b) noexcept {
  const auto cost = [](const WorkItem& w) {
    const std::int64_t rows = static_cast<std::int64_t>(w.token_end - w.token_begin) *
                              static_cast<std::int64_t>(w.head_end - w.head_begin);
    return static_cast<std::int64_t>(w.kv_end - w.kv_begin) *
           (rows + SchedulingRules::cost_row_constant) * w.kv_head_end;
  };
  const std::int64_t ca = cost(a);
  const std::int64_t cb = cost(b);
  if (ca != cb) return ca > cb;
  if (a.request != b.request) return a.request < b.request;
  if (a.token_begin != b.token_begin) return a.token_begin < b.token_begin;
  if (a.head_begin != b.head_begin) return a.head_begin < b.head_begin;
  return a.kv_begin < b.kv_begin;
}

/// The KV hull [begin, end) of query tokens [token_begin, token_end) of a request (DESIGN.md
/// section 3), clamped to [0, seq_len]; begin == end when no row sees anything.
struct KvRange {
  std::int64_t begin;  ///< First position.
  std::int64_t end;    ///< One past the last position.
};

/// The KvRange of query tokens [token_begin, token_end) of a request with `q_len` query tokens
/// and `seq_len` positions. Preconditions: 0 <= token_begin < token_end <= q_len <= seq_len.
inline KvRange tile_kv_range(std::int64_t seq_len, std::int64_t q_len, std::int64_t token_begin,
                             std::int64_t token_end, bool causal, int window_left,
                             int window_right) noexcept {
  const std::int64_t p_first = seq_len - q_len + token_begin;
  const std::int64_t p_last = seq_len - q_len + token_end - 1;
  std::int64_t begin = window_left >= 0 ? std::max<std::int64_t>(0, p_first - window_left) : 0;
  std::int64_t end = causal ? p_last + 1 : seq_len;
  if (window_right >= 0) end = std::min<std::int64_t>(end, p_last + window_right + 1);
  begin = std::clamp<std::int64_t>(begin, 0, seq_len);
  end = std::clamp<std::int64_t>(end, 0, seq_len);
  if (begin >= end) begin = end;
  return {begin, end};
}

/// Saturating a + b.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return checked_add(a, b).value_or(std::numeric_limits<std::uint64_t>::max());
}

/// Saturating a * b.
inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
  return checked_mul(a, b).value_or(std::numeric_limits<std::uint64_t>::max());
}

}  // namespace detail

template <class Traits>
IsaId AttentionScheduler<Traits>::resolve_isa(const SchedulerOptions& options) {
  using Tag = typename Traits::isa_tag;
  IsaId id = best_isa();
  if constexpr (std::is_same_v<Tag, isa::dispatched>) {
    if (options.isa) id = *options.isa;
  } else {
    id = Tag::id;
    if (options.isa && *options.isa != id) {
      detail::throw_if_error(detail::make_error(
          Errc::invalid_argument, "options.isa", isa_name(*options.isa),
          "differs from the ISA the traits name (" + std::string(isa_name(id)) + ")"));
    }
  }
  detail::throw_if_error(check_isa(id));
  return id;
}

template <class Traits>
AttentionScheduler<Traits>::AttentionScheduler(SchedulerOptions options, int head_dim, int)
    : options_(options), isa_(IsaId::scalar), head_dim_(head_dim) {
  detail::throw_if_error(check_head_dim(head_dim));
  detail::throw_if_error(validate_scheduler_options(options_));
  isa_ = resolve_isa(options_);
}

namespace detail {
/// The scheduler's algorithm, independent of the traits (so it is compiled once, not once per
/// layer-group type): plans `batch` for the tiles of `geometry` on `isa` with `options` into `data`.
inline Status build_plan(const AttentionBatch& batch, const SchedulerOptions& options,
                         const TileGeometry& geometry, IsaId isa, PlanData& data) {
  if (Status status = validate_batch(batch); !status.ok()) return status;

  const int max_rows = geometry.shape.max_tile_rows;
  const std::int64_t num_requests = batch.num_requests();
  const std::uint64_t num_workers = options.num_workers;

  // Sizes that do not depend on the tiling: fail before allocating anything.
  if (num_requests > plan_int32_max) {
    return make_error(Errc::size_overflow, "query_start_loc.size()", batch.query_start_loc.size(),
                      "more than 2^31 - 1 requests do not fit the plan's int32 request index");
  }
  if ((CheckedSize(geometry.worker.bytes) * num_workers).overflowed()) {
    return make_error(Errc::size_overflow, "num_workers", options.num_workers,
                      "the workers' scratch (" + std::to_string(geometry.worker.bytes) +
                          " bytes each) does not fit in 64 bits");
  }

  data.work_items.clear();
  data.reductions.clear();
  data.query_start_loc.assign(batch.query_start_loc.begin(), batch.query_start_loc.end());
  data.seq_lens.assign(batch.seq_lens.begin(), batch.seq_lens.end());
  data.causal.resize(static_cast<std::size_t>(num_requests));
  for (std::int64_t r = 0; r < num_requests; ++r) {
    data.causal[static_cast<std::size_t>(r)] = batch.is_causal(r) ? 1 : 0;
  }
  data.num_tokens = batch.num_tokens;
  data.num_query_heads = batch.num_query_heads;
  data.num_kv_heads = batch.num_kv_heads;
  data.window_left = batch.window_left;
  data.window_right = batch.window_right;
  data.geometry = geometry;
  data.num_workers = options.num_workers;
  data.num_partials = 0;
  data.workspace_bytes = 0;
  data.isa = isa;
  data.deterministic = options.deterministic;

  // Tile shape.
  const int num_kv_heads = batch.num_kv_heads;
  const int group = batch.num_query_heads / num_kv_heads;
  const int heads_per_tile = std::min(group, max_rows);
  const int tokens_per_tile = std::max(1, max_rows / heads_per_tile);
  const int head_chunks = (group + heads_per_tile - 1) / heads_per_tile;
  const auto q_len_of = [&](std::int64_t r) {
    const auto i = static_cast<std::size_t>(r);
    return static_cast<std::int64_t>(batch.query_start_loc[i + 1] - batch.query_start_loc[i]);
  };
  const auto kv_of = [&](std::int64_t r, std::int64_t q_len, std::int64_t t) {
    return tile_kv_range(batch.seq_lens[static_cast<std::size_t>(r)], q_len, t,
                         std::min<std::int64_t>(q_len, t + tokens_per_tile),
                         data.causal[static_cast<std::size_t>(r)] != 0, batch.window_left,
                         batch.window_right);
  };

  // Split rule for a KV-head packing (see SchedulingRules::kv_head_chunks).
  enum class Cut { none, fixed, automatic };
  struct SplitRule {
    Cut cut = Cut::none;
    std::int64_t tokens = 0;  // S for Cut::fixed, the budget B for Cut::automatic.
  };
  const auto split_rule = [&](bool pack) {
    SplitRule rule;
    if (options.deterministic) {
      rule = {Cut::fixed, options.split_tokens != 0 ? options.split_tokens : deterministic_split_tokens};
    } else if (options.split_policy == SplitPolicy::fixed) {
      rule = {Cut::fixed, options.split_tokens};
    } else if (options.split_policy == SplitPolicy::automatic && num_workers > 1) {
      // T: total KV length over all tiles (saturating; only its ratio to the workers matters).
      std::uint64_t total = 0;
      for (std::int64_t r = 0; r < num_requests; ++r) {
        const std::int64_t q_len = q_len_of(r);
        const std::uint64_t tiles_per_chunk =
            static_cast<std::uint64_t>(head_chunks) *
            static_cast<std::uint64_t>(SchedulingRules::kv_head_chunks(q_len, group, num_kv_heads, pack, max_rows));
        for (std::int64_t t = 0; t < q_len; t += tokens_per_tile) {
          const KvRange kv = kv_of(r, q_len, t);
          total = saturating_add(
              total,
              saturating_mul(static_cast<std::uint64_t>(kv.end - kv.begin), tiles_per_chunk));
        }
      }
      const std::uint64_t tasks =
          saturating_mul(num_workers, SchedulingRules::tasks_per_worker);
      const std::uint64_t share = total / tasks + (total % tasks != 0 ? 1 : 0);
      const auto floor_budget = static_cast<std::uint64_t>(SchedulingRules::min_split_tokens +
                                                           SchedulingRules::split_alignment);
      // The budget exceeds any int32 length when the share does; clamp so it fits int64 math.
      rule = {Cut::automatic, static_cast<std::int64_t>(std::min<std::uint64_t>(
                                  std::max(share, floor_budget), std::uint64_t{1} << 40))};
    }
    return rule;
  };
  // Pieces of a tile's KV range under `rule`.
  const auto pieces_of = [](const KvRange& kv, const SplitRule& rule) -> std::int64_t {
    const std::int64_t length = kv.end - kv.begin;
    if (length > 0 && rule.cut == Cut::fixed) return (kv.end - 1) / rule.tokens - kv.begin / rule.tokens + 1;
    if (rule.cut == Cut::automatic && length >= 2 * rule.tokens) return length / rule.tokens;
    return 1;
  };
  // Work items of the whole batch under a packing and its split rule, counted up to `limit`.
  const auto count_items = [&](bool pack, const SplitRule& rule, std::uint64_t limit) {
    std::uint64_t items = 0;
    for (std::int64_t r = 0; r < num_requests && items < limit; ++r) {
      const std::int64_t q_len = q_len_of(r);
      const auto chunks = static_cast<std::uint64_t>(head_chunks) *
                          static_cast<std::uint64_t>(SchedulingRules::kv_head_chunks(q_len, group, num_kv_heads, pack, max_rows));
      for (std::int64_t t = 0; t < q_len; t += tokens_per_tile) {
        items = saturating_add(items, saturating_mul(static_cast<std::uint64_t>(pieces_of(kv_of(r, q_len, t), rule)), chunks));
      }
    }
    return items;
  };
  // Pack KV heads unless that leaves fewer than tasks_per_worker items per worker where
  // one KV head per item would not.
  bool pack = true;
  SplitRule rule = split_rule(true);
  if (num_workers > 1) {
    const std::uint64_t wanted = saturating_mul(num_workers, SchedulingRules::tasks_per_worker);
    const std::uint64_t packed = count_items(true, rule, wanted);
    if (packed < wanted) {
      const SplitRule unpacked_rule = split_rule(false);
      if (packed < count_items(false, unpacked_rule, wanted)) {
        pack = false;
        rule = unpacked_rule;
      }
    }
  }

  // Bound what the plan will hold before allocating it.
  if (const std::uint64_t items = count_items(pack, rule, SchedulingRules::max_work_items + 1);
      items > SchedulingRules::max_work_items) {
    return make_error(Errc::size_overflow, "batch", "more than " + std::to_string(SchedulingRules::max_work_items) + " work items",
                      "the plan would exceed SchedulingRules::max_work_items (heads: " +
                          std::to_string(batch.num_query_heads) + "/" + std::to_string(num_kv_heads) +
                          ", tokens: " + std::to_string(batch.num_tokens) +
                          "; split fewer KV ranges or plan smaller batches)");
  }

  // Phase 1: one representative work item per (request, token chunk, head chunk, piece), in that
  // order; its kv_head field holds the tile's piece count, its kv_head_end the KV heads of its
  // largest KV-head chunk and its partial the slot of KV-head chunk 0.
  std::int64_t num_partials = 0;
  for (std::int64_t r = 0; r < num_requests; ++r) {
    const std::int64_t q_len = q_len_of(r);
    const int kv_chunks = SchedulingRules::kv_head_chunks(q_len, group, num_kv_heads, pack, max_rows);
    const int chunk_heads = (num_kv_heads + kv_chunks - 1) / kv_chunks;  // the largest chunk
    for (std::int64_t t = 0; t < q_len; t += tokens_per_tile) {
      const std::int64_t t_end = std::min<std::int64_t>(q_len, t + tokens_per_tile);
      const KvRange kv = kv_of(r, q_len, t);
      const std::int64_t length = kv.end - kv.begin;
      const std::int64_t pieces = pieces_of(kv, rule);
      for (int hc = 0; hc < head_chunks; ++hc) {
        const int h_begin = hc * heads_per_tile;
        const int h_end = std::min(group, h_begin + heads_per_tile);
        std::int64_t first_slot = -1;
        if (pieces >= 2) {
          // Slots of KV-head chunk c: [first_slot + c * pieces, first_slot + (c + 1) * pieces).
          first_slot = num_partials;
          num_partials += pieces * kv_chunks;
          if (num_partials > plan_int32_max) {
            return make_error(Errc::size_overflow, "num_partials", num_partials,
                              "more than 2^31 - 1 partial slots (splits) do not fit the plan's "
                              "int32 slot index; use fewer or longer splits");
          }
          for (int c = 0; c < kv_chunks; ++c) {
            data.reductions.push_back(ReductionItem{
                static_cast<std::int32_t>(r), SchedulingRules::kv_head_chunk_begin(c, kv_chunks, num_kv_heads),
                SchedulingRules::kv_head_chunk_begin(c + 1, kv_chunks, num_kv_heads),
                static_cast<std::int32_t>(t), static_cast<std::int32_t>(t_end), h_begin, h_end,
                static_cast<std::int32_t>(first_slot + static_cast<std::int64_t>(c) * pieces),
                static_cast<std::int32_t>(pieces)});
          }
        }
        std::int64_t piece_begin = kv.begin;
        for (std::int64_t k = 0; k < pieces; ++k) {
          std::int64_t piece_end = kv.end;
          if (k + 1 < pieces) {
            if (rule.cut == Cut::fixed) {
              piece_end = (kv.begin / rule.tokens + k + 1) * rule.tokens;
            } else {
              const std::int64_t exact = kv.begin + (k + 1) * length / pieces;
              piece_end =
                  exact / SchedulingRules::split_alignment * SchedulingRules::split_alignment;
            }
          }
          data.work_items.push_back(WorkItem{
              static_cast<std::int32_t>(r), static_cast<std::int32_t>(pieces), chunk_heads,
              static_cast<std::int32_t>(t), static_cast<std::int32_t>(t_end), h_begin, h_end,
              static_cast<std::int32_t>(piece_begin), static_cast<std::int32_t>(piece_end),
              static_cast<std::int32_t>(pieces >= 2 ? first_slot + k : -1)});
          piece_begin = piece_end;
        }
      }
    }
  }

  // Workspace (checked).
  data.num_partials = static_cast<std::int32_t>(num_partials);
  const std::optional<std::uint64_t> workspace =
      geometry.workspace_bytes(num_workers, static_cast<std::uint64_t>(num_partials)).value();
  if (!workspace) {
    return make_error(Errc::size_overflow, "num_partials", num_partials,
                      "the workspace for " + std::to_string(num_workers) + " workers and " +
                          std::to_string(num_partials) + " partial slots does not fit in 64 bits");
  }
  data.workspace_bytes = *workspace;

  // Phase 2: order the representatives longest first, append each one's items (one per KV-head
  // chunk) behind them, then drop the representatives (one memmove). Needs capacity for
  // representatives + items, which a reused plan keeps.
  std::sort(data.work_items.begin(), data.work_items.end(),
            [](const WorkItem& a, const WorkItem& b) { return work_item_before(a, b); });
  const std::size_t reps = data.work_items.size();
  // A rep's chunks: the fewest of at most kv_head_end heads (what kv_head_chunks chose).
  const auto chunks_of = [num_kv_heads](const WorkItem& rep) {
    return (num_kv_heads + rep.kv_head_end - 1) / rep.kv_head_end;
  };
  std::uint64_t total_items = reps;
  for (const WorkItem& rep : data.work_items) total_items = saturating_add(total_items, static_cast<std::uint64_t>(chunks_of(rep)));
  if (total_items > data.work_items.max_size()) {
    return make_error(Errc::size_overflow, "num_kv_heads", num_kv_heads,
                      "the number of work items (" + std::to_string(reps) +
                          " tiles per KV head) does not fit in memory");
  }
  data.work_items.reserve(static_cast<std::size_t>(total_items));
  for (std::size_t k = 0; k < reps; ++k) {
    const WorkItem rep = data.work_items[k];
    const std::int32_t pieces = rep.kv_head;
    const int kv_chunks = chunks_of(rep);
    for (int c = 0; c < kv_chunks; ++c) {
      WorkItem item = rep;
      item.kv_head = SchedulingRules::kv_head_chunk_begin(c, kv_chunks, num_kv_heads);
      item.kv_head_end = SchedulingRules::kv_head_chunk_begin(c + 1, kv_chunks, num_kv_heads);
      if (rep.partial >= 0) item.partial = rep.partial + c * pieces;
      data.work_items.push_back(item);
    }
  }
  data.work_items.erase(data.work_items.begin(),
                        data.work_items.begin() + static_cast<std::ptrdiff_t>(reps));
  return {};
}
}  // namespace detail

template <class Traits>
Status AttentionScheduler<Traits>::try_plan(const AttentionBatch& batch,
                                            AttentionPlan<Traits>& plan) const {
#if PAGEDATTN_HAS_EXCEPTIONS
  try {
    return detail::build_plan(batch, options_, Traits::geometry(isa_, head_dim_), isa_, plan.data_);
  } catch (const std::bad_alloc&) {
    return detail::make_error(Errc::runtime_failure, "plan", "out of memory",
                              "the plan's work items could not be allocated");
  }
#else
  return detail::build_plan(batch, options_, Traits::geometry(isa_, head_dim_), isa_, plan.data_);
#endif
}

template <class Traits>
AttentionPlan<Traits> AttentionScheduler<Traits>::plan(const AttentionBatch& batch) const {
  AttentionPlan<Traits> result;
  detail::throw_if_error(try_plan(batch, result));
  return result;
}

}  // namespace pagedattn
