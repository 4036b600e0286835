// Paged-attention decode and prefill benchmarks per ISA, with bytes/s (K+V bytes read) and
// FLOP/s (4 x head_dim per visible (query, key, head)) counters.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <pagedattn/pagedattn.hpp>

namespace {

using pagedattn::bf16_t;

/// Frees memory from std::aligned_alloc.
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

template <class T>
std::unique_ptr<T[], FreeDeleter> aligned_array(std::size_t count) {
  const std::size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(std::aligned_alloc(64, bytes)));
}

/// One benchmark shape: `requests` requests of q_len query tokens over seq_len positions.
struct Shape {
  int requests;
  int q_len;
  int seq_len;
  int num_query_heads;
  int num_kv_heads;
  bool causal;
};

template <class CacheT, int HeadDim, class Isa>
void attention_benchmark(benchmark::State& state, Shape shape, std::size_t workers) {
  using Traits = pagedattn::AttentionTraits<bf16_t, CacheT, HeadDim, Isa>;
  constexpr int block_size = 128;
  const int blocks_per_request = (shape.seq_len + block_size - 1) / block_size;
  const std::int64_t num_blocks = static_cast<std::int64_t>(blocks_per_request) * shape.requests;
  const std::size_t cache_elements =
      *pagedattn::kv_cache_elements(num_blocks, shape.num_kv_heads, block_size, HeadDim);
  auto cache_memory = aligned_array<CacheT>(cache_elements);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < cache_elements; ++i) cache_memory[i] = CacheT(normal(rng));
  const pagedattn::KvCacheView<CacheT, HeadDim> cache(cache_memory.get(), num_blocks,
                                                      shape.num_kv_heads, block_size);

  std::vector<std::int32_t> block_table(static_cast<std::size_t>(num_blocks));
  for (std::size_t b = 0; b < block_table.size(); ++b) block_table[b] = static_cast<std::int32_t>(b);
  std::vector<std::int32_t> query_start_loc(1, 0), seq_lens;
  for (int r = 0; r < shape.requests; ++r) {
    query_start_loc.push_back(query_start_loc.back() + shape.q_len);
    seq_lens.push_back(shape.seq_len);
  }
  const std::int64_t num_tokens = query_start_loc.back();
  std::vector<bf16_t> query(static_cast<std::size_t>(num_tokens) * shape.num_query_heads * HeadDim);
  for (auto& x : query) x = bf16_t(normal(rng));
  std::vector<bf16_t> output(query.size());

  pagedattn::AttentionBatch batch;
  batch.query_start_loc = query_start_loc;
  batch.seq_lens = seq_lens;
  batch.num_tokens = num_tokens;
  batch.num_query_heads = shape.num_query_heads;
  batch.num_kv_heads = shape.num_kv_heads;
  batch.causal = shape.causal;
  pagedattn::SchedulerOptions options;
  options.num_workers = workers;
  const pagedattn::AttentionScheduler<Traits> scheduler(options);
  const auto plan = scheduler.plan(batch);
  auto workspace = aligned_array<std::byte>(plan.workspace_bytes());
  pagedattn::ThreadPool pool(workers);
  pagedattn::AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(HeadDim));
  const pagedattn::BlockTableView table{block_table.data(), shape.requests, blocks_per_request,
                                        blocks_per_request};
  const auto query_view = pagedattn::TokenHeadsView<const bf16_t>::packed(
      query.data(), num_tokens, shape.num_query_heads, HeadDim);
  const auto output_view = pagedattn::TokenHeadsView<bf16_t>::packed(
      output.data(), num_tokens, shape.num_query_heads, HeadDim);
  for (auto _ : state) {
    pagedattn::paged_attention(plan, query_view, cache, table, output_view, params,
                               std::span<std::byte>(workspace.get(), plan.workspace_bytes()), pool);
    benchmark::ClobberMemory();
  }
  // Visible (query, key) pairs per head.
  double visible = 0;
  for (int i = 0; i < shape.q_len; ++i) {
    const int p = shape.seq_len - shape.q_len + i;
    visible += shape.causal ? p + 1 : shape.seq_len;
  }
  visible *= shape.requests;
  const double kv_bytes = 2.0 * shape.requests * shape.seq_len * shape.num_kv_heads * HeadDim * sizeof(CacheT);
  const double flops = 4.0 * HeadDim * visible * shape.num_query_heads;
  state.counters["kv_bytes_per_s"] = benchmark::Counter(kv_bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

template <class Isa>
void register_isa() {
  if (!pagedattn::isa_available(Isa::id)) return;
  const std::string isa(pagedattn::isa_name(Isa::id));
  for (std::size_t workers : {1u, 2u}) {
    const std::string suffix = "/" + isa + "/workers:" + std::to_string(workers);
    for (int batch : {1, 16}) {
      for (int context : {4096, 16384}) {
        const Shape decode{batch, 1, context, 32, 8, true};
        const std::string name = "decode_llama3_8b/batch:" + std::to_string(batch) +
                                 "/context:" + std::to_string(context);
        benchmark::RegisterBenchmark((name + "/bf16" + suffix).c_str(),
                                     attention_benchmark<bf16_t, 128, Isa>, decode, workers)
            ->UseRealTime();
        benchmark::RegisterBenchmark((name + "/fp8_e4m3" + suffix).c_str(),
                                     attention_benchmark<pagedattn::fp8_e4m3_t, 128, Isa>, decode, workers)
            ->UseRealTime();
      }
    }
    benchmark::RegisterBenchmark(("prefill_causal_2048/bf16" + suffix).c_str(),
                                 attention_benchmark<bf16_t, 128, Isa>,
                                 Shape{1, 2048, 2048, 32, 8, true}, workers)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_isa<pagedattn::isa::avx512>();
  register_isa<pagedattn::isa::avx2>();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
