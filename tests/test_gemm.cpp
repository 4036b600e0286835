// The public GEMM on the ISA chosen with --isa: the packed-weight layout, pack_weight and
// weight_packed_linear / gemm against an independent float64 reference (every float/bf16 type
// combination, strided operands, accumulate, executors), and argument errors that write nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "minifloat_reference.hpp"
#include "pagedattn/pagedattn.hpp"
#include "test_support.hpp"

using namespace pagedattn;
using pagedattn::test::selected_isa;
using pagedattn::test::Workspace;

namespace {

// ---------------------------------------------------------------------------------------------
// Independent value model: bf16 through the reference codec (minifloat_reference.hpp), never
// through pagedattn's conversions.

/// Exact value of a float or bf16 element.
double value_of(float v) { return v; }
double value_of(bf16_t v) {
  return static_cast<double>(std::bit_cast<float>(mfref::decode<mfref::Bf16>(v.bits())));
}

/// `v` rounded to nearest even as bf16 by the reference codec.
bf16_t reference_bf16(float v) {
  return bf16_t::from_bits(static_cast<std::uint16_t>(mfref::encode<mfref::Bf16>(std::bit_cast<std::uint32_t>(v))));
}

/// `v` stored as T (float: exactly; bf16: the reference rounding).
template <class T>
T make(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return reference_bf16(v);
  }
}

/// A quiet NaN of T.
template <class T>
T nan_of() {
  return make<T>(std::numeric_limits<float>::quiet_NaN());
}


/// Uniform values in [-1, 1) stored as T.
template <class T>
std::vector<T> random_values(std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> values(count);
  for (auto& v : values) v = make<T>(dist(rng));
  return values;
}

/// The packed offset of W[column][input] in packed-weight format version 1, written from the
/// format's description (not from PackedWeightLayout): tiles of 128 columns (padded to 16),
/// tile-major; each tile's inputs in chunks of 256, chunk-minor; inside a (tile, chunk) block the
/// K-cache layout with block_size = tile width and head_dim = chunk depth: groups of 16 columns,
/// each group [depth][16] for 4-byte W, or [depth / 2][16][2] (input pairs) for 2-byte W.
template <class W>
std::size_t format_v1_index(std::int64_t n, std::int64_t k, std::int64_t column, std::int64_t input) {
  const std::int64_t padded = (n + 15) / 16 * 16;
  const std::int64_t tile = column / 128, chunk = input / 256;
  const std::int64_t width = std::min<std::int64_t>(128, padded - tile * 128);
  const std::int64_t depth = std::min<std::int64_t>(256, k - chunk * 256);
  const std::int64_t c = column % 128, d = input % 256;
  const std::int64_t block = tile * 128 * k + chunk * 256 * width;
  const std::int64_t group = c / 16 * 16 * depth, lane = c % 16;
  const std::int64_t inner = sizeof(W) == 4 ? d * 16 + lane : d / 2 * 32 + lane * 2 + d % 2;
  return static_cast<std::size_t>(block + group + inner);
}

// ---------------------------------------------------------------------------------------------
// The float64 reference and the error bound.

/// Largest |got - reference| allowed for one output element whose float64 reference is `ref`,
/// with magnitude sum `magnitude` = sum_i |x_i * w_i| + |bias| + |previous out| over K = `k`
/// inputs (x and w exact: the packed weight's own values). The kernel sums each chunk of at most
/// 256 inputs in float in some order (each term rounded at most once as a product, then at most
/// depth - 1 additions on its path), adds the chunks (chunks - 1 additions), the bias and the
/// previous output (one addition each): at most n = min(k, 256) + chunks + 2 roundings of unit
/// u = 2^-24 on any term's path, so |error| <= gamma_n * magnitude with gamma_n = n u / (1 - n u)
/// (Higham, Thm 3.1; bf16 pair products are exact, so the same n bounds those tiers). That is
/// about 1.6e-5 relative for k = 528. A bf16 output is then rounded once more to nearest: at most
/// half an ulp, 2^-8 |value|, of the float value (itself within the float bound of `ref`).
double error_bound(double ref, double magnitude, std::int64_t k, bool bf16_out) {
  const double chunks = static_cast<double>((k + 255) / 256);
  const double n = static_cast<double>(std::min<std::int64_t>(k, 256)) + chunks + 2.0;
  const double u = std::ldexp(1.0, -24);
  const double float_bound = n * u / (1.0 - n * u) * magnitude;
  if (!bf16_out) return float_bound;
  return float_bound + std::ldexp(1.0, -8) * (std::abs(ref) + float_bound);
}

/// Dense float64 operands of one GEMM in logical (row-major, unpadded) order, and what it must give.
struct Reference {
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<double> x;         ///< [m][k]
  std::vector<double> w;         ///< [n][k]: the values the packed weight holds.
  std::vector<double> bias;      ///< [n] or empty.
  std::vector<double> previous;  ///< [m][n] (accumulate) or empty.

  /// Compares `got` ([m][n], logical order) element by element with the reference.
  void check(const std::vector<double>& got, bool bf16_out) const {
    REQUIRE(got.size() == static_cast<std::size_t>(m * n));
    std::int64_t failures = 0;
    double worst_ratio = 0.0;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (std::int64_t i = 0; i < k; ++i) {
          const double p = x[static_cast<std::size_t>(r * k + i)] * w[static_cast<std::size_t>(j * k + i)];
          sum += p;
          magnitude += std::abs(p);
        }
        if (!bias.empty()) {
          sum += bias[static_cast<std::size_t>(j)];
          magnitude += std::abs(bias[static_cast<std::size_t>(j)]);
        }
        if (!previous.empty()) {
          sum += previous[static_cast<std::size_t>(r * n + j)];
          magnitude += std::abs(previous[static_cast<std::size_t>(r * n + j)]);
        }
        const double value = got[static_cast<std::size_t>(r * n + j)];
        const double bound = error_bound(sum, magnitude, k, bf16_out);
        const double error = std::abs(value - sum);
        if (!(error <= bound)) {  // also catches NaN
          if (failures++ < 5) {
            UNSCOPED_INFO("out[" << r << "][" << j << "] = " << value << ", reference " << sum << ", |error| "
                                 << error << " > bound " << bound);
          }
        }
        if (bound > 0.0) worst_ratio = std::max(worst_ratio, error / bound);
      }
    }
    INFO("m " << m << " n " << n << " k " << k << ": " << failures << " elements out of bound; worst error/bound "
              << worst_ratio);
    CHECK(failures == 0);
  }
};

/// The float64 values of a source weight packed as W: exact, or the reference bf16 rounding.
template <class W, class S>
std::vector<double> packed_values(const std::vector<S>& source) {
  std::vector<double> values(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if constexpr (std::is_same_v<W, bf16_t> && std::is_same_v<S, float>) {
      values[i] = value_of(reference_bf16(source[i]));
    } else {
      values[i] = value_of(source[i]);
    }
  }
  return values;
}

template <class T>
std::vector<double> values_of(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = value_of(v[i]);
  return out;
}

/// An (input, packed weight, output) type combination.
template <class X, class W, class Out>
struct Combo {
  using x_type = X;
  using weight_type = W;
  using out_type = Out;
};

#define GEMM_COMBOS                                                                                   \
  (Combo<float, float, float>), (Combo<float, float, bf16_t>), (Combo<float, bf16_t, float>),         \
      (Combo<float, bf16_t, bf16_t>), (Combo<bf16_t, float, float>), (Combo<bf16_t, float, bf16_t>), \
      (Combo<bf16_t, bf16_t, float>), (Combo<bf16_t, bf16_t, bf16_t>)

struct Shape {
  std::int64_t m, n, k;
};

/// Runs weight_packed_linear (or gemm) on dense operands of `shape` and checks against the reference.
/// The weight is packed from a source of type X (so every packing pair occurs across the combos).
template <class X, class W, class Out>
void check_dense(const Shape& shape, bool with_bias, bool accumulate, std::uint32_t seed) {
  const auto [m, n, k] = shape;
  std::mt19937 rng(seed);
  const auto x = random_values<X>(static_cast<std::size_t>(m * k), rng);
  const auto source = random_values<X>(static_cast<std::size_t>(n * k), rng);
  const auto bias = with_bias ? random_values<float>(static_cast<std::size_t>(n), rng) : std::vector<float>{};
  auto out = accumulate ? random_values<Out>(static_cast<std::size_t>(m * n), rng)
                        : std::vector<Out>(static_cast<std::size_t>(m * n), nan_of<Out>());

  Reference ref{m, n, k, values_of(x), packed_values<W>(source), values_of(bias),
                accumulate ? values_of(out) : std::vector<double>{}};

  const auto packed = pack_weight<W>(RowsView<const X>::dense(source.data(), n, k));
  Workspace workspace(gemm_workspace_bytes<X, W>(1, selected_isa));
  SerialExecutor serial;
  const auto x_view = RowsView<const X>::dense(x.data(), m, k);
  const auto out_view = RowsView<Out>::dense(out.data(), m, n);
  if (accumulate) {
    REQUIRE(bias.empty());
    gemm(out_view, x_view, packed.view(), GemmUpdate::accumulate, workspace.span(), serial, selected_isa);
  } else if (with_bias) {
    weight_packed_linear(out_view, x_view, packed.view(), bias, workspace.span(), serial, selected_isa);
  } else {
    gemm(out_view, x_view, packed.view(), GemmUpdate::overwrite, workspace.span(), serial, selected_isa);
  }
  INFO("isa " << isa_name(selected_isa) << ", bias " << with_bias << ", accumulate " << accumulate);
  ref.check(values_of(out), std::is_same_v<Out, bf16_t>);
}

// ---------------------------------------------------------------------------------------------
// Layout

TEST_CASE("pack_weight: every element where format v1 puts it, padding zero", "[gemm][layout]") {
  SECTION("float from float, n = 300 (3 tiles, padded to 304), k = 528 (chunks 256, 256, 16)") {
    constexpr std::int64_t n = 300, k = 528;
    std::vector<float> source(static_cast<std::size_t>(n * k));
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < k; ++i) source[static_cast<std::size_t>(j * k + i)] = static_cast<float>(j * 1024 + i + 1);
    }
    const auto packed = pack_weight<float>(RowsView<const float>::dense(source.data(), n, k));
    const PackedWeight<float> view = packed.view();
    REQUIRE(view.rows() == n);
    REQUIRE(view.cols() == k);
    REQUIRE(PackedWeightLayout<float>::padded_columns(n) == 304);
    REQUIRE(view.elements() == static_cast<std::size_t>(304 * k));
    REQUIRE(packed_weight_bytes<float>(n, k) == 304u * k * sizeof(float));
    REQUIRE(reinterpret_cast<std::uintptr_t>(view.data()) % 64 == 0);

    // Each stored element is visited exactly once by the (padded) index set.
    std::vector<int> visits(view.elements(), 0);
    std::int64_t mismatches = 0;
    for (std::int64_t j = 0; j < 304; ++j) {
      for (std::int64_t i = 0; i < k; ++i) {
        const std::size_t index = format_v1_index<float>(n, k, j, i);
        REQUIRE(index < view.elements());
        ++visits[index];
        if (PackedWeightLayout<float>::index(n, k, j, i) != index) ++mismatches;
        const float stored = view.data()[index];
        if (j < n) {
          const float expected = source[static_cast<std::size_t>(j * k + i)];
          if (view.at(j, i) != expected || stored != expected) ++mismatches;
        } else if (std::bit_cast<std::uint32_t>(stored) != 0u) {
          ++mismatches;  // padding columns hold +0
        }
      }
    }
    CHECK(mismatches == 0);
    CHECK(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }));
  }

  SECTION("bf16 from bf16, n = 145 (tiles of 128 and 17 -> 32 stored), k = 272 (pairs)") {
    constexpr std::int64_t n = 145, k = 272;
    std::vector<bf16_t> source(static_cast<std::size_t>(n * k));
    // Distinct codes as far as 2^16 allows (positive finite codes 0x0001..0x7F7F cycle).
    for (std::size_t e = 0; e < source.size(); ++e) source[e] = bf16_t::from_bits(static_cast<std::uint16_t>(1 + e % 0x7F7F));
    const auto packed = pack_weight<bf16_t>(RowsView<const bf16_t>::dense(source.data(), n, k));
    const PackedWeight<bf16_t> view = packed.view();
    REQUIRE(PackedWeightLayout<bf16_t>::padded_columns(n) == 160);
    REQUIRE(view.elements() == static_cast<std::size_t>(160 * k));
    std::vector<int> visits(view.elements(), 0);
    std::int64_t mismatches = 0;
    for (std::int64_t j = 0; j < 160; ++j) {
      for (std::int64_t i = 0; i < k; ++i) {
        const std::size_t index = format_v1_index<bf16_t>(n, k, j, i);
        REQUIRE(index < view.elements());
        ++visits[index];
        if (PackedWeightLayout<bf16_t>::index(n, k, j, i) != index) ++mismatches;
        const std::uint16_t stored = view.data()[index].bits();
        if (j < n) {
          const std::uint16_t expected = source[static_cast<std::size_t>(j * k + i)].bits();
          if (view.at(j, i).bits() != expected || stored != expected) ++mismatches;
        } else if (stored != 0u) {
          ++mismatches;
        }
      }
    }
    CHECK(mismatches == 0);
    CHECK(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }));
  }

  SECTION("float from bf16 converts exactly; a row stride is honoured") {
    constexpr std::int64_t n = 17, k = 32, stride = 40;
    std::vector<bf16_t> source(static_cast<std::size_t>(n * stride), bf16_t::from_bits(0x7FC0));  // NaN in the gaps
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < k; ++i) {
        source[static_cast<std::size_t>(j * stride + i)] = bf16_t::from_bits(static_cast<std::uint16_t>(0x3C00 + j * k + i));
      }
    }
    const auto packed = pack_weight<float>(RowsView<const bf16_t>::matrix(source.data(), n, k, stride));
    std::int64_t mismatches = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < k; ++i) {
        const double expected = value_of(source[static_cast<std::size_t>(j * stride + i)]);
        if (static_cast<double>(packed.view().at(j, i)) != expected) ++mismatches;
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("pack_weight: float to bf16 rounds to nearest even", "[gemm][layout]") {
  constexpr std::int64_t n = 40, k = 64;
  std::vector<float> source(static_cast<std::size_t>(n * k));
  std::mt19937 rng(7);
  // Low 16 bits chosen to hit exact ties (0x8000, odd and even upper parts), both sides of a tie,
  // zero and random; signs and exponents varied; one carry into the next binade (0x3FFF8000).
  const std::uint32_t low_parts[] = {0x8000u, 0x7FFFu, 0x8001u, 0x0000u, 0xFFFFu};
  for (std::size_t e = 0; e < source.size(); ++e) {
    const std::uint32_t high = (rng() & 0x807Fu) | (static_cast<std::uint32_t>(100 + e % 50) << 7);
    std::uint32_t bits = (high << 16) | (e % 6 < 5 ? low_parts[e % 5] : (rng() & 0xFFFFu));
    if (e == 3) bits = 0x3FFF8000u;
    source[e] = std::bit_cast<float>(bits);
  }
  const auto packed = pack_weight<bf16_t>(RowsView<const float>::dense(source.data(), n, k));
  std::int64_t mismatches = 0, ties = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t i = 0; i < k; ++i) {
      const float v = source[static_cast<std::size_t>(j * k + i)];
      const std::uint16_t got = packed.view().at(j, i).bits();
      if ((std::bit_cast<std::uint32_t>(v) & 0xFFFFu) == 0x8000u) ++ties;
      if (got != reference_bf16(v).bits() || got != bf16_t(v).bits()) ++mismatches;
    }
  }
  CHECK(ties > 100);
  CHECK(mismatches == 0);
  CHECK(packed.view().at(0, 3).bits() == 0x4000u);  // 0x3FFF8000 ties up to even 0x4000 (= 2.0)
}

TEST_CASE("pack_weight_into caller storage: the bytes of pack_weight; adopt views them", "[gemm][layout]") {
  constexpr std::int64_t n = 129, k = 272;
  std::mt19937 rng(11);
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto weight = RowsView<const float>::dense(source.data(), n, k);

  const auto owned_f = pack_weight<float>(weight);
  std::vector<float> storage_f(PackedWeightLayout<float>::elements(n, k).value().value() + 5, 42.0f);
  const PackedWeight<float> into_f = pack_weight_into<float>(weight, std::span<float>(storage_f));
  REQUIRE(into_f.data() == storage_f.data());
  REQUIRE(into_f.elements() == owned_f.view().elements());
  CHECK(std::memcmp(into_f.data(), owned_f.view().data(), into_f.elements() * sizeof(float)) == 0);
  CHECK(std::all_of(storage_f.end() - 5, storage_f.end(), [](float v) { return v == 42.0f; }));

  const auto owned_b = pack_weight<bf16_t>(weight);
  std::vector<bf16_t> storage_b(PackedWeightLayout<bf16_t>::elements(n, k).value().value());
  const PackedWeight<bf16_t> into_b = pack_weight_into<bf16_t>(weight, std::span<bf16_t>(storage_b));
  CHECK(std::memcmp(into_b.data(), owned_b.view().data(), into_b.elements() * sizeof(bf16_t)) == 0);

  const PackedWeight<bf16_t> adopted = PackedWeight<bf16_t>::adopt(storage_b.data(), n, k);
  CHECK(adopted.data() == storage_b.data());
  CHECK(adopted.rows() == n);
  CHECK(adopted.cols() == k);
  CHECK(adopted.elements() == into_b.elements());
  CHECK(adopted.at(n - 1, k - 1).bits() == reference_bf16(source.back()).bits());
  CHECK(PackedWeight<float>().elements() == 0);
  CHECK(PackedWeight<float>().data() == nullptr);
}

// ---------------------------------------------------------------------------------------------
// Numerics

TEMPLATE_TEST_CASE("weight_packed_linear and gemm against the float64 reference", "[gemm][numeric]", GEMM_COMBOS) {
  using X = typename TestType::x_type;
  using W = typename TestType::weight_type;
  using Out = typename TestType::out_type;
  // M across one and several row blocks and a partial last block, N across 1, partial tiles of
  // columns and padding, K across one group, partial chunks and three chunks.
  const Shape shapes[] = {{1, 1, 16}, {3, 17, 48}, {64, 128, 256}, {65, 129, 272},
                          {130, 300, 528}, {1, 300, 528}, {130, 17, 272}, {3, 129, 16}};
  std::uint32_t seed = 100;
  for (const Shape& shape : shapes) {
    for (const bool with_bias : {false, true}) {
      INFO("m " << shape.m << " n " << shape.n << " k " << shape.k);
      check_dense<X, W, Out>(shape, with_bias, false, ++seed);
    }
  }
}

TEMPLATE_TEST_CASE("gemm accumulate adds to out; overwrite ignores it", "[gemm][accumulate]", GEMM_COMBOS) {
  using X = typename TestType::x_type;
  using W = typename TestType::weight_type;
  using Out = typename TestType::out_type;
  for (const Shape& shape : {Shape{65, 129, 272}, Shape{2, 17, 16}}) {
    INFO("m " << shape.m << " n " << shape.n << " k " << shape.k);
    check_dense<X, W, Out>(shape, false, true, 7);  // accumulate onto random values
    check_dense<X, W, Out>(shape, false, false, 8);  // overwrite NaN (check() rejects any NaN left)
    check_dense<X, W, Out>(shape, true, false, 9);   // weight_packed_linear overwrites NaN too
  }
}

/// x as a [2][3][k] tensor (both strides padded, or the leading strides in the other order), out as
/// [2][3][n] with padded rows, filled with a sentinel first: the results land in the rows, every
/// padding byte keeps the sentinel. With `x_rank3`, x is [2][1][3][k] instead (three leading dims).
template <class X, class W, class Out>
void check_strided(bool permuted, bool x_rank3, bool accumulate, std::uint32_t seed) {
  constexpr std::int64_t d0 = 2, d1 = 3, m = d0 * d1, n = 150, k = 272;
  // x strides: padded, or dimension 0 innermost (the rows of one i1 lie next to each other).
  const std::int64_t xs1 = permuted ? 2 * (k + 5) + 3 : k + 5;
  const std::int64_t xs0 = permuted ? k + 5 : d1 * xs1 + 7;
  const std::int64_t os1 = permuted ? 2 * (n + 3) + 1 : n + 3;
  const std::int64_t os0 = permuted ? n + 3 : d1 * os1 + 11;
  const std::int64_t x_size = (d0 - 1) * xs0 + (d1 - 1) * xs1 + k + 9;
  const std::int64_t out_size = (d0 - 1) * os0 + (d1 - 1) * os1 + n + 13;

  std::mt19937 rng(seed);
  std::vector<X> x(static_cast<std::size_t>(x_size), nan_of<X>());  // NaN between rows: must never be read
  std::vector<double> x_dense(static_cast<std::size_t>(m * k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::int64_t i0 = 0; i0 < d0; ++i0) {
    for (std::int64_t i1 = 0; i1 < d1; ++i1) {
      for (std::int64_t i = 0; i < k; ++i) {
        const X v = make<X>(dist(rng));
        x[static_cast<std::size_t>(i0 * xs0 + i1 * xs1 + i)] = v;
        x_dense[static_cast<std::size_t>((i0 * d1 + i1) * k + i)] = value_of(v);
      }
    }
  }
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto packed = pack_weight<W>(RowsView<const float>::dense(source.data(), n, k));

  // Sentinel: a byte pattern that is a finite value of either type (0x5A5A...).
  std::vector<Out> out(static_cast<std::size_t>(out_size));
  std::memset(static_cast<void*>(out.data()), 0x5A, out.size() * sizeof(Out));
  std::vector<bool> in_row(out.size(), false);
  std::vector<double> previous(static_cast<std::size_t>(m * n));
  for (std::int64_t i0 = 0; i0 < d0; ++i0) {
    for (std::int64_t i1 = 0; i1 < d1; ++i1) {
      for (std::int64_t j = 0; j < n; ++j) {
        const auto e = static_cast<std::size_t>(i0 * os0 + i1 * os1 + j);
        in_row[e] = true;
        out[e] = accumulate ? make<Out>(dist(rng)) : nan_of<Out>();
        previous[static_cast<std::size_t>((i0 * d1 + i1) * n + j)] = value_of(out[e]);
      }
    }
  }
  const std::vector<Out> before = out;

  const RowsView<const X> x_view = x_rank3 ? RowsView<const X>::strided(x.data(), {d0, 1, d1}, {xs0, 12345, xs1}, k)
                                           : RowsView<const X>::strided(x.data(), {d0, d1}, {xs0, xs1}, k);
  const auto out_view = RowsView<Out>::strided(out.data(), {d0, d1}, {os0, os1}, n);
  REQUIRE(x_view.rows() == m);
  Workspace workspace(gemm_workspace_bytes<X, W>(1, selected_isa));
  SerialExecutor serial;
  gemm(out_view, x_view, packed.view(), accumulate ? GemmUpdate::accumulate : GemmUpdate::overwrite,
       workspace.span(), serial, selected_isa);

  std::vector<double> got(static_cast<std::size_t>(m * n));
  for (std::int64_t i0 = 0; i0 < d0; ++i0) {
    for (std::int64_t i1 = 0; i1 < d1; ++i1) {
      for (std::int64_t j = 0; j < n; ++j) {
        got[static_cast<std::size_t>((i0 * d1 + i1) * n + j)] = value_of(out[static_cast<std::size_t>(i0 * os0 + i1 * os1 + j)]);
      }
    }
  }
  std::int64_t touched = 0;
  for (std::size_t e = 0; e < out.size(); ++e) {
    if (!in_row[e] && std::memcmp(&out[e], &before[e], sizeof(Out)) != 0) ++touched;
  }
  CHECK(touched == 0);
  const Reference ref{m, n, k, x_dense, packed_values<W>(source), {},
                      accumulate ? previous : std::vector<double>{}};
  ref.check(got, std::is_same_v<Out, bf16_t>);
}

TEMPLATE_TEST_CASE("gemm on strided x and out: rows found, padding untouched", "[gemm][strided]", GEMM_COMBOS) {
  using X = typename TestType::x_type;
  using W = typename TestType::weight_type;
  using Out = typename TestType::out_type;
  SECTION("padded strides") { check_strided<X, W, Out>(false, false, false, 21); }
  SECTION("leading strides in the other order, accumulate") { check_strided<X, W, Out>(true, false, true, 22); }
  SECTION("x with three leading dimensions") { check_strided<X, W, Out>(false, true, false, 23); }
}

// ---------------------------------------------------------------------------------------------
// Executors

template <class X, class W, class Out>
void check_executors_agree(const Shape& shape) {
  const auto [m, n, k] = shape;
  INFO("m " << m << " n " << n << " k " << k);
  std::mt19937 rng(31);
  const auto x = random_values<X>(static_cast<std::size_t>(m * k), rng);
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto bias = random_values<float>(static_cast<std::size_t>(n), rng);
  const auto packed = pack_weight<W>(RowsView<const float>::dense(source.data(), n, k));
  const auto x_view = RowsView<const X>::dense(x.data(), m, k);

  std::vector<Out> serial_out(static_cast<std::size_t>(m * n), nan_of<Out>());
  std::vector<Out> pool_out(static_cast<std::size_t>(m * n), make<Out>(0.5f));
  SerialExecutor serial;
  Workspace serial_workspace(gemm_workspace_bytes<X, W>(serial.num_workers(), selected_isa));
  weight_packed_linear(RowsView<Out>::dense(serial_out.data(), m, n), x_view, packed.view(), bias,
                       serial_workspace.span(), serial, selected_isa);
  ThreadPool pool(2);
  REQUIRE(pool.num_workers() == 2);
  Workspace pool_workspace(gemm_workspace_bytes<X, W>(2, selected_isa));
  for (int repeat = 0; repeat < 2; ++repeat) {
    weight_packed_linear(RowsView<Out>::dense(pool_out.data(), m, n), x_view, packed.view(), bias,
                         pool_workspace.span(), pool, selected_isa);
    CHECK(std::memcmp(serial_out.data(), pool_out.data(), serial_out.size() * sizeof(Out)) == 0);
  }
  // And the serial result is right (so "equal" is not "equally wrong").
  Reference ref{m, n, k, values_of(x), packed_values<W>(source), values_of(bias), {}};
  ref.check(values_of(serial_out), std::is_same_v<Out, bf16_t>);
}

TEST_CASE("gemm: SerialExecutor and a ThreadPool of 2 give identical bits", "[gemm][executors]") {
  SECTION("float x, bf16 weights, float out") { check_executors_agree<float, bf16_t, float>({130, 300, 528}); }
  SECTION("bf16 x, bf16 weights, bf16 out") { check_executors_agree<bf16_t, bf16_t, bf16_t>({130, 300, 528}); }
  SECTION("bf16 x, float weights, float out") { check_executors_agree<bf16_t, float, float>({130, 300, 528}); }
  // Split K sums (GemmSplit): one item in 5 slices of one chunk, 2 items in 4 slices of 1-2
  // chunks (the last chunk partial).
  SECTION("split: float x, float weights (router), M 1") { check_executors_agree<float, float, float>({1, 128, 1280}); }
  SECTION("split: bf16 x, bf16 weights, M 65") { check_executors_agree<bf16_t, bf16_t, bf16_t>({65, 100, 1552}); }
}

TEST_CASE("GemmSplit: slices from the item count and the chunks alone", "[gemm][split]") {
  const auto slices = [](std::int64_t rows, std::int64_t n, std::int64_t k) {
    const GemmItems items = GemmItems::of(rows, n, 64, PackedWeightLayout<float>::tile_columns);
    return GemmSplit::of(items, PackedWeightLayout<float>::chunks(k)).slices;
  };
  CHECK(slices(1, 128, 4096) == 8);    // a router: 1 item, 16 chunks -> max_slots slices
  CHECK(slices(1, 128, 1280) == 5);    // 5 chunks: one slice each
  CHECK(slices(64, 128, 256) == 1);    // one chunk: nothing to split
  CHECK(slices(65, 129, 4096) == 2);   // 4 items x 2 slices fill the 8 slots
  CHECK(slices(1, 640, 4096) == 1);    // 5 items: more than max_slots / 2, not split
  CHECK(slices(1, 14336, 4096) == 1);  // a dense projection: 112 items
  const GemmSplit split{3};
  CHECK(split.first_chunk(16, 0) == 0);
  CHECK(split.first_chunk(16, 1) == 5);
  CHECK(split.first_chunk(16, 2) == 10);
  CHECK(split.first_chunk(16, 3) == 16);
}

TEST_CASE("gemm: concurrent calls with separate workspaces give the serial bits", "[gemm][executors]") {
  // No global state: two threads share the packed weight and the input, each with its own
  // output and workspace, and repeat the call while the other runs.
  constexpr std::int64_t m = 70, n = 260, k = 272;
  std::mt19937 rng(41);
  const auto x = random_values<bf16_t>(static_cast<std::size_t>(m * k), rng);
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto packed = pack_weight<bf16_t>(RowsView<const float>::dense(source.data(), n, k));
  const auto x_view = RowsView<const bf16_t>::dense(x.data(), m, k);
  const auto run = [&](std::vector<float>& out, const Workspace& workspace) {
    SerialExecutor serial;
    weight_packed_linear(RowsView<float>::dense(out.data(), m, n), x_view, packed.view(), {}, workspace.span(),
                         serial, selected_isa);
  };
  const std::uint64_t bytes = gemm_workspace_bytes<bf16_t, bf16_t>(1, selected_isa);
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  Workspace expected_workspace(bytes);
  run(expected, expected_workspace);
  std::vector<float> outs[2] = {std::vector<float>(expected.size()), std::vector<float>(expected.size())};
  bool same[2] = {true, true};
  {
    Workspace workspaces[2] = {Workspace(bytes), Workspace(bytes)};
    std::thread threads[2];
    for (int t = 0; t < 2; ++t) {
      threads[t] = std::thread([&, t] {
        for (int repeat = 0; repeat < 8; ++repeat) {
          run(outs[t], workspaces[t]);
          same[t] = same[t] && std::memcmp(outs[t].data(), expected.data(), expected.size() * sizeof(float)) == 0;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  CHECK(same[0]);
  CHECK(same[1]);
}

// ---------------------------------------------------------------------------------------------
// Errors

/// Calls `call`, which must throw Error of `code` naming `argument`.
template <class F>
void expect_error(F&& call, Errc code, const std::string& argument) {
  try {
    call();
    FAIL("no error; expected one naming " << argument);
  } catch (const Error& error) {
    INFO(error.what());
    CHECK(error.code() == code);
    CHECK(error.argument() == argument);
    CHECK(error.status().argument() == argument);
    CHECK_THAT(error.what(), Catch::Contains(argument + " = "));
  }
}

TEST_CASE("gemm: bad arguments throw naming the argument, nothing written", "[gemm][errors]") {
  constexpr std::int64_t m = 4, n = 20, k = 32;
  std::mt19937 rng(41);
  const auto x = random_values<float>(static_cast<std::size_t>(m * 48), rng);  // room for k = 48
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto packed = pack_weight<float>(RowsView<const float>::dense(source.data(), n, k));
  const auto weight = packed.view();
  constexpr float sentinel = 1234.5f;
  std::vector<float> out(static_cast<std::size_t>(m * (n + 8)), sentinel);
  const std::vector<float> bias(static_cast<std::size_t>(n), 0.25f);
  SerialExecutor serial;
  const std::uint64_t needed = gemm_workspace_bytes<float, float>(1, selected_isa);
  Workspace workspace(needed + 128);
  const auto ws = std::span<std::byte>(workspace.data, static_cast<std::size_t>(needed));
  const auto x_view = RowsView<const float>::dense(x.data(), m, k);
  const auto out_view = RowsView<float>::dense(out.data(), m, n);
  const auto untouched = [&] {
    CHECK(std::all_of(out.begin(), out.end(), [&](float v) { return v == sentinel; }));
  };
  const auto linear = [&](RowsView<float> o, RowsView<const float> a, PackedWeight<float> w, std::span<const float> b,
                          std::span<std::byte> s) {
    return [=, &serial] { weight_packed_linear(o, a, w, b, s, serial, selected_isa); };
  };

  // The good call passes validation (and is not run here).
  REQUIRE(validate_gemm(out_view, x_view, weight, bias, ws, 1, selected_isa).ok());

  SECTION("x.cols() != weight.cols()") {
    expect_error(linear(out_view, RowsView<const float>::dense(x.data(), m, 48), weight, bias, ws), Errc::size_mismatch,
                 "x.cols()");
    untouched();
  }
  SECTION("out.cols() != weight.rows()") {
    expect_error(linear(RowsView<float>::dense(out.data(), m, n + 1), x_view, weight, bias, ws), Errc::size_mismatch,
                 "out.cols()");
    untouched();
  }
  SECTION("out.rows() != x.rows()") {
    expect_error(linear(RowsView<float>::dense(out.data(), m - 1, n), x_view, weight, bias, ws), Errc::size_mismatch,
                 "out.rows()");
    untouched();
    const Status status = validate_gemm(RowsView<float>::dense(out.data(), m - 1, n), x_view, weight, bias, ws, 1,
                                        selected_isa);
    CHECK(status.code() == Errc::size_mismatch);
    CHECK(status.argument() == "out.rows()");
  }
  SECTION("bias.size() neither 0 nor n") {
    expect_error(linear(out_view, x_view, weight, std::span<const float>(bias).first(n - 1), ws), Errc::size_mismatch,
                 "bias.size()");
    untouched();
  }
  SECTION("workspace too small") {
    expect_error(linear(out_view, x_view, weight, bias, ws.first(ws.size() - 1)), Errc::size_mismatch,
                 "workspace.size()");
    // Sized for one worker, run on two.
    ThreadPool pool(2);
    expect_error([&] { gemm(out_view, x_view, weight, GemmUpdate::accumulate, ws, pool, selected_isa); },
                 Errc::size_mismatch, "workspace.size()");
    const Status status = validate_gemm(out_view, x_view, weight, {}, ws, 2, selected_isa);
    CHECK(status.argument() == "workspace.size()");
    untouched();
  }
  SECTION("workspace misaligned") {
    expect_error(linear(out_view, x_view, weight, bias, std::span<std::byte>(workspace.data + 8, ws.size())),
                 Errc::invalid_argument, "workspace.data()");
    untouched();
  }
  SECTION("empty PackedWeight") {
    expect_error(linear(out_view, x_view, PackedWeight<float>(), {}, ws), Errc::invalid_argument, "weight.data()");
    untouched();
  }
  SECTION("out overlapping x") {
    // out laid over x's own bytes: x must stay as it was.
    std::vector<float> shared(static_cast<std::size_t>(m * k + n), 0.5f);
    const std::vector<float> copy = shared;
    expect_error(linear(RowsView<float>::dense(shared.data() + 8, m, n), RowsView<const float>::dense(shared.data(), m, k),
                        weight, bias, ws),
                 Errc::invalid_argument, "out");
    CHECK(shared == copy);
  }
  SECTION("out overlapping the bias") {
    std::vector<float> shared(static_cast<std::size_t>(m * n + n), sentinel);
    expect_error(linear(RowsView<float>::dense(shared.data(), m, n), x_view, weight,
                        std::span<const float>(shared).subspan(static_cast<std::size_t>(m * n - 1), n), ws),
                 Errc::invalid_argument, "out");
    CHECK(std::all_of(shared.begin(), shared.end(), [&](float v) { return v == sentinel; }));
  }
  SECTION("workspace overlapping x") {
    Workspace both(needed + static_cast<std::uint64_t>(m * k) * sizeof(float));
    auto* x_inside = reinterpret_cast<float*>(both.data + needed - 64);
    for (std::int64_t e = 0; e < m * k; ++e) x_inside[e] = 0.5f;
    expect_error(linear(out_view, RowsView<const float>::dense(x_inside, m, k), weight, bias,
                        std::span<std::byte>(both.data, static_cast<std::size_t>(needed))),
                 Errc::invalid_argument, "workspace");
    untouched();
  }
  SECTION("out rows overlapping each other") {
    expect_error(linear(RowsView<float>::matrix(out.data(), m, n, n - 1), x_view, weight, bias, ws),
                 Errc::invalid_argument, "out.stride(0)");
    untouched();
    // The second leading dimension too (rows of [2][2][n] with stride(1) < n).
    expect_error(linear(RowsView<float>::strided(out.data(), {2, 2}, {2 * n + 8, n - 4}, n), x_view, weight, bias, ws),
                 Errc::invalid_argument, "out.stride(1)");
    untouched();
  }
  SECTION("views with 4 leading dimensions or mismatched strides") {
    expect_error(linear(out_view, RowsView<const float>::strided(x.data(), {1, 1, 2, 2}, {0, 0, 2 * k, k}, k), weight,
                        bias, ws),
                 Errc::invalid_argument, "x.rank()");
    expect_error(linear(RowsView<float>::strided(out.data(), {1, 1, 2, 2}, {0, 0, 2 * n, n}, n), x_view, weight, bias,
                        ws),
                 Errc::invalid_argument, "out.rank()");
    expect_error(linear(out_view, RowsView<const float>::strided(x.data(), {2, 2}, {k}, k), weight, bias, ws),
                 Errc::invalid_argument, "x.rank()");
    CHECK(RowsView<const float>::strided(x.data(), {1, 1, 2, 2}, {0, 0, 2 * k, k}, k).rows() == 0);
    untouched();
  }
  SECTION("negative stride") {
    expect_error(linear(RowsView<float>::matrix(out.data() + n * (m - 1), m, n, -n), x_view, weight, bias, ws),
                 Errc::invalid_argument, "out.stride(0)");
    untouched();
  }
}

TEST_CASE("weight shapes, packing storage and workspace sizes: errors and exact sizes", "[gemm][errors]") {
  SECTION("validate_weight_shape") {
    const auto expect_status = [](const Status& status, Errc code, const char* argument) {
      CHECK(status.code() == code);
      CHECK(status.argument() == argument);
    };
    expect_status(validate_weight_shape<float>(8, 24), Errc::invalid_argument, "weight.cols()");
    expect_status(validate_weight_shape<bf16_t>(8, 0), Errc::invalid_argument, "weight.cols()");
    expect_status(validate_weight_shape<float>(8, 8), Errc::invalid_argument, "weight.cols()");
    expect_status(validate_weight_shape<float>(0, 16), Errc::invalid_argument, "weight.rows()");
    expect_status(validate_weight_shape<float>(-1, 16), Errc::invalid_argument, "weight.rows()");
    expect_status(validate_weight_shape<float>(std::int64_t{INT32_MAX} + 1, 16), Errc::invalid_argument,
                  "weight.rows()");
    expect_status(validate_weight_shape<float>(1, std::int64_t{INT32_MAX} + 1), Errc::invalid_argument,
                  "weight.cols()");
    expect_status(validate_weight_shape<float>(1, 16, "router"), Errc::ok, "");
    expect_status(validate_weight_shape<float>(1, 24, "router"), Errc::invalid_argument, "router.cols()");
    expect_error([] { (void)packed_weight_bytes<float>(8, 24); }, Errc::invalid_argument, "weight.cols()");
    expect_error([] { (void)PackedWeight<float>::adopt(nullptr, 0, 16); }, Errc::invalid_argument, "weight.rows()");
    static const float packed_1x16[16 * 16] = {};  // packed_weight_bytes<float>(1, 16) bytes
    expect_error([] { (void)PackedWeight<float>::adopt(nullptr, 1, 16); }, Errc::invalid_argument, "data");
    CHECK(PackedWeight<float>::adopt(packed_1x16, 1, 16).elements() == 256u);
  }
  SECTION("packed_weight_bytes at the largest shape") {
    // n = 2^31 - 1 (padded to 2^31), k = 2^31 - 16: 2^31 * (2^31 - 16) elements.
    constexpr std::int64_t n = INT32_MAX, k = std::int64_t{INT32_MAX} - 15;
    const std::uint64_t elements = (std::uint64_t{1} << 31) * static_cast<std::uint64_t>(k);
    CHECK(packed_weight_bytes<bf16_t>(n, k) == elements * 2);
    CHECK(elements * 2 < (std::uint64_t{1} << 63));  // bf16: 2^63 - 2^36 bytes, below the 2^63 cap
    // float: 2^64 - 2^37 bytes fit in 64 bits but no address range: past the 2^63-byte cap.
    expect_error([] { (void)packed_weight_bytes<float>(n, k); }, Errc::size_overflow, "weight.cols()");
    CHECK(packed_weight_bytes<float>(17, 48) == 32u * 48u * 4u);
    CHECK(packed_weight_bytes<bf16_t>(1, 16) == 16u * 16u * 2u);
  }
  SECTION("pack_weight / pack_weight_into errors write nothing") {
    constexpr std::int64_t n = 20, k = 32;
    std::vector<float> source(static_cast<std::size_t>(n * k), 1.0f);
    const std::size_t elements = static_cast<std::size_t>(PackedWeightLayout<bf16_t>::elements(n, k).value().value());
    std::vector<bf16_t> storage(elements, bf16_t::from_bits(0x1234));
    const auto untouched = [&] {
      CHECK(std::all_of(storage.begin(), storage.end(), [](bf16_t v) { return v.bits() == 0x1234; }));
    };
    expect_error([&] {
      (void)pack_weight_into<bf16_t>(RowsView<const float>::dense(source.data(), n, k),
                                     std::span<bf16_t>(storage).first(elements - 1));
    }, Errc::size_mismatch, "storage.size()");
    untouched();
    expect_error([&] {
      (void)pack_weight_into<bf16_t>(RowsView<const float>::dense(source.data(), n, 24), std::span<bf16_t>(storage));
    }, Errc::invalid_argument, "weight.cols()");
    untouched();
    expect_error([&] {
      (void)pack_weight_into<bf16_t>(RowsView<const float>::strided(source.data(), {1, 1, 1, n}, {0, 0, 0, k}, k),
                                     std::span<bf16_t>(storage));
    }, Errc::invalid_argument, "weight.rank()");
    untouched();
    expect_error([&] { (void)pack_weight<float>(RowsView<const float>::dense(source.data(), 0, k)); },
                 Errc::invalid_argument, "weight.rows()");
    // Storage overlapping the source (packing in place).
    std::vector<float> in_place(static_cast<std::size_t>(PackedWeightLayout<float>::elements(n, k).value().value()), 3.0f);
    expect_error([&] {
      (void)pack_weight_into<float>(RowsView<const float>::dense(in_place.data(), n, k), std::span<float>(in_place));
    }, Errc::invalid_argument, "storage");
    CHECK(std::all_of(in_place.begin(), in_place.end(), [](float v) { return v == 3.0f; }));
  }
  SECTION("gemm_workspace_bytes is one worker scratch per worker, then the split's partial slots") {
    const auto check_pair = [](auto x_tag, auto w_tag) {
      using X = typename decltype(x_tag)::type;
      using W = typename decltype(w_tag)::type;
      const TileGeometry geometry = gemm_tile_geometry<X, W>(selected_isa);
      const std::size_t per_worker = geometry.worker.bytes;
      const std::size_t slots = GemmSplit::max_slots * geometry.partial.bytes;
      CHECK(per_worker > 0);
      CHECK(per_worker % 64 == 0);  // every worker's scratch starts 64-byte aligned
      CHECK(geometry.partial.bytes % 64 == 0);
      // A slot holds one item's sums: row capacity x one tile of columns.
      CHECK(geometry.partial.bytes >= sizeof(float) * static_cast<std::size_t>(geometry.shape.row_capacity) *
                                          PackedWeightLayout<W>::tile_columns);
      for (const std::size_t workers : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, std::size_t{64}}) {
        CHECK(gemm_workspace_bytes<X, W>(workers, selected_isa) == per_worker * workers + slots);
      }
      CHECK(gemm_workspace_bytes<X, W>(0, selected_isa) == slots);
      expect_error([] { (void)gemm_workspace_bytes<X, W>(std::numeric_limits<std::size_t>::max() / 2, selected_isa); },
                   Errc::size_overflow, "num_workers");
    };
    check_pair(std::type_identity<float>{}, std::type_identity<float>{});
    check_pair(std::type_identity<float>{}, std::type_identity<bf16_t>{});
    check_pair(std::type_identity<bf16_t>{}, std::type_identity<float>{});
    check_pair(std::type_identity<bf16_t>{}, std::type_identity<bf16_t>{});
  }
}

// ---------------------------------------------------------------------------------------------
// No rows

TEMPLATE_TEST_CASE("gemm with M = 0 rows: no write, no throw", "[gemm][empty]", GEMM_COMBOS) {
  using X = typename TestType::x_type;
  using W = typename TestType::weight_type;
  using Out = typename TestType::out_type;
  constexpr std::int64_t n = 17, k = 48;
  std::mt19937 rng(51);
  const auto source = random_values<float>(static_cast<std::size_t>(n * k), rng);
  const auto packed = pack_weight<W>(RowsView<const float>::dense(source.data(), n, k));
  const auto x = random_values<X>(static_cast<std::size_t>(k), rng);
  std::vector<Out> out(static_cast<std::size_t>(2 * n), make<Out>(-7.0f));
  const std::vector<float> bias(static_cast<std::size_t>(n), 1.0f);
  Workspace workspace(gemm_workspace_bytes<X, W>(2, selected_isa));
  ThreadPool pool(2);
  SerialExecutor serial;
  const auto x_empty = RowsView<const X>::dense(x.data(), 0, k);
  const auto out_empty = RowsView<Out>::dense(out.data(), 0, n);
  CHECK_NOTHROW(gemm(out_empty, x_empty, packed.view(), GemmUpdate::overwrite, workspace.span(), serial, selected_isa));
  CHECK_NOTHROW(gemm(out_empty, x_empty, packed.view(), GemmUpdate::accumulate, workspace.span(), pool, selected_isa));
  CHECK_NOTHROW(weight_packed_linear(out_empty, x_empty, packed.view(), bias, workspace.span(), serial, selected_isa));
  // A zero leading dimension among others, and null data with no rows.
  CHECK_NOTHROW(weight_packed_linear(RowsView<Out>::strided(out.data(), {3, 0}, {n, n}, n),
                                     RowsView<const X>::strided(x.data(), {0, 5}, {k, k}, k), packed.view(), bias,
                                     workspace.span(), pool, selected_isa));
  CHECK_NOTHROW(gemm(RowsView<Out>::dense(nullptr, 0, n), RowsView<const X>::dense(nullptr, 0, k), packed.view(),
                     GemmUpdate::overwrite, workspace.span(), serial, selected_isa));
  CHECK(std::all_of(out.begin(), out.end(), [](Out v) { return value_of(v) == -7.0; }));
}

}  // namespace
