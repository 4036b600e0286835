// TileGemm<Isa, CacheT> (attention's compute core) on one hot K/V tile: QK^T and P.V, 4 or 64 rows x
// 64 tokens x head dim 128 (and 64 rows x head dim 256), per ISA and cache type, direct, widened to
// floats first (as the kernel runs >= 16 rows) and, where a tier has them, the bf16 dot-product
// paths of bf16 queries (qk_bf16, pv_bf16). Counters: FLOP/s, fraction of the 1-worker FP32 FMA
// peak and of the 1-worker peak of the instruction the path multiplies with, K or V tile bytes/s.
#include <cstddef>

#include <pagedattn/core/minifloat.hpp>
#include <pagedattn/isa/tags.hpp>

namespace tile_gemm_bench {

/// TileGemm<Isa, CacheT>'s public functions (see gemm/tile_gemm.hpp).
template <class CacheT>
struct Calls {
  void (*qk)(const float* q, int rows, int q_stride, const CacheT* k_block, int head_dim, int token_begin,
             int num_tokens, float* scores, int score_stride, std::ptrdiff_t prefetch_bytes) noexcept;
  void (*pv)(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
             int token_begin, int num_tokens, float* acc, int acc_stride, std::ptrdiff_t prefetch_bytes) noexcept;
  void (*widen_keys)(const CacheT* k_block, int head_dim, int token_begin, int num_tokens, float* k_tile) noexcept;
  void (*widen_values)(const CacheT* v_block, int block_size, int head_dim, int token_begin, int num_tokens,
                       float* v_tile) noexcept;
  /// Null where TileGemm<Isa, CacheT>::dots_bf16_queries is false.
  void (*qk_bf16)(const pagedattn::bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                  int token_begin, int num_tokens, float score_scale, float* scores, int score_stride,
                  std::ptrdiff_t prefetch_bytes) noexcept;
  /// Null where TileGemm<Isa, CacheT>::dots_bf16_queries is false.
  void (*pv_bf16)(const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
                  int token_begin, int num_tokens, float* acc, int acc_stride, std::ptrdiff_t prefetch_bytes) noexcept;
};

/// Defined (explicitly instantiated) in the translation unit compiled for Isa.
template <class Isa, class CacheT>
Calls<CacheT> calls();

}  // namespace tile_gemm_bench

// This file is built twice over (see CMakeLists.txt): once per ISA with TILE_GEMM_BENCH_ISA set and
// that ISA's flags (the TileGemm headers need them), giving calls<Isa, CacheT>() only; and once with
// default flags, giving the cases.
#if defined(TILE_GEMM_BENCH_ISA)
// ---- ISA part: nothing else lives here, so no code built with its flags leaks elsewhere. ----
#include <cstdint>
#include <vector>

#include <pagedattn/backend/kernels.hpp>
#include <pagedattn/backend/step_geometry.hpp>

namespace tile_gemm_bench {

/// The step regions of one worker's scratch for bf16 queries on TileGemm<Isa, CacheT>, laid out
/// for head dim 512 (which covers the cases' 128 and 256: every region grows with the head dim),
/// allocated once.
template <class Isa, class CacheT>
pagedattn::backend::TileScratch step_scratch() noexcept {
  static const pagedattn::WorkerScratch layout =
      pagedattn::backend::StepGeometry<Isa, pagedattn::bf16_t, CacheT>::geometry(pagedattn::max_head_dim).worker;
  static std::vector<std::byte> storage(layout.bytes + 64);
  std::byte* base = storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
  return pagedattn::backend::TileScratch::in(base, layout);
}

template <class Isa, class CacheT>
Calls<CacheT> calls() {
  using gemm = pagedattn::backend::TileGemm<Isa, CacheT>;
  // qk and pv are templates (their after_block hook): plain calls through captureless lambdas.
  // qk_bf16 and pv_bf16 run in a worker's step scratch, set up around each call (AMX: the tile
  // configuration is loaded and released per call, as once per work item in the kernel).
  using QkBf16 = decltype(Calls<CacheT>::qk_bf16);
  using PvBf16 = decltype(Calls<CacheT>::pv_bf16);
  QkBf16 qk_bf16 = nullptr;
  PvBf16 pv_bf16 = nullptr;
  if constexpr (gemm::dots_bf16_queries) {
    qk_bf16 = [](const pagedattn::bf16_t* q, int rows, int q_stride, const CacheT* k_block, int head_dim,
                 int token_begin, int num_tokens, float score_scale, float* scores, int score_stride,
                 std::ptrdiff_t prefetch_bytes) noexcept {
      const pagedattn::backend::TileScratch scratch = step_scratch<Isa, CacheT>();
      gemm::begin(scratch);
      gemm::qk_bf16(q, rows, q_stride, k_block, head_dim, token_begin, num_tokens, score_scale, scores, score_stride,
                    scratch, prefetch_bytes);
      gemm::end(scratch);
    };
    pv_bf16 = [](const float* p, int rows, int p_stride, const CacheT* v_block, int block_size, int head_dim,
                 int token_begin, int num_tokens, float* acc, int acc_stride, std::ptrdiff_t prefetch_bytes) noexcept {
      const pagedattn::backend::TileScratch scratch = step_scratch<Isa, CacheT>();
      gemm::begin(scratch);
      gemm::pv_bf16(p, rows, p_stride, v_block, block_size, head_dim, token_begin, num_tokens, acc, acc_stride,
                    scratch, prefetch_bytes);
      gemm::end(scratch);
    };
  }
  return {[](auto... args) noexcept { gemm::qk(args...); }, [](auto... args) noexcept { gemm::pv(args...); },
          &gemm::widen_keys, &gemm::widen_values, qk_bf16, pv_bf16};
}

template Calls<float> calls<pagedattn::isa::TILE_GEMM_BENCH_ISA, float>();
template Calls<pagedattn::bf16_t> calls<pagedattn::isa::TILE_GEMM_BENCH_ISA, pagedattn::bf16_t>();
template Calls<pagedattn::fp8_e4m3_t> calls<pagedattn::isa::TILE_GEMM_BENCH_ISA, pagedattn::fp8_e4m3_t>();
template Calls<pagedattn::fp8_e5m2_t> calls<pagedattn::isa::TILE_GEMM_BENCH_ISA, pagedattn::fp8_e5m2_t>();

}  // namespace tile_gemm_bench

#else
// ---- Benchmark cases (default flags). ----
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <type_traits>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"
#include "support/memory.hpp"

namespace {

constexpr int block_size = 128;                                          // as in attention_bench
// Half of a vector tier's KV step (kv_tile_tokens of its tile geometry, 128), and the part that prefill widens and
// multiplies at a time at head dim 128 (AttentionKernel::widen_part_tokens).
constexpr int tokens = 64;
static_assert(tokens <= pagedattn::AttentionTraits<pagedattn::bf16_t, pagedattn::bf16_t, 128>::geometry(
                           pagedattn::IsaId::avx512).shape.kv_tile_tokens);

/// How a case multiplies.
enum class Path {
  direct,       ///< qk or pv on the cache tile.
  widened,      ///< As the kernel runs tiles of >= 16 rows of a non-f32 cache: widen the K (V)
                ///< tile to floats, then TileGemm<Isa, float>.
  bf16_queries  ///< qk_bf16 or pv_bf16, where the tier has them: the kernel's paths for bf16 queries
                ///< (pv_bf16 in tiles it does not widen).
};

template <class Isa, class CacheT>
void tile_benchmark(benchmark::State& state, bool pv, int rows, int head_dim, Path path) {
  const bool widened = path == Path::widened;
  using layout = pagedattn::KvBlockLayout<CacheT>;
  const tile_gemm_bench::Calls<CacheT> gemm = tile_gemm_bench::calls<Isa, CacheT>();
  const tile_gemm_bench::Calls<float> f32 = tile_gemm_bench::calls<Isa, float>();
  // One (block, KV head) of the cache: the K sub-block, then the V sub-block; tokens [0, 64) used.
  const std::size_t sub_block = layout::sub_block_elements(block_size, head_dim);
  auto cache = pagedattn_bench::allocate<CacheT>(2 * sub_block);
  pagedattn_bench::fill_normal(cache.get(), 2 * sub_block);
  const CacheT* k_block = cache.get();
  const CacheT* v_block = cache.get() + sub_block;
  const auto floats = [rows](int columns) { return static_cast<std::size_t>(rows) * columns; };
  auto q = pagedattn_bench::allocate<float>(floats(head_dim));
  pagedattn_bench::fill_normal(q.get(), floats(head_dim), 1.0f, 7);
  auto q_bf16 = pagedattn_bench::allocate<pagedattn::bf16_t>(floats(head_dim));
  pagedattn_bench::fill_normal(q_bf16.get(), floats(head_dim), 1.0f, 7);
  auto scores = pagedattn_bench::allocate<float>(floats(tokens));  // P for pv
  pagedattn_bench::fill_normal(scores.get(), floats(tokens), 0.05f, 9);
  auto acc = pagedattn_bench::allocate<float>(floats(head_dim));
  std::fill_n(acc.get(), floats(head_dim), 0.0f);
  auto kv_floats = pagedattn_bench::allocate<float>(static_cast<std::size_t>(tokens) * head_dim);
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    if (path == Path::bf16_queries && pv) {
      gemm.pv_bf16(scores.get(), rows, tokens, v_block, block_size, head_dim, 0, tokens, acc.get(), head_dim, 0);
    } else if (path == Path::bf16_queries) {
      gemm.qk_bf16(q_bf16.get(), rows, head_dim, k_block, head_dim, 0, tokens, 1.0f, scores.get(), tokens, 0);
    } else if (pv && widened) {
      gemm.widen_values(v_block, block_size, head_dim, 0, tokens, kv_floats.get());
      f32.pv(scores.get(), rows, tokens, kv_floats.get(), tokens, head_dim, 0, tokens, acc.get(), head_dim, 0);
    } else if (pv) {
      gemm.pv(scores.get(), rows, tokens, v_block, block_size, head_dim, 0, tokens, acc.get(), head_dim, 0);
    } else if (widened) {
      gemm.widen_keys(k_block, head_dim, 0, tokens, kv_floats.get());
      f32.qk(q.get(), rows, head_dim, kv_floats.get(), head_dim, 0, tokens, scores.get(), tokens, 0);
    } else {
      gemm.qk(q.get(), rows, head_dim, k_block, head_dim, 0, tokens, scores.get(), tokens, 0);
    }
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * rows * tokens * head_dim;
  state.counters["flop_per_s"] = pagedattn_bench::rate(flops);
  const auto& limits = pagedattn_bench::machine_limits();
  const pagedattn::DType operands = path == Path::bf16_queries ? pagedattn::DType::bf16 : pagedattn::DType::f32;
  timer.set_fraction(state, "fma_peak_fraction", flops, limits.fma(Isa::id, 1));
  timer.set_fraction(state, "multiply_peak_fraction", flops, limits.multiply_peak(Isa::id, operands, 1));
  state.counters["tile_bytes_per_s"] = pagedattn_bench::rate(static_cast<double>(tokens) * head_dim * sizeof(CacheT));
}

template <class Isa, class CacheT>
void add(const std::string& cache_name) {
  for (bool pv : {false, true}) {
    for (auto [rows, head_dim] : {std::pair{4, 128}, std::pair{64, 128}, std::pair{64, 256}}) {
      for (Path path : {Path::direct, Path::widened, Path::bf16_queries}) {
        if (path == Path::widened && (rows < 16 || std::is_same_v<CacheT, float>)) continue;
        if (path == Path::bf16_queries && tile_gemm_bench::calls<Isa, CacheT>().qk_bf16 == nullptr) continue;
        const char* suffix = path == Path::widened ? "_widened" : path == Path::bf16_queries ? "_bf16" : "";
        const std::string name = std::string(pv ? "pv" : "qk") + suffix + "/rows:" +
                                 std::to_string(rows) + "/tokens:" + std::to_string(tokens) + "/head_dim:" +
                                 std::to_string(head_dim) + "/" + cache_name + "/" +
                                 std::string(pagedattn::isa_name(Isa::id));
        benchmark::RegisterBenchmark(name.c_str(), [pv, rows, head_dim, path](benchmark::State& state) {
          tile_benchmark<Isa, CacheT>(state, pv, rows, head_dim, path);
        })->Unit(benchmark::kNanosecond);
      }
    }
  }
}

template <class Isa>
void register_isa() {
  if (!pagedattn::isa_available(Isa::id)) return;
  add<Isa, pagedattn::bf16_t>("bf16");
  add<Isa, pagedattn::fp8_e4m3_t>("fp8_e4m3");
  add<Isa, pagedattn::fp8_e5m2_t>("fp8_e5m2");
  add<Isa, float>("f32");
}

}  // namespace

int main(int argc, char** argv) {
  // TILE_GEMM_BENCH_ISA_<ISA> marks the ISA parts this build compiled (pagedattn_add_isa_parts).
  return pagedattn_bench::run_benchmarks(argc, argv, [] {
#if defined(TILE_GEMM_BENCH_ISA_AMX)
    register_isa<pagedattn::isa::amx>();
#endif
#if defined(TILE_GEMM_BENCH_ISA_AVX512BF16)
    register_isa<pagedattn::isa::avx512bf16>();
#endif
#if defined(TILE_GEMM_BENCH_ISA_AVX512)
    register_isa<pagedattn::isa::avx512>();
#endif
#if defined(TILE_GEMM_BENCH_ISA_AVX2)
    register_isa<pagedattn::isa::avx2>();
#endif
  });
}

#endif
