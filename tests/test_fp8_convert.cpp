// FP8 quantize/dequantize helpers on the ISA chosen with --isa: bit-exact with the scalar storage
// type conversions on random data, every 16-bit input code and special values, whatever the caller's
// MXCSR holds; tails write nothing past the end; bad input throws before anything is written.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "minifloat_reference.hpp"
#include "mxcsr_scope.hpp"
#include "pagedattn/fp8/scaled_convert.hpp"
#include "reference_formats.hpp"
#include "test_support.hpp"

using namespace pagedattn;
using pagedattn::test::selected_isa;

namespace {

/// Bits of any element type, widened, for exact comparison.
template <class T>
std::uint32_t bits_of(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<std::uint32_t>(value);
  } else {
    return value.bits();
  }
}

template <class T>
T from_float_bits(std::uint32_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(bits);
  } else {
    return T(std::bit_cast<float>(bits));
  }
}

/// Values that exercise every path: specials, both ends of every format, midpoints, random spread.
template <class T>
std::vector<T> test_inputs(std::size_t random_count, std::uint32_t seed) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, 464.0f, 465.0f, 480.0f,
                               57344.0f, 61440.0f, 65504.0f, 0x1p-9f, 0x1p-10f, 0x1.8p-10f,
                               0x1p-16f, 0x1p-17f, 0x1p-24f, 0x1p-126f, 0x1p-149f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffa00000u)};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  for (std::size_t i = 0; i < random_count; ++i) {
    switch (i % 3) {
      case 0: values.push_back(std::bit_cast<float>(any_bits(rng))); break;
      case 1: values.push_back(normal(rng)); break;
      default: values.push_back(std::ldexp(normal(rng), exponent(rng))); break;
    }
  }
  std::vector<T> result;
  for (float v : values) result.push_back(T(v));
  return result;
}

template <class From, class To>
void check_quantize_matches_scalar(const std::vector<From>& input, float scale) {
  std::vector<To> output(input.size());
  quantize(input, output, scale, selected_isa);
  for (std::size_t i = 0; i < input.size(); ++i) {
    const To expected(static_cast<float>(input[i]) / scale);
    if (output[i].bits() != expected.bits()) {
      FAIL("quantize mismatch at " << i << ": input bits 0x" << std::hex << bits_of(input[i])
                                   << " scale " << scale << " got 0x" << unsigned(output[i].bits())
                                   << " expected 0x" << unsigned(expected.bits()));
    }
  }
}

template <class From, class To>
void check_dequantize_matches_scalar(const std::vector<From>& input, float scale) {
  std::vector<To> output(input.size());
  dequantize(input, output, scale, selected_isa);
  for (std::size_t i = 0; i < input.size(); ++i) {
    const To expected = from_float_bits<To>(
        std::bit_cast<std::uint32_t>(static_cast<float>(input[i]) * scale));
    if (bits_of(output[i]) != bits_of(expected)) {
      FAIL("dequantize mismatch at " << i << ": code 0x" << std::hex << unsigned(input[i].bits())
                                     << " scale " << scale << " got 0x" << bits_of(output[i])
                                     << " expected 0x" << bits_of(expected));
    }
  }
}

const float test_scales[] = {1.0f, 0.0078125f, 0.37f, 3.0f, 1e-3f, 1e5f};

}  // namespace

TEMPLATE_TEST_CASE("quantize is bit-exact with the scalar conversion", "[fp8]", float, bf16_t,
                   fp16_t) {
  const auto input = test_inputs<TestType>(20000, 7);
  for (float scale : test_scales) {
    check_quantize_matches_scalar<TestType, fp8_e4m3_t>(input, scale);
    check_quantize_matches_scalar<TestType, fp8_e5m2_t>(input, scale);
  }
}

TEMPLATE_TEST_CASE("quantize matches on every 16-bit input code", "[fp8]", bf16_t, fp16_t) {
  std::vector<TestType> input;
  for (std::uint32_t code = 0; code < 65536; ++code) {
    input.push_back(TestType::from_bits(static_cast<std::uint16_t>(code)));
  }
  for (float scale : {1.0f, 0.37f, 96.0f}) {
    check_quantize_matches_scalar<TestType, fp8_e4m3_t>(input, scale);
    check_quantize_matches_scalar<TestType, fp8_e5m2_t>(input, scale);
  }
  // Powers of two: the vector tiers fold them into the bf16 encoder's thresholds for
  // |log2(scale)| <= 64 and use the float path beyond.
  for (int exponent : {-65, -64, -40, -13, -4, -1, 1, 4, 9, 20, 64, 65}) {
    const float scale = std::ldexp(1.0f, exponent);
    check_quantize_matches_scalar<TestType, fp8_e4m3_t>(input, scale);
    check_quantize_matches_scalar<TestType, fp8_e5m2_t>(input, scale);
  }
}

#if defined(__x86_64__)
namespace {

using namespace pagedattn::test;  // the MXCSR settings (mxcsr_scope.hpp)

using pagedattn::test::ReferenceFormat;

/// Float value of `x` decoded by the independent reference (a float is itself).
template <class T>
float reference_to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return std::bit_cast<float>(mfref::decode<typename ReferenceFormat<T>::type>(x.bits()));
  }
}

/// Bits of `value` stored as T by the independent reference (round to nearest even).
template <class T>
std::uint32_t reference_bits(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<std::uint32_t>(value);
  } else {
    return mfref::encode<typename ReferenceFormat<T>::type>(std::bit_cast<std::uint32_t>(value));
  }
}

/// Converts `input` with quantize (To FP8) or dequantize (From FP8) and `scale` under each of
/// caller_mxcsr_values and requires the reference's bits every time: To(x / scale) or
/// To(x * scale), with the float division or product rounded to nearest even without DAZ/FTZ
/// (computed here under the default MXCSR). Also requires the call to leave the caller's MXCSR
/// control bits as they were.
template <class From, class To>
void check_conversion_ignores_mxcsr(const std::vector<From>& input, float scale) {
  std::vector<std::uint32_t> expected(input.size());
  {
    const MxcsrScope standard(default_mxcsr);
    for (std::size_t i = 0; i < input.size(); ++i) {
      const float x = reference_to_float(input[i]);
      expected[i] = reference_bits<To>(is_fp8_v<To> ? x / scale : x * scale);
    }
  }
  for (const unsigned mxcsr : caller_mxcsr_values) {
    INFO("caller's MXCSR 0x" << std::hex << mxcsr << ", scale " << std::hexfloat << scale);
    std::vector<To> output(input.size());
    {
      const MxcsrScope caller(mxcsr);
      if constexpr (is_fp8_v<To>) {
        quantize(input, output, scale, selected_isa);
      } else {
        dequantize(input, output, scale, selected_isa);
      }
      REQUIRE((_mm_getcsr() & mxcsr_control_bits) == mxcsr);
    }
    for (std::size_t i = 0; i < input.size(); ++i) {
      if (bits_of(output[i]) != expected[i]) {
        FAIL("mismatch at " << i << ": input bits 0x" << std::hex << bits_of(input[i]) << " got 0x"
                            << bits_of(output[i]) << " expected 0x" << expected[i]);
      }
    }
  }
}

/// Scales for the MXCSR checks: 1, powers of two (folded into the bf16 encoder's thresholds
/// within 2^+-64, applied as exact reciprocals beyond), and other scales (divided), among them
/// scales so small that float subnormal inputs land in the FP8 range.
const float mxcsr_test_scales[] = {1.0f, 0.037f, 0.37f, 3.0f, 0x1p-20f, 0x1p10f, 0x1p-120f, 0x1.8p-120f};

}  // namespace

TEMPLATE_TEST_CASE("quantize gives the same codes under every caller MXCSR", "[fp8][mxcsr]", float,
                   bf16_t, fp16_t) {
  std::vector<TestType> input;
  if constexpr (std::is_same_v<TestType, float>) {
    input = test_inputs<float>(6000, 11);
    // A quotient just above a tie (see the E4M3 example below), and float subnormals that the
    // smallest scales bring into the FP8 range (DAZ would read them as zero).
    for (float x : {0x1.d9999cp+0f, 0x1.8p-128f, -0x1p-127f, 0x1.fffffcp-127f, -0x1p-149f}) {
      input.push_back(x);
    }
  } else {
    for (std::uint32_t code = 0; code < 65536; ++code) {
      input.push_back(TestType::from_bits(static_cast<std::uint16_t>(code)));
    }
  }
  for (const float scale : mxcsr_test_scales) {
    check_conversion_ignores_mxcsr<TestType, fp8_e4m3_t>(input, scale);
    check_conversion_ignores_mxcsr<TestType, fp8_e5m2_t>(input, scale);
  }
}

TEMPLATE_TEST_CASE("dequantize gives the same values under every caller MXCSR", "[fp8][mxcsr]",
                   fp8_e4m3_t, fp8_e5m2_t) {
  std::vector<TestType> input;
  for (std::uint32_t code = 0; code < 256; ++code) {
    input.push_back(TestType::from_bits(static_cast<std::uint8_t>(code)));
  }
  for (const float scale : mxcsr_test_scales) {
    check_conversion_ignores_mxcsr<TestType, float>(input, scale);
    check_conversion_ignores_mxcsr<TestType, bf16_t>(input, scale);
    check_conversion_ignores_mxcsr<TestType, fp16_t>(input, scale);
  }
}

TEST_CASE("quantize examples that depend on rounding and on DAZ give their codes under every MXCSR",
          "[fp8][mxcsr]") {
  // 0x1.d9999cp+0 / 0.037f = 50.0000032... exactly (0x1.d9999cp+0 = 1.85000002384...,
  // 0.037f = 0.03700000047...), so the float quotient rounded to nearest is 0x1.900002p+5, just
  // above the E4M3 tie 50 between 48 (0.1100.100 = 0x64) and 52 (0.1100.101 = 0x65): 0x65.
  // Rounded toward zero (or down) the quotient would be 50.0 exactly, a tie going to the even
  // 0x64.
  // 0x1.8p-128 (a float subnormal) / 0x1.8p-120 = 2^-8 exactly: E4M3 subnormal 2 x 2^-9 (0x02),
  // E5M2 normal 1.00 x 2^-8 (exponent field -8 + 15 = 7: 0.00111.00 = 0x1C). DAZ would read the
  // input as zero (code 0x00).
  const std::vector<float> tie_input(19, 0x1.d9999cp+0f);  // 19: vector steps and a tail
  const std::vector<float> subnormal_input(19, 0x1.8p-128f);
  for (const unsigned mxcsr : caller_mxcsr_values) {
    INFO("caller's MXCSR 0x" << std::hex << mxcsr);
    std::vector<fp8_e4m3_t> tie_codes(tie_input.size());
    std::vector<fp8_e4m3_t> subnormal_e4m3(subnormal_input.size());
    std::vector<fp8_e5m2_t> subnormal_e5m2(subnormal_input.size());
    {
      const MxcsrScope caller(mxcsr);
      quantize(tie_input, tie_codes, 0.037f, selected_isa);
      quantize(subnormal_input, subnormal_e4m3, 0x1.8p-120f, selected_isa);
      quantize(subnormal_input, subnormal_e5m2, 0x1.8p-120f, selected_isa);
    }
    for (const fp8_e4m3_t code : tie_codes) REQUIRE(unsigned(code.bits()) == 0x65u);
    for (const fp8_e4m3_t code : subnormal_e4m3) REQUIRE(unsigned(code.bits()) == 0x02u);
    for (const fp8_e5m2_t code : subnormal_e5m2) REQUIRE(unsigned(code.bits()) == 0x1Cu);
  }
}
#endif

TEMPLATE_TEST_CASE("dequantize is bit-exact on every code", "[fp8]", fp8_e4m3_t, fp8_e5m2_t) {
  std::vector<TestType> input;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (std::uint32_t code = 0; code < 256; ++code) {
      input.push_back(TestType::from_bits(static_cast<std::uint8_t>(code)));
    }
  }
  for (float scale : test_scales) {
    check_dequantize_matches_scalar<TestType, float>(input, scale);
    check_dequantize_matches_scalar<TestType, bf16_t>(input, scale);
    check_dequantize_matches_scalar<TestType, fp16_t>(input, scale);
  }
}

TEST_CASE("every length converts fully and writes nothing past the end", "[fp8]") {
  constexpr std::uint8_t canary = 0xA5;
  for (std::size_t count = 0; count <= 140; ++count) {
    std::vector<float> input(count);
    for (std::size_t i = 0; i < count; ++i) input[i] = 0.25f * static_cast<float>(i) + 0.125f;
    std::vector<fp8_e4m3_t> quantized(count + 64, fp8_e4m3_t::from_bits(canary));
    quantize(input, std::span(quantized.data(), count), 0.5f, selected_isa);
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE(quantized[i].bits() == fp8_e4m3_t(input[i] / 0.5f).bits());
    }
    for (std::size_t i = count; i < quantized.size(); ++i) REQUIRE(quantized[i].bits() == canary);

    // bf16 with a power-of-two scale: the vector tiers' widest path (32 elements per step).
    std::vector<bf16_t> bf16_input(count);
    for (std::size_t i = 0; i < count; ++i) bf16_input[i] = bf16_t(input[i]);
    std::vector<fp8_e4m3_t> from_bf16(count + 64, fp8_e4m3_t::from_bits(canary));
    quantize(std::span<const bf16_t>(bf16_input), std::span(from_bf16.data(), count), 0.5f, selected_isa);
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE(from_bf16[i].bits() == fp8_e4m3_t(static_cast<float>(bf16_input[i]) / 0.5f).bits());
    }
    for (std::size_t i = count; i < from_bf16.size(); ++i) REQUIRE(from_bf16[i].bits() == canary);

    std::vector<bf16_t> restored(count + 64, bf16_t::from_bits(0xA5A5));
    dequantize(std::span(quantized.data(), count), std::span(restored.data(), count), 0.5f,
               selected_isa);
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE(restored[i].bits() == bf16_t(static_cast<float>(quantized[i]) * 0.5f).bits());
    }
    for (std::size_t i = count; i < restored.size(); ++i) REQUIRE(restored[i].bits() == 0xA5A5);
  }
}

TEST_CASE("bad scales and sizes throw before writing", "[fp8][errors]") {
  const std::vector<float> input(33, 1.0f);
  std::vector<fp8_e5m2_t> output(33, fp8_e5m2_t::from_bits(0x11));
  const auto untouched = [&] {
    for (const auto& q : output) REQUIRE(q.bits() == 0x11);
  };
  for (float scale : {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    try {
      quantize(input, output, scale, selected_isa);
      FAIL("no error for scale " << scale);
    } catch (const Error& error) {
      REQUIRE(error.code() == Errc::invalid_argument);
      REQUIRE(error.argument() == "scale");
      REQUIRE_THAT(error.what(), Catch::Contains("scale = ") && Catch::Contains("positive"));
    }
    untouched();
  }
  try {
    quantize(input, std::span(output.data(), 32), 1.0f, selected_isa);
    FAIL("no error for a size mismatch");
  } catch (const Error& error) {
    REQUIRE(error.code() == Errc::size_mismatch);
    REQUIRE(error.argument() == "output.size()");
    REQUIRE_THAT(error.what(), Catch::Contains("32") && Catch::Contains("33"));
  }
  untouched();
  std::vector<float> wide(33, 5.0f);
  REQUIRE_THROWS_AS(dequantize(output, wide, -2.0f, selected_isa), Error);
  for (float v : wide) REQUIRE(v == 5.0f);
}

TEMPLATE_TEST_CASE("quantize of all 2^32 float bit patterns matches the scalar conversion",
                   "[exhaustive]", fp8_e4m3_t, fp8_e5m2_t) {
  constexpr std::uint64_t total = std::uint64_t{1} << 32;
  constexpr std::uint64_t chunk = std::uint64_t{1} << 20;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::uint64_t> mismatches(workers, 0), first_bad(workers, total);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> input(chunk);
      std::vector<TestType> output(chunk);
      for (std::uint64_t start = w * chunk; start < total; start += workers * chunk) {
        for (std::uint64_t i = 0; i < chunk; ++i) {
          input[i] = std::bit_cast<float>(static_cast<std::uint32_t>(start + i));
        }
        quantize(input, output, 1.0f, selected_isa);
        for (std::uint64_t i = 0; i < chunk; ++i) {
          if (output[i].bits() != TestType(input[i]).bits()) {
            if (mismatches[w]++ == 0) first_bad[w] = start + i;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (unsigned w = 0; w < workers; ++w) {
    INFO("worker " << w << " first mismatching input bits 0x" << std::hex << first_bad[w]);
    REQUIRE(mismatches[w] == 0);
  }
}
