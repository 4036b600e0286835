// Numeric storage types and DType helpers: layout, constexpr use, rounding at hand-computed
// boundaries (values from the OCP FP8 and IEEE 754 specifications), and the DType visitor.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "pagedattn/core/dtype.hpp"

using namespace pagedattn;

static_assert(std::is_trivially_copyable_v<fp16_t> && std::is_trivially_copyable_v<fp8_e5m2_t>);
static_assert(!std::is_convertible_v<float, bf16_t>, "construction from float must be explicit");
static_assert(!std::is_convertible_v<fp8_e4m3_t, float>, "conversion to float must be explicit");
static_assert(fp8_e4m3_t(1.0f).bits() == 0x38);
static_assert(fp8_e5m2_t(-2.0f).bits() == 0xC0);
static_assert(float(fp8_e4m3_t::from_bits(0x7E)) == 448.0f);
static_assert(float(fp16_t::from_bits(0x7BFF)) == 65504.0f);
static_assert(dtype_of<fp8_e5m2_t> == DType::fp8_e5m2 && dtype_size(DType::f32) == 4);

TEST_CASE("FP8 E4M3 boundaries follow the OCP specification", "[numeric]") {
  REQUIRE(fp8_e4m3_t(448.0f).bits() == 0x7E);
  REQUIRE(fp8_e4m3_t(464.0f).bits() == 0x7E);   // midpoint 448/480 ties to even 448
  REQUIRE(fp8_e4m3_t(1e30f).bits() == 0x7E);    // saturate
  REQUIRE(fp8_e4m3_t(-std::numeric_limits<float>::infinity()).bits() == 0xFE);
  REQUIRE(fp8_e4m3_t(std::numeric_limits<float>::quiet_NaN()).bits() == 0x7F);
  REQUIRE(fp8_e4m3_t(0x1p-9f).bits() == 0x01);  // smallest subnormal
  REQUIRE(fp8_e4m3_t(0x1p-10f).bits() == 0x00); // half of it ties to even 0
  REQUIRE(fp8_e4m3_t(0x1.8p-9f).bits() == 0x02); // 1.5 x smallest ties to even 2
  REQUIRE(fp8_e4m3_t(-0.0f).bits() == 0x80);
  REQUIRE(std::isnan(float(fp8_e4m3_t::from_bits(0xFF))));
  REQUIRE(float(fp8_e4m3_t::from_bits(0x08)) == 0x1p-6f);  // smallest normal
}

TEST_CASE("FP8 E5M2 boundaries follow the OCP specification", "[numeric]") {
  REQUIRE(fp8_e5m2_t(57344.0f).bits() == 0x7B);
  REQUIRE(fp8_e5m2_t(61440.0f).bits() == 0x7B);  // would round to inf: saturates
  REQUIRE(fp8_e5m2_t(std::numeric_limits<float>::infinity()).bits() == 0x7B);
  REQUIRE(std::isinf(float(fp8_e5m2_t::from_bits(0x7C))));
  REQUIRE(std::isnan(float(fp8_e5m2_t::from_bits(0x7D))));
  REQUIRE(fp8_e5m2_t(0x1p-16f).bits() == 0x01);
  REQUIRE(fp8_e5m2_t(0x1.4p0f).bits() == 0x3D);  // 1.25 is exact
  REQUIRE(fp8_e5m2_t(0x1.2p0f).bits() == 0x3C);  // 1.125 ties to even 1.0
  REQUIRE(fp8_e5m2_t(0x1.6p0f).bits() == 0x3E);  // 1.375 ties to even 1.5
  REQUIRE(fp8_e5m2_t(0x1.61p0f).bits() == 0x3E); // above the tie rounds up
}

TEST_CASE("fp16 and bf16 round to nearest even and overflow to infinity", "[numeric]") {
  REQUIRE(fp16_t(65504.0f).bits() == 0x7BFF);
  REQUIRE(fp16_t(65519.0f).bits() == 0x7BFF);
  REQUIRE(fp16_t(65520.0f).bits() == 0x7C00);
  REQUIRE(fp16_t(0x1p-24f).bits() == 0x0001);
  REQUIRE(fp16_t(0x1p-25f).bits() == 0x0000);
  REQUIRE(bf16_t(1.0f + 0x1p-8f).bits() == 0x3F80);         // tie to even
  REQUIRE(bf16_t(1.0f + 0x1.8p-8f).bits() == 0x3F81);
  REQUIRE(bf16_t(std::numeric_limits<float>::max()).bits() == 0x7F80);
  REQUIRE(bf16_t(std::bit_cast<float>(0x00012345u)).bits() == 0x0001);  // float subnormal kept
  REQUIRE(bf16_t(std::bit_cast<float>(0xFF812345u)).bits() == 0xFFC1);  // NaN quieted, sign kept
}

TEST_CASE("visit_dtype maps every DType to its C++ type", "[numeric]") {
  for (DType d : {DType::f32, DType::bf16, DType::fp16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    const DType round_trip =
        visit_dtype(d, []<class T>(std::type_identity<T>) { return dtype_of<T>; });
    REQUIRE(round_trip == d);
    REQUIRE(dtype_size(d) ==
            visit_dtype(d, []<class T>(std::type_identity<T>) { return sizeof(T); }));
    REQUIRE_FALSE(dtype_name(d).empty());
  }
  REQUIRE(dtype_name(DType::fp8_e4m3) == "fp8_e4m3");
}
