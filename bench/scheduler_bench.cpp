// AttentionScheduler planning time for 256 requests (Llama-3-8B layer group: 32 query heads over 8
// KV heads, head dim 128), re-planning into a reused plan and building a fresh one. Target: a
// plan of 256 requests in <= 50 microseconds. Counters: requests/s, work items and reductions.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"

namespace {

using Traits = pagedattn::AttentionTraits<pagedattn::bf16_t, pagedattn::bf16_t, 128>;

/// `decodes` decode requests with contexts uniform in [1K, 32K] (seeded), after `prefills`
/// chunked-prefill requests of 512 new tokens over contexts of 512, 2K, 8K, 16K, ... positions.
std::vector<std::pair<int, int>> requests(int prefills, int decodes) {
  std::vector<std::pair<int, int>> result;
  const int prefill_contexts[] = {512, 2048, 8192, 16384};
  for (int i = 0; i < prefills; ++i) result.emplace_back(512, prefill_contexts[i % 4]);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> context(1024, 32768);
  for (int i = 0; i < decodes; ++i) result.emplace_back(1, context(rng));
  return result;
}

void plan_benchmark(benchmark::State& state, const std::vector<std::pair<int, int>>& shape,
                    std::size_t workers, bool reuse) {
  std::vector<std::int32_t> query_start_loc(1, 0), seq_lens;
  for (const auto& [q_len, seq_len] : shape) {
    query_start_loc.push_back(query_start_loc.back() + q_len);
    seq_lens.push_back(seq_len);
  }
  pagedattn::AttentionBatch batch;
  batch.query_start_loc = query_start_loc;
  batch.seq_lens = seq_lens;
  batch.num_tokens = query_start_loc.back();
  batch.num_query_heads = 32;
  batch.num_kv_heads = 8;
  pagedattn::SchedulerOptions options;
  options.num_workers = workers;
  // The plan does not depend on the ISA; plan for the one the kernels would run.
  options.isa = pagedattn::isa_available(pagedattn::IsaId::avx512) ? pagedattn::IsaId::avx512
                                                                   : pagedattn::IsaId::avx2;
  const pagedattn::AttentionScheduler<Traits> scheduler(options);
  pagedattn::AttentionPlan<Traits> plan = scheduler.plan(batch);  // warm: capacity for re-planning
  for (auto _ : state) {
    if (reuse) {
      if (!scheduler.try_plan(batch, plan).ok()) state.SkipWithError("try_plan failed");
    } else {
      plan = scheduler.plan(batch);
    }
    benchmark::DoNotOptimize(plan.data().work_items.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(shape.size()));
  state.counters["work_items"] = static_cast<double>(plan.work_items().size());
  state.counters["reductions"] = static_cast<double>(plan.reductions().size());
}

void register_all() {
  const std::pair<std::string, std::vector<std::pair<int, int>>> shapes[] = {
      {"mixed/prefill:4x512+decode:252", requests(4, 252)},
      {"decode:256", requests(0, 256)},
  };
  std::vector<std::size_t> worker_counts{pagedattn::ThreadPool::hardware_workers()};
  if (worker_counts[0] != 16) worker_counts.push_back(16);
  for (const auto& [name, shape] : shapes) {
    for (std::size_t workers : worker_counts) {
      for (bool reuse : {true, false}) {
        const std::string full = std::string(reuse ? "replan/" : "plan_fresh/") + name +
                                 "/workers:" + std::to_string(workers);
        benchmark::RegisterBenchmark(full.c_str(), [shape = shape, workers, reuse](benchmark::State& state) {
          plan_benchmark(state, shape, workers, reuse);
        })->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return pagedattn_bench::run_benchmarks(argc, argv, register_all); }
