// fused_moe and its plan on the ISA chosen with --isa: results against a float64 reference (empty
// experts, all tokens on one expert, duplicate ids), the 235B-model sizes planned without
// allocating in exact 64-bit arithmetic, and bad arguments rejected before any write.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pagedattn/pagedattn.hpp"
#include "test_support.hpp"

using namespace pagedattn;
using pagedattn::test::selected_isa;

namespace {


/// A MoE layer's data: weights as float values exactly representable in W, hidden as X values.
template <class X, class W>
struct MoeCase {
  MoeShape shape;
  std::vector<std::vector<float>> w13, w2;  // [E][2N][K], [E][K][N]
  std::vector<PackedWeightBuffer<W>> packed13, packed2;
  std::vector<PackedWeight<W>> views13, views2;
  std::vector<X> hidden;
  std::vector<float> weights;
  std::vector<std::int32_t> ids;

  MoeCase(MoeShape s, std::uint32_t seed) : shape(s) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    const auto k = static_cast<std::size_t>(s.hidden), n = static_cast<std::size_t>(s.intermediate);
    for (std::int64_t e = 0; e < s.experts; ++e) {
      w13.emplace_back(2 * n * k);
      w2.emplace_back(k * n);
      for (float& v : w13.back()) v = static_cast<float>(W(0.2f * normal(rng)));
      for (float& v : w2.back()) v = static_cast<float>(W(0.2f * normal(rng)));
      packed13.push_back(pack_weight<W>(RowsView<const float>::dense(w13.back().data(), 2 * s.intermediate, s.hidden)));
      packed2.push_back(pack_weight<W>(RowsView<const float>::dense(w2.back().data(), s.hidden, s.intermediate)));
    }
    for (std::int64_t e = 0; e < s.experts; ++e) {
      views13.push_back(packed13[static_cast<std::size_t>(e)].view());
      views2.push_back(packed2[static_cast<std::size_t>(e)].view());
    }
    hidden.resize(static_cast<std::size_t>(s.tokens) * k);
    for (X& v : hidden) v = X(normal(rng));
    weights.resize(static_cast<std::size_t>(s.tokens * s.top_k));
    for (float& v : weights) v = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    ids.assign(weights.size(), 0);
  }

  /// Runs fused_moe into `out` ([tokens][hidden]) with `executor`.
  template <class E>
  void run(std::vector<X>& out, E& executor) const {
    const MoePlan<X, W> plan = plan_moe<X, W>(shape, executor.num_workers(), selected_isa);
    pagedattn::test::Workspace workspace(plan.workspace_bytes());
    fused_moe(plan, RowsView<X>::dense(out.data(), shape.tokens, shape.hidden),
              RowsView<const X>::dense(hidden.data(), shape.tokens, shape.hidden),
              std::span<const PackedWeight<W>>(views13), std::span<const PackedWeight<W>>(views2),
              RowsView<const float>::dense(weights.data(), shape.tokens, shape.top_k),
              RowsView<const std::int32_t>::dense(ids.data(), shape.tokens, shape.top_k), workspace.span(), executor);
  }

  /// Largest |out - reference| / (reference magnitude + 1e-3) over all outputs, the reference
  /// computed in float64 from the same inputs (activations unrounded).
  double worst_error(const std::vector<X>& out) const {
    const auto k = static_cast<std::size_t>(shape.hidden), n = static_cast<std::size_t>(shape.intermediate);
    double worst = 0.0;
    for (std::int64_t m = 0; m < shape.tokens; ++m) {
      std::vector<double> sum(k, 0.0), magnitude(k, 0.0);
      for (std::int64_t j = 0; j < shape.top_k; ++j) {
        const auto slot = static_cast<std::size_t>(m * shape.top_k + j);
        const auto e = static_cast<std::size_t>(ids[slot]);
        std::vector<double> act(n);
        for (std::size_t i = 0; i < n; ++i) {
          double gate = 0.0, up = 0.0;
          for (std::size_t d = 0; d < k; ++d) {
            const double x = static_cast<float>(hidden[static_cast<std::size_t>(m) * k + d]);
            gate += x * w13[e][i * k + d];
            up += x * w13[e][(n + i) * k + d];
          }
          act[i] = gate / (1.0 + std::exp(-gate)) * up;
        }
        for (std::size_t d = 0; d < k; ++d) {
          double y = 0.0, y_magnitude = 0.0;
          for (std::size_t i = 0; i < n; ++i) {
            y += act[i] * w2[e][d * n + i];
            y_magnitude += std::abs(act[i] * w2[e][d * n + i]);
          }
          sum[d] += weights[slot] * y;
          magnitude[d] += weights[slot] * y_magnitude;
        }
      }
      for (std::size_t d = 0; d < k; ++d) {
        const double got = static_cast<float>(out[static_cast<std::size_t>(m) * k + d]);
        worst = std::max(worst, std::abs(got - sum[d]) / (magnitude[d] + 1e-3));
      }
    }
    return worst;
  }
};

/// Error bound relative to the sum of |terms|: float sums (about 1e-6 here) for float data; bf16
/// activations and outputs each add up to 2^-9 relative (plus the bf16 products' float sums).
template <class X>
constexpr double bound = std::is_same_v<X, float> ? 1e-5 : 3.0 * 0x1p-9;

template <class X, class W>
void check_routing(const char* name, MoeShape shape, auto&& route) {
  MoeCase<X, W> c(shape, 7);
  for (std::int64_t m = 0; m < shape.tokens; ++m) {
    for (std::int64_t j = 0; j < shape.top_k; ++j) c.ids[static_cast<std::size_t>(m * shape.top_k + j)] = route(m, j);
  }
  std::vector<X> out(c.hidden.size(), X(std::numeric_limits<float>::quiet_NaN()));
  SerialExecutor serial;
  c.run(out, serial);
  INFO(name);
  CHECK(c.worst_error(out) < bound<X>);
  // Bitwise the same on two workers.
  ThreadPool pool(2);
  std::vector<X> pooled(out.size(), X(0.0f));
  c.run(pooled, pool);
  CHECK(std::memcmp(pooled.data(), out.data(), out.size() * sizeof(X)) == 0);
}

template <class X, class W>
void check_all_routings() {
  const MoeShape shape{37, 48, 32, 6, 3};
  // Expert 5 gets no token; 0..4 in a rotating pattern.
  check_routing<X, W>("spread, one expert empty", shape, [](std::int64_t m, std::int64_t j) {
    return static_cast<std::int32_t>((m * 3 + j * 2) % 5);
  });
  check_routing<X, W>("all tokens on one expert", MoeShape{37, 48, 32, 6, 1},
                      [](std::int64_t, std::int64_t) { return std::int32_t{4}; });
  check_routing<X, W>("duplicate ids in a row", shape, [](std::int64_t m, std::int64_t j) {
    return static_cast<std::int32_t>(j == 2 ? (m % 6) : (m + 1) % 6);
  });
  // More rows per expert than one GEMM row block (64), hidden spanning two input chunks.
  check_routing<X, W>("tall experts, two chunks", MoeShape{150, 272, 16, 2, 2},
                      [](std::int64_t m, std::int64_t j) { return static_cast<std::int32_t>((m + j) % 2); });
}

}  // namespace

TEST_CASE("fused_moe matches a float64 reference", "[moe]") {
  SECTION("float") { check_all_routings<float, float>(); }
  SECTION("bf16") { check_all_routings<bf16_t, bf16_t>(); }
  SECTION("bf16 hidden, float weights") { check_all_routings<bf16_t, float>(); }
}

TEST_CASE("MoE plan of a 235B model's layer is exact 64-bit arithmetic, without allocation", "[moe]") {
  // 128 experts, top-8, hidden 4096, expert intermediate 1536 split 4 ways (384), 16,384 tokens.
  const MoeShape shape{16384, 4096, 384, 128, 8};
  const auto plan = plan_moe<bf16_t, bf16_t>(shape, 16, IsaId::scalar);
  const std::uint64_t slots = 16384ull * 8;
  const MoeBuffers& b = plan.buffers();
  CHECK(b.gathered.bytes == slots * 4096 * 2);          // 2^30
  CHECK(b.gate_up.bytes == slots * 2 * 384 * 4);
  CHECK(b.activated.bytes == slots * 384 * 2);
  CHECK(b.expert_out.bytes == slots * 4096 * 4);        // 2^31: past INT32_MAX
  CHECK(b.expert_out.bytes > static_cast<std::uint64_t>(INT32_MAX));
  CHECK(b.slot_order.bytes == slots * 8);
  CHECK(b.jobs.bytes == 128 * sizeof(detail::GemmJob));
  CHECK(b.gemm_scratch.bytes == 16 * gemm_tile_geometry<bf16_t, bf16_t>(IsaId::scalar).worker.bytes);
  // Regions in order, 64-byte aligned, disjoint; the total is the end of the last.
  const MoeBuffer regions[] = {b.gathered, b.gate_up, b.activated, b.expert_out, b.slot_order,
                               b.slot_position, b.expert_rows, b.item_offsets, b.jobs, b.gemm_scratch};
  for (std::size_t i = 0; i < std::size(regions); ++i) {
    CHECK(regions[i].offset % 64 == 0);
    if (i > 0) CHECK(regions[i].offset >= regions[i - 1].offset + regions[i - 1].bytes);
  }
  CHECK(plan.workspace_bytes() == b.gemm_scratch.offset + b.gemm_scratch.bytes);
  CHECK(plan.workspace_bytes() > (std::uint64_t{3} << 30));
}

TEST_CASE("MoE sizes past 2^64 and bad shapes are errors", "[moe]") {
  const auto argument_of = [](const MoeShape& shape) {
    try {
      (void)plan_moe<float, float>(shape, 1, IsaId::scalar);
    } catch (const Error& e) {
      return e.argument();
    }
    return std::string("(none)");
  };
  // slots * hidden * 4 overflows: 2^40 tokens x 8 x 2^31.
  const MoeShape huge{std::int64_t{1} << 40, (std::int64_t{1} << 31) - 16, 16, 8, 8};
  CHECK(argument_of(huge) == "workspace.gathered");
  CHECK(argument_of(MoeShape{-1, 16, 16, 4, 2}) == "shape.tokens");
  CHECK(argument_of(MoeShape{4, 24, 16, 4, 2}) == "shape.hidden");
  CHECK(argument_of(MoeShape{4, 16, 0, 4, 2}) == "shape.intermediate");
  CHECK(argument_of(MoeShape{4, 16, 16, 0, 1}) == "shape.experts");
  CHECK(argument_of(MoeShape{4, 16, 16, 4, 5}) == "shape.top_k");
  CHECK_THROWS_AS((plan_moe<float, float>(MoeShape{4, 16, 16, 4, 2}, 0, IsaId::scalar)), Error);
}

TEST_CASE("fused_moe rejects bad arguments before writing", "[moe]") {
  using X = float;
  using W = float;
  const MoeShape shape{5, 32, 16, 4, 2};
  MoeCase<X, W> c(shape, 11);
  for (std::size_t i = 0; i < c.ids.size(); ++i) c.ids[i] = static_cast<std::int32_t>(i % 4);
  SerialExecutor serial;
  const MoePlan<X, W> plan = plan_moe<X, W>(shape, 1, selected_isa);
  pagedattn::test::Workspace workspace(plan.workspace_bytes());
  const float sentinel = 12345.0f;
  std::vector<X> out(c.hidden.size(), sentinel);
  const auto attempt = [&](auto ids, auto views13, auto hidden_rows, std::span<std::byte> ws) {
    try {
      fused_moe(plan, RowsView<X>::dense(out.data(), shape.tokens, shape.hidden),
                RowsView<const X>::dense(c.hidden.data(), hidden_rows, shape.hidden),
                std::span<const PackedWeight<W>>(views13), std::span<const PackedWeight<W>>(c.views2),
                RowsView<const float>::dense(c.weights.data(), shape.tokens, shape.top_k),
                RowsView<const std::int32_t>::dense(ids.data(), shape.tokens, shape.top_k), ws, serial);
    } catch (const Error& e) {
      return e.argument();
    }
    return std::string("(none)");
  };
  auto bad_ids = c.ids;
  bad_ids[7] = 4;  // experts = 4
  CHECK(attempt(bad_ids, c.views13, shape.tokens, workspace.span()) == "topk_ids[3][1]");
  bad_ids[7] = -1;
  CHECK(attempt(bad_ids, c.views13, shape.tokens, workspace.span()) == "topk_ids[3][1]");
  auto swapped = c.views13;
  swapped[2] = c.views2[2];  // [32][16] where [32][32] is expected
  CHECK(attempt(c.ids, swapped, shape.tokens, workspace.span()) == "w13[2]");
  auto fewer = c.views13;
  fewer.pop_back();
  CHECK(attempt(c.ids, fewer, shape.tokens, workspace.span()) == "w13.size()");
  CHECK(attempt(c.ids, c.views13, shape.tokens - 1, workspace.span()) == "hidden.rows()");
  CHECK(attempt(c.ids, c.views13, shape.tokens, workspace.span().first(workspace.span().size() - 1)) ==
        "workspace.size()");
  for (const X v : out) REQUIRE(v == sentinel);
  // A valid call then writes.
  CHECK(attempt(c.ids, c.views13, shape.tokens, workspace.span()) == "(none)");
  CHECK(c.worst_error(out) < bound<X>);
}
