// The AMX tile operations: the emulation against the instruction definitions (configuration
// limits, shape checks, round to nearest even whatever MXCSR says, denormals in and out, the two
// partial sums per column) and, where the CPU has AMX, the CPU's tiles against the emulation on
// single instructions and on the kernels' own tile sequences (TileGemm::qk_bf16 / pv_bf16).
#include <cstddef>
#include <cstdint>

#include <pagedattn/backend/amx/tile_config.hpp>
#include <pagedattn/core/minifloat.hpp>

namespace amx_tiles_test {

/// The tile operations and TileGemm products of one AMX tag.
struct TileCalls {
  /// configure(attention_tile_config()); C (tile 0) = c, A (tile 4) = a, B (tile 6) = b, all 16
  /// rows of 64 bytes; TDPBF16PS 0, 4, 6; c = C; release.
  void (*dpbf16ps)(float* c, const pagedattn::bf16_t* a, const pagedattn::bf16_t* b) noexcept;
  /// configure(config); TILELOADD tile 0 from `in` (row stride 64); TILESTORED it to `out` (row
  /// stride 64); release.
  void (*load_store)(const pagedattn::backend::amx::TileConfig& config, const std::uint8_t* in,
                     std::uint8_t* out) noexcept;
  /// TileGemm<Tag, bf16_t>::qk_bf16 then pv_bf16 of `rows` rows (q: rows x head_dim bf16, p:
  /// rows x tokens) over a block of 64 positions (`block`: K then V sub-block), tokens from 0,
  /// into scores (rows x tokens) and acc (rows x head_dim, accumulated), inside begin/end.
  void (*products_bf16)(const pagedattn::bf16_t* q, const float* p, int rows, int head_dim, int tokens,
                        const pagedattn::bf16_t* block, float* scores, float* acc) noexcept;
  /// The same for an E4M3 cache.
  void (*products_e4m3)(const pagedattn::bf16_t* q, const float* p, int rows, int head_dim, int tokens,
                        const pagedattn::fp8_e4m3_t* block, float* scores, float* acc) noexcept;
};

/// Defined in the part compiled for Tag.
template <class Tag>
TileCalls calls();

/// Positions of the cache block the products read.
inline constexpr int block_size = 64;

}  // namespace amx_tiles_test

#if defined(AMX_TILES_TEST_ISA)
// Built once per AMX tag with that tag's flags (see CMakeLists.txt).
#include <cstring>
#include <vector>

#include <pagedattn/backend/kernels.hpp>  // first: its ISA headers include the intrinsics (see avx2/lanes.hpp)
#include <pagedattn/backend/amx/emulated_tiles.hpp>
#include <pagedattn/backend/step_geometry.hpp>

namespace amx_tiles_test {

using Tag = pagedattn::isa::AMX_TILES_TEST_ISA;
/// The CPU's tiles for amx; the emulation's for amx_emulated and the avx2 part.
using Tiles = typename pagedattn::backend::amx::TilesOf<Tag>::type;

/// Tile state and scratch for one call, 64-byte aligned.
struct Scratch {
  explicit Scratch(std::size_t bytes) : storage(bytes + 64) {}
  std::byte* data() { return storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64; }
  std::vector<std::byte> storage;
};

template <class CacheT>
  requires pagedattn::AmxTag<Tag>
void products(const pagedattn::bf16_t* q, const float* p, int rows, int head_dim, int tokens, const CacheT* block,
              float* scores, float* acc) noexcept {
  using Gemm = pagedattn::backend::TileGemm<Tag, CacheT>;
  using Step = pagedattn::backend::StepGeometry<Tag, pagedattn::bf16_t, CacheT>;
  const pagedattn::WorkerScratch layout = Step::geometry(head_dim).worker;
  Scratch scratch(layout.bytes);
  std::byte* base = scratch.data();
  const pagedattn::backend::TileScratch tiles = pagedattn::backend::TileScratch::in(base, layout);
  // Rows past the last one that the tiles may read and write (the step's row capacity).
  const auto capacity = static_cast<std::size_t>(Step::shape.row_capacity);
  std::vector<pagedattn::bf16_t> q_rows(capacity * static_cast<std::size_t>(head_dim));
  std::memcpy(static_cast<void*>(q_rows.data()), q, sizeof(pagedattn::bf16_t) * static_cast<std::size_t>(rows * head_dim));
  std::vector<float> score_rows(capacity * static_cast<std::size_t>(tokens));
  const std::size_t sub_block = pagedattn::KvBlockLayout<CacheT>::sub_block_elements(block_size, head_dim);
  Gemm::begin(tiles);
  Gemm::qk_bf16(q_rows.data(), rows, head_dim, block, head_dim, 0, tokens, 1.0f, score_rows.data(), tokens, tiles);
  Gemm::pv_bf16(p, rows, tokens, block + sub_block, block_size, head_dim, 0, tokens, acc, head_dim, tiles);
  Gemm::end(tiles);
  std::memcpy(scores, score_rows.data(), sizeof(float) * static_cast<std::size_t>(rows * tokens));
}

/// `products<CacheT>` for an AMX tag; none for the avx2 part, which has the tile operations only.
template <class CacheT>
constexpr auto products_of() noexcept {
  using Products = void (*)(const pagedattn::bf16_t*, const float*, int, int, int, const CacheT*, float*, float*) noexcept;
  if constexpr (pagedattn::AmxTag<Tag>) {
    return Products{&products<CacheT>};
  } else {
    return Products{nullptr};
  }
}

template <>
TileCalls calls<Tag>() {
  return {[](float* c, const pagedattn::bf16_t* a, const pagedattn::bf16_t* b) noexcept {
            Scratch state(pagedattn::backend::amx::emulated_state_bytes);
            Tiles tiles(state.data());
            static constexpr pagedattn::backend::amx::TileConfig config = pagedattn::backend::amx::attention_tile_config();
            tiles.configure(config);
            tiles.template load<0>(c, 64);
            tiles.template load<4>(a, 64);
            tiles.template load<6>(b, 64);
            tiles.template dpbf16ps<0, 4, 6>();
            tiles.template store<0>(c, 64);
            tiles.release();
          },
          [](const pagedattn::backend::amx::TileConfig& config, const std::uint8_t* in, std::uint8_t* out) noexcept {
            Scratch state(pagedattn::backend::amx::emulated_state_bytes);
            Tiles tiles(state.data());
            tiles.configure(config);
            tiles.template load<0>(in, 64);
            tiles.template store<0>(out, 64);
            tiles.release();
          },
          products_of<pagedattn::bf16_t>(), products_of<pagedattn::fp8_e4m3_t>()};
}

}  // namespace amx_tiles_test

#else
#include <catch2/catch.hpp>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <xmmintrin.h>

#include <pagedattn/core/kv_cache_layout.hpp>

#include "test_support.hpp"

namespace {

using pagedattn::bf16_t;
using pagedattn::IsaId;
using pagedattn::backend::amx::TileConfig;

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

/// The emulated tile operations as the avx2 part compiles them (they need only AVX2 and FMA, so
/// the [amx_emulation] tests run with --isa avx2 on every CPU of that tier and up).
amx_tiles_test::TileCalls emulated_tiles() {
#if defined(AMX_TILES_TEST_ISA_AVX2)
  REQUIRE(pagedattn::test::selected_isa >= IsaId::avx2);
  return amx_tiles_test::calls<pagedattn::isa::avx2>();
#else
  FAIL("built without the avx2 part");
  return {};
#endif
}

/// The emulation's calls with the AMX kernels' products (every build with an avx2 compiler has
/// them; they run on every avx2 CPU).
amx_tiles_test::TileCalls emulated() {
#if defined(AMX_TILES_TEST_ISA_AMX_EMULATED)
  return amx_tiles_test::calls<pagedattn::isa::amx_emulated>();
#else
  FAIL("built without the amx_emulated part");
  return {};
#endif
}

/// One TDPBF16PS on tiles: C 16 x 16 floats, A 16 rows x 16 pairs, B 16 rows (pairs) x 16 pairs.
struct TileOperands {
  std::vector<float> c = std::vector<float>(256, 0.0f);
  std::vector<bf16_t> a = std::vector<bf16_t>(512, bf16_t(0.0f));
  std::vector<bf16_t> b = std::vector<bf16_t>(512, bf16_t(0.0f));
};

/// The SDM's TDPBF16PS, written out in scalar code: per row m and column n, an FMA chain over k
/// for the even elements and one for the odd, then C += even + odd; every step rounds to nearest
/// even (the caller's MXCSR must be the default). Valid for operands whose values and results
/// stay normal or zero (no denormal in or out), which is what random_operands gives.
std::vector<float> reference_dpbf16ps(const TileOperands& t) {
  std::vector<float> c = t.c;
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 16; ++n) {
      float even = 0.0f, odd = 0.0f;
      for (int k = 0; k < 16; ++k) {
        even = std::fma(static_cast<float>(t.a[m * 32 + 2 * k]), static_cast<float>(t.b[k * 32 + 2 * n]), even);
        odd = std::fma(static_cast<float>(t.a[m * 32 + 2 * k + 1]), static_cast<float>(t.b[k * 32 + 2 * n + 1]), odd);
      }
      c[m * 16 + n] = c[m * 16 + n] + (even + odd);
    }
  }
  return c;
}

/// Operands of magnitudes in [2^-4, 2^4] with random signs: sums round, nothing is denormal.
TileOperands random_operands(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-4.0f, 4.0f);
  std::bernoulli_distribution negative(0.5);
  const auto value = [&] { return (negative(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng)); };
  TileOperands t;
  for (float& x : t.c) x = value();
  for (bf16_t& x : t.a) x = bf16_t(value());
  for (bf16_t& x : t.b) x = bf16_t(value());
  return t;
}

/// Operands of small integers: every product and sum is exact, so any summation order gives the
/// same bits.
TileOperands exact_operands(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-8, 8);
  TileOperands t;
  for (float& x : t.c) x = static_cast<float>(small(rng));
  for (bf16_t& x : t.a) x = bf16_t(static_cast<float>(small(rng)));
  for (bf16_t& x : t.b) x = bf16_t(static_cast<float>(small(rng)));
  return t;
}

/// Runs `calls.dpbf16ps` on `t` (C in place) and returns C.
std::vector<float> run(const amx_tiles_test::TileCalls& calls, TileOperands t) {
  calls.dpbf16ps(t.c.data(), t.a.data(), t.b.data());
  return t.c;
}

/// Units in the last place between two finite floats of the same sign (or both near 0).
std::int64_t ulps(float x, float y) {
  const auto ordered = [](float f) {
    const auto bits = static_cast<std::int64_t>(bits_of(f));
    return bits & 0x80000000 ? -(bits & 0x7FFFFFFF) : bits;
  };
  return std::llabs(ordered(x) - ordered(y));
}

}  // namespace

TEST_CASE("AMX tile configuration limits: what LDTILECFG accepts", "[amx_emulation]") {
  using pagedattn::backend::amx::tile_config_error;
  const TileConfig good = pagedattn::backend::amx::attention_tile_config();
  REQUIRE(tile_config_error(good) == nullptr);
  REQUIRE(tile_config_error(TileConfig{}) == nullptr);  // palette 0: the init state
  const auto broken = [&](auto change) {
    TileConfig config = good;
    change(config);
    return tile_config_error(config) != nullptr;
  };
  CHECK(broken([](TileConfig& c) { c.palette_id = 2; }));
  CHECK(broken([](TileConfig& c) { c.reserved[5] = 1; }));
  CHECK(broken([](TileConfig& c) { c.rows[3] = 17; }));
  CHECK(broken([](TileConfig& c) { c.colsb[3] = 65; }));
  CHECK(broken([](TileConfig& c) { c.rows[8] = 1, c.colsb[8] = 4; }));  // beyond the palette's 8
  CHECK(broken([](TileConfig& c) { c.rows[2] = 0; }));                   // bytes without rows
  CHECK(broken([](TileConfig& c) { c.colsb[2] = 0; }));                  // rows without bytes
  CHECK(broken([](TileConfig& c) { c.palette_id = 0; }));                // palette 0 with tiles
  CHECK_FALSE(broken([](TileConfig& c) { c.rows[7] = 0, c.colsb[7] = 0; }));  // an unused tile
}

TEST_CASE("AMX TDPBF16PS shape checks", "[amx_emulation]") {
  using pagedattn::backend::amx::dpbf16ps_error;
  const TileConfig good = pagedattn::backend::amx::attention_tile_config();
  REQUIRE(dpbf16ps_error(good, 0, 4, 6) == nullptr);
  CHECK(dpbf16ps_error(TileConfig{}, 0, 4, 6) != nullptr);  // not configured
  CHECK(dpbf16ps_error(good, 0, 0, 6) != nullptr);          // not distinct
  CHECK(dpbf16ps_error(good, 0, 4, 8) != nullptr);          // no tile 8
  TileConfig rows = good;
  rows.rows[0] = 8;  // C rows != A rows
  CHECK(dpbf16ps_error(rows, 0, 4, 6) != nullptr);
  TileConfig columns = good;
  columns.colsb[6] = 32;  // C bytes per row != B's
  CHECK(dpbf16ps_error(columns, 0, 4, 6) != nullptr);
  TileConfig depth = good;
  depth.rows[6] = 8;  // A's 16 pairs a row, B's 8 rows
  CHECK(dpbf16ps_error(depth, 0, 4, 6) != nullptr);
  depth.colsb[4] = 32;  // now 8 pairs a row in A too, and C keeps A's 16 rows
  CHECK(dpbf16ps_error(depth, 0, 4, 6) == nullptr);
}

TEST_CASE("emulated TDPBF16PS rounds as the instruction definition says, whatever MXCSR holds",
          "[amx_emulation]") {
  const amx_tiles_test::TileCalls calls = emulated_tiles();
  const unsigned saved = _mm_getcsr();
  for (const unsigned rounding : {0x0000u, 0x6000u, 0x2000u}) {  // nearest, toward zero, down
    CAPTURE(rounding);
    _mm_setcsr((saved & ~0x6000u) | rounding);
    TileOperands t;
    // Row 0, column 0: C = 1 and the pair products 2^-24 (even) and 2^-24 (odd). Their sum 2^-23
    // is one ulp of 1: 1 + 2^-23. (Adding each product to C in turn would round twice to 1.)
    t.c[0] = 1.0f;
    t.a[0] = bf16_t(0x1p-12f), t.a[1] = bf16_t(0x1p-12f);
    t.b[0] = bf16_t(0x1p-12f), t.b[1] = bf16_t(0x1p-12f);
    // Column 1: C = 1 and the products 3 x 2^-25 twice: their sum is 1.5 ulps of 1, a tie between
    // 1 + 1 and 1 + 2 ulps that rounds to even, 1 + 2^-22 (toward zero or down: 1 + 2^-23).
    t.c[1] = 1.0f;
    t.b[2] = bf16_t(3 * 0x1p-13f), t.b[3] = bf16_t(3 * 0x1p-13f);
    // Column 2: the odd partial sum cancels the even one exactly: C stays 5.
    t.c[2] = 5.0f;
    t.b[4] = bf16_t(0x1p-3f), t.b[5] = bf16_t(-0x1p-3f);
    const std::vector<float> c = run(calls, t);
    CHECK(bits_of(c[0]) == bits_of(1.0f + 0x1p-23f));
    CHECK(bits_of(c[1]) == bits_of(1.0f + 0x1p-22f));
    CHECK(c[2] == 5.0f);
    CHECK(_mm_getcsr() == ((saved & ~0x6000u) | rounding));  // restored
  }
  _mm_setcsr(saved);
}

TEST_CASE("emulated TDPBF16PS treats denormal inputs as zero and flushes denormal results",
          "[amx_emulation]") {
  const amx_tiles_test::TileCalls calls = emulated_tiles();
  TileOperands t;
  // Column 0: A's even element is the smallest bf16 denormal (2^-133), B's 2^100: 0 with DAZ
  // (2^-33 without).
  t.a[0] = bf16_t::from_bits(0x0001);
  t.b[0] = bf16_t(0x1p100f);
  // Column 1: 2^-70 x 2^-70 = 2^-140, a denormal result: flushed to 0.
  t.a[1] = bf16_t(0x1p-70f);
  t.b[3] = bf16_t(0x1p-70f);
  // Column 2: a denormal C: read as 0 (DAZ) and the result flushed: 0 + 0 = 0.
  t.c[2] = from_bits(0x00000100);
  // Column 3: a NaN operand gives NaN.
  t.b[6] = bf16_t(std::nanf(""));
  const std::vector<float> c = run(calls, t);
  CHECK(c[0] == 0.0f);
  CHECK(c[1] == 0.0f);
  CHECK(c[2] == 0.0f);
  CHECK(std::isnan(c[3]));
  // The same denormal product without DAZ is not zero: the check above could fail.
  CHECK(static_cast<float>(bf16_t::from_bits(0x0001)) * 0x1p100f != 0.0f);
}

TEST_CASE("emulated TDPBF16PS matches the definition written out in scalar code", "[amx_emulation]") {
  const amx_tiles_test::TileCalls calls = emulated_tiles();
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const TileOperands t = random_operands(seed);
    const std::vector<float> expected = reference_dpbf16ps(t);
    const std::vector<float> got = run(calls, t);
    CAPTURE(seed);
    REQUIRE(std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("emulated TILELOADD / TILESTORED move rows x bytes-per-row and nothing else", "[amx_emulation]") {
  const amx_tiles_test::TileCalls calls = emulated_tiles();
  TileConfig config = pagedattn::backend::amx::attention_tile_config();
  config.rows[0] = 5;
  config.colsb[0] = 24;
  std::vector<std::uint8_t> in(1024), out(1024, 0xEE);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 7 + 1);
  calls.load_store(config, in.data(), out.data());
  for (std::size_t r = 0; r < 16; ++r) {
    for (std::size_t b = 0; b < 64; ++b) {
      const bool moved = r < 5 && b < 24;
      CAPTURE(r, b);
      REQUIRE(out[r * 64 + b] == (moved ? in[r * 64 + b] : 0xEE));
    }
  }
}

TEST_CASE("the CPU's AMX tiles agree with the emulation: single instructions and the kernels' tile "
          "sequences", "[amx_native]") {
#if defined(AMX_TILES_TEST_ISA_AMX)
  REQUIRE(pagedattn::test::selected_isa == IsaId::amx);
  const amx_tiles_test::TileCalls native = amx_tiles_test::calls<pagedattn::isa::amx>();
  const amx_tiles_test::TileCalls emulation = emulated();
  SECTION("exact sums: bit for bit") {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      const TileOperands t = exact_operands(seed);
      const std::vector<float> a = run(native, t), b = run(emulation, t);
      REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
  }
  SECTION("rounded sums: the largest difference, within the two orders' bound") {
    std::int64_t largest = 0;
    for (unsigned seed = 1; seed <= 200; ++seed) {
      const TileOperands t = random_operands(seed);
      const std::vector<float> a = run(native, t), b = run(emulation, t);
      for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, ulps(a[i], b[i]));
    }
    // Emulation == hardware bit for bit when largest is 0; otherwise the CPU sums the 32 products
    // of a column in another order than the SDM's two FMA chains, and the difference is what
    // that order's roundings allow (a few ulps of the largest partial sum).
    WARN("largest difference between the CPU's TDPBF16PS and the emulation: " << largest << " ulp");
    CHECK(largest <= 64);
  }
  SECTION("the kernels' tile sequences (qk_bf16, pv_bf16): bit for bit on exact data") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> small(-3, 3);
    for (const int head_dim : {64, 128, 256}) {
      for (const int rows : {16, 33, 64}) {
        for (const int tokens : {16, 48, 64}) {
          CAPTURE(head_dim, rows, tokens);
          const std::size_t sub_block = pagedattn::KvBlockLayout<bf16_t>::sub_block_elements(amx_tiles_test::block_size, head_dim);
          std::vector<bf16_t> block(2 * sub_block);
          std::vector<pagedattn::fp8_e4m3_t> block8(2 * sub_block);
          for (std::size_t i = 0; i < block.size(); ++i) {
            const float v = static_cast<float>(small(rng));
            block[i] = bf16_t(v);
            block8[i] = pagedattn::fp8_e4m3_t(v);
          }
          std::vector<bf16_t> q(static_cast<std::size_t>(rows * head_dim));
          for (bf16_t& x : q) x = bf16_t(static_cast<float>(small(rng)));
          std::vector<float> p(static_cast<std::size_t>(rows * tokens));
          for (float& x : p) x = static_cast<float>(small(rng)) * 0.25f;
          for (int cache = 0; cache < 2; ++cache) {
            std::vector<float> s1(p.size()), s2(p.size()), a1(q.size(), 1.0f), a2(q.size(), 1.0f);
            if (cache == 0) {
              native.products_bf16(q.data(), p.data(), rows, head_dim, tokens, block.data(), s1.data(), a1.data());
              emulation.products_bf16(q.data(), p.data(), rows, head_dim, tokens, block.data(), s2.data(), a2.data());
            } else {
              native.products_e4m3(q.data(), p.data(), rows, head_dim, tokens, block8.data(), s1.data(), a1.data());
              emulation.products_e4m3(q.data(), p.data(), rows, head_dim, tokens, block8.data(), s2.data(), a2.data());
            }
            CAPTURE(cache);
            REQUIRE(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0);
            REQUIRE(std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
#else
  FAIL("this build has no native amx part (the compiler cannot build AMX code)");
#endif
}

#endif
