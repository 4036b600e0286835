// ISA detection and dispatch: tier ordering, consistency of features with tiers, best_isa within
// what is compiled and supported, check_isa errors (unknown ids, caps), dispatch_isa's tag mapping.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pagedattn/fp8/scaled_convert.hpp"
#include "pagedattn/isa/dispatch.hpp"

using namespace pagedattn;

TEST_CASE("ISA names round-trip and unknown names are rejected", "[isa]") {
  for (IsaId id : all_isa_ids) REQUIRE(parse_isa(isa_name(id)) == id);
  REQUIRE(parse_isa("amx_emulated") == IsaId::amx_emulated);
  REQUIRE(isa_name(static_cast<IsaId>(200)) == "unknown");
  for (IsaId id : all_isa_ids) REQUIRE(is_isa_id(id));
  REQUIRE_FALSE(is_isa_id(static_cast<IsaId>(6)));
  REQUIRE_FALSE(is_isa_id(static_cast<IsaId>(200)));
  REQUIRE_FALSE(parse_isa("sse2").has_value());
  REQUIRE_FALSE(parse_isa("").has_value());
}

TEST_CASE("tiers are nested: each implies the one below", "[isa]") {
  CpuFeatures all;
  all.avx2 = all.fma = all.f16c = true;
  all.avx512f = all.avx512bw = all.avx512dq = all.avx512vl = true;
  all.avx512_bf16 = all.avx512_vbmi = true;
  all.amx_tile = all.amx_bf16 = true;
  REQUIRE(cpu_best_isa(all) == IsaId::amx);
  // Each feature taken away leaves this best tier, and never amx.
  const std::pair<bool CpuFeatures::*, IsaId> removals[] = {
      {&CpuFeatures::amx_tile, IsaId::avx512bf16}, {&CpuFeatures::avx512_bf16, IsaId::avx512},
      {&CpuFeatures::avx512_vbmi, IsaId::avx512},  {&CpuFeatures::avx512vl, IsaId::avx2},
      {&CpuFeatures::f16c, IsaId::scalar}};
  for (const auto& [feature, best] : removals) {
    CpuFeatures without = all;
    without.*feature = false;
    REQUIRE(cpu_best_isa(without) == best);
    REQUIRE_FALSE(cpu_supports(IsaId::amx, without));
  }
  REQUIRE(cpu_best_isa(CpuFeatures{}) == IsaId::scalar);
  const IsaId here = cpu_best_isa();
  for (IsaId id : all_isas) REQUIRE(cpu_supports(id) == (id <= here));
}

TEST_CASE("the AMX emulation needs only the avx2 set and is never the best tier", "[isa]") {
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = avx2.f16c = true;
  REQUIRE(cpu_supports(IsaId::amx_emulated, avx2));
  REQUIRE_FALSE(cpu_supports(IsaId::avx512, avx2));
  REQUIRE_FALSE(cpu_supports(IsaId::amx, avx2));
  for (bool CpuFeatures::*feature : {&CpuFeatures::avx2, &CpuFeatures::fma, &CpuFeatures::f16c}) {
    CpuFeatures without = avx2;
    without.*feature = false;
    REQUIRE_FALSE(cpu_supports(IsaId::amx_emulated, without));
  }
  REQUIRE(best_isa() != IsaId::amx_emulated);
  REQUIRE(cpu_best_isa() != IsaId::amx_emulated);
}

TEST_CASE("fast_subnormal_operands follows the CPU's vendor, and cpu_features() publishes it", "[isa]") {
  REQUIRE_FALSE(CpuFeatures{}.fast_subnormal_operands);  // unknown: the route without subnormal operands
#if defined(__x86_64__) && defined(__linux__)
  // The kernel's vendor_id line, an independent reading of CPUID's vendor string.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
  REQUIRE_FALSE(vendor.empty());
  INFO("vendor_id " << vendor);
  const bool amd_cores = vendor == "AuthenticAMD" || vendor == "HygonGenuine";
  REQUIRE(cpu_features().fast_subnormal_operands == amd_cores);
  REQUIRE(detail::subnormal_operands_allowed.load() == (amd_cores ? 1 : 0));
#endif
}

TEST_CASE("best_isa is compiled, supported, and the highest such tier", "[isa]") {
  const IsaId best = best_isa();
  REQUIRE(isa_available(best));
  REQUIRE(check_isa(best).ok());
  for (IsaId id : all_isas) {
    if (id > best) REQUIRE_FALSE(isa_available(id));
  }
  REQUIRE(isa_compiled(IsaId::scalar));
  // The test binaries are built with runtime dispatch over every ISA the compiler supports.
#if defined(PAGEDATTN_RUNTIME_DISPATCH) && defined(__x86_64__)
  REQUIRE(isa_compiled(IsaId::avx2));
  REQUIRE(isa_compiled(IsaId::avx512));
#endif
  INFO("cpu best " << isa_name(cpu_best_isa()) << ", best " << isa_name(best));
  SUCCEED();
}

TEST_CASE("check_isa explains why a tier cannot run", "[isa]") {
  for (IsaId id : all_isas) {
    const Status status = check_isa(id);
    REQUIRE(status.ok() == isa_available(id));
    if (!status.ok()) {
      REQUIRE(status.code() == Errc::unsupported);
      REQUIRE(status.argument() == "isa");
      REQUIRE_THAT(status.message(), Catch::Contains(std::string(isa_name(id))));
    }
  }
}

TEST_CASE("dispatch_isa calls the matching tag for compiled tiers only", "[isa]") {
  for (IsaId id : all_isas) {
    int calls = 0;
    IsaId seen = IsaId::scalar;
    dispatch_isa(id, [&]<class Tag>(Tag) {
      ++calls;
      seen = Tag::id;
    });
    REQUIRE(calls == (isa_compiled(id) ? 1 : 0));
    if (calls == 1) REQUIRE(seen == id);
  }
}

namespace {
/// Restores the cap set_isa_cap held at construction, also when a check fails.
struct RestoreIsaCap {
  std::optional<IsaId> saved = isa_cap();
  ~RestoreIsaCap() { set_isa_cap(saved); }
};

/// The highest tier compiled in and supported by the CPU: best_isa() without any cap.
IsaId uncapped_best_isa() {
  IsaId best = IsaId::scalar;
  for (IsaId id : all_isas) {
    if (isa_compiled(id) && cpu_supports(id)) best = id;
  }
  return best;
}
}  // namespace

TEST_CASE("set_isa_cap lowers best_isa, check_isa names it, and clearing it restores the result",
          "[isa][cap]") {
  const RestoreIsaCap restore;
  set_isa_cap(std::nullopt);
  const IsaId before = best_isa();
  std::vector<bool> ok_before;
  for (IsaId id : all_isa_ids) ok_before.push_back(check_isa(id).ok());

  set_isa_cap(IsaId::scalar);
  REQUIRE(isa_cap() == IsaId::scalar);
  REQUIRE(best_isa() == IsaId::scalar);
  REQUIRE(check_isa(IsaId::scalar).ok());
  for (IsaId id : all_isa_ids) {
    if (id == IsaId::scalar || !isa_compiled(id) || !cpu_supports(id)) continue;
    INFO("isa " << isa_name(id));
    REQUIRE_FALSE(isa_available(id));
    const Status status = check_isa(id);
    REQUIRE(status.code() == Errc::unsupported);
    REQUIRE(status.argument() == "isa");
    std::string quoted_name(1, '\'');  // as make_error quotes it
    quoted_name.append(isa_name(id)).push_back('\'');
    REQUIRE_THAT(status.message(), Catch::Contains(quoted_name) &&
                                       Catch::Contains("set_isa_cap(scalar)") &&
                                       !Catch::Contains("PAGEDATTN_MAX_ISA"));
  }

  set_isa_cap(std::nullopt);
  REQUIRE_FALSE(isa_cap().has_value());
  REQUIRE(best_isa() == before);
  for (std::size_t i = 0; i < std::size(all_isa_ids); ++i) {
    REQUIRE(check_isa(all_isa_ids[i]).ok() == ok_before[i]);
  }
}

TEST_CASE("a cap at or above every tier leaves best_isa at the highest compiled and supported tier",
          "[isa][cap]") {
  const RestoreIsaCap restore;
  for (IsaId cap : {IsaId::amx, IsaId::amx_emulated}) {
    set_isa_cap(cap);
    REQUIRE(best_isa() == uncapped_best_isa());
  }
  // A cap between: best_isa is the lower of the cap and the uncapped best.
  set_isa_cap(IsaId::avx2);
  REQUIRE(best_isa() == std::min(IsaId::avx2, uncapped_best_isa()));
}

TEST_CASE("set_isa_cap rejects a value that is no IsaId and keeps the cap", "[isa][cap]") {
  const RestoreIsaCap restore;
  set_isa_cap(IsaId::avx2);
  try {
    set_isa_cap(static_cast<IsaId>(9));
    FAIL("no error for cap value 9");
  } catch (const Error& error) {
    REQUIRE(error.code() == Errc::invalid_argument);
    REQUIRE(error.argument() == "cap");
    REQUIRE_THAT(error.what(), Catch::StartsWith("pagedattn: cap = 9: not a known IsaId"));
  }
  REQUIRE(isa_cap() == IsaId::avx2);
}

TEST_CASE("an IsaId value that names no ISA is an invalid argument, never run as scalar", "[isa]") {
  for (const int value : {6, 9, 200}) {
    const auto id = static_cast<IsaId>(value);
    INFO("isa value " << value);
    const Status status = check_isa(id);
    REQUIRE(status.code() == Errc::invalid_argument);
    REQUIRE(status.argument() == "isa");
    REQUIRE_THAT(status.message(),
                 Catch::StartsWith("pagedattn: isa = " + std::to_string(value) + ": not a known IsaId"));
    REQUIRE_FALSE(isa_available(id));
    // A conversion on it throws before writing anything (no back-end ran).
    const std::vector<float> input(40, 1.0f);
    std::vector<fp8_e4m3_t> output(40, fp8_e4m3_t::from_bits(0x11));
    try {
      quantize(input, output, 1.0f, id);
      FAIL("no error for isa value " << value);
    } catch (const Error& error) {
      REQUIRE(error.code() == Errc::invalid_argument);
      REQUIRE(error.argument() == "isa");
    }
    for (const fp8_e4m3_t code : output) REQUIRE(code.bits() == 0x11);
  }
}
