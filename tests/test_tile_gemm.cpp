// TileGemm<Isa, CacheT> called directly on the ISA tier chosen with --isa: after_block runs once per
// register block (qk_blocks / pv_blocks), each row's products do not depend on how many rows share
// the call (the few-rows and tall register shapes agree bit for bit), widened tiles give the direct
// products' bits (also FP8 products whatever route converts the codes), qk_bf16 and pv_bf16
// (where a tier has them) match a float64 reference, and KvPrefetcher spans a tile.
#include <cstddef>

#include <pagedattn/core/minifloat.hpp>
#include <pagedattn/isa/tags.hpp>

namespace tile_gemm_test {

/// TileGemm<Isa, CacheT>'s products and block counts; qk and pv return how often after_block ran.
template <class CacheT>
struct Calls {
  int (*qk)(const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim, int token_begin,
            int num_tokens, float* scores, int score_stride) noexcept;
  int (*pv)(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
            int token_begin, int num_tokens, float* acc, int acc_stride) noexcept;
  int (*qk_blocks)(int rows, int head_dim, int num_tokens) noexcept;
  int (*pv_blocks)(int rows, int head_dim, int num_tokens) noexcept;
  void (*widen_keys)(const CacheT* k_block, int head_dim, int token_begin, int num_tokens, float* k_tile) noexcept;
  void (*widen_values)(const CacheT* v_block, int block_size, int head_dim, int token_begin, int num_tokens,
                       float* v_tile) noexcept;
  /// TileGemm<Isa, CacheT>::value_scale.
  float value_scale;
  /// qk_bf16, or null where TileGemm<Isa, CacheT>::dots_bf16_queries is false.
  int (*qk_bf16)(const pagedattn::bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                 int token_begin, int num_tokens, float score_scale, float* scores, int score_stride) noexcept;
  /// pv_bf16, or null where TileGemm<Isa, CacheT>::dots_bf16_queries is false.
  int (*pv_bf16)(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
                 int token_begin, int num_tokens, float* acc, int acc_stride) noexcept;
  /// pv_bf16 of probabilities already rounded (rows of p_stride, row_capacity of them), or null
  /// where TileGemm<Isa, CacheT>::dots_bf16_queries is false.
  int (*pv_bf16_rounded)(pagedattn::bf16_t* p, int rows, int p_stride, const CacheT* v_block, int block_size,
                         int head_dim, int token_begin, int num_tokens, float* acc, int acc_stride) noexcept;
  /// TileGemm<Isa, CacheT>::uses_tiles: qk_bf16 and pv_bf16 multiply in AMX tiles (after_block
  /// is then not called).
  bool (*uses_tiles)(int rows, int head_dim) noexcept;
  /// pv_bf16 calls one after the other on one scratch after one begin, as a worker runs them:
  /// call i takes row_counts[i] rows of p into accs[i]; null as pv_bf16 is.
  void (*pv_bf16_in_turn)(const float* p, const int* row_counts, int calls, int p_stride, const CacheT* v_block,
                          int block_size, int head_dim, int token_begin, int num_tokens, float* const* accs,
                          int acc_stride) noexcept;
  /// Most rows of a call of the bf16-query step (StepGeometry<Isa, bf16_t, CacheT>::shape):
  /// 64 on the vector tiers, 128 on the AMX ones.
  int max_rows;
};

/// Defined (explicitly instantiated) in the translation unit compiled for Isa.
template <class Isa, class CacheT>
Calls<CacheT> calls();

/// The bf16 conversions of VectorKit<Isa> that bf16 pair products use; null where the kit has no
/// bf16 pair products.
struct KitCalls {
  /// round_to_bf16 on out[i] = bf16(x[i]), i < n <= 16, in calls of at most the kit's width.
  void (*round_to_bf16)(const float* x, int n, pagedattn::bf16_t* out) noexcept;
  /// load_bf16_pairs over `count` codes (a multiple of 64), in loads of bf16_pair_blocks blocks.
  void (*e4m3_to_bf16)(const pagedattn::fp8_e4m3_t* codes, int count, pagedattn::bf16_t* out) noexcept;
  void (*e5m2_to_bf16)(const pagedattn::fp8_e5m2_t* codes, int count, pagedattn::bf16_t* out) noexcept;
  /// value_scale<fp8_e4m3_t> and value_scale<fp8_e5m2_t> of the kit.
  float e4m3_scale, e5m2_scale;
  /// RowSoftmax<Isa>::update (every tier).
  float (*softmax_update)(float* s, int n, int lo, int hi, float logit_scale, float softcap, float alibi_slope,
                          float alibi_base, float& row_max, float& row_sum, pagedattn::bf16_t* probs) noexcept;
};

/// Defined in the translation unit compiled for Isa.
template <class Isa>
KitCalls kit_calls();

}  // namespace tile_gemm_test

// Built once per ISA with TILE_GEMM_TEST_ISA set and that ISA's flags (see CMakeLists.txt), giving
// calls<Isa, CacheT>() and kit_calls<Isa>() only; and once with default flags, giving the test cases.
#if defined(TILE_GEMM_TEST_ISA)
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <pagedattn/backend/kernels.hpp>
#include <pagedattn/backend/step_geometry.hpp>
#include <pagedattn/backend/vector_kit.hpp>

namespace tile_gemm_test {

/// A worker's scratch for the step of bf16 queries on `Gemm`'s tier, the tiles set up
/// (TileGemm::begin) while it lives: what the attention kernel gives qk_bf16 and pv_bf16.
template <class Isa, class Gemm, class CacheT>
struct StepScratchFor {
  using step = pagedattn::backend::StepGeometry<Isa, pagedattn::bf16_t, CacheT>;
  explicit StepScratchFor(int head_dim)
      : layout(step::geometry(head_dim).worker), bytes(layout.bytes + 64) {
    std::byte* base = bytes.data() + (64 - reinterpret_cast<std::uintptr_t>(bytes.data()) % 64) % 64;
    scratch = pagedattn::backend::TileScratch::in(base, layout);
    Gemm::begin(scratch);
  }
  ~StepScratchFor() { Gemm::end(scratch); }
  StepScratchFor(const StepScratchFor&) = delete;
  StepScratchFor& operator=(const StepScratchFor&) = delete;
  pagedattn::WorkerScratch layout;
  std::vector<std::byte> bytes;
  pagedattn::backend::TileScratch scratch{};
};

/// Rows past a call's last that the step may read (q) and write (scores): its row capacity.
template <class Isa, class CacheT>
constexpr int slack_rows = pagedattn::backend::StepGeometry<Isa, pagedattn::bf16_t, CacheT>::shape.row_capacity -
                           pagedattn::backend::StepGeometry<Isa, pagedattn::bf16_t, CacheT>::shape.max_tile_rows;

template <class Isa, class Gemm, class CacheT>
auto qk_bf16_call() {
  using Call = decltype(Calls<CacheT>::qk_bf16);
  if constexpr (Gemm::dots_bf16_queries) {
    return Call{[](const pagedattn::bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                   int token_begin, int num_tokens, float score_scale, float* scores, int score_stride) noexcept {
      // Query and score rows with the step's slack past the last row, as the kernel's scratch has.
      const auto padded = static_cast<std::size_t>(rows + slack_rows<Isa, CacheT>);
      std::vector<pagedattn::bf16_t> q_rows(padded * static_cast<std::size_t>(q_stride));
      std::memcpy(static_cast<void*>(q_rows.data()), q, sizeof(pagedattn::bf16_t) * static_cast<std::size_t>(rows * q_stride));
      std::vector<float> score_rows(padded * static_cast<std::size_t>(score_stride));
      StepScratchFor<Isa, Gemm, CacheT> step(head_dim);
      int blocks = 0;
      Gemm::qk_bf16(q_rows.data(), rows, q_stride, k_block, head_dim, token_begin, num_tokens, score_scale,
                    score_rows.data(), score_stride, step.scratch, 0, [&] { ++blocks; });
      for (int r = 0; r < rows; ++r) {
        std::memcpy(scores + r * score_stride, score_rows.data() + r * score_stride, sizeof(float) * static_cast<std::size_t>(num_tokens));
      }
      return blocks;
    }};
  } else {
    return Call{nullptr};
  }
}

/// pv_bf16 of probabilities of type P (const float, or bf16_t already rounded) as `Call`.
template <class Isa, class Gemm, class CacheT, class Call, class P>
Call pv_bf16_call() {
  if constexpr (Gemm::dots_bf16_queries) {
    return [](P* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim, int token_begin,
              int num_tokens, float* acc, int acc_stride) noexcept {
      StepScratchFor<Isa, Gemm, CacheT> step(head_dim);
      int blocks = 0;
      Gemm::pv_bf16(p, rows, p_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride,
                    step.scratch, 0, [&] { ++blocks; });
      return blocks;
    };
  } else {
    return nullptr;
  }
}

template <class Isa, class Gemm, class CacheT>
auto pv_bf16_in_turn_call() {
  using Call = decltype(Calls<CacheT>::pv_bf16_in_turn);
  if constexpr (Gemm::dots_bf16_queries) {
    return Call{[](const float* p, const int* row_counts, int calls, int p_stride, const CacheT* v_block,
                   int block_size, int head_dim, int token_begin, int num_tokens, float* const* accs,
                   int acc_stride) noexcept {
      StepScratchFor<Isa, Gemm, CacheT> step(head_dim);
      for (int i = 0; i < calls; ++i) {
        Gemm::pv_bf16(p, row_counts[i], p_stride, v_block, block_size, head_dim, token_begin, num_tokens, accs[i],
                      acc_stride, step.scratch);
      }
    }};
  } else {
    return Call{nullptr};
  }
}

template <class Isa, class CacheT>
Calls<CacheT> calls() {
  using gemm = pagedattn::backend::TileGemm<Isa, CacheT>;
  return {[](const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim, int token_begin,
             int num_tokens, float* scores, int score_stride) noexcept {
            int blocks = 0;
            gemm::qk(q, rows, q_stride, k_block, head_dim, token_begin, num_tokens, scores, score_stride, 0,
                     [&] { ++blocks; });
            return blocks;
          },
          [](const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
             int token_begin, int num_tokens, float* acc, int acc_stride) noexcept {
            int blocks = 0;
            gemm::pv(p, rows, p_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride,
                     0, [&] { ++blocks; });
            return blocks;
          },
          [](int rows, int head_dim, int num_tokens) noexcept { return gemm::qk_blocks(rows, head_dim, num_tokens); },
          [](int rows, int head_dim, int num_tokens) noexcept { return gemm::pv_blocks(rows, head_dim, num_tokens); },
          &gemm::widen_keys,
          &gemm::widen_values,
          gemm::value_scale,
          qk_bf16_call<Isa, gemm, CacheT>(),
          pv_bf16_call<Isa, gemm, CacheT, decltype(Calls<CacheT>::pv_bf16), const float>(),
          pv_bf16_call<Isa, gemm, CacheT, decltype(Calls<CacheT>::pv_bf16_rounded), pagedattn::bf16_t>(),
          [](int rows, int head_dim) noexcept { return gemm::uses_tiles(rows, head_dim); },
          pv_bf16_in_turn_call<Isa, gemm, CacheT>(),
          pagedattn::backend::StepGeometry<Isa, pagedattn::bf16_t, CacheT>::shape.max_tile_rows};
}

// TileGemm owns "float tiles are never widened" for every tier, whatever its kit says.
static_assert(!pagedattn::backend::TileGemm<pagedattn::isa::TILE_GEMM_TEST_ISA, float>::widens);

template <class Isa, class CacheT>
auto bf16_pairs_call() {
  using Call = void (*)(const CacheT*, int, pagedattn::bf16_t*) noexcept;
  if constexpr (Isa::id == pagedattn::IsaId::scalar) {
    return Call{nullptr};
  } else if constexpr (!pagedattn::backend::VectorKit<Isa>::template loads_bf16_pairs<CacheT>) {
    return Call{nullptr};
  } else {
    return Call{[](const CacheT* codes, int count, pagedattn::bf16_t* out) noexcept {
      using kit = pagedattn::backend::VectorKit<Isa>;
      constexpr int blocks = kit::template bf16_pair_blocks<CacheT>;
      for (int i = 0; i < count; i += 2 * kit::width * blocks) {
        typename kit::bf16_pairs pairs[blocks];
        kit::template load_bf16_pairs<CacheT, blocks>(codes + i, pairs);
        std::memcpy(static_cast<void*>(out + i), pairs, sizeof pairs);
      }
    }};
  }
}

template <class Isa>
KitCalls kit_calls_of() {
  constexpr auto softmax = &pagedattn::backend::RowSoftmax<Isa>::update;
  if constexpr (Isa::id == pagedattn::IsaId::scalar) {
    return {nullptr, nullptr, nullptr, 1.0f, 1.0f, softmax};
  } else {
    using kit = pagedattn::backend::VectorKit<Isa>;
    KitCalls calls{nullptr, bf16_pairs_call<Isa, pagedattn::fp8_e4m3_t>(), bf16_pairs_call<Isa, pagedattn::fp8_e5m2_t>(),
                   kit::template value_scale<pagedattn::fp8_e4m3_t>, kit::template value_scale<pagedattn::fp8_e5m2_t>,
                   softmax};
    if constexpr (kit::dots_bf16) {
      calls.round_to_bf16 = [](const float* x, int n, pagedattn::bf16_t* out) noexcept {
        for (int i = 0; i < n; i += kit::width) kit::round_to_bf16(x + i, std::min(kit::width, n - i), out + i);
      };
    }
    return calls;
  }
}

template <>
KitCalls kit_calls<pagedattn::isa::TILE_GEMM_TEST_ISA>() {
  return kit_calls_of<pagedattn::isa::TILE_GEMM_TEST_ISA>();
}

template Calls<float> calls<pagedattn::isa::TILE_GEMM_TEST_ISA, float>();
template Calls<pagedattn::bf16_t> calls<pagedattn::isa::TILE_GEMM_TEST_ISA, pagedattn::bf16_t>();
template Calls<pagedattn::fp8_e4m3_t> calls<pagedattn::isa::TILE_GEMM_TEST_ISA, pagedattn::fp8_e4m3_t>();
template Calls<pagedattn::fp8_e5m2_t> calls<pagedattn::isa::TILE_GEMM_TEST_ISA, pagedattn::fp8_e5m2_t>();

}  // namespace tile_gemm_test

#else
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

#include <pagedattn/backend/kv_prefetcher.hpp>
#include <pagedattn/isa/cpu_features.hpp>
#include <pagedattn/core/kv_cache_layout.hpp>

#include "mxcsr_scope.hpp"
#include "test_support.hpp"

namespace {

using pagedattn::IsaId;

/// f(tag) for the tag of the ISA selected with --isa (only ISAs this build compiled run; the
/// scalar part otherwise).
template <class F>
decltype(auto) with_selected_part(F&& f) {
  switch (pagedattn::test::selected_isa) {
#if defined(TILE_GEMM_TEST_ISA_AVX2)
    case IsaId::avx2: return f(pagedattn::isa::avx2{});
#endif
#if defined(TILE_GEMM_TEST_ISA_AVX512)
    case IsaId::avx512: return f(pagedattn::isa::avx512{});
#endif
#if defined(TILE_GEMM_TEST_ISA_AVX512BF16)
    case IsaId::avx512bf16: return f(pagedattn::isa::avx512bf16{});
#endif
#if defined(TILE_GEMM_TEST_ISA_AMX)
    case IsaId::amx: return f(pagedattn::isa::amx{});
#endif
#if defined(TILE_GEMM_TEST_ISA_AMX_EMULATED)
    case IsaId::amx_emulated: return f(pagedattn::isa::amx_emulated{});
#endif
    default: return f(pagedattn::isa::scalar{});
  }
}

/// The TileGemm calls of the ISA selected with --isa.
template <class CacheT>
tile_gemm_test::Calls<CacheT> selected_calls() {
  return with_selected_part([]<class Isa>(Isa) { return tile_gemm_test::calls<Isa, CacheT>(); });
}

/// The kit's bf16 conversions of the ISA selected with --isa.
tile_gemm_test::KitCalls selected_kit_calls() {
  return with_selected_part([]<class Isa>(Isa) { return tile_gemm_test::kit_calls<Isa>(); });
}

/// bf16 of `x` by the definition of VCVTNEPS2BF16: nearest even, NaN kept (made quiet),
/// subnormal inputs to zero of their sign.
std::uint16_t definition_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  if ((bits & 0x7F800000u) == 0) return static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

constexpr int block_size = 64;

/// One (block, KV head) of random cache elements: K sub-block then V sub-block.
template <class CacheT>
std::vector<CacheT> random_block(int head_dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<CacheT> block(2 * pagedattn::KvBlockLayout<CacheT>::sub_block_elements(block_size, head_dim));
  for (CacheT& x : block) x = CacheT(normal(rng));
  return block;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

/// Fills `n` FP8 elements with every finite code in turn (NaN codes replaced by code 1).
template <class Fp8>
void every_finite_code(Fp8* first, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto code = static_cast<std::uint8_t>(i % 256);
    first[i] = Fp8::from_bits((code & 0x7F) == 0x7F ? std::uint8_t{0x01} : code);
  }
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

/// Whether `a` and `b` hold the same bits, NaN payloads aside.
bool same_bits_or_nans(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(same_bits(&a[i], &b[i], 1) || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  }
  return true;
}

/// Whether `code` is one of Fp8's special codes: E4M3's NaNs, E5M2's infinities and NaNs.
template <class Fp8>
bool special_code(std::uint8_t code) {
  return std::is_same_v<Fp8, pagedattn::fp8_e4m3_t> ? (code & 0x7F) == 0x7F : (code & 0x7C) == 0x7C;
}

/// Fills `n` FP8 elements with every code that is not special, in turn (the rest replaced by 1).
template <class Fp8>
void every_ordinary_code(Fp8* first, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto code = static_cast<std::uint8_t>(i % 256);
    first[i] = Fp8::from_bits(special_code<Fp8>(code) ? std::uint8_t{0x01} : code);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("TileGemm: after_block runs once per register block; each row's result does not depend on "
                   "the rows beside it",
                   "[tile_gemm]", float, pagedattn::bf16_t, pagedattn::fp8_e4m3_t, pagedattn::fp8_e5m2_t) {
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  for (const int head_dim : {16, 128, 256}) {
    const std::vector<TestType> block = random_block<TestType>(head_dim, 11u + static_cast<unsigned>(head_dim));
    const TestType* k_block = block.data();
    const TestType* v_block = block.data() + block.size() / 2;
    for (const int tokens : {16, 48, 64}) {
      for (const int rows : {1, 3, 4, 5, 8, 9, 16, 33, 64}) {
        CAPTURE(head_dim, tokens, rows);
        const auto q = random_floats(static_cast<std::size_t>(rows) * head_dim, 5);
        const auto p = random_floats(static_cast<std::size_t>(rows) * tokens, 6);
        const int token_begin = block_size - tokens;
        std::vector<float> scores(static_cast<std::size_t>(rows) * tokens);
        std::vector<float> acc(static_cast<std::size_t>(rows) * head_dim, 0.5f);
        REQUIRE(gemm.qk(q.data(), rows, head_dim, k_block, head_dim, token_begin, tokens, scores.data(), tokens) ==
                gemm.qk_blocks(rows, head_dim, tokens));
        REQUIRE(gemm.pv(p.data(), rows, tokens, v_block, block_size, head_dim, token_begin, tokens, acc.data(),
                        head_dim) == gemm.pv_blocks(rows, head_dim, tokens));
        // Row by row: the same bits as in the shared call (whichever register shape ran).
        for (int r = 0; r < rows; ++r) {
          std::vector<float> one_score(static_cast<std::size_t>(tokens));
          std::vector<float> one_acc(static_cast<std::size_t>(head_dim), 0.5f);
          gemm.qk(q.data() + r * head_dim, 1, head_dim, k_block, head_dim, token_begin, tokens, one_score.data(),
                  tokens);
          gemm.pv(p.data() + r * tokens, 1, tokens, v_block, block_size, head_dim, token_begin, tokens,
                  one_acc.data(), head_dim);
          CAPTURE(r);
          REQUIRE(same_bits(one_score.data(), scores.data() + r * tokens, static_cast<std::size_t>(tokens)));
          REQUIRE(same_bits(one_acc.data(), acc.data() + r * head_dim, static_cast<std::size_t>(head_dim)));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: pv of float probabilities matches a float64 reference, odd tails included, and "
                   "never multiplies an odd tail's partner",
                   "[tile_gemm]", float, pagedattn::bf16_t, pagedattn::fp8_e4m3_t) {
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  using Layout = pagedattn::KvBlockLayout<TestType>;
  for (const int head_dim : {16, 128}) {
    std::vector<TestType> block = random_block<TestType>(head_dim, 61u + static_cast<unsigned>(head_dim));
    TestType* v_block = block.data() + block.size() / 2;
    // The last position stands for one never written: NaN, the partner of every odd tail below.
    for (int d = 0; d < head_dim; ++d) {
      v_block[Layout::value_index(block_size, head_dim, block_size - 1, d)] =
          TestType(std::numeric_limits<float>::quiet_NaN());
    }
    for (const int tokens : {1, 16, 33, 47, 62}) {
      for (const int rows : {1, 4, 9, 64}) {
        CAPTURE(head_dim, tokens, rows);
        const int token_begin = tokens % 2 != 0 ? block_size - 1 - tokens : block_size - 2 - tokens;
        auto p = random_floats(static_cast<std::size_t>(rows) * tokens, 14);
        for (float& x : p) x = std::abs(x);
        std::vector<float> acc(static_cast<std::size_t>(rows) * head_dim, 0.5f);
        REQUIRE(gemm.pv(p.data(), rows, tokens, v_block, block_size, head_dim, token_begin, tokens, acc.data(),
                        head_dim) == gemm.pv_blocks(rows, head_dim, tokens));
        for (int r = 0; r < rows; ++r) {
          for (int d = 0; d < head_dim; ++d) {
            double dot = 0.0, magnitude = 0.0;
            for (int t = 0; t < tokens; ++t) {
              const double product = static_cast<double>(p[static_cast<std::size_t>(r * tokens + t)]) *
                                     static_cast<float>(v_block[Layout::value_index(block_size, head_dim,
                                                                                    token_begin + t, d)]);
              dot += product;
              magnitude += product < 0 ? -product : product;
            }
            CAPTURE(r, d);
            // Float sums of rounded float products: within 2 tokens + 1 roundings of the magnitude.
            const double expected = 0.5 + gemm.value_scale * dot;
            REQUIRE(std::abs(acc[static_cast<std::size_t>(r * head_dim + d)] - expected) <=
                    (2 * tokens + 1) * 0x1p-24 * (0.5 + gemm.value_scale * magnitude));
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: widened tiles multiplied as floats give the direct products' bits", "[tile_gemm]",
                   pagedattn::bf16_t, pagedattn::fp8_e4m3_t, pagedattn::fp8_e5m2_t) {
  // The attention kernel picks either path by TileGemm::widens; its results must not depend on it.
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  const tile_gemm_test::Calls<float> float_gemm = selected_calls<float>();
  for (const int head_dim : {16, 128, 256}) {
    const std::vector<TestType> block = random_block<TestType>(head_dim, 21u + static_cast<unsigned>(head_dim));
    const TestType* k_block = block.data();
    const TestType* v_block = block.data() + block.size() / 2;
    for (const int tokens : {16, 48, 64}) {
      const int token_begin = block_size - tokens;
      std::vector<float> k_tile(static_cast<std::size_t>(tokens) * head_dim);
      std::vector<float> v_tile(k_tile.size());
      gemm.widen_keys(k_block, head_dim, token_begin, tokens, k_tile.data());
      gemm.widen_values(v_block, block_size, head_dim, token_begin, tokens, v_tile.data());
      for (const int rows : {4, 16, 64}) {
        CAPTURE(head_dim, tokens, rows);
        const auto q = random_floats(static_cast<std::size_t>(rows) * head_dim, 7);
        const auto p = random_floats(static_cast<std::size_t>(rows) * tokens, 8);
        std::vector<float> scores(static_cast<std::size_t>(rows) * tokens), widened_scores(scores.size());
        gemm.qk(q.data(), rows, head_dim, k_block, head_dim, token_begin, tokens, scores.data(), tokens);
        float_gemm.qk(q.data(), rows, head_dim, k_tile.data(), head_dim, 0, tokens, widened_scores.data(), tokens);
        REQUIRE(same_bits(scores.data(), widened_scores.data(), scores.size()));
        std::vector<float> acc(static_cast<std::size_t>(rows) * head_dim, 0.5f), widened_acc(acc);
        gemm.pv(p.data(), rows, tokens, v_block, block_size, head_dim, token_begin, tokens, acc.data(), head_dim);
        float_gemm.pv(p.data(), rows, tokens, v_tile.data(), tokens, head_dim, 0, tokens, widened_acc.data(),
                      head_dim);
        REQUIRE(same_bits(acc.data(), widened_acc.data(), acc.size()));
      }
    }
  }
}

/// Sets detail::subnormal_operands_allowed (whether products may give the multipliers subnormal
/// floats) for the scope's lifetime, then restores it, also when a check inside fails.
class SubnormalOperandsScope {
 public:
  explicit SubnormalOperandsScope(bool allowed)
      : saved_(pagedattn::detail::subnormal_operands_allowed.exchange(allowed ? 1 : 0)) {}
  ~SubnormalOperandsScope() { pagedattn::detail::subnormal_operands_allowed.store(saved_); }
  SubnormalOperandsScope(const SubnormalOperandsScope&) = delete;
  SubnormalOperandsScope& operator=(const SubnormalOperandsScope&) = delete;

 private:
  int saved_;
};

TEMPLATE_TEST_CASE("TileGemm: FP8 products give the same bits whichever split converts the codes (special "
                   "codes, operands too large to scale, the caller's DAZ, subnormal operands allowed or not)",
                   "[tile_gemm]", pagedattn::fp8_e4m3_t, pagedattn::fp8_e5m2_t) {
  // Tiers may convert FP8 by faster routes where the codes, the other operand, MXCSR and the CPU
  // allow (avx2: shifts alone, the operand scaled by 2^112, subnormal codes as subnormal floats:
  // only where the cores multiply those at full speed); everywhere else they convert exactly.
  // Both settings of that CPU property run on every CPU. References: the widened tiles (multiples
  // of 16 tokens), and the same call with DAZ set, which no exact route heeds (F16C conversion
  // ignores it; these operands hold no subnormal).
  const bool subnormals_allowed = GENERATE(false, true);
  const SubnormalOperandsScope subnormal_operands(subnormals_allowed);
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  const tile_gemm_test::Calls<float> float_gemm = selected_calls<float>();
  using Layout = pagedattn::KvBlockLayout<TestType>;
  const std::uint8_t specials[] = {0, 0x7F, 0xFC};  // none; a NaN (both types); -infinity (E5M2)
  for (const int head_dim : {16, 128, 256}) {
    for (const std::uint8_t special : specials) {
      if (special != 0 && !special_code<TestType>(special)) continue;
      std::vector<TestType> block = random_block<TestType>(head_dim, 51u + static_cast<unsigned>(head_dim));
      TestType* k_block = block.data();
      TestType* v_block = block.data() + block.size() / 2;
      every_ordinary_code(k_block, block.size());  // subnormal codes included, K and V
      if (special != 0) {
        k_block[Layout::key_index(head_dim, block_size - 2, 3)] = TestType::from_bits(special);
        v_block[Layout::value_index(block_size, head_dim, block_size - 4, 5)] = TestType::from_bits(special);
      }
      for (const int rows : {1, 4, 5, 9}) {
        auto q = random_floats(static_cast<std::size_t>(rows) * head_dim, 12);
        if (rows > 4) q[static_cast<std::size_t>(4 * head_dim + 7)] = 0x1p17f;  // row block 2: too large to scale
        for (const int tokens : {16, 64}) {
          CAPTURE(subnormals_allowed, head_dim, special, rows, tokens);
          const int token_begin = block_size - tokens;
          std::vector<float> scores(static_cast<std::size_t>(rows) * tokens), daz_scores(scores.size()),
              widened_scores(scores.size()), k_tile(static_cast<std::size_t>(tokens) * head_dim);
          gemm.qk(q.data(), rows, head_dim, k_block, head_dim, token_begin, tokens, scores.data(), tokens);
          gemm.widen_keys(k_block, head_dim, token_begin, tokens, k_tile.data());
          float_gemm.qk(q.data(), rows, head_dim, k_tile.data(), head_dim, 0, tokens, widened_scores.data(), tokens);
          REQUIRE(same_bits_or_nans(scores, widened_scores));
#if defined(__x86_64__)
          {
            const pagedattn::test::MxcsrScope daz(pagedattn::test::default_mxcsr | pagedattn::test::daz);
            gemm.qk(q.data(), rows, head_dim, k_block, head_dim, token_begin, tokens, daz_scores.data(), tokens);
          }
          REQUIRE(same_bits_or_nans(scores, daz_scores));
#endif
        }
        auto p = random_floats(static_cast<std::size_t>(rows) * 64, 13);
        for (float& x : p) x = std::abs(x);
        if (rows > 4) p[static_cast<std::size_t>(4 * 64 + 1)] = 0x1p17f;
        for (const int tokens : {1, 16, 33, 48, 62}) {
          CAPTURE(subnormals_allowed, head_dim, special, rows, tokens);
          // Odd tails end just before their partner, inside the block.
          const int token_begin = tokens % 2 != 0 ? block_size - 1 - tokens : block_size - tokens;
          std::vector<float> acc(static_cast<std::size_t>(rows) * head_dim, 0.5f), daz_acc(acc), widened_acc(acc);
          gemm.pv(p.data(), rows, 64, v_block, block_size, head_dim, token_begin, tokens, acc.data(), head_dim);
#if defined(__x86_64__)
          {
            const pagedattn::test::MxcsrScope daz(pagedattn::test::default_mxcsr | pagedattn::test::daz);
            gemm.pv(p.data(), rows, 64, v_block, block_size, head_dim, token_begin, tokens, daz_acc.data(), head_dim);
          }
          REQUIRE(same_bits_or_nans(acc, daz_acc));
#endif
          if (tokens % 16 == 0 && token_begin % 16 == 0) {
            std::vector<float> v_tile(static_cast<std::size_t>(tokens) * head_dim);
            gemm.widen_values(v_block, block_size, head_dim, token_begin, tokens, v_tile.data());
            float_gemm.pv(p.data(), rows, 64, v_tile.data(), tokens, head_dim, 0, tokens, widened_acc.data(), head_dim);
            REQUIRE(same_bits_or_nans(acc, widened_acc));
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: qk_bf16 multiplies bf16 queries as they are (float64 reference), once per "
                   "register block, each row independent of the rows beside it",
                   "[tile_gemm]", pagedattn::bf16_t, pagedattn::fp8_e4m3_t) {
  using pagedattn::bf16_t;
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  // The tiers with AVX512_BF16 and VBMI have it; the others must not claim it.
  REQUIRE((gemm.qk_bf16 != nullptr) == (pagedattn::test::selected_isa >= IsaId::avx512bf16));
  if (gemm.qk_bf16 == nullptr) return;
  // Which products take AMX tiles: at head dims that are multiples of 32, FP8 at any row count
  // (decode included), bf16 from 16 rows; never on the vector tiers.
  const bool amx_tag = pagedattn::test::selected_isa == IsaId::amx || pagedattn::test::selected_isa == IsaId::amx_emulated;
  REQUIRE(gemm.uses_tiles(1, 128) == (amx_tag && pagedattn::is_fp8_v<TestType>));
  REQUIRE(gemm.uses_tiles(15, 256) == (amx_tag && pagedattn::is_fp8_v<TestType>));
  REQUIRE(gemm.uses_tiles(16, 128) == amx_tag);
  REQUIRE_FALSE(gemm.uses_tiles(64, 48));
  using Layout = pagedattn::KvBlockLayout<TestType>;
  const float score_scale = 0.0883883f;
  for (const int head_dim : {16, 128, 256}) {
    std::vector<TestType> block = random_block<TestType>(head_dim, 31u + static_cast<unsigned>(head_dim));
    if constexpr (pagedattn::is_fp8_v<TestType>) {
      // Every code, subnormals and the largest included, in the K sub-block (NaN codes too, in a
      // token of their own, checked apart).
      every_finite_code(block.data(), block.size() / 2);
      block[Layout::key_index(head_dim, block_size - 1, 3)] = TestType::from_bits(0xFF);
    }
    for (const int tokens : {16, 48, 64}) {
      for (const int rows : {1, 4, 5, 8, 9, 33, 64, 100, 128}) {
        if (rows > gemm.max_rows) continue;  // past the step's rows (vector tiers)
        CAPTURE(head_dim, tokens, rows);
        const int token_begin = block_size - tokens;
        const auto q_floats = random_floats(static_cast<std::size_t>(rows) * head_dim, 9);
        std::vector<bf16_t> q(q_floats.size());
        for (std::size_t i = 0; i < q.size(); ++i) q[i] = bf16_t(q_floats[i]);
        std::vector<float> scores(static_cast<std::size_t>(rows) * tokens);
        const bool tiles = gemm.uses_tiles(rows, head_dim);
        REQUIRE(gemm.qk_bf16(q.data(), rows, head_dim, block.data(), head_dim, token_begin, tokens, score_scale,
                             scores.data(), tokens) == (tiles ? 0 : gemm.qk_blocks(rows, head_dim, tokens)));
        // The row again in a call of its own, or where one row takes other products than these
        // rows (bf16 tiles), in the 16-row call that holds it.
        const bool own_call = gemm.uses_tiles(1, head_dim) == tiles;
        const int alone_rows = own_call ? 1 : 16;
        for (int r = 0; r < rows; ++r) {
          const int alone = own_call ? r : std::min(r, rows - 16);
          std::vector<float> one(static_cast<std::size_t>(alone_rows * tokens));
          gemm.qk_bf16(q.data() + alone * head_dim, alone_rows, head_dim, block.data(), head_dim, token_begin, tokens,
                       score_scale, one.data(), tokens);
          CAPTURE(r);
          REQUIRE(same_bits(one.data() + (r - alone) * tokens, scores.data() + r * tokens, static_cast<std::size_t>(tokens)));
          // The last token holds a NaN code in the FP8 case: NaN scores there, as the products say.
          const int checked = pagedattn::is_fp8_v<TestType> ? tokens - 1 : tokens;
          if (pagedattn::is_fp8_v<TestType>) REQUIRE(std::isnan(scores[static_cast<std::size_t>(r * tokens + checked)]));
          for (int t = 0; t < checked; ++t) {
            double dot = 0.0, magnitude = 0.0;
            for (int d = 0; d < head_dim; ++d) {
              const double product =
                  static_cast<double>(static_cast<float>(q[static_cast<std::size_t>(r * head_dim + d)])) *
                  static_cast<float>(block[Layout::key_index(head_dim, token_begin + t, d)]);
              dot += product;
              magnitude += product < 0 ? -product : product;
            }
            CAPTURE(t);
            // Float sums of exact products: within head_dim roundings of the magnitude.
            const double scale = static_cast<double>(score_scale) * gemm.value_scale;
            REQUIRE(std::abs(scores[static_cast<std::size_t>(r * tokens + t)] - scale * dot) <=
                    scale * (head_dim * 0x1p-24 * magnitude + 1e-30));
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: pv_bf16 multiplies probabilities rounded to bf16 (float64 reference), once per "
                   "register block, each row independent of the rows beside it, never the partner of an odd tail",
                   "[tile_gemm]", pagedattn::bf16_t, pagedattn::fp8_e4m3_t) {
  using pagedattn::bf16_t;
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  REQUIRE((gemm.pv_bf16 != nullptr) == (pagedattn::test::selected_isa >= IsaId::avx512bf16));
  if (gemm.pv_bf16 == nullptr) return;
  using Layout = pagedattn::KvBlockLayout<TestType>;
  for (const int head_dim : {16, 128, 256}) {
    std::vector<TestType> block = random_block<TestType>(head_dim, 41u + static_cast<unsigned>(head_dim));
    TestType* v_block = block.data() + block.size() / 2;
    if constexpr (pagedattn::is_fp8_v<TestType>) {
      // Every finite code, subnormals and the largest included.
      every_finite_code(v_block, block.size() / 2);
    }
    // The last position stands for one never written: NaN, outside every odd tail below.
    for (int d = 0; d < head_dim; ++d) {
      v_block[Layout::value_index(block_size, head_dim, block_size - 1, d)] =
          TestType(std::numeric_limits<float>::quiet_NaN());
    }
    for (const int tokens : {1, 16, 33, 47, 62}) {
      for (const int rows : {1, 4, 5, 8, 9, 33, 64, 100, 128}) {
        if (rows > gemm.max_rows) continue;  // past the step's rows (vector tiers)
        CAPTURE(head_dim, tokens, rows);
        // Odd tails end just before the NaN position, whose pair they share.
        const int token_begin = tokens % 2 != 0 ? block_size - 1 - tokens : block_size - 2 - tokens;
        auto p = random_floats(static_cast<std::size_t>(rows) * tokens, 10);
        for (float& x : p) x = std::abs(x);  // probabilities (any finite value would do)
        std::vector<float> acc(static_cast<std::size_t>(rows) * head_dim, 0.5f);
        const bool tiles = gemm.uses_tiles(rows, head_dim);
        REQUIRE(gemm.pv_bf16(p.data(), rows, tokens, v_block, block_size, head_dim, token_begin, tokens, acc.data(),
                             head_dim) == (tiles ? 0 : gemm.pv_blocks(rows, head_dim, tokens)));
        // The row again in a call of its own, or in the 16-row call that holds it (as in qk_bf16).
        const bool own_call = gemm.uses_tiles(1, head_dim) == tiles;
        const int alone_rows = own_call ? 1 : 16;
        for (int r = 0; r < rows; ++r) {
          const int alone = own_call ? r : std::min(r, rows - 16);
          std::vector<float> one(static_cast<std::size_t>(alone_rows * head_dim), 0.5f);
          gemm.pv_bf16(p.data() + alone * tokens, alone_rows, tokens, v_block, block_size, head_dim, token_begin,
                       tokens, one.data(), head_dim);
          CAPTURE(r);
          REQUIRE(same_bits(one.data() + (r - alone) * head_dim, acc.data() + r * head_dim,
                            static_cast<std::size_t>(head_dim)));
          for (int d = 0; d < head_dim; ++d) {
            double dot = 0.0, magnitude = 0.0;
            for (int t = 0; t < tokens; ++t) {
              const double product =
                  static_cast<double>(static_cast<float>(bf16_t(p[static_cast<std::size_t>(r * tokens + t)]))) *
                  static_cast<float>(v_block[Layout::value_index(block_size, head_dim, token_begin + t, d)]);
              dot += product;
              magnitude += product < 0 ? -product : product;
            }
            CAPTURE(d);
            // Float sums of exact products (rounded probabilities: unrounded ones miss by ~2^-9).
            const double expected = 0.5 + gemm.value_scale * dot;
            REQUIRE(std::abs(acc[static_cast<std::size_t>(r * head_dim + d)] - expected) <=
                    (tokens + 1) * 0x1p-24 * (0.5 + gemm.value_scale * magnitude));
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: pv_bf16 of probabilities already rounded gives the bits of pv_bf16 of floats, "
                   "reads no entry past num_tokens and writes none past the next multiple of 32",
                   "[tile_gemm]", pagedattn::bf16_t, pagedattn::fp8_e5m2_t) {
  using pagedattn::bf16_t;
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  REQUIRE((gemm.pv_bf16_rounded != nullptr) == (gemm.pv_bf16 != nullptr));
  if (gemm.pv_bf16 == nullptr) return;
  constexpr int stride = 128;      // a step's positions (the attention kernel's probs rows)
  constexpr int slack_rows = 16;   // rows a partial 16-row tile block may read past the last
  const bf16_t nan_code = bf16_t(std::numeric_limits<float>::quiet_NaN());
  for (const int head_dim : {32, 128}) {
    std::vector<TestType> block = random_block<TestType>(head_dim, 7u + static_cast<unsigned>(head_dim));
    const TestType* v_block = block.data() + block.size() / 2;
    for (const int tokens : {1, 16, 33, 47, 64}) {
      for (const int rows : {1, 5, 16, 17, 40, 64, 72, 128}) {
        if (rows > gemm.max_rows) continue;  // past the step's rows (vector tiers)
        CAPTURE(head_dim, tokens, rows);
        auto p = random_floats(static_cast<std::size_t>(rows) * tokens, 11);
        for (float& x : p) x = std::abs(x);
        // The same probabilities rounded, rows of `stride` whose entries past `tokens` (and whole
        // rows past `rows`) are NaN: any of them read into a product would show.
        std::vector<bf16_t> rounded(static_cast<std::size_t>(rows + slack_rows) * stride, nan_code);
        for (int r = 0; r < rows; ++r) {
          for (int t = 0; t < tokens; ++t) {
            rounded[static_cast<std::size_t>(r * stride + t)] = bf16_t(p[static_cast<std::size_t>(r * tokens + t)]);
          }
        }
        const int token_begin = block_size - tokens - tokens % 2;
        std::vector<float> from_floats(static_cast<std::size_t>(rows) * head_dim, 0.25f), from_rounded = from_floats;
        const int blocks = gemm.pv_bf16(p.data(), rows, tokens, v_block, block_size, head_dim, token_begin, tokens,
                                        from_floats.data(), head_dim);
        REQUIRE(gemm.pv_bf16_rounded(rounded.data(), rows, stride, v_block, block_size, head_dim, token_begin, tokens,
                                     from_rounded.data(), head_dim) == blocks);
        REQUIRE(same_bits(from_floats.data(), from_rounded.data(), from_floats.size()));
        const int may_zero = (tokens + 31) / 32 * 32;
        for (int r = 0; r < rows + slack_rows; ++r) {
          for (int t = r < rows ? may_zero : 0; t < stride; ++t) {
            CAPTURE(r, t);
            REQUIRE(rounded[static_cast<std::size_t>(r * stride + t)].bits() == nan_code.bits());
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("TileGemm: pv_bf16 calls of different row counts in turn on one scratch give the bits of "
                   "each call alone and write no row past their own",
                   "[tile_gemm]", pagedattn::bf16_t, pagedattn::fp8_e4m3_t) {
  // On AMX an FP8 lane under 16 rows reconfigures the tiles to its height, and a taller one back:
  // each call must find the tiles it needs whatever ran before it on the worker.
  const tile_gemm_test::Calls<TestType> gemm = selected_calls<TestType>();
  REQUIRE((gemm.pv_bf16_in_turn != nullptr) == (gemm.pv_bf16 != nullptr));
  if (gemm.pv_bf16 == nullptr) return;
  constexpr int head_dim = 64, tokens = 47, guard = 16;
  const std::vector<TestType> block = random_block<TestType>(head_dim, 31u);
  const TestType* v_block = block.data() + block.size() / 2;
  const int token_begin = block_size - tokens - 1;
  constexpr int row_counts[] = {4, 20, 4, 1, 16, 33, 15};
  constexpr int calls = static_cast<int>(std::size(row_counts));
  auto p = random_floats(static_cast<std::size_t>(std::ranges::max(row_counts)) * tokens, 17);
  for (float& x : p) x = std::abs(x);
  // Each call's acc is followed by `guard` rows of NaN that no call may write.
  std::vector<std::vector<float>> in_turn(calls);
  std::vector<float*> accs(calls);
  for (int i = 0; i < calls; ++i) {
    in_turn[i].assign(static_cast<std::size_t>(row_counts[i] + guard) * head_dim, std::numeric_limits<float>::quiet_NaN());
    std::fill_n(in_turn[i].begin(), row_counts[i] * head_dim, 0.5f);
    accs[i] = in_turn[i].data();
  }
  gemm.pv_bf16_in_turn(p.data(), row_counts, calls, tokens, v_block, block_size, head_dim, token_begin, tokens,
                       accs.data(), head_dim);
  for (int i = 0; i < calls; ++i) {
    CAPTURE(i, row_counts[i]);
    std::vector<float> alone(static_cast<std::size_t>(row_counts[i]) * head_dim, 0.5f);
    gemm.pv_bf16(p.data(), row_counts[i], tokens, v_block, block_size, head_dim, token_begin, tokens, alone.data(),
                 head_dim);
    REQUIRE(same_bits(alone.data(), in_turn[i].data(), alone.size()));
    for (std::size_t j = alone.size(); j < in_turn[i].size(); ++j) REQUIRE(std::isnan(in_turn[i][j]));
  }
}

TEST_CASE("VectorKit: bf16 rounding and FP8 to bf16 pair loads follow the instruction definitions",
          "[tile_gemm]") {
  const tile_gemm_test::KitCalls kit = selected_kit_calls();
  // The kits with bf16 pair products (avx512bf16, amx; amx_emulated in FMA) have them all.
  const bool dots = pagedattn::test::selected_isa >= IsaId::avx512bf16;
  REQUIRE((kit.round_to_bf16 != nullptr) == dots);
  REQUIRE((kit.e4m3_to_bf16 != nullptr) == dots);
  REQUIRE((kit.e5m2_to_bf16 != nullptr) == dots);
  if (!dots) return;
  SECTION("round_to_bf16: ties to even, NaN, infinities, overflow, subnormals; nothing past n") {
    const std::uint32_t special[] = {
        0x3F808000u, 0x3F818000u, 0x3F808001u, 0xBF818000u,  // ties to even (down, up), above a tie
        0x7F800001u, 0xFF800001u, 0x7FC00000u,               // NaNs (signalling, negative, quiet)
        0x7F800000u, 0xFF800000u, 0x7F7FFFFFu,               // infinities, the largest (rounds to inf)
        0x00000001u, 0x80400000u, 0x007FFFFFu,               // subnormals
        0x00800000u, 0x00000000u, 0x80000000u};              // smallest normal, zeros
    std::vector<float> x;
    for (const std::uint32_t bits : special) {
      float f;
      std::memcpy(&f, &bits, sizeof f);
      x.push_back(f);
    }
    const std::vector<float> random = random_floats(256, 5);
    x.insert(x.end(), random.begin(), random.end());
    for (std::size_t first = 0; first + 16 <= x.size(); first += 16) {
      for (int n = 0; n <= 16; ++n) {
        std::vector<pagedattn::bf16_t> out(17, pagedattn::bf16_t::from_bits(0xDEAD));
        kit.round_to_bf16(x.data() + first, n, out.data());
        for (std::size_t i = 0; i <= 16; ++i) {
          const std::uint16_t expected = static_cast<int>(i) < n ? definition_bf16(x[first + i]) : 0xDEAD;
          CAPTURE(first, n, i);
          REQUIRE(out[i].bits() == expected);
        }
      }
    }
  }
  SECTION("load_bf16_pairs: every FP8 code, exactly value_scale times its value (NaN stays NaN)") {
    const auto check = [](auto convert, auto code_type, float scale) {
      using Fp8 = decltype(code_type);
      std::vector<Fp8> codes(256);
      for (unsigned c = 0; c < 256; ++c) codes[c] = Fp8::from_bits(static_cast<std::uint8_t>(c));
      std::vector<pagedattn::bf16_t> out(256);
      convert(codes.data(), 256, out.data());
      for (unsigned c = 0; c < 256; ++c) {
        const float value = static_cast<float>(codes[c]);
        const float got = static_cast<float>(out[c]);
        CAPTURE(c, value, got);
        if (std::isnan(value)) {
          REQUIRE(std::isnan(got));
        } else {
          REQUIRE(got == value * scale);
          REQUIRE(std::signbit(got) == std::signbit(value));
        }
      }
    };
    check(kit.e4m3_to_bf16, pagedattn::fp8_e4m3_t{}, kit.e4m3_scale);
    check(kit.e5m2_to_bf16, pagedattn::fp8_e5m2_t{}, kit.e5m2_scale);
  }
}

TEST_CASE("RowSoftmax: exp to within a few ulps of float64, exactly 0 where masked or far below the "
          "maximum, NaN kept, the same probabilities rounded to bf16, huge logits", "[tile_gemm]") {
  const auto update = selected_kit_calls().softmax_update;
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr int n = 128;
  using pagedattn::bf16_t;
  // Within 8 float ulps (relative) of the float64 exp(x), or both 0, plus what rounding x (of
  // magnitude `magnitude`) to float moves it by.
  const auto near = [](double expected, float got, double magnitude = 0.0) {
    return std::abs(static_cast<double>(got) - expected) <= (8 + 2 * magnitude) * 0x1p-24 * std::abs(expected);
  };
  SECTION("every lane visible: the maximum of the scaled products, exp of their distance from it") {
    auto s = random_floats(n, 5);
    for (float& x : s) x *= 6.0f;
    s[50] = -1e4f;  // e^-3700 below the maximum: exactly 0 (as its float64 reference)
    const float scale = 0.37f;
    const std::vector<float> dots = s;
    float row_max = -inf, row_sum = 0.0f;
    REQUIRE(update(s.data(), n, 0, n, scale, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr) == 0.0f);
    float expected_max = -inf;
    for (const float x : dots) expected_max = std::max(expected_max, x * scale);
    REQUIRE(row_max == expected_max);  // exactly the largest logit
    double sum = 0.0;
    for (int t = 0; t < n; ++t) {
      const double expected = std::exp(static_cast<double>(dots[t]) * scale - expected_max);
      sum += expected;
      CAPTURE(t);
      REQUIRE(near(expected, s[t], std::abs(static_cast<double>(dots[t]) * scale) + std::abs(expected_max)));
    }
    REQUIRE(std::abs(row_sum - sum) <= 1e-5 * sum);
    // The same update rounding into bf16: each probability the bf16 of the float one.
    std::vector<float> again = dots;
    std::vector<bf16_t> probs(n);
    float max_again = -inf, sum_again = 0.0f;
    update(again.data(), n, 0, n, scale, 0.0f, 0.0f, 0.0f, max_again, sum_again, probs.data());
    REQUIRE(max_again == row_max);
    REQUIRE(sum_again == row_sum);
    for (int t = 0; t < n; ++t) {
      CAPTURE(t);
      REQUIRE(probs[t].bits() == definition_bf16(s[t]));
    }
    // A second tile with a larger maximum: the returned correction rescales the old sum.
    std::vector<float> next = dots;
    next[7] = 40.0f;
    const float old_max = row_max, old_sum = row_sum;
    const float correction = update(next.data(), n, 0, n, scale, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr);
    REQUIRE(row_max == 40.0f * scale);
    REQUIRE(near(std::exp(static_cast<double>(old_max) - row_max), correction, row_max));
    double next_sum = 0.0;
    for (int t = 0; t < n; ++t) next_sum += std::exp(static_cast<double>(t == 7 ? 40.0f : dots[t]) * scale - row_max);
    REQUIRE(std::abs(row_sum - (old_sum * correction + next_sum)) <= 1e-5 * row_sum);
  }
  SECTION("masked lanes, soft-cap and ALiBi: masked lanes exactly 0") {
    auto s = random_floats(n, 6);
    for (float& x : s) x *= 20.0f;
    const std::vector<float> dots = s;
    const float scale = 0.25f, softcap = 30.0f, slope = 0.125f, base = -3.0f;
    const int lo = 5, hi = 100;
    std::vector<bf16_t> probs(n, bf16_t(7.0f));
    float row_max = -inf, row_sum = 0.0f;
    update(s.data(), n, lo, hi, scale, softcap, slope, base, row_max, row_sum, probs.data());
    std::vector<double> logits(n);
    double top = -inf;
    for (int t = lo; t < hi; ++t) {
      logits[t] = softcap * std::tanh(static_cast<double>(dots[t]) * scale / softcap) + slope * (t + base);
      top = std::max(top, logits[t]);
    }
    REQUIRE(std::abs(row_max - top) <= 1e-5 * std::abs(top));
    double sum = 0.0;
    for (int t = 0; t < n; ++t) {
      CAPTURE(t);
      if (t < lo || t >= hi) {
        REQUIRE(probs[t].bits() == 0);
        continue;
      }
      const double expected = std::exp(logits[t] - top);
      sum += expected;
      REQUIRE(std::abs(static_cast<float>(probs[t]) - expected) <= (1e-4 + 0x1p-8) * expected);  // bf16
    }
    REQUIRE(std::abs(row_sum - sum) <= 1e-4 * sum);
  }
  SECTION("all visible logits -inf, a NaN, nothing visible") {
    std::vector<float> s(n, -inf);
    float row_max = -inf, row_sum = 0.0f;
    REQUIRE(update(s.data(), n, 0, n, 1.0f, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr) == 1.0f);
    REQUIRE(row_max == -inf);
    REQUIRE(row_sum == 0.0f);
    for (const float p : s) REQUIRE(p == 0.0f);
    s.assign(n, 1.0f);
    s[9] = std::numeric_limits<float>::quiet_NaN();
    update(s.data(), n, 0, n, 1.0f, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr);
    REQUIRE(std::isnan(s[9]));
    REQUIRE(std::isnan(row_sum));
    s.assign(n, 2.0f);
    float max_before = 3.0f, sum_before = 5.0f;
    REQUIRE(update(s.data(), n, 4, 4, 1.0f, 0.0f, 0.0f, 0.0f, max_before, sum_before, nullptr) == 1.0f);
    REQUIRE((max_before == 3.0f && sum_before == 5.0f));
    for (const float p : s) REQUIRE(p == 0.0f);
  }
  SECTION("logits near the float range's end: exp of their distances all the same") {
    std::vector<float> s(n, 3e38f);
    s[3] = 3.4e38f;
    s[4] = -3e38f;
    float row_max = -inf, row_sum = 0.0f;
    update(s.data(), n, 0, n, 1.0f, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr);
    REQUIRE(row_max == 3.4e38f);
    REQUIRE(s[3] == 1.0f);
    REQUIRE(s[4] == 0.0f);
    REQUIRE(s[0] == 0.0f);  // 4e37 below the maximum
    REQUIRE(row_sum == 1.0f);
    std::vector<float> close(n, -3e38f);
    close[0] = -2.9e38f;
    close[1] = std::nextafter(-2.9e38f, 0.0f);
    row_max = -inf;
    row_sum = 0.0f;
    update(close.data(), n, 0, n, 1.0f, 0.0f, 0.0f, 0.0f, row_max, row_sum, nullptr);
    REQUIRE(close[1] == 1.0f);
    REQUIRE(close[0] == 0.0f);  // one float ulp (about 2e31) below
    REQUIRE(close[2] == 0.0f);
  }
}

TEMPLATE_TEST_CASE("KvPrefetcher spans exactly the lines of a tile's K and V runs", "[tile_gemm]", float,
                   pagedattn::bf16_t, pagedattn::fp8_e4m3_t) {
  using Layout = pagedattn::KvBlockLayout<TestType>;
  constexpr std::size_t line = pagedattn::backend::KvPrefetcher<pagedattn::isa::scalar, TestType>::line_bytes;
  for (const int head_dim : {16, 128, 512}) {
    const std::size_t sub_block = Layout::sub_block_elements(block_size, head_dim);
    // 64-byte aligned sub-blocks, as a cache allocated by the caller normally is.
    std::vector<std::uint64_t> storage((2 * sub_block * sizeof(TestType) + line) / 8 + 8);
    auto* base = reinterpret_cast<TestType*>((reinterpret_cast<std::uintptr_t>(storage.data()) + line - 1) / line * line);
    for (const int first : {0, 16, 48}) {
      for (const int tokens : {16, block_size - first}) {
        CAPTURE(head_dim, first, tokens);
        std::set<std::uintptr_t> lines;
        Layout::for_each_token_run(block_size, head_dim, first, tokens, [&](std::size_t f, std::size_t count, bool v) {
          const auto begin = reinterpret_cast<std::uintptr_t>(base + (v ? sub_block : 0) + f);
          for (std::uintptr_t b = begin; b < begin + count * sizeof(TestType); b += line) lines.insert(b / line);
        });
        pagedattn::backend::KvPrefetcher<pagedattn::isa::scalar, TestType> prefetcher(base, base + sub_block, block_size, head_dim, first,
                                                              tokens);
        REQUIRE(prefetcher.lines() == lines.size());
        prefetcher.issue(3);
        REQUIRE(prefetcher.issued() == 3);
        prefetcher.issue(prefetcher.lines() + 5);  // past the end: stops (a hint, never a read)
        REQUIRE(prefetcher.issued() == lines.size());
      }
    }
  }
}

#endif
