// Main demo: prints the CPU's features, the ISA tier pagedattn runs, and an FP8 round-trip table.
#include <fmt/core.h>

#include <cmath>
#include <vector>

#include <pagedattn/pagedattn.hpp>

int main() {
  const pagedattn::CpuFeatures& f = pagedattn::cpu_features();
  fmt::print("pagedattn {}.{}.{}\n", pagedattn::version.major, pagedattn::version.minor,
             pagedattn::version.patch);
  fmt::print("CPU: avx2={} fma={} f16c={} avx512f/bw/dq/vl={}/{}/{}/{} avx512_bf16={} "
             "avx512_fp16={} amx_tile/bf16/int8={}/{}/{}\n",
             f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512dq, f.avx512vl, f.avx512_bf16,
             f.avx512_fp16, f.amx_tile, f.amx_bf16, f.amx_int8);
  fmt::print("best ISA the CPU supports: {}; ISA pagedattn runs: {}\n\n",
             pagedattn::isa_name(pagedattn::cpu_best_isa()), pagedattn::isa_name(pagedattn::best_isa()));

  const float scale = 0.5f;
  const std::vector<float> values = {0.0f, 0.001f, -0.1f, 0.3f, 1.0f, -3.14159f, 100.0f,
                                     224.0f, 300.0f, 1.0e5f, INFINITY, NAN};
  std::vector<pagedattn::fp8_e4m3_t> e4m3(values.size());
  std::vector<pagedattn::fp8_e5m2_t> e5m2(values.size());
  std::vector<float> back_e4m3(values.size()), back_e5m2(values.size());
  pagedattn::quantize(values, e4m3, scale);
  pagedattn::quantize(values, e5m2, scale);
  pagedattn::dequantize(e4m3, back_e4m3, scale);
  pagedattn::dequantize(e5m2, back_e5m2, scale);

  fmt::print("FP8 round trip with scale {} (stored q = fp8(x / scale), read x = float(q) * scale)\n",
             scale);
  fmt::print("{:>12} | {:>5} {:>12} | {:>5} {:>12}\n", "x", "E4M3", "read back", "E5M2",
             "read back");
  for (std::size_t i = 0; i < values.size(); ++i) {
    fmt::print("{:>12g} | 0x{:02X} {:>12g} | 0x{:02X} {:>12g}\n", values[i], e4m3[i].bits(),
               back_e4m3[i], e5m2[i].bits(), back_e5m2[i]);
  }
  return 0;
}
