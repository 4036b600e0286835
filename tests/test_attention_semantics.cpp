// The edges of paged_attention's contract on the ISA chosen with --isa: NaN and infinity
// semantics, windows and positions near INT32_MAX, a plan run only on its own batch, overlap
// rules, block-table address overflow, scales of non-FP8 caches, and bounded planning.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention_reference.hpp"
#include "pagedattn/attention/layer_group.hpp"
#include "pagedattn/attention/paged_attention.hpp"
#include "pagedattn/attention/scheduler.hpp"
#include "pagedattn/attention/traits.hpp"
#include "pagedattn/exec/serial_executor.hpp"
#include "pagedattn/exec/thread_pool.hpp"
#include "pagedattn/fp8/scaled_convert.hpp"
#include "mxcsr_scope.hpp"
#include "test_support.hpp"
#include "tolerances.hpp"

using namespace pagedattn;
using pagedattn::test::selected_isa;
using pagedattn::test::Workspace;
namespace pt = pagedattn::test;

namespace {

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();
constexpr float infinity = std::numeric_limits<float>::infinity();


/// One batch with its data (queries, a cache filled through reshape_and_cache, params), on
/// AttentionTraits<Q, CacheT, HeadDim> and the --isa ISA. 16 query heads on 1 KV head, so that
/// each KV head's rows fill the 16-row tiles of the AMX tier.
template <class Q, class CacheT, int HeadDim = 64>
struct Scenario {
  using Traits = AttentionTraits<Q, CacheT, HeadDim>;
  static constexpr int heads = 16;

  pt::TestBatch batch;
  pt::StridedTensor<Q> query;
  pt::TestCache<CacheT, HeadDim> cache;
  pt::TestParams params;

  /// Requests (q_len, seq_len), block size, causal flag and seed.
  Scenario(std::vector<std::pair<int, int>> requests, int block_size, bool causal, std::uint64_t seed) {
    batch.num_query_heads = heads;
    batch.num_kv_heads = 1;
    batch.causal = causal;
    for (const auto& [q_len, seq_len] : requests) batch.add_request(q_len, seq_len);
    query = pt::random_tensor<Q>(batch.num_tokens(), heads, HeadDim, 0, 0, seed);
    const auto key = pt::random_tensor<Q>(batch.total_kv_tokens(), 1, HeadDim, 0, 0, seed + 1);
    const auto value = pt::random_tensor<Q>(batch.total_kv_tokens(), 1, HeadDim, 0, 0, seed + 2);
    params.scale = static_cast<float>(2.0 / std::sqrt(static_cast<double>(HeadDim)));
    params.k_scale = is_fp8_v<CacheT> ? 0.5f : 1.0f;
    params.v_scale = is_fp8_v<CacheT> ? 2.0f : 1.0f;
    cache = pt::make_filled_cache<CacheT, HeadDim>(batch, block_size, key.const_view(), value.const_view(),
                                                   params.k_scale, params.v_scale, seed + 3, selected_isa);
  }

  /// A deep copy (the query view points into the copy's own storage).
  Scenario(const Scenario& other)
      : batch(other.batch), cache(other.cache), params(other.params) {
    query.storage = other.query.storage;
    query.view = other.query.view;
    query.view.data = query.storage.data() + (other.query.view.data - other.query.storage.data());
  }
  Scenario& operator=(const Scenario&) = delete;

  /// Sets K (`in_key`) or V of request `r`'s position `position`, every head dim, to `x` (stored
  /// as x / scale, exact for the values used: 0, NaN, infinities, powers of two).
  void set(bool in_key, int r, int position, float x) {
    using Layout = KvBlockLayout<CacheT>;
    const std::int64_t physical = cache.table[static_cast<std::size_t>(r * cache.table_stride + position / cache.block_size)];
    CacheT* block = cache.storage.data() + static_cast<std::size_t>(physical) * 2 * cache.block_size * HeadDim;
    if (!in_key) block += static_cast<std::size_t>(cache.block_size) * HeadDim;
    const float stored = x / (in_key ? params.k_scale : params.v_scale);
    for (int d = 0; d < HeadDim; ++d) {
      const std::size_t index = in_key ? Layout::key_index(HeadDim, position % cache.block_size, d)
                                       : Layout::value_index(cache.block_size, HeadDim, position % cache.block_size, d);
      block[index] = CacheT(stored);
    }
  }

  /// The block table as paged_attention takes it.
  [[nodiscard]] BlockTableView table() const {
    return BlockTableView::with_stride(cache.table.data(), cache.table_rows, cache.table_cols, cache.table_stride);
  }

  /// A plan of this batch with default options on --isa.
  [[nodiscard]] AttentionPlan<Traits> plan() const {
    SchedulerOptions options;
    options.isa = selected_isa;
    return AttentionScheduler<Traits>(options).plan(batch.view());
  }

  /// Plans with `options` (on --isa) and runs into a packed output, returned as floats.
  std::vector<float> run(SchedulerOptions options = {}) const {
    SerialExecutor serial;
    return run_on(serial, options);
  }

  /// run(options) on `executor` (the plan made for its worker count).
  template <Executor E>
  std::vector<float> run_on(E& executor, SchedulerOptions options = {}) const {
    options.isa = selected_isa;
    options.num_workers = executor.num_workers();
    const AttentionScheduler<Traits> scheduler(options);
    const AttentionPlan<Traits> plan = scheduler.plan(batch.view());
    const Workspace workspace(plan.workspace_bytes());
    std::vector<Q> output(static_cast<std::size_t>(batch.num_tokens() * heads * HeadDim), Q(-3.0f));
    paged_attention(plan, batch.view(), query.const_view(), cache.const_view(), table(),
                    TokenHeadsView<Q>::packed(output.data(), batch.num_tokens(), heads, HeadDim), params.view(),
                    workspace.span(), executor);
    std::vector<float> result(output.size());
    for (std::size_t i = 0; i < output.size(); ++i) result[i] = static_cast<float>(output[i]);
    return result;
  }

  /// run() through AttentionTraits<Q, CacheT, dynamic_head_dim> (head dim given at run time)
  /// and an AttentionLayerGroup, for `layers` layers of the same data.
  std::vector<float> run_dynamic(int layers = 1) const {
    SchedulerOptions options;
    options.isa = selected_isa;
    AttentionLayerGroup<AttentionTraits<Q, CacheT, dynamic_head_dim>> group(options, HeadDim);
    group.plan(batch.view());
    std::vector<Q> output(static_cast<std::size_t>(batch.num_tokens() * heads * HeadDim), Q(-3.0f));
    SerialExecutor serial;
    const KvCacheView<const CacheT, dynamic_head_dim> runtime_cache = cache.const_view();
    for (int layer = 0; layer < layers; ++layer) {
      group.run(batch.view(), query.const_view(), runtime_cache, table(),
                TokenHeadsView<Q>::packed(output.data(), batch.num_tokens(), heads, HeadDim), params.view(), serial);
    }
    std::vector<float> result(output.size());
    for (std::size_t i = 0; i < output.size(); ++i) result[i] = static_cast<float>(output[i]);
    return result;
  }

  /// The float64 oracle.
  [[nodiscard]] std::vector<double> reference() const {
    return pt::reference_attention<Q, CacheT>(cache.reference(), cache.reference_table(), query.const_view(),
                                              batch.view(), params.view());
  }

  /// Elements of row (token, head) of a packed output.
  static std::span<const float> row(const std::vector<float>& output, std::int64_t token, int head) {
    return std::span<const float>(output).subspan(static_cast<std::size_t>((token * heads + head) * HeadDim), HeadDim);
  }
};

/// A batch of one decode request (one query token) at `seq_len`, owning its arrays.
struct OneDecode {
  std::vector<std::int32_t> start{0, 1};
  std::vector<std::int32_t> lens;
  AttentionBatch batch;

  OneDecode(std::int32_t seq_len, int query_heads, int kv_heads) : lens{seq_len} {
    batch.query_start_loc = start;
    batch.seq_lens = lens;
    batch.num_tokens = 1;
    batch.num_query_heads = query_heads;
    batch.num_kv_heads = kv_heads;
  }
  OneDecode(const OneDecode&) = delete;
  OneDecode& operator=(const OneDecode&) = delete;
};

/// Options that cut every KV range at multiples of `tokens` (splits and reductions).
SchedulerOptions fixed_split(std::int32_t tokens) {
  SchedulerOptions options;
  options.split_policy = SplitPolicy::fixed;
  options.split_tokens = tokens;
  return options;
}

/// Largest |output - oracle| over `rows` rows of a packed output (infinity on a non-finite value).
double max_error(const std::vector<float>& output, const std::vector<double>& reference) {
  double worst = 0.0;
  for (std::size_t i = 0; i < output.size(); ++i) {
    const double error = std::abs(static_cast<double>(output[i]) - reference[i]);
    worst = std::isfinite(error) ? std::max(worst, error) : infinity;
  }
  return worst;
}

/// True when `a` and `b` hold the same floats bit for bit.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// True when every element of `row` is NaN.
bool all_nan(std::span<const float> row) {
  for (float x : row) {
    if (!std::isnan(x)) return false;
  }
  return true;
}

/// True when every element of `row` is finite.
bool all_finite(std::span<const float> row) {
  for (float x : row) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

/// Runs `f.template operator()<Q, CacheT>()` for the type pairs of these tests: the fp32, bf16
/// (pair dot products, AMX tiles) and FP8 paths.
template <class F>
void for_type_pairs(F&& f) {
  f.template operator()<float, float>();
  f.template operator()<bf16_t, bf16_t>();
  f.template operator()<bf16_t, fp8_e4m3_t>();
  f.template operator()<fp16_t, fp8_e5m2_t>();
}

}  // namespace

TEST_CASE("NaN: a NaN in a query row makes that row NaN and no other, with and without splits",
          "[attention][nan]") {
  for_type_pairs([]<class Q, class CacheT>() {
    INFO(dtype_name(dtype_of<Q>) << "/" << dtype_name(dtype_of<CacheT>));
    // A prefill (rows in tiles) and a decode (one row per head).
    Scenario<Q, CacheT> s({{20, 100}, {1, 300}}, 32, true, 11);
    for (const SchedulerOptions& options : {SchedulerOptions{}, fixed_split(64)}) {
      const std::vector<float> clean = s.run(options);
      Scenario<Q, CacheT> poisoned = s;
      TokenHeadsView<Q> query = poisoned.query.view;
      query.row(3, 5)[7] = Q(nan_value);   // prefill row: token 3, head 5
      query.row(20, 9)[0] = Q(nan_value);  // the decode row, head 9
      const std::vector<float> out = poisoned.run(options);
      for (std::int64_t t = 0; t < s.batch.num_tokens(); ++t) {
        for (int h = 0; h < s.heads; ++h) {
          INFO("token " << t << " head " << h << " split " << options.split_tokens);
          const auto row = s.row(out, t, h);
          if ((t == 3 && h == 5) || (t == 20 && h == 9)) {
            CHECK(all_nan(row));
          } else {
            const auto clean_row = s.row(clean, t, h);
            CHECK(std::memcmp(row.data(), clean_row.data(), row.size_bytes()) == 0);
          }
        }
      }
    }
  });
}

TEST_CASE("NaN: a NaN key or value reaches exactly the rows that see its position", "[attention][nan]") {
  for_type_pairs([]<class Q, class CacheT>() {
    INFO(dtype_name(dtype_of<Q>) << "/" << dtype_name(dtype_of<CacheT>));
    // Request 0: 40 query tokens at positions 24..63 of 64, causal; position 41 is seen by the
    // rows of tokens 17.. (positions 41..63) and not by tokens 0..16; tokens 16..19 share a
    // work item (4 tokens x 16 heads), whose KV tile holds position 41 while token 16 is masked.
    Scenario<Q, CacheT> s({{40, 64}}, 32, true, 21);
    const std::vector<double> reference = s.reference();
    for (const bool in_key : {true, false}) {
      for (const float poison : {nan_value, infinity, -infinity}) {
        if (is_fp8_v<CacheT> && std::isinf(poison)) continue;  // FP8 conversion saturates infinities
        for (const SchedulerOptions& options : {SchedulerOptions{}, fixed_split(32)}) {
          INFO((in_key ? "K" : "V") << " = " << poison << " at position 41, split " << options.split_tokens);
          Scenario<Q, CacheT> poisoned = s;
          poisoned.set(in_key, 0, 41, poison);
          const std::vector<float> out = poisoned.run(options);
          std::vector<float> unseen_rows;
          std::vector<double> unseen_reference;
          for (std::int64_t t = 0; t < 40; ++t) {
            for (int h = 0; h < s.heads; ++h) {
              const auto row = s.row(out, t, h);
              INFO("token " << t << " head " << h);
              if (t >= 17) {
                // Seen: NaN in K or V gives NaN; +-inf in K (against queries of both signs: a
                // NaN or infinite logit) or in V gives a non-finite row, never a finite one.
                if (std::isnan(poison)) {
                  CHECK(all_nan(row));
                } else {
                  CHECK(!all_finite(row));
                }
              } else {
                unseen_rows.insert(unseen_rows.end(), row.begin(), row.end());
                const auto first = reference.begin() + (t * s.heads + h) * 64;
                unseen_reference.insert(unseen_reference.end(), first, first + 64);
              }
            }
          }
          // Rows that cannot see position 41 give the oracle's answer.
          CHECK(max_error(unseen_rows, unseen_reference) <= pt::tolerance<Q, CacheT>());
        }
      }
    }
  });
}

TEST_CASE("-inf logits weigh 0: a first tile of -inf logits before finite ones is not NaN", "[attention][nan]") {
  // float and bf16 caches hold -inf keys; with q . k = -inf on positions 0..31 (the first block
  // and KV tile) the rest of the context decides the row, as in the oracle.
  const auto check = []<class Q, class CacheT>() {
    INFO(dtype_name(dtype_of<Q>) << "/" << dtype_name(dtype_of<CacheT>));
    Scenario<Q, CacheT> s({{1, 200}, {4, 90}}, 32, true, 31);
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 32; ++j) s.set(true, r, j, -infinity);
    }
    // Each head's queries: positive first elements make -inf keys give -inf logits (a zero
    // element would give NaN: 0 x inf).
    for (std::int64_t t = 0; t < s.batch.num_tokens(); ++t) {
      for (int h = 0; h < s.heads; ++h) {
        for (int d = 0; d < 64; ++d) s.query.view.row(t, h)[d] = Q(d % 2 == 0 ? 0.5f : 0.25f);
      }
    }
    const std::vector<double> reference = s.reference();
    for (const SchedulerOptions& options : {SchedulerOptions{}, fixed_split(32)}) {
      INFO("split " << options.split_tokens);
      CHECK(max_error(s.run(options), reference) <= pt::tolerance<Q, CacheT>());
    }
  };
  check.template operator()<float, float>();
  check.template operator()<bf16_t, bf16_t>();
}

TEST_CASE("windows of INT32_MAX mean unbounded", "[attention][window]") {
  Scenario<bf16_t, bf16_t> s({{24, 70}, {1, 45}}, 32, false, 41);
  const std::vector<float> unbounded = s.run();
  for (const auto& [left, right] : {std::pair{std::numeric_limits<int>::max(), -1},
                                    std::pair{-1, std::numeric_limits<int>::max()},
                                    std::pair{std::numeric_limits<int>::max(), std::numeric_limits<int>::max()}}) {
    INFO("window (" << left << ", " << right << ")");
    Scenario<bf16_t, bf16_t> windowed = s;
    windowed.batch.window_left = left;
    windowed.batch.window_right = right;
    const std::vector<float> out = windowed.run();
    CHECK(std::memcmp(out.data(), unbounded.data(), out.size() * sizeof(float)) == 0);
    CHECK(max_error(out, windowed.reference()) <= pt::tolerance<bf16_t, bf16_t>());
  }
}

TEST_CASE("seq_len up to max_seq_len runs (here under a window); one more is an Error", "[attention][window]") {
  // One block of 2^16 positions that every logical block maps to: position j reads offset
  // j % 2^16, so a request of max_seq_len positions equals one of 2 x 2^16 with the same window.
  using Cache = bf16_t;
  constexpr int dim = 64, block = 1 << 16, window = 40;
  std::vector<Cache> memory(*kv_cache_elements(1, 1, block, dim));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (Cache& x : memory) x = Cache(normal(rng));
  const KvCacheView<const Cache, dim> cache(memory.data(), 1, 1, block);
  std::vector<std::int32_t> table(static_cast<std::size_t>(max_seq_len / block), 0);
  std::vector<bf16_t> query(16 * dim);
  for (bf16_t& x : query) x = bf16_t(normal(rng));
  using Traits = AttentionTraits<bf16_t, Cache, dim>;
  SchedulerOptions options;
  options.isa = selected_isa;
  const AttentionScheduler<Traits> scheduler(options);
  const auto run = [&](std::int32_t seq_len) {
    OneDecode decode(seq_len, 16, 1);
    AttentionBatch& batch = decode.batch;
    batch.window_left = window;
    const AttentionPlan<Traits> plan = scheduler.plan(batch);
    const Workspace workspace(plan.workspace_bytes());
    std::vector<bf16_t> output(16 * dim);
    AttentionParams params;
    params.scale = 0.125f;
    SerialExecutor serial;
    paged_attention(plan, batch, TokenHeadsView<const bf16_t>::packed(query.data(), 1, 16, dim), cache,
                    BlockTableView::row_major(table.data(), 1, static_cast<std::int64_t>(table.size())),
                    TokenHeadsView<bf16_t>::packed(output.data(), 1, 16, dim), params,
                    workspace.span(), serial);
    return output;
  };
  const std::vector<bf16_t> at_limit = run(max_seq_len);
  const std::vector<bf16_t> short_one = run(2 * block);
  CHECK(std::memcmp(at_limit.data(), short_one.data(), at_limit.size() * sizeof(bf16_t)) == 0);
  for (bf16_t x : at_limit) CHECK(std::isfinite(static_cast<float>(x)));

  const OneDecode too_long(max_seq_len + 1, 16, 1);
  try {
    (void)scheduler.plan(too_long.batch);
    FAIL("seq_len max_seq_len + 1 was accepted");
  } catch (const Error& error) {
    CHECK(error.argument() == "seq_lens[0]");
    CHECK(error.code() == Errc::out_of_range);
  }
}

TEST_CASE("planning is bounded: huge head counts or splits give an Error, not bad_alloc", "[attention][scheduler]") {
  using Traits = AttentionTraits<bf16_t, bf16_t, 64>;
  SchedulerOptions options;
  options.isa = selected_isa;
  const auto plan_with = [&](const SchedulerOptions& scheduler_options, int heads, std::int32_t seq_len, bool causal) {
    OneDecode decode(seq_len, heads, heads);
    decode.batch.causal = causal;
    AttentionPlan<Traits> plan;
    return AttentionScheduler<Traits>(scheduler_options).try_plan(decode.batch, plan);
  };
  const Status heads = plan_with(options, 1 << 30, 16, true);
  CHECK(heads.code() == Errc::size_overflow);
  CHECK(heads.argument() == "batch");
  SchedulerOptions fine = options;
  fine.split_policy = SplitPolicy::fixed;
  fine.split_tokens = 16;
  const Status splits = plan_with(fine, 8, max_seq_len, false);
  CHECK(splits.code() == Errc::size_overflow);
  // Control: the largest number of items allowed plans (2^22 splits of one head).
  CHECK(plan_with(fine, 1, static_cast<std::int32_t>(SchedulingRules::max_work_items * 16), false).ok());
  CHECK(plan_with(fine, 1, static_cast<std::int32_t>(SchedulingRules::max_work_items * 16 + 16), false).code() ==
        Errc::size_overflow);
}

TEST_CASE("a plan runs only on the batch it was built for", "[attention][errors]") {
  Scenario<bf16_t, bf16_t> s({{3, 50}, {1, 70}}, 32, true, 51);
  const auto plan = s.plan();
  const Workspace workspace(plan.workspace_bytes());
  std::vector<bf16_t> output(static_cast<std::size_t>(4 * 16 * 64), bf16_t(-3.0f));
  const std::vector<bf16_t> untouched = output;
  SerialExecutor serial;
  const auto expect_stale = [&](const pt::TestBatch& other, const std::string& argument) {
    INFO(argument);
    try {
      paged_attention(plan, other.view(), s.query.const_view(), s.cache.const_view(), s.table(),
                      TokenHeadsView<bf16_t>::packed(output.data(), 4, 16, 64), s.params.view(), workspace.span(),
                      serial);
      FAIL("a stale plan ran");
    } catch (const Error& error) {
      CHECK(error.argument() == argument);
      CHECK(std::string(error.what()).find("plan") != std::string::npos);
    }
    CHECK(std::memcmp(output.data(), untouched.data(), output.size() * sizeof(bf16_t)) == 0);
  };
  pt::TestBatch other = s.batch;
  other.seq_lens[1] = 69;  // same shape, another context length
  expect_stale(other, "batch.seq_lens[1]");
  other = s.batch;
  other.query_start_loc = {0, 2, 4};  // the same 4 tokens, split otherwise
  other.seq_lens = {50, 71};
  expect_stale(other, "batch.query_start_loc[1]");
  other = s.batch;
  other.causal = false;
  expect_stale(other, "batch causal flag of request 0");
  other = s.batch;
  other.window_left = 8;
  expect_stale(other, "batch.window_left/window_right");
  // The plan's own batch, in other arrays with the same values, runs.
  const pt::TestBatch same = s.batch;
  paged_attention(plan, same.view(), s.query.const_view(), s.cache.const_view(), s.table(),
                  TokenHeadsView<bf16_t>::packed(output.data(), 4, 16, 64), s.params.view(), workspace.span(), serial);
  CHECK(max_error(std::vector<float>(output.begin(), output.end()), s.reference()) <= pt::tolerance<bf16_t, bf16_t>());
}

TEST_CASE("overlap: output in place of the query works; any other overlap is an Error", "[attention][errors]") {
  Scenario<bf16_t, bf16_t> s({{5, 40}, {1, 33}}, 32, true, 61);
  const auto plan = s.plan();
  const Workspace workspace(plan.workspace_bytes());
  SerialExecutor serial;
  const std::vector<float> out_of_place = s.run();
  const std::int64_t tokens = s.batch.num_tokens();

  // In place: the output is the query tensor itself (strided, as the scenario's query is).
  Scenario<bf16_t, bf16_t> in_place = s;
  TokenHeadsView<bf16_t> q = in_place.query.view;
  paged_attention(plan, s.batch.view(), static_cast<TokenHeadsView<const bf16_t>>(q), s.cache.const_view(), s.table(), q,
                  s.params.view(), workspace.span(), serial);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < 16; ++h) {
      for (int d = 0; d < 64; ++d) {
        INFO("token " << t << " head " << h << " dim " << d);
        REQUIRE(static_cast<float>(q.row(t, h)[d]) == s.row(out_of_place, t, h)[static_cast<std::size_t>(d)]);
      }
    }
  }

  const auto expect_overlap = [&](TokenHeadsView<const bf16_t> query, TokenHeadsView<bf16_t> output,
                                  std::span<std::byte> space, const std::string& argument, const std::string& other) {
    INFO(argument << " overlapping " << other);
    const Status status = validate_paged_attention(plan, s.batch.view(), query, s.cache.const_view(), s.table(),
                                                   output, s.params.view(), space);
    CHECK(status.argument() == argument);
    CHECK(status.message().find(other) != std::string::npos);
    CHECK(status.message().find("0x") != std::string::npos);  // addresses in hexadecimal
  };
  // Output one head past the query (same strides): overlaps without being it.
  std::vector<bf16_t> shared(static_cast<std::size_t>((tokens + 1) * 16 * 64));
  const auto query_view = TokenHeadsView<const bf16_t>::packed(shared.data(), tokens, 16, 64);
  expect_overlap(query_view, TokenHeadsView<bf16_t>::packed(shared.data() + 64, tokens, 16, 64), workspace.span(),
                 "output.data", "query");
  // Output inside the workspace, workspace over the query, output over the cache.
  std::vector<bf16_t> output(static_cast<std::size_t>(tokens * 16 * 64));
  const auto output_view = TokenHeadsView<bf16_t>::packed(output.data(), tokens, 16, 64);
  expect_overlap(query_view, TokenHeadsView<bf16_t>::packed(reinterpret_cast<bf16_t*>(workspace.data), tokens, 16, 64),
                 workspace.span(), "output.data", "workspace");
  const Workspace big(static_cast<std::uint64_t>(plan.workspace_bytes()) + shared.size() * sizeof(bf16_t));
  auto* inside = reinterpret_cast<bf16_t*>(big.data + plan.workspace_bytes() / 2 / 64 * 64);
  expect_overlap(TokenHeadsView<const bf16_t>::packed(inside, tokens, 16, 64), output_view, big.span(),
                 "workspace.data()", "query");
  std::vector<bf16_t> cache_copy = s.cache.storage;
  const KvCacheView<const bf16_t, 64> cache(cache_copy.data(), s.cache.num_blocks, 1, s.cache.block_size);
  const Status over_cache = validate_paged_attention(
      plan, s.batch.view(), query_view, cache, s.table(),
      TokenHeadsView<bf16_t>::packed(cache_copy.data() + 100, tokens, 16, 64), s.params.view(), workspace.span());
  CHECK(over_cache.argument() == "output.data");
  CHECK(over_cache.message().find("cache") != std::string::npos);
}

TEST_CASE("block-table strides whose addresses overflow are an Error, not undefined behaviour", "[attention][errors]") {
  Scenario<bf16_t, bf16_t> s({{1, 20}, {1, 20}}, 32, true, 71);
  const auto plan = s.plan();
  const Workspace workspace(plan.workspace_bytes());
  std::vector<bf16_t> output(2 * 16 * 64);
  for (const std::int64_t stride : {std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max(),
                                    std::numeric_limits<std::int64_t>::max() / 4 + 1}) {
    INFO("row_stride " << stride);
    BlockTableView table = s.table();
    table.row_stride = stride;
    const Status status = validate_paged_attention(plan, s.batch.view(), s.query.const_view(), s.cache.const_view(),
                                                   table, TokenHeadsView<bf16_t>::packed(output.data(), 2, 16, 64),
                                                   s.params.view(), workspace.span());
    CHECK(status.code() == Errc::size_overflow);
    CHECK(status.argument() == "block_table.row_stride");
  }
}

TEST_CASE("k_scale and v_scale: any value for caches that ignore them, checked for FP8 caches", "[attention][errors]") {
  Scenario<bf16_t, bf16_t> plain({{2, 30}}, 32, true, 81);
  const std::vector<float> expected = plain.run();
  for (const float scale : {0.0f, -1.0f, nan_value, infinity}) {
    Scenario<bf16_t, bf16_t> odd = plain;
    odd.params.k_scale = scale;
    odd.params.v_scale = scale;
    const std::vector<float> out = odd.run();
    CHECK(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0);

    Scenario<bf16_t, fp8_e4m3_t> fp8({{2, 30}}, 32, true, 82);
    fp8.params.k_scale = scale;
    try {
      (void)fp8.run();
      FAIL("k_scale " << scale << " accepted for an FP8 cache");
    } catch (const Error& error) {
      CHECK(error.argument() == "params.k_scale");
    }
  }
}

TEST_CASE("runtime head dim: any multiple of 16 runs, bit for bit as the typed form", "[attention][api]") {
  const auto check = []<int HeadDim>() {
    INFO("head dim " << HeadDim);
    for_type_pairs([]<class Q, class CacheT>() {
      INFO(dtype_name(dtype_of<Q>) << "/" << dtype_name(dtype_of<CacheT>));
      const Scenario<Q, CacheT, HeadDim> s({{17, 60}, {1, 40}}, 32, true, 91);
      const std::vector<float> typed = s.run();
      const std::vector<float> runtime = s.run_dynamic(2);
      CHECK(std::memcmp(typed.data(), runtime.data(), typed.size() * sizeof(float)) == 0);
      CHECK(max_error(runtime, s.reference()) <= pt::tolerance<Q, CacheT>());
    });
  };
  check.template operator()<16>();
  check.template operator()<48>();
  check.template operator()<64>();
  check.template operator()<208>();
}

TEST_CASE("AttentionLayerGroup: plan once per step, run per layer; misuse is an Error", "[attention][api]") {
  using Traits = AttentionTraits<bf16_t, bf16_t, 64>;
  Scenario<bf16_t, bf16_t> s({{3, 50}, {1, 70}}, 32, true, 95);
  SchedulerOptions options;
  options.isa = selected_isa;
  AttentionLayerGroup<Traits> group(options);
  std::vector<bf16_t> output(static_cast<std::size_t>(4 * 16 * 64), bf16_t(-3.0f));
  const auto out = TokenHeadsView<bf16_t>::packed(output.data(), 4, 16, 64);
  SerialExecutor serial;
  CHECK_THROWS_AS(group.run(s.batch.view(), s.query.const_view(), s.cache.const_view(), s.table(), out,
                            s.params.view(), serial),
                  Error);  // nothing planned yet
  for (const bf16_t& x : output) REQUIRE(static_cast<float>(x) == -3.0f);
  group.plan(s.batch.view());
  group.run(s.batch.view(), s.query.const_view(), s.cache.const_view(), s.table(), out, s.params.view(), serial);
  const std::vector<float> expected = s.run();
  for (std::size_t i = 0; i < output.size(); ++i) REQUIRE(static_cast<float>(output[i]) == expected[i]);
  // Another step's batch without plan(): refused.
  pt::TestBatch next = s.batch;
  next.seq_lens[1] = 71;
  CHECK_THROWS_AS(group.run(next.view(), s.query.const_view(), s.cache.const_view(), s.table(), out,
                            s.params.view(), serial),
                  Error);
  // A borrowed workspace one byte short: refused by run().
  group.plan(s.batch.view());
  const Workspace exact(group.workspace_bytes());
  group.plan(s.batch.view(), exact.span().first(exact.bytes - 1));
  try {
    group.run(s.batch.view(), s.query.const_view(), s.cache.const_view(), s.table(), out, s.params.view(), serial);
    FAIL("a short workspace was accepted");
  } catch (const Error& error) {
    CHECK(error.argument() == "workspace.size()");
  }
  group.plan(s.batch.view(), exact.span());
  group.run(s.batch.view(), s.query.const_view(), s.cache.const_view(), s.table(), out, s.params.view(), serial);
  for (std::size_t i = 0; i < output.size(); ++i) REQUIRE(static_cast<float>(output[i]) == expected[i]);
}

TEST_CASE("runtime head dim: mismatched cache or query head dims and bad values are Errors", "[attention][api]") {
  using Dynamic = AttentionTraits<bf16_t, bf16_t, dynamic_head_dim>;
  SchedulerOptions options;
  options.isa = selected_isa;
  for (const int bad : {0, 8, 40, 528, -16}) {
    INFO("head dim " << bad);
    CHECK_THROWS_AS(AttentionScheduler<Dynamic>(options, bad), Error);
  }
  Scenario<bf16_t, bf16_t> s({{2, 30}}, 32, true, 97);
  const AttentionScheduler<Dynamic> scheduler(options, 80);  // the plan says 80, the data 64
  const AttentionPlan<Dynamic> plan = scheduler.plan(s.batch.view());
  const Workspace workspace(plan.workspace_bytes());
  std::vector<bf16_t> output(2 * 16 * 80);
  const Status status = validate_paged_attention(plan, s.batch.view(), s.query.const_view(), s.cache.const_view(),
                                                 s.table(), TokenHeadsView<bf16_t>::packed(output.data(), 2, 16, 80),
                                                 s.params.view(), workspace.span());
  CHECK(status.argument() == "query.head_dim");
}

#if defined(__x86_64__)
TEST_CASE("scale checks read the bits: subnormal scales pass and zero, negative, inf and NaN fail, under DAZ too",
          "[attention][mxcsr]") {
  const float subnormal = std::ldexp(1.0f, -140);
  for (const unsigned mxcsr : pt::caller_mxcsr_values) {
    CAPTURE(mxcsr);
    const pt::MxcsrScope caller(mxcsr);
    for (const float good : {subnormal, std::numeric_limits<float>::min(), 1.0f, std::numeric_limits<float>::max()}) {
      CAPTURE(good);
      REQUIRE(check_scale(good).ok());
      AttentionParams params;
      params.scale = params.softcap = params.k_scale = params.v_scale = good;
      REQUIRE(validate_params(params, 4, true).ok());
    }
    for (const float bad : {0.0f, -0.0f, -subnormal, -1.0f, infinity, -infinity, nan_value}) {
      CAPTURE(bad);
      REQUIRE(check_scale(bad).code() == Errc::invalid_argument);
      AttentionParams params;
      params.scale = bad;
      REQUIRE(validate_params(params, 4, false).argument() == "params.scale");
      params.scale = 1.0f;
      params.v_scale = bad;
      REQUIRE(validate_params(params, 4, true).argument() == "params.v_scale");
      REQUIRE(validate_params(params, 4, false).ok());  // ignored without an FP8 cache
      params.v_scale = 1.0f;
      params.softcap = bad;
      const bool zero = (std::bit_cast<std::uint32_t>(bad) << 1) == 0;  // by the bits: DAZ reads -subnormal as 0
      REQUIRE(validate_params(params, 4, false).ok() == zero);  // 0 and -0 mean off
    }
  }
}

TEST_CASE("the caller's MXCSR (rounding, DAZ, FTZ) changes no output bit, on the calling thread or a pool's",
          "[attention][mxcsr]") {
  // A pool's helpers keep the MXCSR they started with while the calling thread (worker 0) runs
  // under the caller's: without a default environment per task, which thread ran which item
  // would show in the output. Values of V scaled down to the subnormal range (V x 2^-130 for the
  // unscaled caches, v_scale 2^-130 for the FP8 ones) make DAZ and FTZ matter, the rounding modes
  // the last bits of every sum.
  for_type_pairs([]<class Q, class CacheT>() {
    CAPTURE(dtype_name(dtype_of<Q>), dtype_name(dtype_of<CacheT>));
    Scenario<Q, CacheT> plain({{1, 300}, {5, 200}, {3, 3}}, 32, true, 61);
    Scenario<Q, CacheT> tiny = plain;
    if constexpr (is_fp8_v<CacheT>) {
      tiny.params.v_scale = std::ldexp(1.0f, -130);
    } else {
      for (CacheT& element : tiny.cache.storage) element = CacheT(static_cast<float>(element) * std::ldexp(1.0f, -130));
    }
    ThreadPool pool(3);
    for (const SchedulerOptions& options : {SchedulerOptions{}, fixed_split(64)}) {
      for (const Scenario<Q, CacheT>* scenario : {&plain, &tiny}) {
        const std::vector<float> standard = [&] {
          const pt::MxcsrScope caller(pt::default_mxcsr);
          return scenario->run(options);
        }();
        for (const unsigned mxcsr : pt::caller_mxcsr_values) {
          CAPTURE(mxcsr, scenario == &tiny, options.split_policy == SplitPolicy::fixed);
          const pt::MxcsrScope caller(mxcsr);
          REQUIRE(same_bits(scenario->run(options), standard));
          REQUIRE(same_bits(scenario->run_on(pool, options), standard));
          REQUIRE((_mm_getcsr() & pt::mxcsr_control_bits) == mxcsr);  // the caller's is restored
        }
      }
    }
  });
}
#endif
