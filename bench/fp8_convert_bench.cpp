// FP8 quantize/dequantize throughput per ISA tier available here, hot (64 Ki elements, in L2) and
// cold (rotating over >= 1 GiB of input + output). Counters: bytes read + written per s, and that
// as a fraction of the 1-worker copy bandwidth measured at the start of the same run.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"
#include "support/memory.hpp"

namespace {

constexpr std::size_t hot_elements = std::size_t{1} << 16;
/// Input + output bytes the cold cases rotate over, in chunks of cold_chunk_elements per call.
constexpr std::size_t cold_pool_bytes = std::size_t{1} << 30;
constexpr std::size_t cold_chunk_elements = std::size_t{1} << 23;

template <class From, class To>
void convert_benchmark(benchmark::State& state, pagedattn::IsaId isa, bool cold) {
  const std::size_t chunk = cold ? cold_chunk_elements : hot_elements;
  const std::size_t chunks = cold ? (cold_pool_bytes / (sizeof(From) + sizeof(To)) + chunk - 1) / chunk : 1;
  auto input = pagedattn_bench::allocate<From>(chunks * chunk);
  auto output = pagedattn_bench::allocate<To>(chunks * chunk);
  pagedattn_bench::fill_normal(input.get(), chunks * chunk, 4.0f);
  pagedattn_bench::fill_normal(output.get(), chunks * chunk);  // real pages
  std::size_t next = 0;
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    const std::span<const From> in(input.get() + next * chunk, chunk);
    const std::span<To> out(output.get() + next * chunk, chunk);
    if constexpr (pagedattn::is_fp8_v<To>) {
      pagedattn::quantize(in, out, 0.5f, isa);
    } else {
      pagedattn::dequantize(in, out, 0.5f, isa);
    }
    benchmark::ClobberMemory();
    next = (next + 1) % chunks;
  }
  const double bytes = static_cast<double>(chunk * (sizeof(From) + sizeof(To)));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(chunk));
  state.counters["bytes_per_s"] = pagedattn_bench::rate(bytes);
  state.counters["copy_bw_fraction"] = timer.fraction(state, bytes, pagedattn_bench::machine_limits().copy(1));
}

template <class From, class To>
void add(const std::string& name, pagedattn::IsaId isa) {
  for (bool cold : {false, true}) {
    const std::string full = name + (cold ? "/cold" : "/hot") + "/" + std::string(pagedattn::isa_name(isa));
    benchmark::RegisterBenchmark(full.c_str(), [isa, cold](benchmark::State& state) {
      convert_benchmark<From, To>(state, isa, cold);
    })->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
}

void register_all() {
  for (pagedattn::IsaId isa : pagedattn::all_isas) {
    if (!pagedattn::isa_available(isa)) continue;
    add<pagedattn::bf16_t, pagedattn::fp8_e4m3_t>("quantize_bf16_to_e4m3", isa);
    add<float, pagedattn::fp8_e5m2_t>("quantize_f32_to_e5m2", isa);
    add<pagedattn::fp8_e4m3_t, pagedattn::bf16_t>("dequantize_e4m3_to_bf16", isa);
  }
}

}  // namespace

int main(int argc, char** argv) { return pagedattn_bench::run_benchmarks(argc, argv, register_all); }
