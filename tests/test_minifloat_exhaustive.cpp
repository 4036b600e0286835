// Checks pagedattn's scalar bf16/fp16/FP8 conversions against the independent model in
// minifloat_reference.hpp: every code decoded, every float encoded ("[exhaustive]") or a structured
// sample of floats ("[sampled]", small enough for sanitizer builds), and constexpr usability.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "minifloat_reference.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "reference_formats.hpp"

namespace {

using pagedattn::bf16_t;
using pagedattn::fp16_t;
using pagedattn::fp8_e4m3_t;
using pagedattn::fp8_e5m2_t;

/// The reference format describing storage type T.
template <class T>
using Ref = pagedattn::test::reference_format_t<T>;

/// The library's code for the float with bit pattern `float_bits`.
template <class T>
inline std::uint32_t lib_encode(std::uint32_t float_bits) {
  return T(std::bit_cast<float>(float_bits)).bits();
}

/// Bit pattern of the library's float for code `code`.
template <class T>
inline std::uint32_t lib_decode(std::uint32_t code) {
  using storage = typename T::storage_type;
  return std::bit_cast<std::uint32_t>(static_cast<float>(T::from_bits(static_cast<storage>(code))));
}

/// One disagreement: the input, the reference's output and the library's.
struct Mismatch {
  std::uint32_t input;
  std::uint32_t expected;
  std::uint32_t actual;
};

/// Disagreements found by a sweep: their number and the first few (lowest inputs first).
struct SweepResult {
  static constexpr std::size_t kept = 16;
  std::uint64_t count = 0;
  std::vector<Mismatch> first;

  void add(const Mismatch& m) {
    ++count;
    if (first.size() < kept) first.push_back(m);
  }
  void merge(const SweepResult& other) {
    count += other.count;
    first.insert(first.end(), other.first.begin(), other.first.end());
    std::sort(first.begin(), first.end(),
              [](const Mismatch& a, const Mismatch& b) { return a.input < b.input; });
    if (first.size() > kept) first.resize(kept);
  }
};

/// The recorded mismatches, one per line, as hex (`input_name` labels the input column).
std::string describe(const SweepResult& result, const char* input_name) {
  std::string text = std::to_string(result.count) + " mismatches";
  if (!result.first.empty()) text += "; first ones:";
  for (const Mismatch& m : result.first) {
    char line[128];
    std::snprintf(line, sizeof line, "\n  %s 0x%08X: reference 0x%X, library 0x%X", input_name,
                  static_cast<unsigned>(m.input), static_cast<unsigned>(m.expected),
                  static_cast<unsigned>(m.actual));
    text += line;
  }
  return text;
}

/// Compares the library's encoding with the reference on float bit patterns [begin, end).
template <class T>
void encode_range(std::uint64_t begin, std::uint64_t end, SweepResult& result) {
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto input = static_cast<std::uint32_t>(i);
    const std::uint32_t actual = lib_encode<T>(input);
    const std::uint32_t expected = mfref::encode<Ref<T>>(input);
    if (actual != expected) result.add({input, expected, actual});
  }
}

/// Compares the library's encoding with the reference on all 2^32 float bit patterns, in chunks
/// handed out to hardware_concurrency() threads.
template <class T>
SweepResult encode_all_floats() {
  constexpr std::uint64_t total = std::uint64_t{1} << 32;
  constexpr std::uint64_t chunk = std::uint64_t{1} << 22;
  constexpr std::uint64_t chunks = total / chunk;
  const unsigned thread_count = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::uint64_t> next_chunk{0};
  std::vector<SweepResult> results(thread_count);
  std::vector<std::thread> threads;
  threads.reserve(thread_count);
  for (unsigned t = 0; t < thread_count; ++t) {
    threads.emplace_back([&next_chunk, &result = results[t]] {
      for (std::uint64_t c = next_chunk++; c < chunks; c = next_chunk++) {
        encode_range<T>(c * chunk, (c + 1) * chunk, result);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  SweepResult merged;
  for (const SweepResult& r : results) merged.merge(r);
  return merged;
}

/// Appends `f` and its `steps` float neighbours on each side, for both signs.
void add_with_neighbours(std::vector<std::uint32_t>& out, float f, int steps) {
  const auto bits = std::bit_cast<std::uint32_t>(std::fabs(f));
  for (int d = -steps; d <= steps; ++d) {
    const std::int64_t b = static_cast<std::int64_t>(bits) + d;
    if (b < 0 || b > 0x7FFFFFFF) continue;
    out.push_back(static_cast<std::uint32_t>(b));
    out.push_back(static_cast<std::uint32_t>(b) | 0x80000000u);
  }
}

/// Every value of format S from 0 up to one step past the largest finite, every midpoint between
/// neighbours, each with two float neighbours either side; plus twice the largest finite.
template <class S>
void add_format_points(std::vector<std::uint32_t>& out) {
  for (std::uint32_t mag = 0; mag <= S::max_finite_code + 1; ++mag) {
    const double low = mfref::finite_value<S>(mag);
    const double high = mfref::finite_value<S>(mag + 1);
    const double mid = (low + high) / 2;
    // All of these are exactly floats, except bf16's step past the largest (2^128), skipped.
    constexpr double float_max = std::numeric_limits<float>::max();
    if (low <= float_max) add_with_neighbours(out, static_cast<float>(low), 2);
    if (mid <= float_max) add_with_neighbours(out, static_cast<float>(mid), 2);
  }
  const double twice_max = 2 * S::max_finite;
  if (twice_max <= std::numeric_limits<float>::max()) {
    add_with_neighbours(out, static_cast<float>(twice_max), 2);
  }
}

/// The "[sampled]" inputs: top and bottom 10 bits varying, a seeded random sample, powers of two,
/// the special values, and every code value and rounding midpoint of the four formats.
const std::vector<std::uint32_t>& sampled_inputs() {
  static const std::vector<std::uint32_t> inputs = [] {
    std::vector<std::uint32_t> out;
    out.reserve(std::size_t{6} << 20);
    std::mt19937 rng(20240611u);
    // All combinations of the top 10 and bottom 10 bits, with the 12 bits between all zeros,
    // all ones, or random.
    for (std::uint32_t top = 0; top < 1024; ++top) {
      for (std::uint32_t bottom = 0; bottom < 1024; ++bottom) {
        const std::uint32_t base = (top << 22) | bottom;
        out.push_back(base);
        out.push_back(base | (0xFFFu << 10));
        out.push_back(base | ((rng() & 0xFFFu) << 10));
      }
    }
    for (int i = 0; i < (1 << 20); ++i) out.push_back(static_cast<std::uint32_t>(rng()));
    // Powers of two over the whole float range (normal and subnormal), with neighbours.
    for (int k = -149; k <= 127; ++k) add_with_neighbours(out, std::ldexp(1.0f, k), 2);
    // Specials: zeros, float subnormal and normal extremes, infinities, NaNs with payloads.
    const std::uint32_t specials[] = {0x00000000u, 0x00000001u, 0x00000002u, 0x007FFFFFu,
                                      0x00800000u, 0x00800001u, 0x7F7FFFFFu, 0x7F7FFFFEu,
                                      0x7F800000u, 0x7F800001u, 0x7F800002u, 0x7F801000u,
                                      0x7F810000u, 0x7FA00000u, 0x7FBFFFFFu, 0x7FC00000u,
                                      0x7FC00001u, 0x7FC02000u, 0x7FD55555u, 0x7FEAAAAAu,
                                      0x7FF00000u, 0x7FFFFFFFu, 0x3F800000u, 0x3F7FFFFFu};
    for (const std::uint32_t s : specials) {
      out.push_back(s);
      out.push_back(s | 0x80000000u);
    }
    add_format_points<mfref::Bf16>(out);
    add_format_points<mfref::Fp16>(out);
    add_format_points<mfref::E4M3>(out);
    add_format_points<mfref::E5M2>(out);
    return out;
  }();
  return inputs;
}

std::uint32_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

/// True when converting the float with bit pattern `Bits` to T is a constant expression.
template <class T, std::uint32_t Bits>
concept ConstantEncodable = requires {
  typename std::integral_constant<std::uint32_t, T(std::bit_cast<float>(Bits)).bits()>;
};

/// T's code for the float `Bits`, evaluated at compile time; 0xFFFFFFFF when that is not a
/// constant expression (never a valid code).
template <class T, std::uint32_t Bits>
constexpr std::uint32_t constant_encoding() {
  if constexpr (ConstantEncodable<T, Bits>) {
    return std::integral_constant<std::uint32_t, T(std::bit_cast<float>(Bits)).bits()>::value;
  } else {
    return 0xFFFFFFFFu;
  }
}

/// Compares compile-time encodings of one float per binade (every biased exponent, both signs,
/// mantissas 0 and 0x400001) with the reference.
template <class T, std::size_t... Exponent>
SweepResult check_constant_binades(std::index_sequence<Exponent...>) {
  SweepResult result;
  const auto check = [&result](std::uint32_t input, std::uint32_t actual) {
    const std::uint32_t expected = mfref::encode<Ref<T>>(input);
    if (actual != expected) result.add({input, expected, actual});
  };
  constexpr std::uint32_t odd_mantissa = 0x400001u;
  (check(Exponent << 23, constant_encoding<T, (Exponent << 23)>()), ...);
  (check(Exponent << 23 | odd_mantissa, constant_encoding<T, (Exponent << 23 | odd_mantissa)>()),
   ...);
  (check(0x80000000u | Exponent << 23 | odd_mantissa,
         constant_encoding<T, (0x80000000u | Exponent << 23 | odd_mantissa)>()),
   ...);
  return result;
}

}  // namespace

TEST_CASE("minifloat reference matches hand-computed spec values", "[minifloat]") {
  using mfref::decode;
  using mfref::encode;
  const float inf = std::numeric_limits<float>::infinity();
  // E4M3FN.
  CHECK(encode<mfref::E4M3>(float_bits(1.0f)) == 0x38);
  CHECK(encode<mfref::E4M3>(float_bits(448.0f)) == 0x7E);
  CHECK(encode<mfref::E4M3>(float_bits(0x1p-9f)) == 0x01);
  CHECK(encode<mfref::E4M3>(float_bits(0x1p-10f)) == 0x00);    // tie to even: zero
  CHECK(encode<mfref::E4M3>(float_bits(0x1.8p-9f)) == 0x02);   // tie 1.5 ulp: even is 2
  CHECK(encode<mfref::E4M3>(float_bits(464.0f)) == 0x7E);      // tie 448/480: 448 is even
  CHECK(encode<mfref::E4M3>(float_bits(470.0f)) == 0x7E);      // would be 480: saturates
  CHECK(encode<mfref::E4M3>(float_bits(1e9f)) == 0x7E);
  CHECK(encode<mfref::E4M3>(float_bits(-inf)) == 0xFE);
  CHECK(encode<mfref::E4M3>(float_bits(-0.0f)) == 0x80);
  CHECK(encode<mfref::E4M3>(0x7FC00000u) == 0x7F);
  CHECK(encode<mfref::E4M3>(0xFF800001u) == 0xFF);
  CHECK(decode<mfref::E4M3>(0x38) == float_bits(1.0f));
  CHECK(decode<mfref::E4M3>(0x7E) == float_bits(448.0f));
  CHECK(decode<mfref::E4M3>(0x01) == float_bits(0x1p-9f));
  CHECK(decode<mfref::E4M3>(0x08) == float_bits(0x1p-6f));
  CHECK(decode<mfref::E4M3>(0x78) == float_bits(256.0f));  // 0x78 is finite in E4M3FN
  CHECK(decode<mfref::E4M3>(0x7F) == 0x7FF00000u);
  CHECK(decode<mfref::E4M3>(0xFF) == 0xFFF00000u);
  // E5M2.
  CHECK(encode<mfref::E5M2>(float_bits(1.0f)) == 0x3C);
  CHECK(encode<mfref::E5M2>(float_bits(57344.0f)) == 0x7B);
  CHECK(encode<mfref::E5M2>(float_bits(61440.0f)) == 0x7B);  // tie rounds to 65536: saturates
  CHECK(encode<mfref::E5M2>(float_bits(inf)) == 0x7B);
  CHECK(encode<mfref::E5M2>(float_bits(-inf)) == 0xFB);
  CHECK(encode<mfref::E5M2>(float_bits(0x1p-16f)) == 0x01);
  CHECK(encode<mfref::E5M2>(0x7F800001u) == 0x7F);
  CHECK(decode<mfref::E5M2>(0x7C) == float_bits(inf));
  CHECK(decode<mfref::E5M2>(0x7D) == 0x7FE00000u);
  CHECK(decode<mfref::E5M2>(0x7B) == float_bits(57344.0f));
  CHECK(decode<mfref::E5M2>(0x01) == float_bits(0x1p-16f));
  // fp16.
  CHECK(encode<mfref::Fp16>(float_bits(1.0f)) == 0x3C00);
  CHECK(encode<mfref::Fp16>(float_bits(65504.0f)) == 0x7BFF);
  CHECK(encode<mfref::Fp16>(float_bits(65519.0f)) == 0x7BFF);
  CHECK(encode<mfref::Fp16>(float_bits(65520.0f)) == 0x7C00);
  CHECK(encode<mfref::Fp16>(float_bits(-inf)) == 0xFC00);
  CHECK(encode<mfref::Fp16>(float_bits(0x1p-24f)) == 0x0001);
  CHECK(encode<mfref::Fp16>(float_bits(0x1p-25f)) == 0x0000);
  CHECK(encode<mfref::Fp16>(float_bits(0x1.000002p-25f)) == 0x0001);
  CHECK(encode<mfref::Fp16>(float_bits(0x1p-14f)) == 0x0400);
  CHECK(encode<mfref::Fp16>(float_bits(1.0f + 0x1p-11f)) == 0x3C00);        // tie to even
  CHECK(encode<mfref::Fp16>(float_bits(1.0f + 3 * 0x1p-11f)) == 0x3C02);    // tie to even
  CHECK(encode<mfref::Fp16>(0x7F812345u) == 0x7E09);  // top 10 mantissa bits 0x009
  CHECK(decode<mfref::Fp16>(0x7BFF) == float_bits(65504.0f));
  CHECK(decode<mfref::Fp16>(0x0001) == float_bits(0x1p-24f));
  CHECK(decode<mfref::Fp16>(0xFC01) == 0xFFC02000u);
  // bf16.
  CHECK(encode<mfref::Bf16>(float_bits(1.0f)) == 0x3F80);
  CHECK(encode<mfref::Bf16>(0x3F808000u) == 0x3F80);  // tie to even
  CHECK(encode<mfref::Bf16>(0x3F818000u) == 0x3F82);  // tie to even
  CHECK(encode<mfref::Bf16>(0x7F7FFFFFu) == 0x7F80);  // float max rounds past 0x1.FEp127: inf
  CHECK(encode<mfref::Bf16>(0x7F7F7FFFu) == 0x7F7F);
  CHECK(encode<mfref::Bf16>(0x00000001u) == 0x0000);  // 2^-149 is far below bf16's 2^-133
  CHECK(encode<mfref::Bf16>(0x00010000u) == 0x0001);
  CHECK(encode<mfref::Bf16>(0x00008000u) == 0x0000);  // tie to even
  CHECK(encode<mfref::Bf16>(0x00018000u) == 0x0002);  // tie to even
  CHECK(encode<mfref::Bf16>(0xFF800001u) == 0xFFC0);
  CHECK(decode<mfref::Bf16>(0x7F81) == 0x7F810000u);  // bit for bit, no quieting
  CHECK(decode<mfref::Bf16>(0x8001) == 0x80010000u);
  // The spec tables agree with the decode formula.
  CHECK(decode<mfref::Bf16>(mfref::Bf16::max_finite_code) ==
        float_bits(static_cast<float>(mfref::Bf16::max_finite)));
  CHECK(decode<mfref::Fp16>(mfref::Fp16::max_finite_code) == float_bits(65504.0f));
  CHECK(decode<mfref::E4M3>(mfref::E4M3::max_finite_code) == float_bits(448.0f));
  CHECK(decode<mfref::E5M2>(mfref::E5M2::max_finite_code) == float_bits(57344.0f));
}

TEMPLATE_TEST_CASE("decode every code", "[minifloat]", bf16_t, fp16_t, fp8_e4m3_t, fp8_e5m2_t) {
  using S = Ref<TestType>;
  constexpr std::uint32_t codes = 1u << mfref::total_bits<S>;
  constexpr std::uint32_t magnitude_mask = codes / 2 - 1;
  SweepResult decoded;
  SweepResult round_trip;
  for (std::uint32_t code = 0; code < codes; ++code) {
    const std::uint32_t expected = mfref::decode<S>(code);
    const std::uint32_t actual = lib_decode<TestType>(code);
    if (actual != expected) decoded.add({code, expected, actual});

    const std::uint32_t mag = code & magnitude_mask;
    if (mfref::is_nan_code<S>(mag)) continue;
    // Saturating formats re-encode +-inf as the largest finite; every other code comes back.
    const bool infinity = S::has_infinity && mag == mfref::infinity_code<S>;
    const std::uint32_t want =
        infinity && S::saturating ? (code & ~magnitude_mask) | S::max_finite_code : code;
    const std::uint32_t again = lib_encode<TestType>(actual);
    if (again != want) round_trip.add({code, want, again});
  }
  INFO("decode: " << describe(decoded, "code"));
  CHECK(decoded.count == 0);
  INFO("round trip: " << describe(round_trip, "code"));
  CHECK(round_trip.count == 0);
}

TEMPLATE_TEST_CASE("encode all 2^32 floats", "[minifloat][exhaustive]", bf16_t, fp16_t,
                   fp8_e4m3_t, fp8_e5m2_t) {
  const SweepResult result = encode_all_floats<TestType>();
  INFO(describe(result, "float"));
  REQUIRE(result.count == 0);
}

TEMPLATE_TEST_CASE("encode sampled floats", "[minifloat][sampled]", bf16_t, fp16_t, fp8_e4m3_t,
                   fp8_e5m2_t) {
  const std::vector<std::uint32_t>& inputs = sampled_inputs();
  SweepResult result;
  for (const std::uint32_t input : inputs) {
    const std::uint32_t actual = lib_encode<TestType>(input);
    const std::uint32_t expected = mfref::encode<Ref<TestType>>(input);
    if (actual != expected) result.add({input, expected, actual});
  }
  INFO(inputs.size() << " inputs; " << describe(result, "float"));
  REQUIRE(result.count == 0);
}

TEMPLATE_TEST_CASE("encode is a constant expression in every binade", "[minifloat]", bf16_t,
                   fp16_t, fp8_e4m3_t, fp8_e5m2_t) {
  const SweepResult result = check_constant_binades<TestType>(std::make_index_sequence<256>{});
  INFO("library 0xFFFFFFFF: not a constant expression; " << describe(result, "float"));
  CHECK(result.count == 0);
}

// The conversions are usable in constant expressions; expected codes are from the format specs.
namespace constexpr_checks {
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();
static_assert(fp8_e4m3_t(1.0f).bits() == 0x38);
static_assert(fp8_e4m3_t(448.0f).bits() == 0x7E);
static_assert(fp8_e4m3_t(464.0f).bits() == 0x7E);
static_assert(fp8_e4m3_t(-1000.0f).bits() == 0xFE);
static_assert(fp8_e4m3_t(inf).bits() == 0x7E);
static_assert(fp8_e4m3_t(0x1p-9f).bits() == 0x01);
static_assert(fp8_e4m3_t(nan).bits() == 0x7F);
static_assert(fp8_e5m2_t(1.0f).bits() == 0x3C);
static_assert(fp8_e5m2_t(57344.0f).bits() == 0x7B);
static_assert(fp8_e5m2_t(inf).bits() == 0x7B);
static_assert(fp8_e5m2_t(-inf).bits() == 0xFB);
static_assert(fp8_e5m2_t(-nan).bits() == 0xFF);
static_assert(fp16_t(1.0f).bits() == 0x3C00);
static_assert(fp16_t(65504.0f).bits() == 0x7BFF);
static_assert(fp16_t(65520.0f).bits() == 0x7C00);
static_assert(fp16_t(-0.0f).bits() == 0x8000);
static_assert(fp16_t(0x1p-24f).bits() == 0x0001);
static_assert(fp16_t(0x1p-25f).bits() == 0x0000);
static_assert(fp16_t(nan).bits() == 0x7E00);
static_assert(bf16_t(1.0f).bits() == 0x3F80);
static_assert(bf16_t(1.0f + 0x1p-8f).bits() == 0x3F80);
static_assert(bf16_t(-inf).bits() == 0xFF80);
static_assert(static_cast<float>(fp8_e4m3_t::from_bits(0x7E)) == 448.0f);
static_assert(static_cast<float>(fp8_e5m2_t::from_bits(0x01)) == 0x1p-16f);
static_assert(static_cast<float>(fp16_t::from_bits(0x0001)) == 0x1p-24f);
static_assert(static_cast<float>(bf16_t::from_bits(0x3F80)) == 1.0f);
static_assert(std::bit_cast<std::uint32_t>(static_cast<float>(fp8_e5m2_t::from_bits(0xFC))) ==
              0xFF800000u);
}  // namespace constexpr_checks
