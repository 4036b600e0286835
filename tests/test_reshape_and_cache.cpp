// reshape_and_cache on the ISA chosen with --isa: written elements sit where KvBlockLayout says
// with the expected value (FP8: the independent reference's, whatever the caller's MXCSR), other
// cache bytes keep their canary, the bytes match the scalar ISA's, and bad input throws.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "minifloat_reference.hpp"
#include "mxcsr_scope.hpp"
#include "pagedattn/cache/reshape_and_cache.hpp"
#include "reference_formats.hpp"
#include "test_support.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace pagedattn;
using pagedattn::test::selected_isa;

namespace {

/// An (input type, cache type) combination under test.
template <class Input, class Cache>
struct Combo {
  using input_type = Input;
  using cache_type = Cache;
};

using FloatToFloat = Combo<float, float>;
using Bf16ToBf16 = Combo<bf16_t, bf16_t>;
using Fp16ToFp16 = Combo<fp16_t, fp16_t>;
using FloatToE4m3 = Combo<float, fp8_e4m3_t>;
using FloatToE5m2 = Combo<float, fp8_e5m2_t>;
using Bf16ToE4m3 = Combo<bf16_t, fp8_e4m3_t>;
using Bf16ToE5m2 = Combo<bf16_t, fp8_e5m2_t>;
using Fp16ToE4m3 = Combo<fp16_t, fp8_e4m3_t>;
using Fp16ToE5m2 = Combo<fp16_t, fp8_e5m2_t>;

using pagedattn::test::ReferenceFormat;

/// The value the cache must hold for input `x`: x itself, or for an FP8 cache the independent
/// reference's code of x / scale (the float quotient rounded to nearest even without DAZ/FTZ, as
/// computed under the default MXCSR, which the tests keep outside the calls they check).
template <class InputT, class CacheT>
CacheT stored_value(InputT x, float scale) {
  if constexpr (is_fp8_v<CacheT>) {
    float value = 0.0f;
    if constexpr (std::is_same_v<InputT, float>) {
      value = x;
    } else {
      value = std::bit_cast<float>(mfref::decode<typename ReferenceFormat<InputT>::type>(x.bits()));
    }
    const std::uint32_t code =
        mfref::encode<typename ReferenceFormat<CacheT>::type>(std::bit_cast<std::uint32_t>(value / scale));
    return CacheT::from_bits(static_cast<std::uint8_t>(code));
  } else {
    return x;
  }
}

/// Input values covering every conversion path: specials, saturation, subnormals, a wide spread.
template <class T>
std::vector<T> random_inputs(std::size_t count, std::mt19937& rng) {
  // 0x1.d9999cp+0 / 0.037 lies just above an E4M3 tie; the float subnormals reach the FP8 range
  // with the smallest scales the tests use (below 2^-117).
  const float specials[] = {0.0f, -0.0f, 448.0f, 464.0f, -465.0f, 57344.0f, 1.0e6f, 0x1p-9f,
                            0x1p-17f, 0x1.8p-10f, 0x1.d9999cp+0f, 0x1.8p-128f, -0x1p-130f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN()};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 10);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(specials) - 1);
  std::uniform_int_distribution<int> percent(0, 99);
  std::vector<T> values;
  values.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float v = percent(rng) < 3 ? specials[pick(rng)] : std::ldexp(normal(rng), exponent(rng));
    if constexpr (std::is_same_v<T, float>) {
      values.push_back(v);
    } else {
      values.push_back(T(v));
    }
  }
  return values;
}

/// A canary cache: byte i holds a pattern byte that differs between neighbours.
template <class CacheT>
std::vector<CacheT> canary_cache(std::size_t elements) {
  std::vector<CacheT> cache(elements);
  auto* bytes = reinterpret_cast<unsigned char*>(cache.data());
  for (std::size_t i = 0; i < elements * sizeof(CacheT); ++i) {
    bytes[i] = static_cast<unsigned char>((i * 151u + 0x5Au) & 0xFFu);
  }
  return cache;
}

/// Cache shape and the input strides' padding (elements).
struct Shape {
  std::int64_t num_blocks;
  int num_kv_heads;
  int block_size;
  std::int64_t head_padding;   ///< head_stride = head_dim + head_padding
  std::int64_t token_padding;  ///< token_stride = heads * head_stride + token_padding
};

/// Fails with a description of the first element where `actual` and `expected` differ.
template <class CacheT, int HeadDim>
void require_same_bytes(const std::vector<CacheT>& actual, const std::vector<CacheT>& expected,
                        const Shape& shape, const char* what) {
  REQUIRE(actual.size() == expected.size());
  if (std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(CacheT)) == 0) return;
  const std::size_t sub_block = static_cast<std::size_t>(shape.block_size) * HeadDim;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(CacheT)) != 0) {
      const std::size_t per_block = sub_block * 2 * static_cast<std::size_t>(shape.num_kv_heads);
      FAIL(what << ": first difference at element " << i << " (block " << i / per_block
                << ", head " << (i % per_block) / (2 * sub_block) << ", "
                << ((i % (2 * sub_block)) < sub_block ? "K" : "V") << " index "
                << i % sub_block << "), cache block_size " << shape.block_size << ", head_dim "
                << HeadDim);
    }
  }
}

/// Runs reshape_and_cache on `isa` into a copy of `initial` placed `misalignment` bytes past a
/// 64-byte boundary (the vector back-ends write whole groups differently into 64-byte aligned
/// caches) and returns the cache's final contents.
template <class CacheT, int HeadDim, class InputT>
std::vector<CacheT> write_at(std::size_t misalignment, const std::vector<CacheT>& initial,
                             const Shape& shape, const TokenHeadsView<InputT>& key,
                             const TokenHeadsView<InputT>& value,
                             const std::vector<std::int64_t>& slots, float k_scale, float v_scale,
                             IsaId isa) {
  const std::size_t bytes = initial.size() * sizeof(CacheT);
  std::vector<std::byte> storage(bytes + 128);
  const auto base = reinterpret_cast<std::uintptr_t>(storage.data());
  std::byte* placed = storage.data() + ((64 - base % 64) % 64) + misalignment;
  std::memcpy(placed, initial.data(), bytes);
  const KvCacheView<CacheT, HeadDim> view(reinterpret_cast<CacheT*>(placed), shape.num_blocks,
                                          shape.num_kv_heads, shape.block_size);
  reshape_and_cache(key, value, slots, view, k_scale, v_scale, isa);
  std::vector<CacheT> result(initial.size());
  std::memcpy(static_cast<void*>(result.data()), placed, bytes);
  return result;
}

/// Runs a write as it is (check_write's default environment).
struct AsIs {
  template <class Write>
  void operator()(Write&& write) const {
    write();
  }
};

/// Writes `slots` tokens of random input on the selected ISA into a canary cache (64-byte
/// aligned, and not) and checks every byte of the cache; then checks the scalar ISA writes the
/// same bytes. `environment(write)` runs each reshape_and_cache call (`write()`); the expected
/// values are computed outside it.
template <class InputT, class CacheT, int HeadDim, class Environment = AsIs>
void check_write(const Shape& shape, const std::vector<std::int64_t>& slots, float k_scale,
                 float v_scale, std::mt19937& rng, const Environment& environment = {}) {
  using Layout = KvBlockLayout<CacheT>;
  const auto num_tokens = static_cast<std::int64_t>(slots.size());
  const std::int64_t head_stride = HeadDim + shape.head_padding;
  const std::int64_t token_stride = shape.num_kv_heads * head_stride + shape.token_padding;
  const auto input_size =
      static_cast<std::size_t>(std::max<std::int64_t>(1, num_tokens * token_stride));
  std::vector<InputT> keys = random_inputs<InputT>(input_size, rng);
  std::vector<InputT> values = random_inputs<InputT>(input_size, rng);
  const TokenHeadsView<InputT> key{keys.data(), num_tokens, shape.num_kv_heads, HeadDim,
                                   token_stride, head_stride};
  const TokenHeadsView<InputT> value{values.data(), num_tokens, shape.num_kv_heads, HeadDim,
                                     token_stride, head_stride};

  const std::size_t elements =
      *kv_cache_elements(shape.num_blocks, shape.num_kv_heads, shape.block_size, HeadDim);
  const std::vector<CacheT> untouched = canary_cache<CacheT>(elements);

  // Expected: the canary, with every written element replaced at its KvBlockLayout position.
  std::vector<CacheT> expected = untouched;
  const std::size_t sub_block = Layout::sub_block_elements(shape.block_size, HeadDim);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const std::int64_t slot = slots[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    const std::int64_t block = slot / shape.block_size;
    const int offset = static_cast<int>(slot % shape.block_size);
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      const std::size_t key_base =
          (static_cast<std::size_t>(block) * static_cast<std::size_t>(shape.num_kv_heads) +
           static_cast<std::size_t>(h)) * 2 * sub_block;
      for (int d = 0; d < HeadDim; ++d) {
        expected[key_base + Layout::key_index(HeadDim, offset, d)] =
            stored_value<InputT, CacheT>(key.row(t, h)[d], k_scale);
        expected[key_base + sub_block + Layout::value_index(shape.block_size, HeadDim, offset, d)] =
            stored_value<InputT, CacheT>(value.row(t, h)[d], v_scale);
      }
    }
  }

  for (const std::size_t misalignment : {std::size_t{0}, std::size_t{32}}) {
    INFO("cache " << misalignment << " bytes past a 64-byte boundary");
    std::vector<CacheT> written;
    environment([&] {
      written = write_at<CacheT, HeadDim>(misalignment, untouched, shape, key, value, slots, k_scale,
                                          v_scale, selected_isa);
    });
    require_same_bytes<CacheT, HeadDim>(written, expected, shape, "selected ISA vs expected");
    if (selected_isa != IsaId::scalar) {
      std::vector<CacheT> scalar;
      environment([&] {
        scalar = write_at<CacheT, HeadDim>(misalignment, untouched, shape, key, value, slots,
                                           k_scale, v_scale, IsaId::scalar);
      });
      require_same_bytes<CacheT, HeadDim>(written, scalar, shape, "selected ISA vs scalar ISA");
    }
  }
}

/// Distinct random slots (about a third of the cache, at most 48) in random order, with
/// negative (skipped) entries mixed in: decode-like scattered single tokens.
std::vector<std::int64_t> scattered_slots(const Shape& shape, std::mt19937& rng) {
  const std::int64_t capacity = shape.num_blocks * shape.block_size;
  std::vector<std::int64_t> all(static_cast<std::size_t>(capacity));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  std::shuffle(all.begin(), all.end(), rng);
  const std::size_t count = static_cast<std::size_t>(std::min<std::int64_t>(48, capacity / 3));
  const std::int64_t negatives[] = {-1, -2, -1000, std::numeric_limits<std::int64_t>::min()};
  std::vector<std::int64_t> slots;
  for (std::size_t i = 0; i < count; ++i) {
    if (i % 6 == 3) slots.push_back(negatives[(i / 6) % 4]);
    slots.push_back(all[i]);
  }
  return slots;
}

/// Prefill-like runs: each (start position, length) sequence gets fresh physical blocks in a
/// shuffled order; position p maps to block p / block_size at offset p % block_size. Padding
/// (-1) separates sequences. Sets shape.num_blocks to what the sequences need plus one spare.
std::vector<std::int64_t> sequence_slots(Shape& shape, std::mt19937& rng) {
  const int bs = shape.block_size;
  const std::pair<int, int> sequences[] = {
      {0, bs + 21},   // a whole block, then a whole group and 5 tokens of the next block
      {5, 40},        // starts inside a group
      {bs - 3, 7},    // crosses a block boundary (runs of 3 and 4)
      {17, 2},        // an odd first token, then an even one
      {2, 1},         // a single token
      {33, 31},       // an odd lane start, then whole groups
  };
  std::int64_t needed = 0;
  for (const auto& [start, length] : sequences) needed += (start + length + bs - 1) / bs;
  shape.num_blocks = needed + 1;
  std::vector<std::int64_t> physical(static_cast<std::size_t>(shape.num_blocks));
  std::iota(physical.begin(), physical.end(), std::int64_t{0});
  std::shuffle(physical.begin(), physical.end(), rng);
  std::size_t next_block = 0;
  std::vector<std::int64_t> slots;
  for (const auto& [start, length] : sequences) {
    const std::size_t first_block = next_block;
    next_block += static_cast<std::size_t>((start + length + bs - 1) / bs);
    for (int p = start; p < start + length; ++p) {
      slots.push_back(physical[first_block + static_cast<std::size_t>(p / bs)] * bs + p % bs);
    }
    slots.push_back(-1);
  }
  return slots;
}

/// Both slot patterns on one cache configuration.
template <class InputT, class CacheT, int HeadDim>
void check_configuration(int block_size, int num_kv_heads, std::int64_t head_padding,
                         std::int64_t token_padding, std::uint32_t seed) {
  INFO("head_dim " << HeadDim << ", block_size " << block_size << ", heads " << num_kv_heads);
  std::mt19937 rng(seed);
  Shape shape{0, num_kv_heads, block_size, head_padding, token_padding};
  {
    INFO("prefill-like sequences");
    const std::vector<std::int64_t> slots = sequence_slots(shape, rng);
    check_write<InputT, CacheT, HeadDim>(shape, slots, 0.37f, 2.5f, rng);
  }
  if constexpr (is_fp8_v<CacheT>) {
    // Powers of two: the vector tiers quantize bf16 groups in registers, without staging; a
    // single non-power-of-two scale sends both K and V back to the staged path.
    INFO("prefill-like sequences, power-of-two scales");
    const std::vector<std::int64_t> slots = sequence_slots(shape, rng);
    check_write<InputT, CacheT, HeadDim>(shape, slots, 0.5f, 4.0f, rng);
    check_write<InputT, CacheT, HeadDim>(shape, slots, 2.0f, 0.37f, rng);
  }
  {
    INFO("scattered single tokens");
    shape.num_blocks = 5;
    const std::vector<std::int64_t> slots = scattered_slots(shape, rng);
    check_write<InputT, CacheT, HeadDim>(shape, slots, 1.0f, 0.0625f, rng);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("reshape_and_cache writes exactly the target elements, in layout order",
                   "[reshape_and_cache]", FloatToFloat, Bf16ToBf16, Fp16ToFp16, FloatToE4m3,
                   FloatToE5m2, Bf16ToE4m3, Bf16ToE5m2, Fp16ToE4m3, Fp16ToE5m2) {
  using InputT = typename TestType::input_type;
  using CacheT = typename TestType::cache_type;
  check_configuration<InputT, CacheT, 16>(16, 2, 16, 8, 1);
  check_configuration<InputT, CacheT, 32>(2176, 1, 0, 0, 2);
  check_configuration<InputT, CacheT, 64>(32, 3, 16, 8, 3);
  check_configuration<InputT, CacheT, 80>(48, 2, 32, 0, 4);
  check_configuration<InputT, CacheT, 128>(128, 2, 0, 24, 5);
  check_configuration<InputT, CacheT, 256>(16, 2, 16, 8, 6);
  check_configuration<InputT, CacheT, 512>(32, 1, 16, 8, 7);
}

#if defined(__x86_64__)
namespace {

using namespace pagedattn::test;  // the MXCSR settings (mxcsr_scope.hpp)

/// check_write environment: runs each write with MXCSR = `value` and requires the call to leave
/// the control bits as they were.
struct UnderMxcsr {
  unsigned value;

  template <class Write>
  void operator()(Write&& write) const {
    const MxcsrScope caller(value);
    write();
    REQUIRE((_mm_getcsr() & mxcsr_control_bits) == value);
  }
};

}  // namespace

TEMPLATE_TEST_CASE("reshape_and_cache into FP8 stores the same codes under every caller MXCSR",
                   "[reshape_and_cache][mxcsr]", FloatToE4m3, FloatToE5m2, Bf16ToE4m3, Bf16ToE5m2,
                   Fp16ToE4m3, Fp16ToE5m2) {
  using InputT = typename TestType::input_type;
  using CacheT = typename TestType::cache_type;
  REQUIRE((_mm_getcsr() & mxcsr_control_bits) == default_mxcsr);  // for the expected values
  // (K scale, V scale): divided scales, one small enough for float subnormal inputs to reach the
  // FP8 range; powers of two within 2^+-64 (bf16 groups quantized in registers); a power of two
  // beyond that (applied as an exact reciprocal).
  const std::pair<float, float> scales[] = {{0.037f, 0x1.8p-120f}, {0.5f, 4.0f}, {0x1p-120f, 0.37f}};
  for (const unsigned mxcsr : caller_mxcsr_values) {
    INFO("caller's MXCSR 0x" << std::hex << mxcsr << std::dec);
    for (const auto& [k_scale, v_scale] : scales) {
      INFO("k_scale " << std::hexfloat << k_scale << ", v_scale " << v_scale << std::defaultfloat);
      std::mt19937 rng(11);
      Shape shape{0, 2, 32, 16, 8};
      const std::vector<std::int64_t> slots = sequence_slots(shape, rng);
      check_write<InputT, CacheT, 128>(shape, slots, k_scale, v_scale, rng, UnderMxcsr{mxcsr});
    }
  }
}

TEST_CASE("reshape_and_cache stores examples that depend on rounding and on DAZ as their codes "
          "under every caller MXCSR",
          "[reshape_and_cache][mxcsr]") {
  // K: 0x1.d9999cp+0 / 0.037f = 50.0000032... exactly, so the float quotient rounded to nearest
  // is just above the E4M3 tie 50 between 48 (0.1100.100 = 0x64) and 52 (0.1100.101 = 0x65):
  // 0x65 (rounded toward zero or down, the quotient is 50.0, a tie going to the even 0x64).
  // V: 0x1.8p-128 (a float subnormal) / 0x1.8p-120 = 2^-8 exactly, the E4M3 subnormal
  // 2 x 2^-9 = 0x02 (with DAZ the input would read as zero: 0x00).
  constexpr int head_dim = 16;
  constexpr int tokens = 16;  // one whole group: the vector tiers' group path
  const std::vector<float> keys(tokens * head_dim, 0x1.d9999cp+0f);
  const std::vector<float> values(tokens * head_dim, 0x1.8p-128f);
  std::vector<std::int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), std::int64_t{0});
  const auto key = TokenHeadsView<const float>::packed(keys.data(), tokens, 1, head_dim);
  const auto value = TokenHeadsView<const float>::packed(values.data(), tokens, 1, head_dim);
  using Layout = KvBlockLayout<fp8_e4m3_t>;
  for (const unsigned mxcsr : caller_mxcsr_values) {
    INFO("caller's MXCSR 0x" << std::hex << mxcsr << std::dec);
    std::vector<fp8_e4m3_t> cache(*kv_cache_elements(1, 1, tokens, head_dim), fp8_e4m3_t::from_bits(0xA5));
    const KvCacheView<fp8_e4m3_t, head_dim> view(cache.data(), 1, 1, tokens);
    {
      const MxcsrScope caller(mxcsr);
      reshape_and_cache(key, value, slots, view, 0.037f, 0x1.8p-120f, selected_isa);
    }
    const std::size_t sub_block = Layout::sub_block_elements(tokens, head_dim);
    for (int t = 0; t < tokens; ++t) {
      for (int d = 0; d < head_dim; ++d) {
        INFO("token " << t << ", dim " << d);
        REQUIRE(unsigned(cache[Layout::key_index(head_dim, t, d)].bits()) == 0x65u);
        REQUIRE(unsigned(cache[sub_block + Layout::value_index(tokens, head_dim, t, d)].bits()) == 0x02u);
      }
    }
  }
}
#endif

TEMPLATE_TEST_CASE("KvBlockLayout::for_each_token_run covers exactly a token range's elements",
                   "[layout]", float, bf16_t, fp8_e4m3_t) {
  using Layout = KvBlockLayout<TestType>;
  for (const auto& [block_size, head_dim, first, tokens] :
       std::vector<std::array<int, 4>>{{16, 16, 0, 16}, {64, 32, 16, 32}, {128, 128, 64, 64}, {128, 80, 0, 128}}) {
    INFO("block " << block_size << ", head dim " << head_dim << ", tokens [" << first << ", " << first + tokens << ")");
    const std::size_t sub_block = Layout::sub_block_elements(block_size, head_dim);
    std::vector<int> key_hits(sub_block, 0), value_hits(sub_block, 0);
    Layout::for_each_token_run(block_size, head_dim, first, tokens,
                               [&](std::size_t start, std::size_t count, bool is_value) {
                                 REQUIRE(start + count <= sub_block);
                                 for (std::size_t i = start; i < start + count; ++i) ++(is_value ? value_hits : key_hits)[i];
                               });
    std::vector<int> key_expected(sub_block, 0), value_expected(sub_block, 0);
    for (int t = first; t < first + tokens; ++t) {
      for (int d = 0; d < head_dim; ++d) {
        ++key_expected[Layout::key_index(head_dim, t, d)];
        ++value_expected[Layout::value_index(block_size, head_dim, t, d)];
      }
    }
    CHECK(key_hits == key_expected);
    CHECK(value_hits == value_expected);
  }
}

TEST_CASE("reshape_and_cache accepts const views and skips all-padding batches",
          "[reshape_and_cache]") {
  constexpr int head_dim = 32;
  const Shape shape{3, 2, 16, 0, 0};
  std::vector<bf16_t> cache = canary_cache<bf16_t>(3 * 2 * 2 * 16 * head_dim);
  const std::vector<bf16_t> untouched = cache;
  const KvCacheView<bf16_t, head_dim> view(cache.data(), 3, 2, 16);
  std::vector<bf16_t> input(3 * 2 * head_dim, bf16_t(1.5f));
  const auto key = TokenHeadsView<const bf16_t>::packed(input.data(), 3, 2, head_dim);
  const std::vector<std::int64_t> skip_all = {-1, -5, -1};
  REQUIRE(validate_reshape_and_cache(key, key, skip_all, view, 1.0f, 1.0f, selected_isa).ok());
  reshape_and_cache(key, key, skip_all, view, 1.0f, 1.0f, selected_isa);
  require_same_bytes<bf16_t, head_dim>(cache, untouched, shape, "all-padding batch");

  const TokenHeadsView<bf16_t> empty{nullptr, 0, 2, head_dim, 2 * head_dim, head_dim};
  reshape_and_cache(empty, empty, std::span<const std::int64_t>(), view, 1.0f, 1.0f, selected_isa);
  require_same_bytes<bf16_t, head_dim>(cache, untouched, shape, "empty batch");

  const std::vector<std::int64_t> one = {-1, 37, -1};
  reshape_and_cache(key, key, one, view, 1.0f, 1.0f, selected_isa);
  const std::size_t key_block = 2 * (2 * 2 * 16 * head_dim);  // slot 37: block 2, head 0
  REQUIRE(cache[key_block + KvBlockLayout<bf16_t>::key_index(head_dim, 37 % 16, 5)].bits() ==
          bf16_t(1.5f).bits());
}

TEST_CASE("reshape_and_cache rejects bad input before writing anything",
          "[reshape_and_cache][errors]") {
  constexpr int head_dim = 32;
  constexpr int heads = 2;
  constexpr int block_size = 16;
  constexpr std::int64_t num_blocks = 4;
  constexpr std::int64_t num_tokens = 5;
  std::vector<fp8_e4m3_t> cache =
      canary_cache<fp8_e4m3_t>(num_blocks * heads * 2 * block_size * head_dim);
  const std::vector<fp8_e4m3_t> untouched = cache;
  const KvCacheView<fp8_e4m3_t, head_dim> view(cache.data(), num_blocks, heads, block_size);
  std::vector<float> input(num_tokens * heads * head_dim, 0.75f);
  const auto key = TokenHeadsView<float>::packed(input.data(), num_tokens, heads, head_dim);
  const auto value = key;
  const std::vector<std::int64_t> good = {0, 1, -1, 40, 63};
  REQUIRE(validate_reshape_and_cache(key, value, good, view, 1.0f, 1.0f, selected_isa).ok());

  // Runs `call` (which must throw), then checks the error and that the cache is unchanged.
  const auto expect_error = [&](auto&& call, Errc code, const std::string& argument,
                                const std::string& value_text) {
    try {
      call();
      FAIL("no error for " << argument << " = " << value_text);
    } catch (const Error& error) {
      CHECK(error.code() == code);
      CHECK(error.argument() == argument);
      CHECK_THAT(error.what(), Catch::Contains(argument + " = " + value_text));
    }
    REQUIRE(std::memcmp(cache.data(), untouched.data(), cache.size()) == 0);
  };
  const auto with_slots = [&](std::vector<std::int64_t> slots) {
    return [&, slots] {
      REQUIRE_FALSE(
          validate_reshape_and_cache(key, value, slots, view, 1.0f, 1.0f, selected_isa).ok());
      reshape_and_cache(key, value, slots, view, 1.0f, 1.0f, selected_isa);
    };
  };

  SECTION("slot out of range") {
    expect_error(with_slots({0, 1, 64, 3, 4}), Errc::out_of_range, "slot_mapping[2]", "64");
    expect_error(with_slots({0, 1, 2, 3, std::numeric_limits<std::int64_t>::max()}),
                 Errc::out_of_range, "slot_mapping[4]",
                 std::to_string(std::numeric_limits<std::int64_t>::max()));
  }
  SECTION("duplicate slot") {
    expect_error(with_slots({7, 1, -1, 9, 7}), Errc::invalid_argument, "slot_mapping[4]", "7");
    expect_error(with_slots({0, 1, 2, 2, 3}), Errc::invalid_argument, "slot_mapping[3]", "2");
    try {
      with_slots({7, 1, -1, 9, 7})();
    } catch (const Error& error) {
      CHECK_THAT(error.what(), Catch::Contains("duplicates slot_mapping[0]"));
    }
  }
  SECTION("slot_mapping size") {
    expect_error(with_slots({0, 1, 2, 3}), Errc::size_mismatch, "slot_mapping.size()", "4");
  }
  SECTION("key and value shapes") {
    auto bad_heads = key;
    bad_heads.num_heads = 1;
    expect_error([&] { reshape_and_cache(bad_heads, value, good, view, 1.0f, 1.0f, selected_isa); },
                 Errc::size_mismatch, "key.num_heads", "1");
    expect_error([&] { reshape_and_cache(key, bad_heads, good, view, 1.0f, 1.0f, selected_isa); },
                 Errc::size_mismatch, "value.num_heads", "1");
    auto bad_dim = value;
    bad_dim.head_dim = 16;
    expect_error([&] { reshape_and_cache(key, bad_dim, good, view, 1.0f, 1.0f, selected_isa); },
                 Errc::size_mismatch, "value.head_dim", "16");
    auto fewer = value;
    fewer.num_tokens = 4;
    expect_error([&] { reshape_and_cache(key, fewer, good, view, 1.0f, 1.0f, selected_isa); },
                 Errc::size_mismatch, "value.num_tokens", "4");
    auto overlapping = key;
    overlapping.token_stride = 16;
    expect_error(
        [&] { reshape_and_cache(overlapping, value, good, view, 1.0f, 1.0f, selected_isa); },
        Errc::invalid_argument, "key.token_stride", "16");
  }
  SECTION("scales") {
    const float bad[] = {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
    for (const float scale : bad) {
      const std::string text = detail::describe_value(scale);
      INFO("scale " << text);
      REQUIRE_FALSE(
          validate_reshape_and_cache(key, value, good, view, scale, 1.0f, selected_isa).ok());
      expect_error([&] { reshape_and_cache(key, value, good, view, scale, 1.0f, selected_isa); },
                   Errc::invalid_argument, "k_scale", text);
      expect_error([&] { reshape_and_cache(key, value, good, view, 1.0f, scale, selected_isa); },
                   Errc::invalid_argument, "v_scale", text);
    }
    // Scales are validated for non-FP8 caches too.
    std::vector<float> float_cache(num_blocks * heads * 2 * block_size * head_dim, 3.0f);
    const KvCacheView<float, head_dim> float_view(float_cache.data(), num_blocks, heads,
                                                  block_size);
    REQUIRE_THROWS_AS(reshape_and_cache(key, value, good, float_view, 1.0f, -2.0f, selected_isa),
                      Error);
    for (const float v : float_cache) REQUIRE(v == 3.0f);
  }
}
