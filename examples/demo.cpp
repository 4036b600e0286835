// Main demo: a Llama-3-8B-shaped layer group (32 query heads, 8 KV heads, head dim 128) serving a
// batch of 2 chunked-prefill requests and 30 decodes (contexts 1K-8K) from a paged bf16 cache and
// an FP8 E4M3 cache: reshape_and_cache, plan, paged_attention, a float64 check of sampled rows.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "attention_reference.hpp"

namespace {

using pagedattn::bf16_t;
constexpr int num_query_heads = 32;
constexpr int num_kv_heads = 8;
constexpr int head_dim = 128;
constexpr int block_size = 128;

/// Fast seeded unit-variance values (uniform on [-sqrt(3), sqrt(3)]) for filling large caches.
class UnitNoise {
 public:
  explicit UnitNoise(std::uint64_t seed) : state_(seed) {}
  float operator()() noexcept {
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (static_cast<float>(z >> 40) * 0x1p-24f * 2.0f - 1.0f) * 1.7320508f;
  }

 private:
  std::uint64_t state_;
};

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

/// The AttentionBatch of this layer group for the given request boundaries and context lengths.
pagedattn::AttentionBatch layer_batch(const std::vector<std::int32_t>& query_start_loc,
                                      const std::vector<std::int32_t>& seq_lens) {
  pagedattn::AttentionBatch batch;
  batch.query_start_loc = query_start_loc;
  batch.seq_lens = seq_lens;
  batch.num_tokens = query_start_loc.back();
  batch.num_query_heads = num_query_heads;
  batch.num_kv_heads = num_kv_heads;
  return batch;
}

/// The batch: per request, query tokens and context length.
struct DemoBatch {
  std::vector<std::int32_t> query_start_loc{0};
  std::vector<std::int32_t> seq_lens;
  std::vector<std::int32_t> block_table;  // [requests][max_blocks]
  int max_blocks = 0;
  std::int64_t num_blocks = 0;

  pagedattn::AttentionBatch view() const { return layer_batch(query_start_loc, seq_lens); }
};

DemoBatch make_batch(std::mt19937_64& rng) {
  DemoBatch b;
  const auto add = [&](int q_len, int seq_len) {
    b.query_start_loc.push_back(b.query_start_loc.back() + q_len);
    b.seq_lens.push_back(seq_len);
  };
  add(512, 2048);   // chunked prefill: 1536 tokens of history + a chunk of 512
  add(384, 384);    // the first chunk of a new prompt
  std::uniform_int_distribution<int> context(1024, 8192);
  for (int i = 0; i < 30; ++i) add(1, context(rng));
  for (int s : b.seq_lens) b.max_blocks = std::max(b.max_blocks, (s + block_size - 1) / block_size);
  const auto requests = static_cast<int>(b.seq_lens.size());
  b.block_table.assign(static_cast<std::size_t>(requests * b.max_blocks), 0);
  // Physical blocks handed out in a shuffled order, as an allocator would after some churn.
  std::vector<std::int32_t> physical;
  for (int r = 0; r < requests; ++r) b.num_blocks += (b.seq_lens[static_cast<std::size_t>(r)] + block_size - 1) / block_size;
  physical.resize(static_cast<std::size_t>(b.num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  std::size_t next = 0;
  for (int r = 0; r < requests; ++r) {
    const int blocks = (b.seq_lens[static_cast<std::size_t>(r)] + block_size - 1) / block_size;
    for (int j = 0; j < blocks; ++j) b.block_table[static_cast<std::size_t>(r * b.max_blocks + j)] = physical[next++];
  }
  return b;
}

/// Runs the whole flow for one cache type and prints one result line.
template <class CacheT>
void run(const DemoBatch& batch, const std::vector<bf16_t>& query, std::size_t workers, float kv_scale,
         const char* label) {
  using Traits = pagedattn::AttentionTraits<bf16_t, CacheT, head_dim>;
  const std::size_t elements =
      *pagedattn::kv_cache_elements(batch.num_blocks, num_kv_heads, block_size, head_dim);
  std::unique_ptr<CacheT[], FreeDeleter> memory(
      static_cast<CacheT*>(std::aligned_alloc(64, (elements * sizeof(CacheT) + 63) / 64 * 64)));
  const pagedattn::KvCacheView<CacheT, head_dim> cache(memory.get(), batch.num_blocks, num_kv_heads,
                                                       block_size);

  // Write every context position through reshape_and_cache, one request at a time.
  UnitNoise noise(7);
  for (std::size_t r = 0; r < batch.seq_lens.size(); ++r) {
    const int seq_len = batch.seq_lens[r];
    std::vector<bf16_t> key(static_cast<std::size_t>(seq_len) * num_kv_heads * head_dim);
    std::vector<bf16_t> value(key.size());
    for (auto& x : key) x = bf16_t(noise());
    for (auto& x : value) x = bf16_t(noise());
    std::vector<std::int64_t> slots(static_cast<std::size_t>(seq_len));
    for (int j = 0; j < seq_len; ++j) {
      const std::int64_t block = batch.block_table[r * static_cast<std::size_t>(batch.max_blocks) +
                                                   static_cast<std::size_t>(j / block_size)];
      slots[static_cast<std::size_t>(j)] = block * block_size + j % block_size;
    }
    pagedattn::reshape_and_cache(
        pagedattn::TokenHeadsView<const bf16_t>::packed(key.data(), seq_len, num_kv_heads, head_dim),
        pagedattn::TokenHeadsView<const bf16_t>::packed(value.data(), seq_len, num_kv_heads, head_dim),
        slots, cache, kv_scale, kv_scale);
  }

  pagedattn::SchedulerOptions options;
  options.num_workers = workers;
  const pagedattn::AttentionScheduler<Traits> scheduler(options);
  const pagedattn::AttentionBatch batch_view = batch.view();
  const auto plan = scheduler.plan(batch_view);
  std::unique_ptr<std::byte[], FreeDeleter> workspace(
      static_cast<std::byte*>(std::aligned_alloc(64, plan.workspace_bytes())));
  pagedattn::ThreadPool pool(workers);
  pagedattn::AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  params.k_scale = kv_scale;
  params.v_scale = kv_scale;
  const std::int64_t num_tokens = batch.query_start_loc.back();
  std::vector<bf16_t> output(query.size());
  const auto query_view =
      pagedattn::TokenHeadsView<const bf16_t>::packed(query.data(), num_tokens, num_query_heads, head_dim);
  const auto output_view =
      pagedattn::TokenHeadsView<bf16_t>::packed(output.data(), num_tokens, num_query_heads, head_dim);
  const auto table = pagedattn::BlockTableView::row_major(
      batch.block_table.data(), static_cast<std::int64_t>(batch.seq_lens.size()), batch.max_blocks);

  std::vector<double> seconds;
  for (int run_index = 0; run_index < 5; ++run_index) {
    const auto start = std::chrono::steady_clock::now();
    pagedattn::paged_attention(plan, batch_view, query_view, cache, table, output_view, params,
                               std::span<std::byte>(workspace.get(), plan.workspace_bytes()), pool);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];

  // Sampled rows: query token i of request r sees positions 0..p (causal), which is exactly what a
  // one-token request with seq_len p + 1 sees; the float64 oracle computes those requests.
  std::vector<std::int32_t> sample_start{0}, sample_seq, sample_table;
  std::vector<bf16_t> sample_query;
  std::vector<std::int64_t> sample_rows;
  std::mt19937_64 pick(11);
  for (std::size_t r = 0; r < batch.seq_lens.size(); ++r) {
    const int first = batch.query_start_loc[r];
    const int q_len = batch.query_start_loc[r + 1] - first;
    for (int i : {0, q_len - 1, static_cast<int>(pick() % static_cast<unsigned>(q_len))}) {
      if (r >= 4 && r % 5 != 0) break;  // every prefill row sample, every fifth decode
      sample_start.push_back(sample_start.back() + 1);
      sample_seq.push_back(batch.seq_lens[r] - q_len + i + 1);
      sample_table.insert(sample_table.end(), batch.block_table.begin() + static_cast<std::ptrdiff_t>(r) * batch.max_blocks,
                          batch.block_table.begin() + static_cast<std::ptrdiff_t>(r + 1) * batch.max_blocks);
      const auto row = query.begin() + static_cast<std::ptrdiff_t>(first + i) * num_query_heads * head_dim;
      sample_query.insert(sample_query.end(), row, row + num_query_heads * head_dim);
      sample_rows.push_back(first + i);
    }
  }
  const pagedattn::AttentionBatch sample_batch = layer_batch(sample_start, sample_seq);
  const auto sample_count = static_cast<std::int64_t>(sample_rows.size());
  const std::vector<double> expected = pagedattn::test::reference_attention<bf16_t, CacheT>(
      {memory.get(), batch.num_blocks, num_kv_heads, block_size, head_dim},
      {sample_table.data(), sample_count, batch.max_blocks, batch.max_blocks},
      pagedattn::TokenHeadsView<const bf16_t>::packed(sample_query.data(), sample_count, num_query_heads, head_dim),
      sample_batch, params);
  double max_error = 0.0;
  for (std::int64_t s = 0; s < sample_count; ++s) {
    for (int e = 0; e < num_query_heads * head_dim; ++e) {
      const double got = static_cast<float>(output[static_cast<std::size_t>(sample_rows[static_cast<std::size_t>(s)] * num_query_heads * head_dim + e)]);
      max_error = std::max(max_error, std::abs(got - expected[static_cast<std::size_t>(s * num_query_heads * head_dim + e)]));
    }
  }

  double kv_bytes = 0.0;
  for (int s : batch.seq_lens) kv_bytes += 2.0 * s * num_kv_heads * head_dim * sizeof(CacheT);
  fmt::print("{:<9} | {:<6} | {:>7} | {:>9.3f} ms | {:>8.2f} GB/s | {:>9.2e} ({} rows)\n", label,
             pagedattn::isa_name(plan.isa()), workers, median * 1e3, kv_bytes / median / 1e9, max_error,
             sample_count);
}

}  // namespace

int main() {
  std::mt19937_64 rng(2026);
  const DemoBatch batch = make_batch(rng);
  const std::int64_t num_tokens = batch.query_start_loc.back();
  std::vector<bf16_t> query(static_cast<std::size_t>(num_tokens) * num_query_heads * head_dim);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : query) x = bf16_t(normal(rng));
  std::int64_t context = 0;
  for (int s : batch.seq_lens) context += s;
  fmt::print("pagedattn {}.{}.{}: Llama-3-8B layer group (32 query heads, 8 KV heads, head dim 128), "
             "block size {}\n", pagedattn::version.major, pagedattn::version.minor,
             pagedattn::version.patch, block_size);
  fmt::print("batch: 2 prefill chunks (512 on 2048, 384 on 384) + 30 decodes (contexts 1K-8K): "
             "{} query tokens, {} KV positions\n", num_tokens, context);
  fmt::print("CPU best ISA: {}; time = median of 5 runs; GB/s = K+V cache bytes read / time\n\n",
             pagedattn::isa_name(pagedattn::best_isa()));
  fmt::print("{:<9} | {:<6} | {:>7} | {:>12} | {:>13} | {}\n", "cache", "ISA", "threads", "time",
             "KV bytes/s", "max |error| vs float64 reference");
  const std::size_t workers = pagedattn::ThreadPool::hardware_workers();
  for (std::size_t threads : {std::size_t{1}, workers}) {
    run<bf16_t>(batch, query, threads, 1.0f, "bf16");
    run<pagedattn::fp8_e4m3_t>(batch, query, threads, 0.5f, "fp8_e4m3");
    if (workers == 1) break;
  }
  return 0;
}
