// AttentionScheduler: every visible (token, head, position) covered exactly once, tile shapes,
// splits and reductions, workspace sizes (beyond 2^32 bytes, and overflow), deterministic mode,
// input validation naming the argument and value, and plan reuse.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pagedattn/attention/scheduler.hpp"

using namespace pagedattn;

namespace {

using Traits = AttentionTraits<bf16_t, bf16_t, 128>;
// The tiling cases' numbers are those of the 64-row vector steps (the AMX step takes 128 rows).
using TilingTraits = AttentionTraits<bf16_t, bf16_t, 128, isa::scalar>;
using ScalarTraits = AttentionTraits<float, float, 64, isa::scalar>;
using Traits512 = AttentionTraits<bf16_t, fp8_e4m3_t, 512>;

// A batch owning its arrays; view() gives the AttentionBatch the scheduler reads.
struct TestBatch {
  std::vector<std::int32_t> query_start_loc{0};
  std::vector<std::int32_t> seq_lens;
  std::vector<std::uint8_t> causal_per_request;
  std::int64_t num_tokens = 0;
  int num_query_heads = 1;
  int num_kv_heads = 1;
  bool causal = true;
  int window_left = -1;
  int window_right = -1;

  [[nodiscard]] AttentionBatch view() const {
    AttentionBatch batch;
    batch.query_start_loc = query_start_loc;
    batch.seq_lens = seq_lens;
    batch.causal_per_request = causal_per_request;
    batch.num_tokens = num_tokens;
    batch.num_query_heads = num_query_heads;
    batch.num_kv_heads = num_kv_heads;
    batch.causal = causal;
    batch.window_left = window_left;
    batch.window_right = window_right;
    return batch;
  }
  [[nodiscard]] std::int64_t q_len(std::size_t r) const {
    return query_start_loc[r + 1] - query_start_loc[r];
  }
  [[nodiscard]] bool is_causal(std::size_t r) const {
    return causal_per_request.empty() ? causal : causal_per_request[r] != 0;
  }
};

// A batch of requests with these query and context lengths.
TestBatch make_batch(const std::vector<std::int32_t>& q_lens,
                     const std::vector<std::int32_t>& seq_lens, int num_query_heads,
                     int num_kv_heads) {
  TestBatch batch;
  for (const std::int32_t q : q_lens)
    batch.query_start_loc.push_back(batch.query_start_loc.back() + q);
  batch.seq_lens = seq_lens;
  batch.num_tokens = batch.query_start_loc.back();
  batch.num_query_heads = num_query_heads;
  batch.num_kv_heads = num_kv_heads;
  return batch;
}

// Options with these fields.
SchedulerOptions make_options(SplitPolicy policy, std::size_t workers,
                              std::int32_t split_tokens = 0, bool deterministic = false) {
  SchedulerOptions options;
  options.split_policy = policy;
  options.num_workers = workers;
  options.split_tokens = split_tokens;
  options.deterministic = deterministic;
  return options;
}

// The geometry a plan records is the one its ISA's step declares (Traits::geometry(isa)); its
// laid-out sizes are checked against hand-derived values (below) and its regions against their
// statements (check_geometry). Workspace = worker scratch x workers + partial slot x partials.
constexpr std::uint64_t expected_workspace(const TileGeometry& geometry, std::uint64_t workers,
                                           std::uint64_t partials) {
  return geometry.worker.bytes * workers + geometry.partial.bytes * partials;
}
// Head dim 512, bf16 queries, E4M3 cache, derived by hand from each step's declaration.
// Vector steps (64 rows, 128-position steps, 64 rows of row regions): query and acc 2 x 4*64*512,
// scores 4*64*128, row max and sum 2 x 4*64, one widened KV tile 4*128*512; with bf16 dot products
// also the rounded probabilities 2*64*128.
constexpr std::uint64_t worker_bytes_512_vector = 557568;
constexpr std::uint64_t worker_bytes_512_bf16_dots = 557568 + 16384;
// AMX steps (128 rows, row regions of 144 rows): query and acc 2 x 4*144*512, scores 4*144*128,
// row max and sum 2 x 4*144, the FP8 stage of two K groups 2*2*16*512 (above two V strips
// 2*2*16*128), probabilities 2*144*128, C staging 4 x 1024, the tile height record 64, and
// (emulated) the tile file 64 + 8 x 1024.
constexpr std::uint64_t worker_bytes_512_amx = 589824 + 73728 + 1152 + 32768 + 36864 + 4096 + 64;
constexpr std::uint64_t worker_bytes_512_amx_emulated = worker_bytes_512_amx + 64 + 8192;
// The worker bytes above for the step of `isa`.
constexpr std::uint64_t worker_bytes_512_on(IsaId isa) {
  switch (isa) {
    case IsaId::avx512bf16: return worker_bytes_512_bf16_dots;
    case IsaId::amx: return worker_bytes_512_amx;
    case IsaId::amx_emulated: return worker_bytes_512_amx_emulated;
    default: return worker_bytes_512_vector;
  }
}
// A partial slot is acc 4*rows*512, max and sum 2 x 4*rows: 64 rows on the vector steps, 128 on
// the AMX ones.
constexpr std::uint64_t partial_bytes_512 = 131584;
constexpr std::uint64_t partial_bytes_512_amx = 263168;
// The partial slot bytes above for the step of `isa`.
constexpr std::uint64_t partial_bytes_512_on(IsaId isa) {
  return isa == IsaId::amx || isa == IsaId::amx_emulated ? partial_bytes_512_amx : partial_bytes_512;
}
using Geometry512 = AttentionTraits<bf16_t, fp8_e4m3_t, 512>;
static_assert(Geometry512::geometry(IsaId::scalar).worker.bytes == worker_bytes_512_vector);
static_assert(Geometry512::geometry(IsaId::avx2).worker.bytes == worker_bytes_512_vector);
static_assert(Geometry512::geometry(IsaId::avx512).worker.bytes == worker_bytes_512_vector);
static_assert(Geometry512::geometry(IsaId::avx512bf16).worker.bytes == worker_bytes_512_bf16_dots);
static_assert(Geometry512::geometry(IsaId::amx).worker.bytes == worker_bytes_512_amx);
static_assert(Geometry512::geometry(IsaId::amx_emulated).worker.bytes == worker_bytes_512_amx_emulated);
static_assert(Geometry512::geometry(IsaId::amx).partial.bytes == partial_bytes_512_amx);
static_assert(Geometry512::geometry(IsaId::amx_emulated).partial.bytes == partial_bytes_512_amx);
static_assert(Geometry512::geometry(IsaId::avx2).partial.bytes == partial_bytes_512);
// The AMX step covers float queries by the vector products: the vector geometry.
static_assert(AttentionTraits<float, fp8_e4m3_t, 512>::geometry(IsaId::amx).worker.bytes == worker_bytes_512_vector);

// "" or the first way `g` breaks its regions' statements (geometry.hpp): regions in order, 64-byte
// aligned, each at least as large as it says, partial slot rows compact.
std::string check_geometry(const TileGeometry& g) {
  const auto dim = static_cast<std::uint64_t>(g.head_dim);
  const auto capacity = static_cast<std::uint64_t>(g.shape.row_capacity);
  const auto kv = static_cast<std::uint64_t>(g.shape.kv_tile_tokens);
  const auto rows = static_cast<std::uint64_t>(g.shape.max_tile_rows);
  if ((g.shape.max_tile_rows != 64 && g.shape.max_tile_rows != 128) || g.shape.kv_tile_tokens != 128) {
    return "not 64 (vector steps) or 128 (AMX) rows x 128 positions";
  }
  if (capacity < rows) return "row capacity below max_tile_rows";
  const std::uint64_t offsets[] = {g.worker.query, g.worker.acc, g.worker.scores, g.worker.row_max, g.worker.row_sum,
                                   g.worker.kv_tile, g.worker.probs, g.worker.tile_state, g.worker.bytes};
  const std::uint64_t least[] = {4 * capacity * dim, 4 * capacity * dim, 4 * capacity * kv, 4 * capacity, 4 * capacity, 0, 0, 0};
  if (g.worker.query != 0) return "query not first";
  for (std::size_t i = 0; i + 1 < std::size(offsets); ++i) {
    if (offsets[i] % 64 != 0) return "region " + std::to_string(i) + " not 64-byte aligned";
    if (offsets[i + 1] < offsets[i] + least[i]) return "region " + std::to_string(i) + " too small";
  }
  if (g.worker.bytes % 64 != 0) return "worker bytes not a multiple of 64";
  if (g.partial.acc != 0 || g.partial.row_max < 4 * rows * dim || g.partial.row_sum < g.partial.row_max + 4 * rows ||
      g.partial.bytes < g.partial.row_sum + 4 * rows || g.partial.bytes % 64 != 0) {
    return "partial slot regions out of order or too small";
  }
  return "";
}

// DESIGN.md section 3: whether KV position j is visible to the query token at position p.
bool visible(std::int64_t j, std::int64_t p, std::int64_t seq_len, bool causal, int window_left,
             int window_right) {
  if (j < 0 || j >= seq_len) return false;
  if (causal && j > p) return false;
  if (window_left >= 0 && j < p - window_left) return false;
  if (window_right >= 0 && j > p + window_right) return false;
  return true;
}

std::string describe(const WorkItem& w) {
  return "item{request " + std::to_string(w.request) + ", kv_heads [" + std::to_string(w.kv_head) +
         ", " + std::to_string(w.kv_head_end) + "), tokens [" + std::to_string(w.token_begin) + ", " + std::to_string(w.token_end) +
         "), heads [" + std::to_string(w.head_begin) + ", " + std::to_string(w.head_end) +
         "), kv [" + std::to_string(w.kv_begin) + ", " + std::to_string(w.kv_end) + "), partial " +
         std::to_string(w.partial) + "}";
}

// (request, kv_head, kv_head_end, token_begin, token_end, head_begin, head_end): one tile.
using TileKey = std::array<std::int32_t, 7>;
TileKey tile_key(const WorkItem& w) {
  return {w.request, w.kv_head, w.kv_head_end, w.token_begin, w.token_end, w.head_begin, w.head_end};
}
TileKey tile_key(const ReductionItem& w) {
  return {w.request, w.kv_head, w.kv_head_end, w.token_begin, w.token_end, w.head_begin, w.head_end};
}

// KV-head chunks of a request's tiles, from the rule's statement (SchedulingRules::kv_head_chunks):
// one KV head per tile, or, packed, as few chunks as keep each within max_rows rows when a KV
// head's query rows (q_len x group) fit one tile.
std::int64_t expected_kv_chunks(std::int64_t q_len, int group, int hkv, bool packed, std::int64_t max_rows) {
  const std::int64_t rows = q_len * group;
  if (!packed || rows == 0 || rows > max_rows) return hkv;
  for (std::int64_t chunks = 1;; ++chunks) {
    if ((hkv + chunks - 1) / chunks * rows <= max_rows) return chunks;
  }
}

// Checks every scheduler invariant of `plan` for `batch` and `options` (written from the
// semantics, not from the scheduler's code). Returns "" or the first violation found.
std::string check_plan(const TestBatch& batch, const SchedulerOptions& options,
                       const detail::PlanData& plan, int head_dim) {
  const int hq = batch.num_query_heads;
  const int hkv = batch.num_kv_heads;
  const int group = hq / hkv;
  const int max_rows = plan.geometry.shape.max_tile_rows;  // 64 or 128 (check_geometry)
  if (const std::string error = check_geometry(plan.geometry); !error.empty()) return "geometry: " + error;
  const std::size_t requests = batch.seq_lens.size();

  // Copied batch description.
  if (plan.query_start_loc != batch.query_start_loc) return "query_start_loc not copied";
  if (plan.seq_lens != batch.seq_lens) return "seq_lens not copied";
  if (plan.causal.size() != requests) return "causal flags: wrong size";
  for (std::size_t r = 0; r < requests; ++r) {
    if ((plan.causal[r] != 0) != batch.is_causal(r))
      return "causal flag of request " + std::to_string(r);
  }
  if (plan.num_tokens != batch.num_tokens || plan.num_query_heads != hq ||
      plan.num_kv_heads != hkv || plan.window_left != batch.window_left ||
      plan.window_right != batch.window_right || plan.geometry.head_dim != head_dim ||
      plan.num_workers != options.num_workers || plan.deterministic != options.deterministic) {
    return "plan fields differ from the batch and options";
  }

  // Work items are well formed; group them by tile.
  std::map<TileKey, std::vector<WorkItem>> tiles;
  for (const WorkItem& w : plan.work_items) {
    if (w.request < 0 || static_cast<std::size_t>(w.request) >= requests)
      return "bad request: " + describe(w);
    const auto r = static_cast<std::size_t>(w.request);
    const std::int64_t q_len = batch.q_len(r);
    if (w.kv_head < 0 || w.kv_head >= w.kv_head_end || w.kv_head_end > hkv) return "bad KV heads: " + describe(w);
    if (w.token_begin < 0 || w.token_begin >= w.token_end || w.token_end > q_len) {
      return "tokens outside the request: " + describe(w);
    }
    if (w.head_begin < 0 || w.head_begin >= w.head_end || w.head_end > group) {
      return "heads outside the KV head's group: " + describe(w);
    }
    if ((w.kv_head_end - w.kv_head) * (w.token_end - w.token_begin) * (w.head_end - w.head_begin) > max_rows) {
      return "more than max_tile_rows rows: " + describe(w);
    }
    if (w.kv_head_end - w.kv_head > 1 && (w.token_begin != 0 || w.token_end != q_len)) {
      return "KV heads share a tile that does not hold all their query rows: " + describe(w);
    }
    if (group <= max_rows && (w.head_begin != 0 || w.head_end != group)) {
      return "a group of <= max_tile_rows heads is not packed into one tile: " + describe(w);
    }
    if (w.kv_begin < 0 || w.kv_begin > w.kv_end || w.kv_end > batch.seq_lens[r]) {
      return "KV range outside [0, seq_len]: " + describe(w);
    }
    if (w.partial < -1 || w.partial >= plan.num_partials) return "bad partial slot: " + describe(w);
    tiles[tile_key(w)].push_back(w);
  }

  // Tiles are as large as the tiling rule allows: one per (request, token chunk, head chunk,
  // KV-head chunk), where the KV heads of every request are packed or those of none are (one
  // worker always packs); chunk sizes differ by at most one.
  const int heads_per_tile = group <= max_rows ? group : max_rows;
  const std::int64_t tokens_per_tile = group <= max_rows ? max_rows / group : 1;
  const std::int64_t head_chunks = (group + heads_per_tile - 1) / heads_per_tile;
  const auto expected_tiles = [&](bool packed) {
    std::int64_t count = 0;
    for (std::size_t r = 0; r < requests; ++r) {
      count += (batch.q_len(r) + tokens_per_tile - 1) / tokens_per_tile * head_chunks *
               expected_kv_chunks(batch.q_len(r), group, hkv, packed, max_rows);
    }
    return count;
  };
  const auto tile_count = static_cast<std::int64_t>(tiles.size());
  if (tile_count != expected_tiles(true) && (options.num_workers == 1 || tile_count != expected_tiles(false))) {
    return "tile count " + std::to_string(tiles.size()) + ", expected " +
           std::to_string(expected_tiles(true)) + " (KV heads packed) or " + std::to_string(expected_tiles(false));
  }
  for (const auto& [key, items] : tiles) {
    const WorkItem& w = items.front();
    const std::int64_t chunks = expected_kv_chunks(batch.q_len(static_cast<std::size_t>(w.request)), group, hkv,
                                                   tile_count == expected_tiles(true), max_rows);
    const std::int32_t size = w.kv_head_end - w.kv_head;
    if (size != hkv / chunks && size != (hkv + chunks - 1) / chunks) return "uneven KV-head chunks: " + describe(w);
  }

  // Reductions, keyed by tile.
  std::map<TileKey, ReductionItem> reductions;
  for (const ReductionItem& red : plan.reductions) {
    if (!reductions.emplace(tile_key(red), red).second) return "two reductions for one tile";
  }

  // Split rule of the options.
  enum class Rule { none, fixed, automatic };
  Rule rule = Rule::none;
  std::int64_t split = 0;
  if (options.deterministic || options.split_policy == SplitPolicy::fixed) {
    rule = Rule::fixed;
    split = options.split_tokens != 0 ? options.split_tokens : deterministic_split_tokens;
  } else if (options.split_policy == SplitPolicy::automatic && options.num_workers > 1) {
    rule = Rule::automatic;
  }

  // Per tile: pieces contiguous in ascending KV order, partial slots and reduction, split rule,
  // row ownership.
  std::vector<int> slot_fills(static_cast<std::size_t>(std::max(plan.num_partials, 0)), 0);
  std::vector<std::vector<int>> row_owner(requests);  // [request][token * hq + head] -> tile.
  for (std::size_t r = 0; r < requests; ++r) {
    row_owner[r].assign(static_cast<std::size_t>(batch.q_len(r) * hq), -1);
  }
  std::vector<std::vector<WorkItem>*> tile_list;
  std::size_t split_tiles = 0;
  for (auto& [key, items] : tiles) {
    const int tile = static_cast<int>(tile_list.size());
    tile_list.push_back(&items);
    std::sort(items.begin(), items.end(),
              [](const WorkItem& a, const WorkItem& b) { return a.kv_begin < b.kv_begin; });
    const WorkItem& first = items.front();
    for (std::int32_t kv_head = first.kv_head; kv_head < first.kv_head_end; ++kv_head) {
      for (std::int32_t t = first.token_begin; t < first.token_end; ++t) {
        for (std::int32_t h = first.head_begin; h < first.head_end; ++h) {
          int& owner = row_owner[static_cast<std::size_t>(first.request)]
                                [static_cast<std::size_t>(t * hq + kv_head * group + h)];
          if (owner != -1) return "row in two tiles: " + describe(first);
          owner = tile;
        }
      }
    }
    const std::size_t n = items.size();
    for (std::size_t k = 0; k + 1 < n; ++k) {
      if (items[k].kv_end != items[k + 1].kv_begin)
        return "pieces not contiguous: " + describe(items[k + 1]);
    }
    const auto reduction = reductions.find(key);
    if (n == 1) {
      if (first.partial != -1) return "unsplit tile writes a partial: " + describe(first);
      if (reduction != reductions.end()) return "reduction for an unsplit tile: " + describe(first);
    } else {
      ++split_tiles;
      if (reduction == reductions.end()) return "split tile without reduction: " + describe(first);
      if (reduction->second.first_partial != first.partial ||
          reduction->second.num_partials != static_cast<std::int32_t>(n)) {
        return "reduction does not match its pieces: " + describe(first);
      }
      for (std::size_t k = 0; k < n; ++k) {
        if (items[k].kv_begin >= items[k].kv_end) return "empty piece: " + describe(items[k]);
        if (items[k].partial != first.partial + static_cast<std::int32_t>(k)) {
          return "pieces' slots not consecutive in KV order: " + describe(items[k]);
        }
        ++slot_fills[static_cast<std::size_t>(items[k].partial)];
      }
    }
    for (std::size_t k = 0; k < n; ++k) {
      const WorkItem& w = items[k];
      switch (rule) {
        case Rule::none:
          if (n != 1) return "split although splitting is off: " + describe(w);
          break;
        case Rule::fixed:
          if (w.kv_begin < w.kv_end && w.kv_begin / split != (w.kv_end - 1) / split) {
            return "piece crosses a multiple of split_tokens: " + describe(w);
          }
          if (k > 0 && w.kv_begin % split != 0)
            return "cut not at a multiple of split_tokens: " + describe(w);
          break;
        case Rule::automatic:
          if (k > 0 && w.kv_begin % 16 != 0)
            return "automatic cut not at a multiple of 16: " + describe(w);
          if (n > 1 && w.kv_end - w.kv_begin < 512)
            return "automatic piece shorter than 512: " + describe(w);
          break;
      }
    }
  }
  if (reductions.size() != split_tiles) return "reduction without a split tile";
  for (std::size_t s = 0; s < slot_fills.size(); ++s) {
    if (slot_fills[s] != 1)
      return "partial slot " + std::to_string(s) + " filled " + std::to_string(slot_fills[s]) +
             " times";
  }
  const auto with_partial = std::count_if(plan.work_items.begin(), plan.work_items.end(),
                                          [](const WorkItem& w) { return w.partial >= 0; });
  if (with_partial != plan.num_partials) return "num_partials != items with a partial slot";
  if (rule == Rule::automatic && static_cast<std::uint64_t>(plan.num_partials) >
                                     2 * static_cast<std::uint64_t>(options.num_workers)) {
    return "automatic splitting made more than 2 slots per worker";
  }

  // Every (token, head) row belongs to one tile, which covers each visible position exactly once
  // (pieces are disjoint) and spans exactly the hull of what its rows see.
  std::vector<std::int64_t> prefix;  // prefix[j]: visible positions in [0, j) of the current token.
  std::vector<std::pair<std::int64_t, std::int64_t>> tile_hull(tile_list.size(),
                                                               {-1, -1});  // [min, max]
  for (std::size_t r = 0; r < requests; ++r) {
    const std::int64_t q_len = batch.q_len(r);
    const std::int64_t seq_len = batch.seq_lens[r];
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t p = seq_len - q_len + i;
      prefix.assign(static_cast<std::size_t>(seq_len + 1), 0);
      std::int64_t lo = -1;
      std::int64_t hi = -1;
      for (std::int64_t j = 0; j < seq_len; ++j) {
        const bool v =
            visible(j, p, seq_len, batch.is_causal(r), batch.window_left, batch.window_right);
        prefix[static_cast<std::size_t>(j + 1)] = prefix[static_cast<std::size_t>(j)] + (v ? 1 : 0);
        if (v) {
          if (lo < 0) lo = j;
          hi = j;
        }
      }
      const std::int64_t total = prefix.back();
      int previous_tile = -1;
      for (int h = 0; h < hq; ++h) {
        const int tile = row_owner[r][static_cast<std::size_t>(i * hq + h)];
        if (tile < 0) {
          return "row (request " + std::to_string(r) + ", token " + std::to_string(i) + ", head " +
                 std::to_string(h) + ") in no tile";
        }
        if (tile == previous_tile) continue;  // Same pieces as the previous head.
        previous_tile = tile;
        std::int64_t covered = 0;
        for (const WorkItem& w : *tile_list[static_cast<std::size_t>(tile)]) {
          covered += prefix[static_cast<std::size_t>(w.kv_end)] -
                     prefix[static_cast<std::size_t>(w.kv_begin)];
        }
        if (covered != total) {
          return "visible positions of (request " + std::to_string(r) + ", token " +
                 std::to_string(i) + ", head " + std::to_string(h) + ") covered " +
                 std::to_string(covered) + " of " + std::to_string(total);
        }
        auto& hull = tile_hull[static_cast<std::size_t>(tile)];
        if (lo >= 0) {
          hull.first = hull.first < 0 ? lo : std::min(hull.first, lo);
          hull.second = std::max(hull.second, hi);
        }
      }
    }
  }
  for (std::size_t t = 0; t < tile_list.size(); ++t) {
    const std::vector<WorkItem>& items = *tile_list[t];
    const std::int64_t begin = items.front().kv_begin;
    const std::int64_t end = items.back().kv_end;
    const auto [lo, hi] = tile_hull[t];
    const bool ok = lo < 0 ? (items.size() == 1 && begin == end) : (begin == lo && end == hi + 1);
    if (!ok)
      return "tile range is not the hull of its rows' visible positions: " +
             describe(items.front());
  }

  // Longest first: among items with the same number of rows per KV head and of KV heads, KV
  // length never increases.
  std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> last_length;  // -> KV length of the last such item.
  for (const WorkItem& w : plan.work_items) {
    const std::pair<std::int32_t, std::int32_t> rows{(w.token_end - w.token_begin) * (w.head_end - w.head_begin),
                                                     w.kv_head_end - w.kv_head};
    const auto [it, inserted] = last_length.emplace(rows, w.kv_end - w.kv_begin);
    if (!inserted) {
      if (w.kv_end - w.kv_begin > it->second) return "not ordered longest first at " + describe(w);
      it->second = w.kv_end - w.kv_begin;
    }
  }

  // Workspace.
  if (plan.geometry.head_dim != head_dim) return "geometry for another head dim";
  if (plan.workspace_bytes != expected_workspace(plan.geometry, options.num_workers,
                                                 static_cast<std::uint64_t>(plan.num_partials))) {
    return "workspace_bytes " + std::to_string(plan.workspace_bytes) +
           " differs from the geometry formula";
  }
  return "";
}

bool same_item(const WorkItem& a, const WorkItem& b) {
  return std::tie(a.request, a.kv_head, a.kv_head_end, a.token_begin, a.token_end, a.head_begin,
                  a.head_end, a.kv_begin, a.kv_end, a.partial) ==
         std::tie(b.request, b.kv_head, b.kv_head_end, b.token_begin, b.token_end, b.head_begin,
                  b.head_end, b.kv_begin, b.kv_end, b.partial);
}

bool same_reduction(const ReductionItem& a, const ReductionItem& b) {
  return std::tie(a.request, a.kv_head, a.kv_head_end, a.token_begin, a.token_end, a.head_begin,
                  a.head_end, a.first_partial, a.num_partials) ==
         std::tie(b.request, b.kv_head, b.kv_head_end, b.token_begin, b.token_end, b.head_begin,
                  b.head_end, b.first_partial, b.num_partials);
}

// Whether two plans hold exactly the same data.
bool same_plan(const detail::PlanData& a, const detail::PlanData& b) {
  return std::equal(a.work_items.begin(), a.work_items.end(), b.work_items.begin(),
                    b.work_items.end(), same_item) &&
         std::equal(a.reductions.begin(), a.reductions.end(), b.reductions.begin(),
                    b.reductions.end(), same_reduction) &&
         a.query_start_loc == b.query_start_loc && a.seq_lens == b.seq_lens &&
         a.causal == b.causal && a.num_tokens == b.num_tokens &&
         a.num_query_heads == b.num_query_heads && a.num_kv_heads == b.num_kv_heads &&
         a.window_left == b.window_left && a.window_right == b.window_right &&
         a.geometry == b.geometry && a.num_workers == b.num_workers &&
         a.num_partials == b.num_partials && a.workspace_bytes == b.workspace_bytes &&
         a.isa == b.isa && a.deterministic == b.deterministic;
}

// Request r's work per KV head as a sorted list: (kv_head, tokens, heads, kv range, piece index
// or -1) for each KV head of each item, plus its reductions' (kv_head, tokens, heads, count) for
// each KV head; slot numbers are made relative to the tile. What each query row computes, whether
// or not KV heads share items.
using RequestWork = std::vector<std::array<std::int32_t, 9>>;
RequestWork request_work(const detail::PlanData& plan, std::int32_t r) {
  std::map<TileKey, std::int32_t> first_slot;
  RequestWork work;
  for (const ReductionItem& red : plan.reductions) {
    if (red.request != r) continue;
    first_slot[tile_key(red)] = red.first_partial;
    for (std::int32_t h = red.kv_head; h < red.kv_head_end; ++h) {
      work.push_back({-1, h, red.token_begin, red.token_end, red.head_begin, red.head_end, 0, 0, red.num_partials});
    }
  }
  for (const WorkItem& w : plan.work_items) {
    if (w.request != r) continue;
    const std::int32_t piece = w.partial < 0 ? -1 : w.partial - first_slot.at(tile_key(w));
    for (std::int32_t h = w.kv_head; h < w.kv_head_end; ++h) {
      work.push_back({0, h, w.token_begin, w.token_end, w.head_begin, w.head_end, w.kv_begin, w.kv_end, piece});
    }
  }
  std::sort(work.begin(), work.end());
  return work;
}

}  // namespace

TEST_CASE("every visible (token, head, position) is covered by exactly one work item",
          "[scheduler]") {
  struct Shape {
    const char* name;
    std::vector<std::int32_t> q_lens;
    std::vector<std::int32_t> seq_lens;
  };
  const std::vector<Shape> shapes = {
      {"decode", {1, 1, 1, 1}, {1, 17, 300, 1500}},
      {"chunked prefill", {5, 30, 1}, {40, 1200, 64}},
      {"full prefill", {40, 7}, {40, 7}},
      {"mixed", {1, 12, 0, 33, 1}, {700, 12, 50, 90, 2000}},
  };
  const std::vector<std::pair<int, int>> head_counts = {{4, 4},  {8, 2},   {9, 3}, {16, 1},
                                                        {32, 8}, {128, 1}, {96, 1}};
  const std::vector<std::pair<int, int>> windows = {{-1, -1}, {16, -1}, {-1, 5}, {20, 3}, {0, 0}};
  const std::vector<SchedulerOptions> option_sets = {
      make_options(SplitPolicy::off, 2),          make_options(SplitPolicy::automatic, 1),
      make_options(SplitPolicy::automatic, 2),    make_options(SplitPolicy::automatic, 7),
      make_options(SplitPolicy::fixed, 7, 32),    make_options(SplitPolicy::automatic, 2, 64, true),
      make_options(SplitPolicy::off, 7, 0, true),
  };
  // The best ISA's steps, and where the tile emulation runs (every CPU of the avx2 tier), the
  // AMX step's 128-row tiles, so that both row counts are checked on any such machine.
  std::vector<IsaId> isas = {best_isa()};
  if (isa_available(IsaId::amx_emulated)) isas.push_back(IsaId::amx_emulated);
  AttentionPlan<Traits> plan;
  for (const Shape& shape : shapes) {
    for (const auto& [hq, hkv] : head_counts) {
      for (int causal_mode = 0; causal_mode < 3; ++causal_mode) {
        for (const auto& [wl, wr] : windows) {
          TestBatch batch = make_batch(shape.q_lens, shape.seq_lens, hq, hkv);
          batch.causal = causal_mode != 1;
          if (causal_mode == 2) {
            for (std::size_t r = 0; r < shape.q_lens.size(); ++r)
              batch.causal_per_request.push_back(r % 2 == 0);
          }
          batch.window_left = wl;
          batch.window_right = wr;
          for (const IsaId isa : isas) {
            for (std::size_t o = 0; o < option_sets.size(); ++o) {
              SchedulerOptions options = option_sets[o];
              options.isa = isa;
              const AttentionScheduler<Traits> scheduler(options);
              const Status status = scheduler.try_plan(batch.view(), plan);
              INFO(shape.name << ", heads " << hq << "/" << hkv << ", causal mode " << causal_mode << ", window ("
                              << wl << ", " << wr << "), option set " << o << ", " << isa_name(isa));
              REQUIRE(status.ok());
              REQUIRE(plan.isa() == isa);
              REQUIRE(check_plan(batch, options, plan.data(), Traits::head_dim) == "");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("tiles pack the query heads of a KV head", "[scheduler]") {
  const AttentionScheduler<TilingTraits> scheduler(make_options(SplitPolicy::off, 1));
  SECTION("decode, 8 query heads per KV head: one tile of 4 KV heads x 8 rows per request") {
    const auto plan = scheduler.plan(make_batch({1, 1}, {100, 5}, 32, 4).view());
    REQUIRE(plan.work_items().size() == 2);
    for (const WorkItem& w : plan.work_items()) {
      REQUIRE(w.kv_head == 0);
      REQUIRE(w.kv_head_end == 4);
      REQUIRE(w.head_begin == 0);
      REQUIRE(w.head_end == 8);
      REQUIRE(w.token_end - w.token_begin == 1);
    }
  }
  SECTION("prefill, 3 heads per group: 21 tokens per tile") {
    const auto plan = scheduler.plan(make_batch({50}, {50}, 9, 3).view());
    REQUIRE(plan.work_items().size() == 3 * 3);  // Token chunks [0,21), [21,42), [42,50).
    for (const WorkItem& w : plan.work_items()) REQUIRE(w.token_begin % 21 == 0);
  }
  SECTION("128 heads per KV head: two 64-head tiles per token") {
    const auto plan = scheduler.plan(make_batch({3}, {10}, 128, 1).view());
    REQUIRE(plan.work_items().size() == 3 * 2);
    for (const WorkItem& w : plan.work_items()) {
      REQUIRE(w.token_end - w.token_begin == 1);
      REQUIRE(w.head_end - w.head_begin == 64);
    }
  }
  SECTION("requests without query tokens produce nothing") {
    const auto plan = scheduler.plan(make_batch({0, 2, 0}, {30, 9, 0}, 4, 2).view());
    for (const WorkItem& w : plan.work_items()) REQUIRE(w.request == 1);
    REQUIRE(plan.work_items().size() == 1);
  }
  SECTION("an empty batch gives an empty plan with worker scratch only") {
    const auto plan = scheduler.plan(make_batch({}, {}, 4, 2).view());
    REQUIRE(plan.work_items().empty());
    REQUIRE(plan.reductions().empty());
    REQUIRE(plan.num_requests() == 0);
    REQUIRE(plan.geometry() == TilingTraits::geometry(plan.isa()));
    REQUIRE(plan.workspace_bytes() == expected_workspace(plan.geometry(), 1, 0));
  }
}

TEST_CASE("KV heads share a tile when all their query rows fit, unless that starves the workers",
          "[scheduler]") {
  const auto kv_heads_of = [](const WorkItem& w) { return std::pair{w.kv_head, w.kv_head_end}; };
  SECTION("Llama-3-8B decode (32/8 heads): one 32-row item of all 8 KV heads on one worker") {
    const auto plan = AttentionScheduler<TilingTraits>(make_options(SplitPolicy::automatic, 1))
                          .plan(make_batch({1}, {4096}, 32, 8).view());
    REQUIRE(plan.work_items().size() == 1);
    REQUIRE(kv_heads_of(plan.work_items()[0]) == std::pair{0, 8});
  }
  SECTION("3 tokens x 4 heads = 12 rows per KV head: 5 fit a tile, so 8 KV heads take 2 chunks of 4") {
    const auto plan = AttentionScheduler<TilingTraits>(make_options(SplitPolicy::off, 1))
                          .plan(make_batch({3}, {100}, 32, 8).view());
    REQUIRE(plan.work_items().size() == 2);
    std::vector<std::pair<std::int32_t, std::int32_t>> chunks;
    for (const WorkItem& w : plan.work_items()) chunks.push_back(kv_heads_of(w));
    std::sort(chunks.begin(), chunks.end());
    REQUIRE(chunks == std::vector<std::pair<std::int32_t, std::int32_t>>{{0, 4}, {4, 8}});
  }
  SECTION("a prefill chunk of 17 tokens (68 rows per KV head) keeps one KV head per tile") {
    const auto plan = AttentionScheduler<TilingTraits>(make_options(SplitPolicy::off, 1))
                          .plan(make_batch({17}, {17}, 32, 8).view());
    REQUIRE(plan.work_items().size() == 2 * 8);  // token chunks [0, 16), [16, 17) per KV head
    for (const WorkItem& w : plan.work_items()) REQUIRE(w.kv_head_end == w.kv_head + 1);
  }
  SECTION("two workers, automatic: the packed tile is split instead (4 pieces, 1 reduction of 8 KV heads)") {
    const SchedulerOptions options = make_options(SplitPolicy::automatic, 2);
    const TestBatch batch = make_batch({1}, {4096}, 32, 8);
    const auto plan = AttentionScheduler<TilingTraits>(options).plan(batch.view());
    REQUIRE(plan.work_items().size() == 4);
    for (const WorkItem& w : plan.work_items()) REQUIRE(kv_heads_of(w) == std::pair{0, 8});
    REQUIRE(plan.reductions().size() == 1);
    REQUIRE(plan.reductions()[0].kv_head == 0);
    REQUIRE(plan.reductions()[0].kv_head_end == 8);
    REQUIRE(check_plan(batch, options, plan.data(), TilingTraits::head_dim).empty());
  }
  SECTION("two workers without splits: packing would leave one item for two workers, so one per KV head") {
    const SchedulerOptions options = make_options(SplitPolicy::off, 2);
    const TestBatch batch = make_batch({1}, {4096}, 32, 8);
    const auto plan = AttentionScheduler<TilingTraits>(options).plan(batch.view());
    REQUIRE(plan.work_items().size() == 8);
    for (const WorkItem& w : plan.work_items()) REQUIRE(w.kv_head_end == w.kv_head + 1);
    REQUIRE(check_plan(batch, options, plan.data(), TilingTraits::head_dim).empty());
  }
  SECTION("two workers without splits, four requests: four packed items are enough") {
    const auto plan = AttentionScheduler<TilingTraits>(make_options(SplitPolicy::off, 2))
                          .plan(make_batch({1, 1, 1, 1}, {4096, 100, 7, 3000}, 32, 8).view());
    REQUIRE(plan.work_items().size() == 4);
    for (const WorkItem& w : plan.work_items()) REQUIRE(kv_heads_of(w) == std::pair{0, 8});
  }
}

TEST_CASE("automatic splitting spreads few long tiles over the workers and nothing else",
          "[scheduler]") {
  const TestBatch lone_decode = make_batch({1}, {8192}, 16, 2);
  SECTION("one worker never splits") {
    const auto plan = AttentionScheduler<TilingTraits>(make_options(SplitPolicy::automatic, 1))
                          .plan(lone_decode.view());
    REQUIRE(plan.work_items().size() == 1);  // both KV heads' 8 rows
    REQUIRE(plan.num_partials() == 0);
  }
  SECTION("seven workers: about two tasks per worker") {
    const SchedulerOptions options = make_options(SplitPolicy::automatic, 7);
    const auto plan = AttentionScheduler<TilingTraits>(options).plan(lone_decode.view());
    REQUIRE(plan.work_items().size() >= 7);
    REQUIRE(plan.work_items().size() <= 14);
    REQUIRE(plan.reductions().size() == 1);  // one tile: both KV heads
    REQUIRE(check_plan(lone_decode, options, plan.data(), TilingTraits::head_dim).empty());
  }
  SECTION("many equal tiles are not split") {
    const TestBatch batch =
        make_batch(std::vector<std::int32_t>(64, 1), std::vector<std::int32_t>(64, 4000), 32, 8);
    const auto plan =
        AttentionScheduler<TilingTraits>(make_options(SplitPolicy::automatic, 7)).plan(batch.view());
    REQUIRE(plan.num_partials() == 0);
    REQUIRE(plan.work_items().size() == 64);  // each request's 8 KV heads x 4 rows in one tile
  }
  SECTION("a short context is never split below 512 positions") {
    const TestBatch batch = make_batch({1}, {1000}, 8, 1);
    const auto plan =
        AttentionScheduler<TilingTraits>(make_options(SplitPolicy::automatic, 64)).plan(batch.view());
    REQUIRE(plan.work_items().size() == 1);
  }
}

TEST_CASE("workspace follows the geometry formula and counts the partial slots", "[scheduler]") {
  const TestBatch batch = make_batch({1, 1, 17}, {5000, 100, 3000}, 8, 2);
  for (const std::size_t workers : {std::size_t{1}, std::size_t{3}, std::size_t{16}}) {
    for (const SchedulerOptions& options :
         {make_options(SplitPolicy::off, workers), make_options(SplitPolicy::automatic, workers),
          make_options(SplitPolicy::fixed, workers, 256),
          make_options(SplitPolicy::automatic, workers, 0, true)}) {
      const auto plan = AttentionScheduler<Traits512>(options).plan(batch.view());
      const auto partials = std::count_if(plan.work_items().begin(), plan.work_items().end(),
                                          [](const WorkItem& w) { return w.partial >= 0; });
      REQUIRE(plan.num_partials() == partials);
      REQUIRE(plan.num_workers() == workers);
      REQUIRE(plan.geometry() == Traits512::geometry(plan.isa()));
      REQUIRE(check_geometry(plan.geometry()).empty());
      REQUIRE(plan.workspace_bytes() ==
              expected_workspace(plan.geometry(), workers, static_cast<std::uint64_t>(plan.num_partials())));
    }
  }
  // fixed 256: 20 pieces over [0, 5000) of one tile holding both KV heads (2 x 4 rows); the
  // 17-token request (68 rows per KV head) has one tile per KV head (two KV heads exceed 128
  // rows) on 128-row steps, over [0, 3000): 12 pieces each; on 64-row steps two token chunks
  // (16 tokens per tile) per KV head, over [0, 2999) and [0, 3000): 12 pieces each; the 100 one
  // is unsplit.
  const auto fixed =
      AttentionScheduler<Traits512>(make_options(SplitPolicy::fixed, 1, 256)).plan(batch.view());
  const int token_chunks_of_17 = fixed.geometry().shape.max_tile_rows == 128 ? 1 : 2;
  REQUIRE(fixed.num_partials() == 20 + 2 * 12 * token_chunks_of_17);
}

TEST_CASE("workspace sizes beyond 2^31 and 2^32 bytes are exact; absurd ones are errors",
          "[scheduler]") {
  const std::uint64_t worker_bytes_512 = worker_bytes_512_on(best_isa());  // Traits512's ISA
  const std::uint64_t partial_bytes_512 = partial_bytes_512_on(best_isa());
  SECTION("many workers: more than 2^32 bytes") {
    const SchedulerOptions options = make_options(SplitPolicy::off, 20000);
    const auto plan =
        AttentionScheduler<Traits512>(options).plan(make_batch({1}, {10}, 1, 1).view());
    const std::uint64_t expected = worker_bytes_512 * 20000;
    REQUIRE(expected > (std::uint64_t{1} << 32));
    REQUIRE(plan.workspace_bytes() == expected);
  }
  SECTION("many partial slots: more than 2^31 bytes") {
    // Fixed splits of 16 over 320000 positions: 20000 pieces of one 512-dim tile.
    const auto plan = AttentionScheduler<Traits512>(make_options(SplitPolicy::fixed, 1, 16))
                          .plan(make_batch({1}, {320000}, 1, 1).view());
    REQUIRE(plan.num_partials() == 20000);
    const std::uint64_t expected = worker_bytes_512 + partial_bytes_512 * 20000;
    REQUIRE(expected > (std::uint64_t{1} << 31));
    REQUIRE(plan.workspace_bytes() == expected);
  }
  SECTION("both: more than 2^32 bytes") {
    const auto plan = AttentionScheduler<Traits512>(make_options(SplitPolicy::fixed, 9000, 16))
                          .plan(make_batch({1}, {320000}, 1, 1).view());
    const std::uint64_t expected = worker_bytes_512 * 9000 + partial_bytes_512 * 20000;
    REQUIRE(expected > (std::uint64_t{1} << 32));
    REQUIRE(plan.workspace_bytes() == expected);
  }
  SECTION("the largest worker count whose scratch fits 64 bits") {
    const std::uint64_t workers = std::numeric_limits<std::uint64_t>::max() / worker_bytes_512;
    AttentionPlan<Traits512> plan;
    const auto batch = make_batch({1}, {48}, 1, 1);
    REQUIRE(AttentionScheduler<Traits512>(make_options(SplitPolicy::off, workers))
                .try_plan(batch.view(), plan)
                .ok());
    REQUIRE(plan.workspace_bytes() == workers * worker_bytes_512);
    // Three partial slots more no longer fit: an error naming num_partials, not a wrapped size.
    const Status status =
        AttentionScheduler<Traits512>(make_options(SplitPolicy::fixed, workers, 16))
            .try_plan(batch.view(), plan);
    REQUIRE(status.code() == Errc::size_overflow);
    REQUIRE(status.argument() == "num_partials");
  }
  SECTION("2^62 workers") {
    const std::size_t workers = std::size_t{1} << 62;
    AttentionPlan<Traits> plan;
    const Status status = AttentionScheduler<Traits>(make_options(SplitPolicy::off, workers))
                              .try_plan(make_batch({1}, {8}, 8, 1).view(), plan);
    REQUIRE(status.code() == Errc::size_overflow);
    REQUIRE(status.argument() == "num_workers");
    REQUIRE(status.message().find(std::to_string(workers)) != std::string::npos);
    REQUIRE_THROWS_AS(AttentionScheduler<Traits>(make_options(SplitPolicy::off, workers))
                          .plan(make_batch({1}, {8}, 8, 1).view()),
                      Error);
  }
  SECTION("more work items (and partial slots) than SchedulingRules::max_work_items") {
    // 2^26 pieces of 16 positions per tile, 16 KV heads with a tile each (65 rows per KV head
    // are too many to share one): 2^30 items and slots. Rejected before allocating.
    AttentionPlan<Traits> plan;
    const Status status = AttentionScheduler<Traits>(make_options(SplitPolicy::fixed, 1, 16))
                              .try_plan(make_batch({65}, {max_seq_len}, 16, 16).view(), plan);
    REQUIRE(status.code() == Errc::size_overflow);
    REQUIRE(status.argument() == "batch");
    REQUIRE(plan.work_items().empty());
  }
}

TEST_CASE("deterministic mode: a request's work depends only on the request", "[scheduler]") {
  TestBatch batch = make_batch({1, 20, 100, 1, 3}, {5000, 4500, 100, 2049, 7000}, 8, 2);
  batch.window_left = 3000;
  for (const std::int32_t split_tokens : {0, 256}) {
    std::vector<RequestWork> reference;
    for (std::size_t r = 0; r < batch.seq_lens.size(); ++r) {
      const TestBatch alone =
          make_batch({static_cast<std::int32_t>(batch.q_len(r))}, {batch.seq_lens[r]}, 8, 2);
      TestBatch alone_windowed = alone;
      alone_windowed.window_left = batch.window_left;
      const auto plan =
          AttentionScheduler<Traits>(make_options(SplitPolicy::automatic, 1, split_tokens, true))
              .plan(alone_windowed.view());
      REQUIRE(plan.deterministic());
      reference.push_back(request_work(plan.data(), 0));
    }
    // 5000 positions at 2048: three pieces per tile.
    if (split_tokens == 0)
      REQUIRE(std::count_if(reference[0].begin(), reference[0].end(),
                            [](const auto& w) { return w[0] == 0; }) == 2 * 3);
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}, std::size_t{8}}) {
      for (const SplitPolicy policy :
           {SplitPolicy::automatic, SplitPolicy::off, SplitPolicy::fixed}) {
        if (policy == SplitPolicy::fixed && split_tokens == 0)
          continue;  // Invalid: fixed needs split_tokens.
        const SchedulerOptions options = make_options(policy, workers, split_tokens, true);
        const auto plan = AttentionScheduler<Traits>(options).plan(batch.view());
        REQUIRE(check_plan(batch, options, plan.data(), Traits::head_dim).empty());
        for (std::size_t r = 0; r < batch.seq_lens.size(); ++r) {
          INFO("split_tokens " << split_tokens << ", workers " << workers << ", request " << r);
          REQUIRE(request_work(plan.data(), static_cast<std::int32_t>(r)) == reference[r]);
        }
      }
    }
  }
}

TEST_CASE("bad inputs are errors naming the argument and the value", "[scheduler]") {
  struct Case {
    const char* what;
    TestBatch batch;
    std::string argument;
    std::string value;
  };
  const TestBatch good = make_batch({1, 2}, {5, 6}, 8, 2);
  std::vector<Case> cases;
  const auto add = [&](const char* what, auto mutate, std::string argument, std::string value) {
    TestBatch batch = good;
    mutate(batch);
    cases.push_back({what, batch, std::move(argument), std::move(value)});
  };
  add(
      "Hq % Hkv != 0",
      [](TestBatch& b) {
        b.num_query_heads = 6;
        b.num_kv_heads = 4;
      },
      "num_query_heads", "6");
  add(
      "Hq == 0", [](TestBatch& b) { b.num_query_heads = 0; }, "num_query_heads", "0");
  add(
      "Hkv < 0", [](TestBatch& b) { b.num_kv_heads = -2; }, "num_kv_heads", "-2");
  add(
      "window_left < -1", [](TestBatch& b) { b.window_left = -2; }, "window_left", "-2");
  add(
      "window_right < -1", [](TestBatch& b) { b.window_right = -5; }, "window_right", "-5");
  add(
      "query_start_loc not from 0",
      [](TestBatch& b) {
        b.query_start_loc = {1, 2, 3};
        b.num_tokens = 3;
      },
      "query_start_loc[0]", "1");
  add(
      "query_start_loc decreasing",
      [](TestBatch& b) {
        b.query_start_loc = {0, 2, 1};
        b.num_tokens = 1;
      },
      "query_start_loc[2]", "1");
  add(
      "query_start_loc not ending at num_tokens", [](TestBatch& b) { b.num_tokens = 4; },
      "num_tokens", "4");
  add(
      "seq_len < q_len", [](TestBatch& b) { b.seq_lens[1] = 1; }, "seq_lens[1]", "1");
  add(
      "seq_lens too short", [](TestBatch& b) { b.seq_lens.pop_back(); }, "seq_lens.size()", "1");
  add(
      "causal_per_request wrong size",
      [](TestBatch& b) {
        b.causal_per_request = {1, 0, 1};
      },
      "causal_per_request.size()", "3");
  add(
      "causal_per_request not 0/1",
      [](TestBatch& b) {
        b.causal_per_request = {1, 7};
      },
      "causal_per_request[1]", "7");
  add(
      "empty query_start_loc",
      [](TestBatch& b) {
        b.query_start_loc.clear();
        b.seq_lens.clear();
        b.num_tokens = 0;
      },
      "query_start_loc.size()", "0");

  const AttentionScheduler<Traits> scheduler;
  AttentionPlan<Traits> plan;
  for (const Case& c : cases) {
    INFO(c.what);
    const Status status = scheduler.try_plan(c.batch.view(), plan);
    REQUIRE_FALSE(status.ok());
    REQUIRE(status.argument() == c.argument);
    REQUIRE(status.message().find(c.argument + " = " + c.value + ":") != std::string::npos);
    try {
      (void)scheduler.plan(c.batch.view());
      FAIL("expected an Error");
    } catch (const Error& error) {
      REQUIRE(error.argument() == c.argument);
      REQUIRE(error.code() == status.code());
    }
  }
}

TEST_CASE("bad scheduler options are errors naming the option and the value", "[scheduler]") {
  struct Case {
    SchedulerOptions options;
    std::string argument;
    std::string value;
  };
  const std::vector<Case> cases = {
      {make_options(SplitPolicy::automatic, 0), "num_workers", "0"},
      {make_options(SplitPolicy::fixed, 1, 0), "split_tokens", "0"},
      {make_options(SplitPolicy::fixed, 1, 24), "split_tokens", "24"},
      {make_options(SplitPolicy::fixed, 1, -16), "split_tokens", "-16"},
      {make_options(SplitPolicy::automatic, 1, -32), "split_tokens", "-32"},
      {make_options(SplitPolicy::off, 1, 8), "split_tokens", "8"},
      {make_options(static_cast<SplitPolicy>(9), 1), "split_policy", "9"},
  };
  for (const Case& c : cases) {
    INFO(c.argument << " = " << c.value);
    const Status status = validate_scheduler_options(c.options);
    REQUIRE(status.code() == Errc::invalid_argument);
    REQUIRE(status.argument() == c.argument);
    REQUIRE(status.message().find(c.argument + " = " + c.value + ":") != std::string::npos);
    try {
      const AttentionScheduler<Traits> scheduler(c.options);
      FAIL("expected an Error");
    } catch (const Error& error) {
      REQUIRE(error.argument() == c.argument);
    }
  }
  REQUIRE(validate_scheduler_options(make_options(SplitPolicy::fixed, 3, 16)).ok());
  REQUIRE(validate_scheduler_options(make_options(SplitPolicy::automatic, 1, 0, true)).ok());
}

TEST_CASE("the scheduler's ISA comes from the traits", "[scheduler]") {
  REQUIRE(AttentionScheduler<Traits>().isa() == best_isa());
  REQUIRE(AttentionScheduler<ScalarTraits>().isa() == IsaId::scalar);
  const auto plan = AttentionScheduler<ScalarTraits>().plan(make_batch({1}, {4}, 2, 1).view());
  REQUIRE(plan.isa() == IsaId::scalar);
  REQUIRE(plan.data().geometry.head_dim == 64);
  using AmxTraits = AttentionTraits<bf16_t, bf16_t, 128, isa::amx>;
  if (isa_available(IsaId::amx)) {
    REQUIRE(AttentionScheduler<AmxTraits>().isa() == IsaId::amx);
  } else {
    try {
      const AttentionScheduler<AmxTraits> scheduler;
      FAIL("expected an Error");
    } catch (const Error& error) {
      REQUIRE(error.code() == Errc::unsupported);
      REQUIRE(error.argument() == "isa");
    }
  }
}

TEST_CASE("re-planning into a used plan equals a fresh plan and reuses its memory", "[scheduler]") {
  TestBatch big = make_batch({1, 40, 1, 7, 1}, {9000, 40, 300, 2000, 12}, 32, 8);
  big.window_left = 1000;
  TestBatch small = make_batch({1, 3}, {4000, 3}, 32, 8);
  small.causal_per_request = {1, 0};
  for (const SchedulerOptions& options :
       {make_options(SplitPolicy::automatic, 7), make_options(SplitPolicy::fixed, 2, 512),
        make_options(SplitPolicy::off, 3, 0, true)}) {
    const AttentionScheduler<Traits> scheduler(options);
    const auto fresh_big = scheduler.plan(big.view());
    const auto fresh_small = scheduler.plan(small.view());
    AttentionPlan<Traits> reused;
    REQUIRE(scheduler.try_plan(big.view(), reused).ok());
    REQUIRE(same_plan(reused.data(), fresh_big.data()));
    const WorkItem* items = reused.work_items().data();
    const std::int32_t* starts = reused.data().query_start_loc.data();
    REQUIRE(scheduler.try_plan(small.view(), reused).ok());
    REQUIRE(same_plan(reused.data(), fresh_small.data()));
    REQUIRE(scheduler.try_plan(big.view(), reused).ok());
    REQUIRE(same_plan(reused.data(), fresh_big.data()));
    REQUIRE(reused.work_items().data() == items);
    REQUIRE(reused.data().query_start_loc.data() == starts);
    REQUIRE(check_plan(big, options, reused.data(), Traits::head_dim).empty());
  }
}

TEST_CASE("visit_head_dim dispatches every listed head dim and rejects others", "[traits]") {
  for (int head_dim : {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512}) {
    int seen = 0;
    std::size_t scratch = 0;
    REQUIRE(pagedattn::visit_head_dim(head_dim, [&]<int D>(std::integral_constant<int, D>) {
      seen = D;
      scratch = pagedattn::AttentionTraits<pagedattn::bf16_t, pagedattn::fp8_e4m3_t, D>::geometry(IsaId::avx2).worker.bytes;
    }));
    REQUIRE(seen == head_dim);
    // The vector step's worker scratch, from its statement (check_geometry's regions, no probs).
    const auto d = static_cast<std::size_t>(head_dim);
    REQUIRE(scratch == 2 * 4 * 64 * d + 4 * 64 * 128 + 2 * 4 * 64 + 4 * 128 * d);
  }
  for (int head_dim : {0, 16, 48, 100, 513, 1024}) {
    REQUIRE_FALSE(pagedattn::visit_head_dim(head_dim, [](auto) { FAIL("called"); }));
  }
}
