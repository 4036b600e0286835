// read_cache_token: every token reshape_and_cache stored reads back as its value (bit for bit for
// float/bf16/fp16 caches, the independently rounded FP8 code times the scale for FP8 caches), and
// bad arguments are errors before anything is written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "minifloat_reference.hpp"
#include "pagedattn/cache/read_cache_token.hpp"
#include "pagedattn/cache/reshape_and_cache.hpp"
#include "reference_formats.hpp"

using namespace pagedattn;

namespace {

/// The value a cache of `CacheT` holds for input `x` stored with `scale`, read back dequantised,
/// from the independent reference codec (mfref) for FP8 and exactly `x` otherwise.
template <class CacheT>
float expected_read(float x, float scale) {
  if constexpr (std::is_same_v<CacheT, fp8_e4m3_t> || std::is_same_v<CacheT, fp8_e5m2_t>) {
    using Spec = pagedattn::test::reference_format_t<CacheT>;
    const std::uint32_t code = mfref::encode<Spec>(std::bit_cast<std::uint32_t>(x / scale));
    return std::bit_cast<float>(mfref::decode<Spec>(code)) * scale;
  } else {
    return x;
  }
}

}  // namespace

TEMPLATE_TEST_CASE("read_cache_token reads back what reshape_and_cache stored, dequantised", "[cache]", float,
                   bf16_t, fp16_t, fp8_e4m3_t, fp8_e5m2_t) {
  using CacheT = TestType;
  using Input = std::conditional_t<is_fp8_v<CacheT>, bf16_t, CacheT>;
  constexpr int dim = 48, block = 32, blocks = 5, heads = 3, tokens = 70;
  std::vector<CacheT> memory(*kv_cache_elements(blocks, heads, block, dim));
  const KvCacheView<CacheT, dim> cache(memory.data(), blocks, heads, block);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<Input> key(tokens * heads * dim), value(key.size());
  for (Input& x : key) x = Input(normal(rng));
  for (Input& x : value) x = Input(normal(rng));
  std::vector<std::int64_t> slots(blocks * block);
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int64_t>(i);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);
  const float k_scale = is_fp8_v<CacheT> ? 0.37f : 1.0f, v_scale = is_fp8_v<CacheT> ? 1.9f : 1.0f;
  reshape_and_cache(TokenHeadsView<const Input>::packed(key.data(), tokens, heads, dim),
                    TokenHeadsView<const Input>::packed(value.data(), tokens, heads, dim), slots, cache, k_scale,
                    v_scale);
  std::vector<float> k(dim), v(dim);
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      read_cache_token(KvCacheView<const CacheT, dim>(cache), slots[static_cast<std::size_t>(t)], h, k, v, k_scale,
                       v_scale);
      for (int d = 0; d < dim; ++d) {
        INFO("token " << t << " head " << h << " dim " << d);
        const std::size_t i = static_cast<std::size_t>((t * heads + h) * dim + d);
        REQUIRE(k[static_cast<std::size_t>(d)] == expected_read<CacheT>(static_cast<float>(key[i]), k_scale));
        REQUIRE(v[static_cast<std::size_t>(d)] == expected_read<CacheT>(static_cast<float>(value[i]), v_scale));
      }
    }
  }
  // Only K, only V.
  std::vector<float> only(dim, -1.0f);
  read_cache_token(cache, slots[0], 0, only, {}, k_scale, v_scale);
  CHECK(only[0] == expected_read<CacheT>(static_cast<float>(key[0]), k_scale));
  read_cache_token(cache, slots[0], 0, {}, only, k_scale, v_scale);
  CHECK(only[0] == expected_read<CacheT>(static_cast<float>(value[0]), v_scale));
}

TEST_CASE("read_cache_token rejects bad arguments before writing; non-FP8 caches ignore the scales", "[cache]") {
  constexpr int dim = 32, block = 16;
  std::vector<bf16_t> memory(*kv_cache_elements(2, 2, block, dim), bf16_t(1.5f));
  const KvCacheView<const bf16_t, dim> cache(memory.data(), 2, 2, block);
  std::vector<float> k(dim, -7.0f), v(dim, -7.0f), short_one(dim - 1, -7.0f);
  const auto rejected = [&](std::int64_t slot, int head, std::span<float> key, const char* argument) {
    INFO(argument);
    const Status status = validate_read_cache_token(cache, slot, head, key, v);
    CHECK(status.argument() == argument);
    CHECK_THROWS_AS(read_cache_token(cache, slot, head, key, v), Error);
    for (float x : v) CHECK(x == -7.0f);
  };
  rejected(-1, 0, k, "slot");
  rejected(2 * block, 0, k, "slot");
  rejected(0, 2, k, "kv_head");
  rejected(0, -1, k, "kv_head");
  rejected(0, 0, short_one, "key.size()");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  read_cache_token(cache, 2 * block - 1, 1, k, v, nan, 0.0f);  // ignored for bf16
  CHECK(k[0] == 1.5f);
  CHECK(v[dim - 1] == 1.5f);

  std::vector<fp8_e4m3_t> codes(*kv_cache_elements(1, 1, block, dim), fp8_e4m3_t(1.0f));
  const KvCacheView<const fp8_e4m3_t, dim> fp8(codes.data(), 1, 1, block);
  CHECK(validate_read_cache_token(fp8, 0, 0, k, v, 0.0f, 1.0f).argument() == "k_scale");
  CHECK(validate_read_cache_token(fp8, 0, 0, k, v, 1.0f, nan).argument() == "v_scale");
  read_cache_token(fp8, 3, 0, k, v, 0.5f, 4.0f);
  CHECK(k[5] == 0.5f);
  CHECK(v[5] == 4.0f);
}

TEST_CASE("runtime head dim: reshape_and_cache and read_cache_token on a dynamic_head_dim view", "[cache]") {
  // Head dim 48 given at run time: the same bytes as the typed view, read back the same.
  constexpr int dim = 48, block = 16, blocks = 3, heads = 2, tokens = 20;
  std::vector<fp8_e5m2_t> typed_memory(*kv_cache_elements(blocks, heads, block, dim));
  std::vector<fp8_e5m2_t> runtime_memory(typed_memory.size());
  const KvCacheView<fp8_e5m2_t, dim> typed(typed_memory.data(), blocks, heads, block);
  const KvCacheView<fp8_e5m2_t, dynamic_head_dim> runtime(runtime_memory.data(), blocks, heads, block, dim);
  REQUIRE(runtime.head_dim() == dim);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> key(tokens * heads * dim), value(key.size());
  for (float& x : key) x = normal(rng);
  for (float& x : value) x = normal(rng);
  std::vector<std::int64_t> slots(tokens);
  for (int t = 0; t < tokens; ++t) slots[static_cast<std::size_t>(t)] = 2 * t + 1;
  const auto key_view = TokenHeadsView<const float>::packed(key.data(), tokens, heads, dim);
  const auto value_view = TokenHeadsView<const float>::packed(value.data(), tokens, heads, dim);
  reshape_and_cache(key_view, value_view, slots, typed, 0.5f, 2.0f);
  reshape_and_cache(key_view, value_view, slots, runtime, 0.5f, 2.0f);
  CHECK(std::memcmp(typed_memory.data(), runtime_memory.data(), typed_memory.size()) == 0);
  std::vector<float> k(dim), v(dim);
  read_cache_token(runtime, slots[7], 1, k, v, 0.5f, 2.0f);
  for (int d = 0; d < dim; ++d) {
    const std::size_t i = static_cast<std::size_t>((7 * heads + 1) * dim + d);
    CHECK(k[static_cast<std::size_t>(d)] == expected_read<fp8_e5m2_t>(key[i], 0.5f));
    CHECK(v[static_cast<std::size_t>(d)] == expected_read<fp8_e5m2_t>(value[i], 2.0f));
  }
  // A key of another head dim is refused against the runtime view's.
  const auto narrow = TokenHeadsView<const float>::packed(key.data(), tokens, heads, 32);
  CHECK(validate_reshape_and_cache(narrow, narrow, slots, runtime, 0.5f, 2.0f).argument() == "key.head_dim");
  CHECK_THROWS_AS((KvCacheView<fp8_e5m2_t, dynamic_head_dim>(runtime_memory.data(), blocks, heads, block, 40)), Error);
}
