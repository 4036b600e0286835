// Package-test consumer: uses the public API through the umbrella header and checks the results.
#include <pagedattn/pagedattn.hpp>

#include <cstdio>
#include <vector>

int main() {
  const pagedattn::IsaId isa = pagedattn::best_isa();
  std::vector<float> values = {0.5f, -1.25f, 3.0f, 448.0f, 1000.0f};
  std::vector<pagedattn::fp8_e4m3_t> codes(values.size());
  pagedattn::quantize(values, codes, 2.0f);
  std::vector<float> restored(values.size());
  pagedattn::dequantize(codes, restored, 2.0f);
  const float expected[] = {0.5f, -1.25f, 3.0f, 448.0f, 896.0f};
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (restored[i] != expected[i]) {
      std::printf("element %zu: got %g, expected %g\n", i, restored[i], expected[i]);
      return 1;
    }
  }
  std::printf("pagedattn %d.%d.%d consumer OK on %s\n", pagedattn::version.major,
              pagedattn::version.minor, pagedattn::version.patch,
              std::string(pagedattn::isa_name(isa)).c_str());
  return 0;
}
