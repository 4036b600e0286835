// GEMM benchmarks of the public linear and fused-MoE API on best_isa(): an fp32 router linear
// (K 4096, N 128), a bf16 dense projection (K 4096, N 14336) and a bf16 fused MoE (128 experts,
// top-8, hidden 2048, expert intermediate 768), on 1 worker and on all. Every case reads its
// weights cold, as an engine stepping through its layers does: it rotates over copies ("layers")
// of its weights filling cold_pool_bytes, and probes the read bandwidth of that pool just before
// and after its timed loop (as attention's cold decode does). Counters: weight bytes read per s
// (the MoE counts only the experts the step's top-k ids touch), FLOP/s (2 x M x N x K; the MoE 2 x
// slots x 3 x hidden x intermediate), each also as a fraction of the read bandwidth (the run's
// probe and the adjacent one), of the peak of the instruction the tier multiplies with and of the
// FP32 FMA peak, measured at the start of the same run. bench/torch_gemm.py times the same cases
// (same names up to the tier) in PyTorch; bench/summarize.py states the ratios.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"
#include "support/memory.hpp"

namespace {

using pagedattn::bf16_t;

/// Weight bytes every case rotates over (64x the README machine's 32 MiB L3), rounded up to
/// whole copies: enough that no weight byte is still cached when it is read again.
constexpr std::size_t cold_pool_bytes = std::size_t{2} << 30;
/// Passes of each read probe around a case's loop (its own weight pool read in order).
constexpr int adjacent_probe_passes = 3;
/// Bytes between consecutive weight copies in a pool (cache-line aligned starts).
constexpr std::size_t copy_alignment = 64;

constexpr std::int64_t moe_experts = 128;
constexpr std::int64_t moe_top_k = 8;
constexpr std::int64_t moe_hidden = 2048;
constexpr std::int64_t moe_intermediate = 768;
/// Seed of the MoE routing (routing() below; bench/torch_gemm.py draws the same ids).
constexpr std::uint64_t moe_routing_seed = 20240611;

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

/// A pool of weight copies: `copies` packed weights of `copy_bytes` each, `stride` bytes apart.
struct WeightPool {
  std::string key;
  pagedattn_bench::Buffer<std::byte> memory;
  std::size_t stride = 0;
  std::size_t copies = 0;
  std::size_t bytes() const noexcept { return stride * copies; }
};

/// Builds the pool of `key` once and keeps it (one pool at a time) for the repetitions of a case
/// and for its other worker count: packing and filling gigabytes per repetition would dominate
/// the run. `pack_one(std::byte* first)` packs copy 0; the other copies are its bytes (their
/// values do not affect speed; their addresses are what keeps them out of the cache).
template <class PackOne>
const WeightPool& weight_pool(const std::string& key, std::size_t copy_bytes, PackOne&& pack_one) {
  static WeightPool pool;
  if (pool.key == key) return pool;
  pool = WeightPool{};  // free the previous case's pool first
  const std::size_t stride = round_up(copy_bytes, copy_alignment);
  const std::size_t copies = std::max<std::size_t>(2, (cold_pool_bytes + stride - 1) / stride);
  pool.memory = pagedattn_bench::allocate<std::byte>(stride * copies);
  pack_one(pool.memory.get());
  for (std::size_t c = 1; c < copies; ++c) std::memcpy(pool.memory.get() + c * stride, pool.memory.get(), copy_bytes);
  pool.stride = stride;
  pool.copies = copies;
  pool.key = key;
  return pool;
}

/// Read bandwidth of `pool` now (the adjacent probe of a case's loop).
double probe_pool(const WeightPool& pool, std::size_t workers) {
  return pagedattn_bench::probe::read_bandwidth(pool.memory.get(), workers, pool.bytes(), adjacent_probe_passes);
}

/// Sets the counters every case shares: `weight_bytes` and `flops` per iteration.
template <class Operands>
void set_counters(benchmark::State& state, pagedattn_bench::LoopTimer& timer, pagedattn::IsaId isa,
                  std::size_t workers, double weight_bytes, double flops, double read_before, double read_after,
                  std::size_t copies) {
  const auto& limits = pagedattn_bench::machine_limits();
  const double read_adjacent = 0.5 * (read_before + read_after);
  state.counters["weight_bytes_per_s"] = pagedattn_bench::rate(weight_bytes);
  state.counters["flop_per_s"] = pagedattn_bench::rate(flops);
  state.counters["read_bw_adjacent"] = read_adjacent;
  state.counters["read_bw_adjacent_fraction"] = timer.fraction(state, weight_bytes, read_adjacent);
  state.counters["read_bw_fraction"] = timer.fraction(state, weight_bytes, limits.read(workers));
  // Against the peak of what the tier multiplies these operands with (vdpbf16ps, tdpbf16ps or the
  // FP32 FMA), and against the FP32 FMA peak of its width; left out where the CPU lacks the peak.
  timer.set_fraction(state, "multiply_peak_fraction", flops,
                     limits.multiply_peak(isa, pagedattn::dtype_of<Operands>, workers));
  timer.set_fraction(state, "fma_peak_fraction", flops, limits.fma(isa, workers));
  state.counters["weight_copies"] = static_cast<double>(copies);
}

/// out = x * W^T (weight_packed_linear, no bias) for x [m][k] of X, W [n][k] packed as W, out of Out.
template <class X, class W, class Out>
void linear_benchmark(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, std::size_t workers) {
  const pagedattn::IsaId isa = pagedattn::best_isa();
  const std::size_t weight_bytes = pagedattn::packed_weight_bytes<W>(n, k);
  const std::string key = "linear/" + std::string(pagedattn::dtype_name(pagedattn::dtype_of<W>)) + "/" +
                          std::to_string(n) + "x" + std::to_string(k);
  const WeightPool& pool = weight_pool(key, weight_bytes, [&](std::byte* first) {
    std::vector<W> source(static_cast<std::size_t>(n * k));
    pagedattn_bench::fill_normal(source.data(), source.size(), 0.02f, 3);
    (void)pagedattn::pack_weight_into<W>(pagedattn::RowsView<const W>::dense(source.data(), n, k),
                                         std::span<W>(reinterpret_cast<W*>(first), weight_bytes / sizeof(W)));
  });
  std::vector<pagedattn::PackedWeight<W>> weights;
  for (std::size_t c = 0; c < pool.copies; ++c) {
    weights.push_back(pagedattn::PackedWeight<W>::adopt(reinterpret_cast<const W*>(pool.memory.get() + c * pool.stride), n, k));
  }
  std::vector<X> x(static_cast<std::size_t>(m * k));
  pagedattn_bench::fill_normal(x.data(), x.size(), 1.0f, 7);
  std::vector<Out> out(static_cast<std::size_t>(m * n));
  const std::size_t workspace_bytes = pagedattn::gemm_workspace_bytes<X, W>(workers, isa);
  auto workspace = pagedattn_bench::allocate<std::byte>(workspace_bytes);
  pagedattn::ThreadPool threads(workers);
  const auto x_view = pagedattn::RowsView<const X>::dense(x.data(), m, k);
  const auto out_view = pagedattn::RowsView<Out>::dense(out.data(), m, n);
  std::size_t copy = 0;
  const double read_before = probe_pool(pool, workers);
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    pagedattn::weight_packed_linear(out_view, x_view, weights[copy], {},
                                    std::span<std::byte>(workspace.get(), workspace_bytes), threads, isa);
    benchmark::ClobberMemory();
    copy = (copy + 1) % weights.size();
  }
  timer.stop();
  set_counters<X>(state, timer, isa, workers, static_cast<double>(weight_bytes), 2.0 * m * n * k, read_before,
                  probe_pool(pool, workers), pool.copies);
}

/// One splitmix64 step (bench/torch_gemm.py has the same).
std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  state += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The base routing of `tokens` tokens: per token top_k distinct experts, each the next
/// splitmix64 draw mod experts that the token has not taken yet (row-major [tokens][top_k]).
/// Step s of a case shifts every id by top_k * (s / layers) mod experts (a relabelling: the number
/// of distinct experts, and the rows each gets, stay the same), so consecutive steps of one layer
/// touch other experts.
std::vector<std::int32_t> routing(std::int64_t tokens) {
  std::vector<std::int32_t> ids;
  std::uint64_t state = moe_routing_seed;
  for (std::int64_t m = 0; m < tokens; ++m) {
    const std::size_t first = ids.size();
    while (static_cast<std::int64_t>(ids.size() - first) < moe_top_k) {
      const auto e = static_cast<std::int32_t>(splitmix64(state) % static_cast<std::uint64_t>(moe_experts));
      if (std::find(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end(), e) == ids.end()) ids.push_back(e);
    }
  }
  return ids;
}

/// fused_moe with bf16 hidden states and bf16 expert weights; `tokens` rows of the routing above.
void moe_benchmark(benchmark::State& state, std::int64_t tokens, std::size_t workers) {
  using X = bf16_t;
  using W = bf16_t;
  const pagedattn::IsaId isa = pagedattn::best_isa();
  const std::int64_t h = moe_hidden, n = moe_intermediate;
  const std::size_t w13_bytes = round_up(pagedattn::packed_weight_bytes<W>(2 * n, h), copy_alignment);
  const std::size_t w2_bytes = round_up(pagedattn::packed_weight_bytes<W>(h, n), copy_alignment);
  const std::size_t expert_bytes = w13_bytes + w2_bytes;
  const std::size_t layer_bytes = expert_bytes * static_cast<std::size_t>(moe_experts);
  // A pool copy is one layer: every expert's w13 then w2.
  const WeightPool& pool = weight_pool("moe/bf16", layer_bytes, [&](std::byte* first) {
    std::vector<W> w13(static_cast<std::size_t>(2 * n * h)), w2(static_cast<std::size_t>(h * n));
    pagedattn_bench::fill_normal(w13.data(), w13.size(), 0.02f, 3);
    pagedattn_bench::fill_normal(w2.data(), w2.size(), 0.02f, 4);
    (void)pagedattn::pack_weight_into<W>(pagedattn::RowsView<const W>::dense(w13.data(), 2 * n, h),
                                         std::span<W>(reinterpret_cast<W*>(first), w13_bytes / sizeof(W)));
    (void)pagedattn::pack_weight_into<W>(pagedattn::RowsView<const W>::dense(w2.data(), h, n),
                                         std::span<W>(reinterpret_cast<W*>(first + w13_bytes), w2_bytes / sizeof(W)));
    for (std::int64_t e = 1; e < moe_experts; ++e) {
      std::memcpy(first + static_cast<std::size_t>(e) * expert_bytes, first, expert_bytes);
    }
  });
  const std::size_t layers = pool.copies;
  std::vector<pagedattn::PackedWeight<W>> w13, w2;  // [layer][expert]
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::int64_t e = 0; e < moe_experts; ++e) {
      const std::byte* expert = pool.memory.get() + l * pool.stride + static_cast<std::size_t>(e) * expert_bytes;
      w13.push_back(pagedattn::PackedWeight<W>::adopt(reinterpret_cast<const W*>(expert), 2 * n, h));
      w2.push_back(pagedattn::PackedWeight<W>::adopt(reinterpret_cast<const W*>(expert + w13_bytes), h, n));
    }
  }
  // The steps of one cycle: step s runs on layer s % layers with the base ids shifted by
  // top_k * (s / layers) (all experts / top_k shifts per layer).
  const std::vector<std::int32_t> base = routing(tokens);
  const std::set<std::int32_t> touched(base.begin(), base.end());
  const std::size_t shifts = static_cast<std::size_t>(moe_experts / moe_top_k);
  std::vector<std::vector<std::int32_t>> step_ids;
  for (std::size_t s = 0; s < layers * shifts; ++s) {
    std::vector<std::int32_t> ids(base);
    const auto shift = static_cast<std::int32_t>(moe_top_k * static_cast<std::int64_t>(s / layers));
    for (auto& id : ids) id = static_cast<std::int32_t>((id + shift) % moe_experts);
    step_ids.push_back(std::move(ids));
  }
  std::vector<float> topk_weights(base.size(), 1.0f / static_cast<float>(moe_top_k));
  std::vector<X> hidden(static_cast<std::size_t>(tokens * h)), out(hidden.size());
  pagedattn_bench::fill_normal(hidden.data(), hidden.size(), 1.0f, 7);
  const pagedattn::MoeShape shape{tokens, h, n, moe_experts, moe_top_k};
  const auto plan = pagedattn::plan_moe<X, W>(shape, workers, isa);
  auto workspace = pagedattn_bench::allocate<std::byte>(plan.workspace_bytes());
  pagedattn::ThreadPool threads(workers);
  const auto out_view = pagedattn::RowsView<X>::dense(out.data(), tokens, h);
  const auto hidden_view = pagedattn::RowsView<const X>::dense(hidden.data(), tokens, h);
  const auto weights_view = pagedattn::RowsView<const float>::dense(topk_weights.data(), tokens, moe_top_k);
  const auto experts = static_cast<std::size_t>(moe_experts);
  std::size_t step = 0;
  const double read_before = probe_pool(pool, workers);
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    const std::size_t layer = step % layers;
    pagedattn::fused_moe(plan, out_view, hidden_view,
                         std::span<const pagedattn::PackedWeight<W>>(w13.data() + layer * experts, experts),
                         std::span<const pagedattn::PackedWeight<W>>(w2.data() + layer * experts, experts),
                         weights_view, pagedattn::RowsView<const std::int32_t>::dense(step_ids[step].data(), tokens, moe_top_k),
                         std::span<std::byte>(workspace.get(), plan.workspace_bytes()), threads);
    benchmark::ClobberMemory();
    step = (step + 1) % step_ids.size();
  }
  timer.stop();
  // The packed bytes of the experts a step touches (every step touches touched.size(): the ids
  // are relabelled, never merged), and 2 x slots x (2n x h + h x n) FLOP.
  const double weight_bytes = static_cast<double>(touched.size()) *
                              static_cast<double>(pagedattn::packed_weight_bytes<W>(2 * n, h) +
                                                  pagedattn::packed_weight_bytes<W>(h, n));
  const double flops = 2.0 * static_cast<double>(tokens * moe_top_k) * static_cast<double>(3 * n * h);
  set_counters<X>(state, timer, isa, workers, weight_bytes, flops, read_before, probe_pool(pool, workers), layers);
  state.counters["experts_touched"] = static_cast<double>(touched.size());
}

/// Registers `name/<isa>/workers:<n>` (the isa best_isa() runs).
template <class Body>
void add(const std::string& name, std::size_t workers, Body body) {
  const std::string full =
      name + "/" + std::string(pagedattn::isa_name(pagedattn::best_isa())) + "/workers:" + std::to_string(workers);
  benchmark::RegisterBenchmark(full.c_str(), [body, workers](benchmark::State& state) { body(state, workers); })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void register_cases() {
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  const std::size_t worker_counts[] = {std::size_t{1}, all};
  // Workers innermost: consecutive cases share a weight pool (one pool is kept at a time).
  // Router: fp32 activations and weights, fp32 logits.
  for (std::int64_t m : {1, 64, 4096}) {
    for (std::size_t workers : worker_counts) {
      add("router/K:4096/N:128/M:" + std::to_string(m) + "/fp32", workers, [m](benchmark::State& state, std::size_t w) {
        linear_benchmark<float, float, float>(state, m, 128, 4096, w);
      });
    }
  }
  // Dense projection (Llama-3-8B's gate/up width): bf16 activations, weights and output.
  for (std::int64_t m : {1, 512}) {
    for (std::size_t workers : worker_counts) {
      add("dense/K:4096/N:14336/M:" + std::to_string(m) + "/bf16", workers,
          [m](benchmark::State& state, std::size_t w) { linear_benchmark<bf16_t, bf16_t, bf16_t>(state, m, 14336, 4096, w); });
    }
  }
  // MoE (Qwen3-30B-A3B's experts): bf16 hidden states and expert weights.
  for (std::int64_t m : {1, 16, 512}) {
    for (std::size_t workers : worker_counts) {
      add("moe/experts:128/top_k:8/hidden:2048/inter:768/M:" + std::to_string(m) + "/bf16", workers,
          [m](benchmark::State& state, std::size_t w) { moe_benchmark(state, m, w); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return pagedattn_bench::run_benchmarks(argc, argv, register_cases); }
