// FP8 quantize/dequantize throughput per ISA tier available here, with bytes/s counters
// (bytes read + written per second).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include <pagedattn/pagedattn.hpp>

namespace {

template <class From, class To>
void convert_benchmark(benchmark::State& state, pagedattn::IsaId isa) {
  const std::size_t count = static_cast<std::size_t>(state.range(0));
  std::vector<From> input(count);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (auto& x : input) {
    if constexpr (std::is_same_v<From, float>) {
      x = normal(rng);
    } else {
      x = From(normal(rng));
    }
  }
  std::vector<To> output(count);
  for (auto _ : state) {
    if constexpr (pagedattn::is_fp8_v<To>) {
      pagedattn::quantize(input, output, 0.5f, isa);
    } else {
      pagedattn::dequantize(input, output, 0.5f, isa);
    }
    benchmark::DoNotOptimize(output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count *
                                                    (sizeof(From) + sizeof(To))));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * count));
}

void register_all() {
  for (pagedattn::IsaId isa : pagedattn::all_isas) {
    if (!pagedattn::isa_available(isa)) continue;
    const std::string suffix = "/" + std::string(pagedattn::isa_name(isa));
    benchmark::RegisterBenchmark(("quantize_bf16_to_e4m3" + suffix).c_str(),
                                 convert_benchmark<pagedattn::bf16_t, pagedattn::fp8_e4m3_t>, isa)
        ->Arg(1 << 16);
    benchmark::RegisterBenchmark(("quantize_f32_to_e5m2" + suffix).c_str(),
                                 convert_benchmark<float, pagedattn::fp8_e5m2_t>, isa)
        ->Arg(1 << 16);
    benchmark::RegisterBenchmark(("dequantize_e4m3_to_bf16" + suffix).c_str(),
                                 convert_benchmark<pagedattn::fp8_e4m3_t, pagedattn::bf16_t>, isa)
        ->Arg(1 << 16);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
