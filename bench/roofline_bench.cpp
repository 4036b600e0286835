// This machine's limits, measured in the same run as the kernel benchmarks: read bandwidth over a
// working set far larger than the last-level cache, and FP32 FMA peak per ISA, for 1 worker and
// for all workers. Results are the denominators of the roofline fractions.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pagedattn/pagedattn.hpp>

namespace {

/// Bytes of the read-bandwidth working set (far larger than any last-level cache).
constexpr std::size_t read_set_bytes = std::size_t{1} << 30;

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

/// Sums `bytes` bytes from `data` with 4 independent AVX2 accumulators (read-only traffic).
__attribute__((target("avx2"))) float read_chunk(const float* data, std::size_t bytes) noexcept {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (std::size_t i = 0; i < bytes / sizeof(float); i += 32) {
    a = _mm256_add_ps(a, _mm256_load_ps(data + i));
    b = _mm256_add_ps(b, _mm256_load_ps(data + i + 8));
    c = _mm256_add_ps(c, _mm256_load_ps(data + i + 16));
    d = _mm256_add_ps(d, _mm256_load_ps(data + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return lanes[0];
}

/// 12 x `iterations` FMAs on 12 independent AVX-512 chains (enough to fill two FMA ports).
__attribute__((target("avx512f"))) float fma_chains_avx512(std::size_t iterations) noexcept {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (std::size_t n = 0; n < iterations; ++n) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

/// The AVX2 version of fma_chains_avx512.
__attribute__((target("avx2,fma"))) float fma_chains_avx2(std::size_t iterations) noexcept {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (std::size_t n = 0; n < iterations; ++n) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0];
}

/// Runs `work(worker)` on `workers` threads (the caller is worker 0) and waits.
template <class F>
void on_workers(std::size_t workers, F&& work) {
  std::vector<std::thread> threads;
  for (std::size_t w = 1; w < workers; ++w) threads.emplace_back([&, w] { work(w); });
  work(0);
  for (auto& t : threads) t.join();
}

void read_bandwidth(benchmark::State& state, std::size_t workers) {
  std::unique_ptr<float[], FreeDeleter> data(static_cast<float*>(std::aligned_alloc(64, read_set_bytes)));
  std::memset(data.get(), 0, read_set_bytes);
  const std::size_t chunk = read_set_bytes / workers / 128 * 128;
  std::vector<float> sink(workers);
  for (auto _ : state) {
    on_workers(workers, [&](std::size_t w) { sink[w] = read_chunk(data.get() + w * chunk / sizeof(float), chunk); });
    benchmark::DoNotOptimize(sink.data());
  }
  state.counters["bytes_per_s"] = benchmark::Counter(static_cast<double>(chunk * workers),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void fma_peak(benchmark::State& state, pagedattn::IsaId isa, std::size_t workers) {
  constexpr std::size_t iterations = std::size_t{1} << 22;
  const int lanes = isa == pagedattn::IsaId::avx2 ? 8 : 16;
  std::vector<float> sink(workers);
  for (auto _ : state) {
    on_workers(workers, [&](std::size_t w) {
      sink[w] = isa == pagedattn::IsaId::avx2 ? fma_chains_avx2(iterations) : fma_chains_avx512(iterations);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = 2.0 * lanes * 12.0 * static_cast<double>(iterations) * static_cast<double>(workers);
  state.counters["flop_per_s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  for (std::size_t workers : {std::size_t{1}, all}) {
    const std::string suffix = "/workers:" + std::to_string(workers);
    if (pagedattn::cpu_supports(pagedattn::IsaId::avx2)) {
      benchmark::RegisterBenchmark(("roofline_read_bandwidth" + suffix).c_str(), read_bandwidth, workers)
          ->UseRealTime();
    }
    for (pagedattn::IsaId isa : {pagedattn::IsaId::avx2, pagedattn::IsaId::avx512}) {
      if (!pagedattn::cpu_supports(isa)) continue;
      benchmark::RegisterBenchmark(
          ("roofline_fma_peak/" + std::string(pagedattn::isa_name(isa)) + suffix).c_str(), fma_peak, isa, workers)
          ->UseRealTime();
    }
    if (workers == all) break;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
