// Paged-attention benchmarks per ISA: decode (KV cold, read from memory, as in a real engine
// stepping through its layers; one case also cached), prefill, and a mixed batch with its separate
// parts. Counters: K+V bytes read per s and FLOP/s (4 x head_dim per visible (query, key, head)),
// each also as a fraction of the read bandwidth, of the peak of the instruction the tier multiplies
// the queries with and of the FP32 FMA peak, measured at the start of the same run; cold cases also
// probe the read bandwidth just before and after their timed loop. Phase counters (PhaseTracer)
// say where each call's time went: calling thread alone, workers in tasks, waking, waiting.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "support/caller_pin.hpp"
#include "support/machine_limits.hpp"
#include "support/memory.hpp"
#include "support/phase_tracer.hpp"

namespace {

using pagedattn::bf16_t;
using pagedattn::fp8_e4m3_t;
using pagedattn::fp8_e5m2_t;

/// KV bytes the cold cases spread their "layers" over (128x the README machine's 32 MiB L3).
constexpr std::size_t cold_pool_bytes = std::size_t{4} << 30;
/// Passes of each read probe around a cold case's loop (its own KV pool read in order, cold_pool_bytes each).
constexpr int adjacent_probe_passes = 3;
constexpr int block_size = 128;

/// One benchmark batch: requests given by (q_len, seq_len); heads of one layer group.
struct Shape {
  std::vector<std::pair<int, int>> requests;  ///< (q_len, seq_len) per request.
  int num_query_heads;
  int num_kv_heads;
  bool causal;
  bool cold;  ///< Rotate over enough copies ("layers") that every K/V byte comes from memory.
};

/// How a case runs besides its shape (decode_setup rows vary it): the pool's options, with
/// pinned helpers also the calling thread pinned to the first allowed CPU; fixed splits.
struct Setup {
  pagedattn::ThreadPoolOptions pool{};
  int split_tokens = 0;  ///< > 0: SplitPolicy::fixed with pieces of this many positions
};

/// `count` requests of `q_len` query tokens over `seq_len` positions.
std::vector<std::pair<int, int>> uniform(int count, int q_len, int seq_len) {
  return std::vector<std::pair<int, int>>(static_cast<std::size_t>(count), {q_len, seq_len});
}

/// Where a call's time went, per call: `outside_us` on the calling thread outside the parallel
/// phases (checks, dispatch); per phase (`attention`: the work items, `reduction`: merging split
/// pieces, 0 without splits) its wall time, and the attention phase's worker time split into
/// fractions: in tasks, before each worker's first task, after its last; its mean and longest
/// task (`task_us`, `longest_task_us`: the longest of each call, averaged); `helper_start_us`, when
/// the attention phase ran on more than the calling thread, the latest first task start of the
/// other workers (their wake-up).
template <class E>
void add_phase_counters(benchmark::State& state, const pagedattn_bench::PhaseTracer<E>& tracer) {
  const auto calls = static_cast<double>(tracer.calls());
  const pagedattn_bench::PhaseTotals attention = tracer.phase(0);
  const pagedattn_bench::PhaseTotals reduction = tracer.phase(1);
  const double worker_seconds = static_cast<double>(tracer.num_workers()) * attention.wall;
  state.counters["outside_us"] = 1e6 * tracer.outside() / calls;
  state.counters["attention_us"] = 1e6 * attention.wall / calls;
  state.counters["attention_in_tasks"] = attention.in_tasks / worker_seconds;
  state.counters["attention_before_first"] = attention.before_first / worker_seconds;
  state.counters["attention_after_last"] = attention.after_last / worker_seconds;
  state.counters["attention_tasks"] = static_cast<double>(attention.tasks) / calls;
  state.counters["task_us"] = 1e6 * attention.in_tasks / static_cast<double>(attention.tasks);
  state.counters["longest_task_us"] = 1e6 * attention.longest_task / calls;
  if (const auto helper_start = attention.mean_last_helper_start()) state.counters["helper_start_us"] = 1e6 * *helper_start;
  state.counters["reduction_us"] = 1e6 * reduction.wall / calls;
  state.counters["reduction_tasks"] = static_cast<double>(reduction.tasks) / calls;
}

template <class CacheT, int HeadDim, class Isa>
void attention_benchmark(benchmark::State& state, const Shape& shape, std::size_t workers, const Setup& setup) {
  using Traits = pagedattn::AttentionTraits<bf16_t, CacheT, HeadDim, Isa>;
  const int num_requests = static_cast<int>(shape.requests.size());
  int max_blocks = 0;
  std::int64_t layer_blocks = 0;
  for (const auto& [q_len, seq_len] : shape.requests) {
    const int blocks = (seq_len + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, blocks);
    layer_blocks += blocks;
  }
  const std::size_t layer_bytes =
      *pagedattn::kv_cache_elements(layer_blocks, shape.num_kv_heads, block_size, HeadDim) * sizeof(CacheT);
  const std::int64_t layers =
      shape.cold ? std::max<std::int64_t>(2, static_cast<std::int64_t>((cold_pool_bytes + layer_bytes - 1) / layer_bytes)) : 1;
  const std::int64_t num_blocks = layers * layer_blocks;
  const std::size_t cache_elements =
      *pagedattn::kv_cache_elements(num_blocks, shape.num_kv_heads, block_size, HeadDim);
  auto cache_memory = pagedattn_bench::allocate<CacheT>(cache_elements);
  pagedattn_bench::fill_normal(cache_memory.get(), cache_elements);
  const pagedattn::KvCacheView<CacheT, HeadDim> cache(cache_memory.get(), num_blocks, shape.num_kv_heads,
                                                      block_size);

  // Layer l's block table: rows of max_blocks entries, its blocks numbered from l * layer_blocks.
  std::vector<std::int32_t> block_tables(static_cast<std::size_t>(layers * num_requests * max_blocks), 0);
  for (std::int64_t l = 0, next = 0; l < layers; ++l) {
    for (int r = 0; r < num_requests; ++r) {
      const int blocks = (shape.requests[static_cast<std::size_t>(r)].second + block_size - 1) / block_size;
      for (int b = 0; b < blocks; ++b) {
        block_tables[static_cast<std::size_t>((l * num_requests + r) * max_blocks + b)] = static_cast<std::int32_t>(next++);
      }
    }
  }
  std::vector<std::int32_t> query_start_loc(1, 0), seq_lens;
  for (const auto& [q_len, seq_len] : shape.requests) {
    query_start_loc.push_back(query_start_loc.back() + q_len);
    seq_lens.push_back(seq_len);
  }
  const std::int64_t num_tokens = query_start_loc.back();
  std::vector<bf16_t> query(static_cast<std::size_t>(num_tokens) * shape.num_query_heads * HeadDim);
  pagedattn_bench::fill_normal(query.data(), query.size(), 1.0f, 7);
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
  if (setup.split_tokens > 0) {
    options.split_policy = pagedattn::SplitPolicy::fixed;
    options.split_tokens = setup.split_tokens;
  }
  const pagedattn::AttentionScheduler<Traits> scheduler(options);
  const auto plan = scheduler.plan(batch);
  auto workspace = pagedattn_bench::allocate<std::byte>(plan.workspace_bytes());
  pagedattn::ThreadPool pool(workers, setup.pool);
  const pagedattn_bench::CallerPin caller_pin(setup.pool.pin_threads);  // after the pool, which pins by this thread's CPUs
  pagedattn_bench::PhaseTracer tracer(pool);
  pagedattn::AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(HeadDim));
  const auto query_view = pagedattn::TokenHeadsView<const bf16_t>::packed(query.data(), num_tokens,
                                                                          shape.num_query_heads, HeadDim);
  const auto output_view =
      pagedattn::TokenHeadsView<bf16_t>::packed(output.data(), num_tokens, shape.num_query_heads, HeadDim);
  std::int64_t layer = 0;
  // Cold cases: the read bandwidth of this moment, on the same pages, before and after the loop
  // (a shared machine's bandwidth moves by tens of percent within a run).
  const auto probe_pool = [&] {
    return pagedattn_bench::probe::read_bandwidth(cache_memory.get(), workers, cold_pool_bytes, adjacent_probe_passes);
  };
  const double read_before = shape.cold ? probe_pool() : 0.0;
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    const auto table = pagedattn::BlockTableView::row_major(block_tables.data() + layer * num_requests * max_blocks,
                                                            num_requests, max_blocks);
    tracer.begin_call();
    pagedattn::paged_attention(plan, batch, query_view, cache, table, output_view, params,
                               std::span<std::byte>(workspace.get(), plan.workspace_bytes()), tracer);
    tracer.end_call();
    benchmark::ClobberMemory();
    layer = (layer + 1) % layers;
  }
  timer.stop();
  double visible = 0, kv_bytes = 0;  // visible (query, key) pairs per query head; K+V bytes read
  for (const auto& [q_len, seq_len] : shape.requests) {
    for (int i = 0; i < q_len; ++i) visible += shape.causal ? seq_len - q_len + i + 1 : seq_len;
    kv_bytes += 2.0 * seq_len * shape.num_kv_heads * HeadDim * sizeof(CacheT);
  }
  const double flops = 4.0 * HeadDim * visible * shape.num_query_heads;
  const auto& limits = pagedattn_bench::machine_limits();
  if (shape.cold) {
    const double read_adjacent = 0.5 * (read_before + probe_pool());
    state.counters["read_bw_adjacent"] = read_adjacent;
    state.counters["read_bw_adjacent_fraction"] = timer.fraction(state, kv_bytes, read_adjacent);
  }
  state.counters["kv_bytes_per_s"] = pagedattn_bench::rate(kv_bytes);
  state.counters["flop_per_s"] = pagedattn_bench::rate(flops);
  const auto operands = pagedattn::dtype_of<typename Traits::query_type>;
  if (workers == 1 || workers == limits.all_workers) {
    state.counters["read_bw_fraction"] = timer.fraction(state, kv_bytes, limits.read(workers));
    // Against the peak of what the tier multiplies these queries with (vdpbf16ps, tdpbf16ps or the
    // FP32 FMA), and against the FP32 FMA peak of its width; left out where the CPU lacks the peak.
    timer.set_fraction(state, "multiply_peak_fraction", flops, limits.multiply_peak(Isa::id, operands, workers));
    timer.set_fraction(state, "fma_peak_fraction", flops, limits.fma(Isa::id, workers));
  } else {
    // A scaling row between 1 and all workers: the limits hold neither, so the multiply peak is
    // probed with this many workers right after the loop (decode rows have their adjacent read probe).
    const double peak = pagedattn_bench::probe::multiply_peak_now(Isa::id, operands, workers);
    state.counters["multiply_peak_adjacent"] = peak;
    timer.set_fraction(state, "multiply_peak_fraction", flops, peak);
  }
  state.counters["layers"] = static_cast<double>(layers);
  add_phase_counters(state, tracer);
  double item_heads = 0;  // KV heads per work item, mean: 8 reads each cache block whole
  for (const pagedattn::WorkItem& item : plan.work_items()) item_heads += item.kv_head_end - item.kv_head;
  state.counters["item_kv_heads"] = item_heads / static_cast<double>(plan.work_items().size());
}

/// Registers `name/<isa>/workers:<n>` for the given kernel instantiation.
template <class CacheT, int HeadDim, class Isa>
void add(const std::string& name, const Shape& shape, std::size_t workers, const Setup& setup = {}) {
  const std::string full = name + "/" + std::string(pagedattn::isa_name(Isa::id)) + "/workers:" + std::to_string(workers);
  benchmark::RegisterBenchmark(full.c_str(), [shape, workers, setup](benchmark::State& state) {
    attention_benchmark<CacheT, HeadDim, Isa>(state, shape, workers, setup);
  })->UseRealTime()->Unit(benchmark::kMillisecond);
}

template <class Isa>
void register_isa() {
  if (!pagedattn::isa_available(Isa::id)) return;
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  // Llama-3-8B layer group: 32 query heads over 8 KV heads, head dim 128, block 128.
  const auto decode = [](int batch, int context) { return Shape{uniform(batch, 1, context), 32, 8, true, true}; };
  const Shape prefill_causal{uniform(1, 2048, 2048), 32, 8, true, false};
  // Scaling rows: the decode (batch 1 and 16, context 16384) and causal prefill cases at 2, 4 and
  // 8 workers too, where the machine has more (1 and all workers: below).
  for (std::size_t workers : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
    if (workers >= all) break;
    for (int batch : {1, 16}) {
      add<bf16_t, 128, Isa>("decode/batch:" + std::to_string(batch) + "/context:16384/bf16", decode(batch, 16384),
                            workers);
    }
    add<bf16_t, 128, Isa>("prefill_causal/tokens:2048/bf16", prefill_causal, workers);
  }
  for (std::size_t workers : {std::size_t{1}, all}) {
    for (int batch : {1, 16}) {
      for (int context : {4096, 16384}) {
        const std::string name = "decode/batch:" + std::to_string(batch) + "/context:" + std::to_string(context);
        add<bf16_t, 128, Isa>(name + "/bf16", decode(batch, context), workers);
        add<fp8_e4m3_t, 128, Isa>(name + "/fp8_e4m3", decode(batch, context), workers);
        add<fp8_e5m2_t, 128, Isa>(name + "/fp8_e5m2", decode(batch, context), workers);
      }
    }
    // Batch 1 at context 4096 on one layer that stays in cache (16 MiB of bf16, 8 of E4M3: within
    // a 32 MiB L3): the kernel's own pace, without memory's.
    const Shape cached{uniform(1, 1, 4096), 32, 8, true, false};
    add<bf16_t, 128, Isa>("decode_cached/batch:1/context:4096/bf16", cached, workers);
    add<fp8_e4m3_t, 128, Isa>("decode_cached/batch:1/context:4096/fp8_e4m3", cached, workers);
    add<bf16_t, 128, Isa>("prefill_causal/tokens:2048/bf16", prefill_causal, workers);
    // 2 KV heads x 16 query heads each, head dim 256: 512 queries over 10,000 keys, no mask.
    add<bf16_t, 256, Isa>("prefill_full/queries:512/keys:10000/bf16",
                          Shape{uniform(1, 512, 10000), 32, 2, false, false}, workers);
    // A mixed batch and the same work as two separate batches (KV cold as in decode).
    std::vector<std::pair<int, int>> mixed = uniform(2, 512, 2048);
    const auto decodes = uniform(62, 1, 2048);
    mixed.insert(mixed.end(), decodes.begin(), decodes.end());
    add<bf16_t, 128, Isa>("mixed/prefill:2x512+decode:62/context:2048/bf16", Shape{mixed, 32, 8, true, true}, workers);
    add<bf16_t, 128, Isa>("mixed_part/prefill:2x512/context:2048/bf16", Shape{uniform(2, 512, 2048), 32, 8, true, true},
                          workers);
    add<bf16_t, 128, Isa>("mixed_part/decode:62/context:2048/bf16", Shape{decodes, 32, 8, true, true}, workers);
  }
  // The tier that runs by default, all workers: decode at context 16384 with the pool spinning
  // 1 ms instead of 0.1 before sleeping, with pinned threads, and (batch 1) with fixed splits:
  // 512 positions keep all 8 KV heads in each item (32 items: on 16 workers, where the default
  // plan's packed split gives 31 < 2 x 16 items and so takes one KV head per item, this is the
  // same item count in whole-block read order), 1024 positions one KV head per item (128 items).
  // The phase counters beside the default setup's show which of wake-ups, thread placement, read
  // order and task granularity costs time.
  if (Isa::id != pagedattn::best_isa() || all == 1) return;
  Setup spin;
  spin.pool.spin_time = std::chrono::milliseconds(1);
  Setup pinned;
  pinned.pool.pin_threads = true;
  Setup packed;
  packed.split_tokens = 512;
  Setup fine;
  fine.split_tokens = 1024;
  for (int batch : {1, 16}) {
    const std::string name = "decode_setup/batch:" + std::to_string(batch) + "/context:16384/bf16/";
    add<bf16_t, 128, Isa>(name + "spin:1ms", decode(batch, 16384), all, spin);
    add<bf16_t, 128, Isa>(name + "pinned", decode(batch, 16384), all, pinned);
    if (batch == 1) {
      add<bf16_t, 128, Isa>(name + "split:512", decode(batch, 16384), all, packed);
      add<bf16_t, 128, Isa>(name + "split:1024", decode(batch, 16384), all, fine);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return pagedattn_bench::run_benchmarks(argc, argv, [] {
    register_isa<pagedattn::isa::amx>();
    register_isa<pagedattn::isa::avx512bf16>();
    register_isa<pagedattn::isa::avx512>();
    register_isa<pagedattn::isa::avx2>();
  });
}
