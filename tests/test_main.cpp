// Catch2 main for every test binary. `--isa NAME` selects the ISA tier an ISA-specific test runs
// on (`amx` on a CPU without AMX: amx_emulated, unless --no-emulation); when this program or CPU
// cannot run it, the binary exits with 77 (ctest reports "skipped").
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "test_support.hpp"

namespace pagedattn::test {
IsaId selected_isa = IsaId::scalar;
}

int main(int argc, char** argv) {
  std::vector<char*> catch_args;
  // --no-emulation: `--isa amx` means the CPU's own AMX (exit 77 without it), never the emulation.
  bool emulation = true;
  for (int i = 1; i < argc; ++i) emulation = emulation && std::strcmp(argv[i], "--no-emulation") != 0;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-emulation") == 0) continue;
    if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      const auto parsed = pagedattn::parse_isa(argv[++i]);
      if (!parsed) {
        std::fprintf(stderr, "unknown --isa '%s'\n", argv[i]);
        return 2;
      }
      pagedattn::IsaId isa = *parsed;
      // `--isa amx` on a CPU without AMX runs the AMX kernels on the tile emulation.
      if (isa == pagedattn::IsaId::amx && emulation && !pagedattn::check_isa(isa).ok() &&
          pagedattn::check_isa(pagedattn::IsaId::amx_emulated).ok()) {
        std::printf("amx: this CPU has no AMX; running the AMX kernels on the tile emulation (amx_emulated)\n");
        isa = pagedattn::IsaId::amx_emulated;
      }
      if (const pagedattn::Status status = pagedattn::check_isa(isa); !status.ok()) {
        std::printf("skipped: %s\n", status.message().c_str());
        return pagedattn::test::skip_exit_code;
      }
      pagedattn::test::selected_isa = isa;
      continue;
    }
    catch_args.push_back(argv[i]);
  }
  return Catch::Session().run(static_cast<int>(catch_args.size()), catch_args.data());
}
