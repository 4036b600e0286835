// The roofline probe on its own: this machine's read and copy bandwidth and per-ISA FP32 FMA peak
// for 1 worker and for all workers (the same probes every benchmark binary runs before its cases).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

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

void register_cases() {
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  for (std::size_t workers : {std::size_t{1}, all}) {
    const std::string suffix = "/workers:" + std::to_string(workers);
    // Each iteration's time is one unit at the probe's median rate, so the counters read as rates.
    benchmark::RegisterBenchmark(("roofline_read_bandwidth" + suffix).c_str(), read_bandwidth, workers)
        ->UseManualTime()->Iterations(1);
    benchmark::RegisterBenchmark(("roofline_copy_bandwidth" + suffix).c_str(), copy_bandwidth, workers)
        ->UseManualTime()->Iterations(1);
    for (pagedattn::IsaId isa : {pagedattn::IsaId::avx2, pagedattn::IsaId::avx512}) {
      if (!pagedattn::cpu_supports(isa)) continue;
      benchmark::RegisterBenchmark(("roofline_fma_peak/" + std::string(pagedattn::isa_name(isa)) + suffix).c_str(),
                                   fma_peak, isa, workers)
          ->UseManualTime()->Iterations(1);
    }
    if (workers == all) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return pagedattn_bench::run_benchmarks(argc, argv, register_cases);
}
