// ISA detection and dispatch: tier ordering, consistency of features with tiers, best_isa within
// what is compiled and supported, check_isa errors, and dispatch_isa's tag mapping.
#include <catch2/catch.hpp>

#include <utility>

#include "pagedattn/isa/dispatch.hpp"

using namespace pagedattn;

TEST_CASE("ISA names round-trip and unknown names are rejected", "[isa]") {
  for (IsaId id : all_isa_ids) REQUIRE(parse_isa(isa_name(id)) == id);
  REQUIRE(parse_isa("amx_emulated") == IsaId::amx_emulated);
  REQUIRE(isa_name(static_cast<IsaId>(200)) == "unknown");
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

TEST_CASE("the AMX emulation needs only the avx512bf16 set and is never the best tier", "[isa]") {
  CpuFeatures bf16;
  bf16.avx2 = bf16.fma = bf16.f16c = true;
  bf16.avx512f = bf16.avx512bw = bf16.avx512dq = bf16.avx512vl = true;
  bf16.avx512_bf16 = bf16.avx512_vbmi = true;
  REQUIRE(cpu_supports(IsaId::amx_emulated, bf16));
  REQUIRE_FALSE(cpu_supports(IsaId::amx, bf16));
  bf16.avx512_vbmi = false;
  REQUIRE_FALSE(cpu_supports(IsaId::amx_emulated, bf16));
  REQUIRE(best_isa() != IsaId::amx_emulated);
  REQUIRE(cpu_best_isa() != IsaId::amx_emulated);
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
