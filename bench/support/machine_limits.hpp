// This machine's limits, measured once per benchmark process before its cases run (so every
// result is stated against limits taken in the same run): read and copy bandwidth over working
// sets far larger than the last-level cache, the FP32 FMA peak of each vector ISA, and the peak of
// the bf16 instructions the avx512bf16 and amx tiers multiply with (vdpbf16ps, tdpbf16ps).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include <pagedattn/pagedattn.hpp>

#include "memory.hpp"
#include "peak_probes.hpp"

namespace pagedattn_bench {

/// Bytes read by the read-bandwidth probe per pass (about 8x this machine's 480 MiB LLC).
inline constexpr std::size_t read_probe_bytes = std::size_t{4} << 30;
/// Bytes copied by the copy-bandwidth probe per pass (source and destination 1 GiB each).
inline constexpr std::size_t copy_probe_bytes = std::size_t{1} << 30;
/// Timed passes per probe; the median is kept.
inline constexpr int probe_passes = 5;

/// Limits for 1 worker ([0]) and for all hardware workers ([1]). Bandwidths in bytes/s (copy:
/// bytes read + bytes written), peaks in FLOP/s (peak_probes.hpp: FLOP per instruction). Each
/// peak is named after the tier that multiplies with its instruction; 0 where the CPU (or this
/// build) lacks the instruction: unknown, printed and recorded as n/a, never divided by.
struct MachineLimits {
  std::size_t all_workers = 1;
  double read_bytes_per_s[2] = {};
  double copy_bytes_per_s[2] = {};
  double avx2_flop_per_s[2] = {};        ///< FP32 FMA, 256-bit registers.
  double avx512_flop_per_s[2] = {};      ///< FP32 FMA, 512-bit registers.
  double avx512bf16_flop_per_s[2] = {};  ///< vdpbf16ps (bf16 pair dot products), 512-bit registers.
  double amx_flop_per_s[2] = {};         ///< tdpbf16ps (bf16 tile products), 16 x 64-byte tiles.

  /// Index of `workers` in the arrays (1 -> 0, anything else -> 1).
  static int slot(std::size_t workers) noexcept { return workers == 1 ? 0 : 1; }
  /// Read bandwidth for `workers` (1 or all).
  double read(std::size_t workers) const noexcept { return read_bytes_per_s[slot(workers)]; }
  /// Copy bandwidth for `workers` (1 or all).
  double copy(std::size_t workers) const noexcept { return copy_bytes_per_s[slot(workers)]; }
  /// The tier whose FP32 FMA peak is `isa`'s: avx2, or avx512 for every wider tier.
  static pagedattn::IsaId fma_width(pagedattn::IsaId isa) noexcept {
    return isa == pagedattn::IsaId::avx2 ? pagedattn::IsaId::avx2 : pagedattn::IsaId::avx512;
  }
  /// FP32 FMA peak of `isa`'s vector width (fma_width) for `workers`.
  double fma(pagedattn::IsaId isa, std::size_t workers) const noexcept {
    return fma_width(isa) == pagedattn::IsaId::avx2 ? avx2_flop_per_s[slot(workers)] : avx512_flop_per_s[slot(workers)];
  }
  /// Whether tier `isa` multiplies `operands` with its bf16 instruction (vdpbf16ps on avx512bf16,
  /// tdpbf16ps on amx: bf16 operands there); otherwise with the FP32 FMA of its width.
  static bool multiplies_bf16(pagedattn::IsaId isa, pagedattn::DType operands) noexcept {
    return operands == pagedattn::DType::bf16 && (isa == pagedattn::IsaId::avx512bf16 || isa == pagedattn::IsaId::amx);
  }
  /// Peak of the instruction tier `isa` multiplies `operands` with (multiplies_bf16), for `workers`.
  double multiply_peak(pagedattn::IsaId isa, pagedattn::DType operands, std::size_t workers) const noexcept {
    if (!multiplies_bf16(isa, operands)) return fma(isa, workers);
    return isa == pagedattn::IsaId::amx ? amx_flop_per_s[slot(workers)] : avx512bf16_flop_per_s[slot(workers)];
  }
};

namespace probe {

/// Sums `bytes` bytes from `data` with 4 independent AVX2 accumulators (read-only traffic).
__attribute__((target("avx2"))) inline float read_chunk(const float* data, std::size_t bytes) noexcept {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (std::size_t i = 0; i < bytes / sizeof(float); i += 32) {
    a = _mm256_add_ps(a, _mm256_load_ps(data + i));
    b = _mm256_add_ps(b, _mm256_load_ps(data + i + 8));
    c = _mm256_add_ps(c, _mm256_load_ps(data + i + 16));
    d = _mm256_add_ps(d, _mm256_load_ps(data + i + 24));
  }
  alignas(32) float lanes[avx2_lanes];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return lanes[0];
}

/// vector_chains x `iterations` FMAs on independent AVX-512 chains (enough to fill two FMA ports).
__attribute__((target("avx512f"))) inline float fma_chains_avx512(std::size_t iterations) noexcept {
  __m512 acc[vector_chains];
  for (int i = 0; i < vector_chains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (std::size_t n = 0; n < iterations; ++n) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < vector_chains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[avx512_lanes];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

/// The AVX2 version of fma_chains_avx512.
__attribute__((target("avx2,fma"))) inline float fma_chains_avx2(std::size_t iterations) noexcept {
  __m256 acc[vector_chains];
  for (int i = 0; i < vector_chains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (std::size_t n = 0; n < iterations; ++n) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < vector_chains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[avx2_lanes];
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

/// Median over `passes` of `units / seconds` for one call of `pass()`.
template <class F>
double median_rate(double units, F&& pass, int passes = probe_passes) {
  std::vector<double> rates;
  for (int i = 0; i < passes; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    rates.push_back(units / seconds.count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

/// Read bandwidth (bytes/s) with `workers` threads, each reading its share of the first `bytes`
/// (default read_probe_bytes; far more than the last-level cache) at `data` (32-byte aligned);
/// median of `passes`.
inline double read_bandwidth(const void* data, std::size_t workers, std::size_t bytes = read_probe_bytes,
                             int passes = probe_passes) {
  const std::size_t chunk = bytes / workers / 128 * 128;
  const auto* floats = static_cast<const float*>(data);
  std::vector<float> sink(workers);
  return median_rate(
      static_cast<double>(chunk * workers),
      [&] {
        on_workers(workers, [&](std::size_t w) { sink[w] = read_chunk(floats + w * chunk / sizeof(float), chunk); });
        benchmark::DoNotOptimize(sink.data());
      },
      passes);
}

/// Copy bandwidth (bytes read + written per s) with `workers` threads, std::memcpy per worker.
inline double copy_bandwidth(std::byte* destination, const std::byte* source, std::size_t workers) {
  const std::size_t chunk = copy_probe_bytes / workers / 4096 * 4096;
  return median_rate(2.0 * static_cast<double>(chunk * workers), [&] {
    on_workers(workers, [&](std::size_t w) { std::memcpy(destination + w * chunk, source + w * chunk, chunk); });
    benchmark::ClobberMemory();
  });
}

/// Median FLOP/s of `chains()` (`flop` FLOP per call, each worker calling it once per pass) with
/// `workers` threads.
template <class Chains>
double flop_peak(double flop, Chains&& chains, std::size_t workers) {
  std::vector<float> sink(workers);
  return median_rate(flop * static_cast<double>(workers), [&] {
    on_workers(workers, [&](std::size_t w) { sink[w] = chains(); });
    benchmark::DoNotOptimize(sink.data());
  });
}

/// FP32 FMA peak (FLOP/s) of `isa` with `workers` threads.
inline double fma_peak(pagedattn::IsaId isa, std::size_t workers) {
  constexpr std::size_t iterations = std::size_t{1} << 23;
  const bool avx2 = isa == pagedattn::IsaId::avx2;
  const double flop = fma_flop_per_lane * (avx2 ? avx2_lanes : avx512_lanes) * vector_chains *
                      static_cast<double>(iterations);
  return flop_peak(
      flop, [&] { return avx2 ? fma_chains_avx2(iterations) : fma_chains_avx512(iterations); }, workers);
}

/// True when this build has the bf16 peak probe of tier `isa` (avx512bf16: vdpbf16ps; amx:
/// tdpbf16ps) and the CPU runs it.
inline bool bf16_peak_available([[maybe_unused]] pagedattn::IsaId isa) noexcept {
#if defined(PEAK_PROBE_ISA_AVX512BF16)
  if (isa == pagedattn::IsaId::avx512bf16) return pagedattn::cpu_supports(isa);
#endif
#if defined(PEAK_PROBE_ISA_AMX)
  if (isa == pagedattn::IsaId::amx) return pagedattn::cpu_supports(isa);
#endif
  return false;
}

/// bf16 peak (FLOP/s) of tier `isa` with `workers` threads: vdpbf16ps for avx512bf16, tdpbf16ps
/// for amx. Precondition: bf16_peak_available(isa).
inline double bf16_peak([[maybe_unused]] pagedattn::IsaId isa, [[maybe_unused]] std::size_t workers) {
#if defined(PEAK_PROBE_ISA_AVX512BF16)
  if (isa == pagedattn::IsaId::avx512bf16) {
    constexpr std::size_t iterations = std::size_t{1} << 23;
    const double flop = bf16_dot_flop * vector_chains * static_cast<double>(iterations);
    return flop_peak(flop, [] { return bf16_dot_chains(iterations); }, workers);
  }
#endif
#if defined(PEAK_PROBE_ISA_AMX)
  if (isa == pagedattn::IsaId::amx) {
    constexpr std::size_t iterations = std::size_t{1} << 20;
    const double flop = amx_tile_flop * amx_chains * static_cast<double>(iterations);
    return flop_peak(flop, [] { return amx_tile_chains(iterations); }, workers);
  }
#endif
  return 0.0;  // no probe: unknown
}

/// The peak MachineLimits::multiply_peak names, probed now with `workers` threads (any count; the
/// limits hold 1 and all): for rows at other worker counts. 0 where the CPU lacks it (unknown).
inline double multiply_peak_now(pagedattn::IsaId isa, pagedattn::DType operands, std::size_t workers) {
  if (MachineLimits::multiplies_bf16(isa, operands)) return bf16_peak_available(isa) ? bf16_peak(isa, workers) : 0.0;
  const pagedattn::IsaId width = MachineLimits::fma_width(isa);
  return pagedattn::cpu_supports(width) ? fma_peak(width, workers) : 0.0;
}

}  // namespace probe

/// Measures every limit (a few seconds; memory is freed afterwards).
inline MachineLimits measure_machine_limits() {
  MachineLimits limits;
  limits.all_workers = pagedattn::ThreadPool::hardware_workers();
  const std::size_t worker_counts[2] = {1, limits.all_workers};
  {
    auto data = allocate<float>(read_probe_bytes / sizeof(float));
    std::memset(data.get(), 1, read_probe_bytes);  // real pages, not the shared zero page
    for (int s = 0; s < 2; ++s) limits.read_bytes_per_s[s] = probe::read_bandwidth(data.get(), worker_counts[s]);
  }
  {
    auto source = allocate<std::byte>(copy_probe_bytes);
    auto destination = allocate<std::byte>(copy_probe_bytes);
    std::memset(source.get(), 1, copy_probe_bytes);
    std::memset(destination.get(), 2, copy_probe_bytes);
    for (int s = 0; s < 2; ++s) {
      limits.copy_bytes_per_s[s] = probe::copy_bandwidth(destination.get(), source.get(), worker_counts[s]);
    }
  }
  for (int s = 0; s < 2; ++s) {
    if (pagedattn::cpu_supports(pagedattn::IsaId::avx2)) {
      limits.avx2_flop_per_s[s] = probe::fma_peak(pagedattn::IsaId::avx2, worker_counts[s]);
    }
    if (pagedattn::cpu_supports(pagedattn::IsaId::avx512)) {
      limits.avx512_flop_per_s[s] = probe::fma_peak(pagedattn::IsaId::avx512, worker_counts[s]);
    }
    if (probe::bf16_peak_available(pagedattn::IsaId::avx512bf16)) {
      limits.avx512bf16_flop_per_s[s] = probe::bf16_peak(pagedattn::IsaId::avx512bf16, worker_counts[s]);
    }
    if (probe::bf16_peak_available(pagedattn::IsaId::amx)) {
      limits.amx_flop_per_s[s] = probe::bf16_peak(pagedattn::IsaId::amx, worker_counts[s]);
    }
  }
  return limits;
}

/// The limits of this process, measured on first use.
inline const MachineLimits& machine_limits() {
  static const MachineLimits limits = measure_machine_limits();
  return limits;
}

/// Measures the limits now, prints them and records them in the benchmark context (JSON output
/// key "context", as strings in SI units: bytes/s and FLOP/s; "n/a" for a peak the CPU lacks).
inline void report_machine_limits() {
  const MachineLimits& limits = machine_limits();
  const std::string all = std::to_string(limits.all_workers);
  // limit_<name>/1 and limit_<name>/<all workers>, with what it measures.
  const auto record = [&](const std::string& name, const double (&values)[2], const char* what) {
    for (int s = 0; s < 2; ++s) {
      const std::string key = "limit_" + name + "/" + (s == 0 ? "1" : all);
      if (values[s] > 0) {
        benchmark::AddCustomContext(key, std::to_string(values[s]));
        std::printf("%-30s %10.3f G/s  %s\n", key.c_str(), values[s] * 1e-9, what);
      } else {
        benchmark::AddCustomContext(key, "n/a");
        std::printf("%-30s %10s      %s: the CPU (or this build) lacks it\n", key.c_str(), "n/a", what);
      }
    }
  };
  std::printf("Machine limits (median of %d passes):\n", probe_passes);
  benchmark::AddCustomContext("limit_all_workers", all);
  record("read_bytes_per_s", limits.read_bytes_per_s, "read bandwidth");
  record("copy_bytes_per_s", limits.copy_bytes_per_s, "copy bandwidth (read + written)");
  record("avx2_flop_per_s", limits.avx2_flop_per_s, "FP32 FMA peak, AVX2");
  record("avx512_flop_per_s", limits.avx512_flop_per_s, "FP32 FMA peak, AVX-512");
  record("avx512bf16_flop_per_s", limits.avx512bf16_flop_per_s, "bf16 peak, vdpbf16ps (AVX512-BF16)");
  record("amx_flop_per_s", limits.amx_flop_per_s, "bf16 peak, tdpbf16ps (AMX)");
  std::fflush(stdout);
}

/// Wall time of one run of a benchmark's timed loop: construct it just before the loop, then
/// turn per-iteration amounts into fractions of a limit (plain counters, printed without "/s").
/// The loop ends at the first of stop() and the first rate asked for; call that right after it.
class LoopTimer {
 public:
  LoopTimer() noexcept : start_(std::chrono::steady_clock::now()) {}

  /// Ends the timed span now (a no-op once ended): for work between the loop and the counters.
  void stop() noexcept {
    if (!end_) end_ = std::chrono::steady_clock::now();
  }

  /// `amount` per iteration over the loop's iterations and its wall time, per second.
  double achieved(const benchmark::State& state, double amount) {
    stop();
    const std::chrono::duration<double> seconds = *end_ - start_;
    return amount * static_cast<double>(state.iterations()) / seconds.count();
  }

  /// achieved(state, amount) as a fraction of `limit` (a rate per second); 0 when the limit is
  /// unknown (set_fraction leaves such a counter out instead).
  benchmark::Counter fraction(const benchmark::State& state, double amount, double limit) {
    return benchmark::Counter(limit > 0 ? achieved(state, amount) / limit : 0.0);
  }

  /// Sets counter `name` to fraction(state, amount, limit), or leaves it out (n/a) where the limit
  /// is unknown (0: a peak the CPU lacks).
  void set_fraction(benchmark::State& state, const std::string& name, double amount, double limit) {
    if (limit > 0) state.counters[name] = fraction(state, amount, limit);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::optional<std::chrono::steady_clock::time_point> end_;
};

/// A counter showing `amount` per iteration per second.
inline benchmark::Counter rate(double amount) {
  return benchmark::Counter(amount, benchmark::Counter::kIsIterationInvariantRate);
}

/// The common main of the benchmark binaries: limits first, then `register_cases()`, then run.
template <class Register>
int run_benchmarks(int argc, char** argv, Register&& register_cases) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  report_machine_limits();
  register_cases();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace pagedattn_bench
