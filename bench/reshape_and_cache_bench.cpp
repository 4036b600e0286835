// reshape_and_cache per ISA: bf16 K/V of a Llama-3-8B layer (8 KV heads, head dim 128, block 128)
// into bf16 and FP8 caches, prefill and decode, inputs and cache cold (rotated over GiBs); bytes
// read + written per s, also as a fraction of the 1-worker copy bandwidth measured in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <pagedattn/pagedattn.hpp>

#include "support/machine_limits.hpp"
#include "support/memory.hpp"

namespace {

using pagedattn::bf16_t;
using pagedattn::fp8_e4m3_t;
using pagedattn::fp8_e5m2_t;

constexpr int num_kv_heads = 8;
constexpr int head_dim = 128;
constexpr int block_size = 128;
/// bf16 elements of K (or V) of one token.
constexpr std::size_t token_elements = std::size_t{num_kv_heads} * head_dim;
/// Bytes of the source pool: the "layers" of K and V inputs rotated over (about 4x the LLC).
constexpr std::size_t source_pool_bytes = std::size_t{2} << 30;
/// Bytes of the cache pool every case views as its cache type (about 8x the LLC).
constexpr std::size_t cache_pool_bytes = std::size_t{4} << 30;
/// Bytes of one cache line (for the line-traffic counter).
constexpr std::size_t line_bytes = 64;

/// Source and cache memory shared by every case (allocated and touched once per process).
struct Pools {
  pagedattn_bench::Buffer<bf16_t> source = pagedattn_bench::allocate<bf16_t>(source_pool_bytes / sizeof(bf16_t));
  pagedattn_bench::Buffer<std::byte> cache = pagedattn_bench::allocate<std::byte>(cache_pool_bytes);

  Pools() {
    pagedattn_bench::fill_normal(source.get(), source_pool_bytes / sizeof(bf16_t), 1.0f, 11);
    std::memset(cache.get(), 0, cache_pool_bytes);  // real pages, not the shared zero page
  }
};

const Pools& pools() {
  static const Pools instance;
  return instance;
}

/// One case: `tokens` new tokens per call; prefill = consecutive slots from a block start,
/// decode = one token per request at a random offset of a random block (distinct blocks).
struct Case {
  bool prefill;
  int tokens;
  float scale;  ///< k_scale = v_scale (applied to FP8 caches only).
};

/// Index of the cache line (counted from `cache`) that holds `element`.
template <class CacheT>
std::size_t line_of(const CacheT* cache, const CacheT* element) {
  return static_cast<std::size_t>(element - cache) * sizeof(CacheT) / line_bytes;
}

/// Distinct cache lines written by one call with `slots` (every head, K and V).
template <class CacheT>
std::size_t lines_touched(const pagedattn::KvCacheView<CacheT, head_dim>& cache, std::span<const std::int64_t> slots) {
  using Layout = pagedattn::KvBlockLayout<CacheT>;
  std::vector<std::size_t> lines;
  lines.reserve(slots.size() * num_kv_heads * 2 * head_dim);
  for (const std::int64_t slot : slots) {
    const std::int64_t block = slot / block_size;
    const int offset = static_cast<int>(slot % block_size);
    for (int h = 0; h < num_kv_heads; ++h) {
      const CacheT* key = cache.key_block(block, h);
      const CacheT* value = cache.value_block(block, h);
      for (int d = 0; d < head_dim; ++d) {
        lines.push_back(line_of(cache.data(), key + Layout::key_index(head_dim, offset, d)));
        lines.push_back(line_of(cache.data(), value + Layout::value_index(block_size, head_dim, offset, d)));
      }
    }
  }
  std::sort(lines.begin(), lines.end());
  return static_cast<std::size_t>(std::unique(lines.begin(), lines.end()) - lines.begin());
}

/// One case on `isa`: each iteration stores the next "layer" (its own inputs and cache blocks).
template <class CacheT>
void reshape_benchmark(benchmark::State& state, const Case& c, pagedattn::IsaId isa) {
  const Pools& memory = pools();
  const std::size_t block_bytes = *pagedattn::kv_cache_elements(1, num_kv_heads, block_size, head_dim) * sizeof(CacheT);
  const auto num_blocks = static_cast<std::int64_t>(cache_pool_bytes / block_bytes);
  const pagedattn::KvCacheView<CacheT, head_dim> cache(reinterpret_cast<CacheT*>(memory.cache.get()), num_blocks,
                                                       num_kv_heads, block_size);
  const auto tokens = static_cast<std::size_t>(c.tokens);
  const std::size_t layer_source_elements = 2 * tokens * token_elements;  // K then V
  const std::int64_t layer_blocks = c.prefill ? (c.tokens + block_size - 1) / block_size : c.tokens;
  // Layers: as many as the source pool holds, and (prefill) as the cache holds disjointly; decode
  // layers draw their blocks at random from the whole cache.
  std::int64_t layers = static_cast<std::int64_t>(source_pool_bytes / (layer_source_elements * sizeof(bf16_t)));
  if (c.prefill) layers = std::min(layers, num_blocks / layer_blocks);
  layers = std::min<std::int64_t>(layers, 512);

  std::mt19937_64 rng(17);
  std::vector<std::int64_t> slot_mappings(static_cast<std::size_t>(layers) * tokens);
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(num_blocks));
  std::iota(blocks.begin(), blocks.end(), std::int64_t{0});
  for (std::int64_t l = 0; l < layers; ++l) {
    std::int64_t* slots = slot_mappings.data() + l * c.tokens;
    if (c.prefill) {
      for (std::size_t t = 0; t < tokens; ++t) slots[t] = l * layer_blocks * block_size + static_cast<std::int64_t>(t);
    } else {
      // A partial shuffle: the first `tokens` entries become distinct random blocks.
      for (std::size_t t = 0; t < tokens; ++t) {
        std::uniform_int_distribution<std::size_t> pick(t, blocks.size() - 1);
        std::swap(blocks[t], blocks[pick(rng)]);
        slots[t] = blocks[t] * block_size + static_cast<std::int64_t>(rng() % block_size);
      }
    }
  }

  std::int64_t layer = 0;
  pagedattn_bench::LoopTimer timer;
  for (auto _ : state) {
    const bf16_t* key = memory.source.get() + static_cast<std::size_t>(layer) * layer_source_elements;
    const auto key_view = pagedattn::TokenHeadsView<const bf16_t>::packed(key, c.tokens, num_kv_heads, head_dim);
    const auto value_view =
        pagedattn::TokenHeadsView<const bf16_t>::packed(key + tokens * token_elements, c.tokens, num_kv_heads, head_dim);
    pagedattn::reshape_and_cache(key_view, value_view,
                                 std::span<const std::int64_t>(slot_mappings.data() + layer * c.tokens, tokens), cache,
                                 c.scale, c.scale, isa);
    benchmark::ClobberMemory();
    layer = (layer + 1) % layers;
  }

  // Bytes of K+V read from the source plus bytes of K+V written to the cache, over the copy
  // bandwidth of one worker (reshape_and_cache is single-threaded).
  const double bytes = static_cast<double>(2 * tokens * token_elements * (sizeof(bf16_t) + sizeof(CacheT)));
  // Lines of layer 0 (every layer has the same pattern), counted once per case and cache type.
  static std::map<std::pair<bool, int>, std::size_t> lines_per_case;
  const auto [entry, added] = lines_per_case.try_emplace({c.prefill, c.tokens}, 0);
  if (added) entry->second = lines_touched(cache, {slot_mappings.data(), tokens});
  const double line_traffic = static_cast<double>(2 * tokens * token_elements * sizeof(bf16_t)) +
                              static_cast<double>(entry->second * line_bytes);
  const double copy = pagedattn_bench::machine_limits().copy(1);  // reshape_and_cache runs on one thread
  state.counters["bytes_per_s"] = pagedattn_bench::rate(bytes);
  state.counters["copy_bw_fraction"] = timer.fraction(state, bytes, copy);
  // The same with the written bytes counted as whole cache lines: what memory moves when each
  // token fills only part of its lines (decode: 2-4 bytes per line of a K group).
  state.counters["line_copy_bw_fraction"] = timer.fraction(state, line_traffic, copy);
  state.counters["layers"] = static_cast<double>(layers);
}

/// Registers `<shape>/<cache type>/<isa>` (and the scale when it is not the default).
template <class CacheT>
void add(const std::string& shape, const std::string& type, const Case& c, pagedattn::IsaId isa,
         bool name_scale = false) {
  std::string name = shape + "/" + type;
  if (name_scale) name += "/scale:" + std::to_string(c.scale).substr(0, 4);
  name += "/" + std::string(pagedattn::isa_name(isa));
  benchmark::RegisterBenchmark(name.c_str(), [c, isa](benchmark::State& state) {
    reshape_benchmark<CacheT>(state, c, isa);
  })->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void register_all() {
  // Power-of-two default scale; 0.37 shows a general scale (exact division) on FP8.
  constexpr float scale = 0.5f;
  for (const pagedattn::IsaId isa : {pagedattn::IsaId::avx512, pagedattn::IsaId::avx2, pagedattn::IsaId::scalar}) {
    if (!pagedattn::isa_available(isa)) continue;
    for (const bool prefill : {true, false}) {
      const Case c{prefill, prefill ? 4096 : 256, scale};
      const std::string shape = prefill ? "prefill/tokens:4096" : "decode/requests:256";
      add<bf16_t>(shape, "bf16", c, isa);
      add<fp8_e4m3_t>(shape, "fp8_e4m3", c, isa);
      add<fp8_e5m2_t>(shape, "fp8_e5m2", c, isa);
      add<fp8_e4m3_t>(shape, "fp8_e4m3", Case{c.prefill, c.tokens, 0.37f}, isa, true);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return pagedattn_bench::run_benchmarks(argc, argv, register_all);
}
