// The roofline probe on its own: this machine's read and copy bandwidth, per-ISA FP32 FMA peak and
// bf16 peaks (vdpbf16ps, tdpbf16ps) for 1 worker and all workers (the probes every benchmark binary
// runs before its cases), and the read probe walking the paged cache in decode's order.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"

namespace {

using pagedattn_bench::allocate;

void read_bandwidth(benchmark::State& state, std::size_t workers) {
  auto data = allocate<float>(pagedattn_bench::read_probe_bytes / sizeof(float));
  std::memset(data.get(), 1, pagedattn_bench::read_probe_bytes);
  for (auto _ : state) state.SetIterationTime(1.0 / pagedattn_bench::probe::read_bandwidth(data.get(), workers));
  state.counters["bytes_per_s"] = pagedattn_bench::rate(1.0);
}

/// Shape of read_decode_order's cache: bench_attention's decode cases (16384-token requests).
constexpr int decode_block_size = 128, decode_head_dim = 128, decode_kv_heads = 8;
constexpr int decode_blocks_per_request = 16384 / decode_block_size;

/// (byte offset, bytes) of each run decode reads in one (block, KV head) K/V sub-block pair of a
/// CacheT cache, in its order, for KV steps of `tile_tokens`: per step the step's K (one run), then
/// its V (one run per 16-dim strip). Offsets come from the cache layout.
template <class CacheT>
std::vector<std::pair<std::size_t, std::size_t>> decode_runs(int tile_tokens) {
  using layout = pagedattn::KvBlockLayout<CacheT>;
  constexpr std::size_t element = sizeof(CacheT);
  const std::size_t v_base = layout::sub_block_elements(decode_block_size, decode_head_dim) * element;
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (int t = 0; t < decode_block_size; t += tile_tokens) {
    const std::size_t k_begin = layout::key_index(decode_head_dim, t, 0) * element;
    runs.emplace_back(k_begin, layout::key_index(decode_head_dim, t + tile_tokens, 0) * element - k_begin);
    for (int dim = 0; dim < decode_head_dim; dim += 16) {
      const std::size_t v_begin = layout::value_index(decode_block_size, decode_head_dim, t, dim) * element;
      const std::size_t v_end = layout::value_index(decode_block_size, decode_head_dim, t + tile_tokens, dim) * element;
      runs.emplace_back(v_base + v_begin, v_end - v_begin);
    }
  }
  return runs;
}

/// Decode's order over a CacheT paged cache of the shape above (64 KiB per block and KV head in
/// bf16, 32 KiB in E4M3), blocks numbered in request order, in KV steps of `tile_tokens`: each work
/// item is one request and `item_heads` (1 or all) of its KV heads, which reads its blocks in block
/// order and, within a block, its heads' runs (decode_runs) head after head; items are dealt to
/// workers in turn. All heads per item is the order of the kernels' decode items, which hold all
/// of a request's KV heads and read each block whole; one head per item is their order where
/// the scheduler does not pack KV heads (and was the only one before it did). No arithmetic: the read
/// probe's summing loop over each run, so the rate against the read probe's is what this order
/// alone costs.
template <class CacheT>
void read_decode_order(benchmark::State& state, std::size_t workers, int tile_tokens, std::size_t item_heads) {
  const std::size_t pair_bytes = *pagedattn::kv_cache_elements(1, 1, decode_block_size, decode_head_dim) * sizeof(CacheT);
  const std::size_t request_bytes = pair_bytes * decode_kv_heads * decode_blocks_per_request;
  const std::size_t requests = pagedattn_bench::read_probe_bytes / request_bytes;
  const std::size_t bytes = requests * request_bytes;
  auto data = allocate<std::byte>(bytes);
  std::memset(data.get(), 1, bytes);
  const auto runs = decode_runs<CacheT>(tile_tokens);
  const std::size_t items_per_request = decode_kv_heads / item_heads;
  const std::size_t items = requests * items_per_request;
  std::vector<float> sink(workers);
  const auto pass = [&] {
    pagedattn_bench::probe::on_workers(workers, [&](std::size_t w) {
      float sum = 0;
      for (std::size_t item = w; item < items; item += workers) {
        const std::size_t request = item / items_per_request;
        const std::size_t first_head = item % items_per_request * item_heads;
        for (std::size_t b = 0; b < decode_blocks_per_request; ++b) {
          for (std::size_t head = first_head; head < first_head + item_heads; ++head) {
            const std::byte* pair =
                data.get() + ((request * decode_blocks_per_request + b) * decode_kv_heads + head) * pair_bytes;
            for (const auto& [offset, run_bytes] : runs) {
              sum += pagedattn_bench::probe::read_chunk(reinterpret_cast<const float*>(pair + offset), run_bytes);
            }
          }
        }
      }
      sink[w] = sum;
    });
    benchmark::DoNotOptimize(sink.data());
  };
  const double rate = pagedattn_bench::probe::median_rate(static_cast<double>(bytes), pass);
  for (auto _ : state) state.SetIterationTime(1.0 / rate);
  state.counters["bytes_per_s"] = pagedattn_bench::rate(1.0);
  state.counters["read_bw_fraction"] = rate / pagedattn_bench::machine_limits().read(workers);
}

void copy_bandwidth(benchmark::State& state, std::size_t workers) {
  auto source = allocate<std::byte>(pagedattn_bench::copy_probe_bytes);
  auto destination = allocate<std::byte>(pagedattn_bench::copy_probe_bytes);
  std::memset(source.get(), 1, pagedattn_bench::copy_probe_bytes);
  std::memset(destination.get(), 2, pagedattn_bench::copy_probe_bytes);
  for (auto _ : state) {
    state.SetIterationTime(1.0 / pagedattn_bench::probe::copy_bandwidth(destination.get(), source.get(), workers));
  }
  state.counters["bytes_per_s"] = pagedattn_bench::rate(1.0);
}

void fma_peak(benchmark::State& state, pagedattn::IsaId isa, std::size_t workers) {
  for (auto _ : state) state.SetIterationTime(1.0 / pagedattn_bench::probe::fma_peak(isa, workers));
  state.counters["flop_per_s"] = pagedattn_bench::rate(1.0);
}

void bf16_peak(benchmark::State& state, pagedattn::IsaId isa, std::size_t workers) {
  for (auto _ : state) state.SetIterationTime(1.0 / pagedattn_bench::probe::bf16_peak(isa, workers));
  state.counters["flop_per_s"] = pagedattn_bench::rate(1.0);
}

void register_cases() {
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  for (std::size_t workers : {std::size_t{1}, all}) {
    const std::string suffix = "/workers:" + std::to_string(workers);
    // Each iteration's time is one unit at the probe's median rate, so the counters read as rates.
    benchmark::RegisterBenchmark(("roofline_read_bandwidth" + suffix).c_str(), read_bandwidth, workers)
        ->UseManualTime()->Iterations(1);
    benchmark::RegisterBenchmark(("roofline_copy_bandwidth" + suffix).c_str(), copy_bandwidth, workers)
        ->UseManualTime()->Iterations(1);
    // The attention kernels' KV step (kv_tile_tokens of bf16 decode's tile geometry on best_isa())
    // and, for bf16, the half step. With one KV head per item (unpacked items), and the full step
    // with every head per item. bf16 and E4M3 caches: the FP8 decode target asks E4M3 to read
    // nearly as fast as bf16.
    const int tile_tokens = pagedattn::AttentionTraits<pagedattn::bf16_t, pagedattn::bf16_t, decode_head_dim>::geometry(
                                pagedattn::best_isa()).shape.kv_tile_tokens;
    const auto register_order = [&]<class CacheT>(int tile, int heads) {
      const std::string name = "read_decode_order/" + std::string(pagedattn::dtype_name(pagedattn::dtype_of<CacheT>)) +
                               "/block:" + std::to_string(decode_block_size) +
                               "/head_dim:" + std::to_string(decode_head_dim) +
                               "/tile:" + std::to_string(tile) + "/item_heads:" + std::to_string(heads) + suffix;
      benchmark::RegisterBenchmark(name.c_str(), read_decode_order<CacheT>, workers, tile,
                                   static_cast<std::size_t>(heads))
          ->UseManualTime()
          ->Iterations(1);
    };
    for (const auto& [tile, heads] : {std::pair{tile_tokens / 2, 1}, {tile_tokens, 1}, {tile_tokens, decode_kv_heads}}) {
      register_order.template operator()<pagedattn::bf16_t>(tile, heads);
    }
    for (int heads : {1, decode_kv_heads}) {
      register_order.template operator()<pagedattn::fp8_e4m3_t>(tile_tokens, heads);
    }
    for (pagedattn::IsaId isa : {pagedattn::IsaId::avx2, pagedattn::IsaId::avx512}) {
      if (!pagedattn::cpu_supports(isa)) continue;
      benchmark::RegisterBenchmark(("roofline_fma_peak/" + std::string(pagedattn::isa_name(isa)) + suffix).c_str(),
                                   fma_peak, isa, workers)
          ->UseManualTime()->Iterations(1);
    }
    // Only where the CPU has the instruction (AMX: with Linux's tile permission granted).
    for (pagedattn::IsaId isa : {pagedattn::IsaId::avx512bf16, pagedattn::IsaId::amx}) {
      if (!pagedattn_bench::probe::bf16_peak_available(isa)) continue;
      benchmark::RegisterBenchmark(("roofline_bf16_peak/" + std::string(pagedattn::isa_name(isa)) + suffix).c_str(),
                                   bf16_peak, isa, workers)
          ->UseManualTime()->Iterations(1);
    }
    if (workers == all) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return pagedattn_bench::run_benchmarks(argc, argv, register_cases);
}
