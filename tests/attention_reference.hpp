// The attention tests' oracle: DESIGN.md section 3 computed in float64 from exactly what a paged
// cache holds, plus seeded builders of test data (batches, tensors, caches filled through
// reshape_and_cache) and the error measure between a library output and the oracle.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pagedattn/attention/batch.hpp"
#include "pagedattn/attention/params.hpp"
#include "pagedattn/cache/reshape_and_cache.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/core/token_heads_view.hpp"
#include "pagedattn/isa/tags.hpp"

namespace pagedattn::test {

// ------------------------------------------------------------------------------------------------
// The oracle
// ------------------------------------------------------------------------------------------------

/// The exact value of a stored element (float, bf16_t, fp16_t or an FP8 type) as a double.
template <class T>
double element_value(T element) {
  return static_cast<double>(static_cast<float>(element));
}

/// The raw elements and shape of a paged cache `[num_blocks][num_kv_heads][2][block_size *
/// head_dim]`, as the oracle reads it (independent of KvCacheView).
template <class CacheT>
struct ReferenceCache {
  const CacheT* data = nullptr;  ///< First element.
  std::int64_t num_blocks = 0;   ///< Physical blocks.
  int num_kv_heads = 0;          ///< KV heads.
  int block_size = 0;            ///< Tokens per block.
  int head_dim = 0;              ///< Elements per head.
};

/// A row-major int32 block table as the oracle reads it: row r, entry b at data[r * row_stride + b].
struct ReferenceBlockTable {
  const std::int32_t* data = nullptr;  ///< Entry (0, 0).
  std::int64_t num_rows = 0;           ///< Rows.
  std::int64_t num_cols = 0;           ///< Usable entries per row.
  std::int64_t row_stride = 0;         ///< Elements between rows.
};

/// Throws std::logic_error(`what`) unless `condition`: the oracle's own precondition checks (the
/// oracle is only ever given valid cases; a failure is a bug in the test).
inline void reference_require(bool condition, const std::string& what) {
  if (!condition) throw std::logic_error("attention reference: " + what);
}

/// Attention of DESIGN.md section 3 in float64 for every query row of `batch`.
/// K[j][d] of request r and KV head g is the element at KvBlockLayout<CacheT>::key_index(head_dim,
/// j % block_size, d) of the K sub-block of (block_table[r][j / block_size], g), times
/// params.k_scale when CacheT is an FP8 type (V likewise with value_index and v_scale); queries
/// are the stored query elements. Returns `[num_tokens][Hq][head_dim]`, row-major. Rows that see
/// no KV position are zeros (with or without a sink). Single-threaded; one call per case.
template <class Q, class CacheT>
std::vector<double> reference_attention(const ReferenceCache<CacheT>& cache,
                                        const ReferenceBlockTable& block_table,
                                        TokenHeadsView<const Q> query, const AttentionBatch& batch,
                                        const AttentionParams& params) {
  using Layout = KvBlockLayout<CacheT>;
  const int num_heads = batch.num_query_heads;
  const int num_kv_heads = batch.num_kv_heads;
  const int dim = cache.head_dim;
  const int block_size = cache.block_size;
  reference_require(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "Hq % Hkv");
  reference_require(cache.num_kv_heads == num_kv_heads, "cache.num_kv_heads");
  reference_require(query.num_heads == num_heads && query.head_dim == dim &&
                        query.num_tokens == batch.num_tokens,
                    "query shape");
  reference_require(block_table.num_rows >= batch.num_requests(), "block_table rows");
  reference_require(params.alibi_slopes.empty() ||
                        static_cast<int>(params.alibi_slopes.size()) == num_heads,
                    "alibi size");
  reference_require(params.sinks.empty() || static_cast<int>(params.sinks.size()) == num_heads,
                    "sinks size");

  const int group = num_heads / num_kv_heads;
  const double k_scale = is_fp8_v<CacheT> ? static_cast<double>(params.k_scale) : 1.0;
  const double v_scale = is_fp8_v<CacheT> ? static_cast<double>(params.v_scale) : 1.0;
  const double scale = params.scale;
  const double softcap = params.softcap;
  const std::size_t sub_block = Layout::sub_block_elements(block_size, dim);
  const auto udim = static_cast<std::size_t>(dim);

  std::vector<double> output(static_cast<std::size_t>(batch.num_tokens) *
                                 static_cast<std::size_t>(num_heads) * udim,
                             0.0);
  std::vector<double> keys_t;  // [dim][seq_len]: transposed so logits vectorise over positions
  std::vector<double> values;  // [seq_len][dim]
  std::vector<double> logits;
  std::vector<double> q(udim);
  std::vector<double> acc(udim);

  for (std::int64_t r = 0; r < batch.num_requests(); ++r) {
    const auto ur = static_cast<std::size_t>(r);
    const std::int64_t first_token = batch.query_start_loc[ur];
    const std::int64_t q_len = batch.query_start_loc[ur + 1] - first_token;
    const std::int64_t seq_len = batch.seq_lens[ur];
    if (q_len == 0) continue;
    const bool causal = batch.is_causal(r);
    const std::int64_t needed_blocks = (seq_len + block_size - 1) / block_size;
    reference_require(needed_blocks <= block_table.num_cols, "block_table columns");
    const std::int32_t* table_row = block_table.data + r * block_table.row_stride;
    for (std::int64_t b = 0; b < needed_blocks; ++b) {
      reference_require(table_row[b] >= 0 && table_row[b] < cache.num_blocks,
                        "block_table entry out of range");
    }
    const auto useq = static_cast<std::size_t>(seq_len);
    keys_t.assign(udim * useq, 0.0);
    values.assign(useq * udim, 0.0);
    logits.resize(useq);

    for (int kv_head = 0; kv_head < num_kv_heads; ++kv_head) {
      // Gather this request's K and V for this KV head through the block table.
      for (std::int64_t j = 0; j < seq_len; ++j) {
        const std::int64_t block = table_row[j / block_size];
        const int token = static_cast<int>(j % block_size);
        const CacheT* key_block =
            cache.data + (static_cast<std::size_t>(block) * static_cast<std::size_t>(num_kv_heads) +
                          static_cast<std::size_t>(kv_head)) *
                             2 * sub_block;
        const CacheT* value_block = key_block + sub_block;
        const auto uj = static_cast<std::size_t>(j);
        for (int d = 0; d < dim; ++d) {
          const auto ud = static_cast<std::size_t>(d);
          keys_t[ud * useq + uj] = element_value(key_block[Layout::key_index(dim, token, d)]) * k_scale;
          values[uj * udim + ud] =
              element_value(value_block[Layout::value_index(block_size, dim, token, d)]) * v_scale;
        }
      }

      for (int g = 0; g < group; ++g) {
        const int head = kv_head * group + g;
        const auto uh = static_cast<std::size_t>(head);
        const bool has_sink = !params.sinks.empty();
        const double sink = has_sink ? static_cast<double>(params.sinks[uh]) : 0.0;
        const double slope =
            params.alibi_slopes.empty() ? 0.0 : static_cast<double>(params.alibi_slopes[uh]);
        for (std::int64_t i = 0; i < q_len; ++i) {
          const std::int64_t p = seq_len - q_len + i;
          std::int64_t lo = 0;
          std::int64_t hi = seq_len - 1;
          if (causal) hi = std::min(hi, p);
          if (batch.window_left >= 0) lo = std::max(lo, p - batch.window_left);
          if (batch.window_right >= 0) hi = std::min(hi, p + batch.window_right);
          if (lo > hi) continue;  // nothing visible: the row stays zero
          const auto count = static_cast<std::size_t>(hi - lo + 1);
          const auto ulo = static_cast<std::size_t>(lo);

          const Q* q_row = query.row(first_token + i, head);
          for (std::size_t d = 0; d < udim; ++d) q[d] = element_value(q_row[d]);

          std::fill(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(count), 0.0);
          for (std::size_t d = 0; d < udim; ++d) {
            const double qd = q[d];
            const double* k_column = keys_t.data() + d * useq + ulo;
            for (std::size_t k = 0; k < count; ++k) logits[k] += qd * k_column[k];
          }
          double max_logit = -std::numeric_limits<double>::infinity();
          for (std::size_t k = 0; k < count; ++k) {
            double s = scale * logits[k];
            if (softcap > 0.0) s = softcap * std::tanh(s / softcap);
            s += slope * static_cast<double>(lo + static_cast<std::int64_t>(k) - p);
            logits[k] = s;
            max_logit = std::max(max_logit, s);
          }
          if (has_sink) max_logit = std::max(max_logit, sink);

          std::fill(acc.begin(), acc.end(), 0.0);
          double denominator = has_sink ? std::exp(sink - max_logit) : 0.0;
          for (std::size_t k = 0; k < count; ++k) {
            const double weight = std::exp(logits[k] - max_logit);
            denominator += weight;
            const double* v_row = values.data() + (ulo + k) * udim;
            for (std::size_t d = 0; d < udim; ++d) acc[d] += weight * v_row[d];
          }
          const std::size_t row =
              static_cast<std::size_t>(first_token + i) * static_cast<std::size_t>(num_heads) + uh;
          double* out = output.data() + row * udim;
          for (std::size_t d = 0; d < udim; ++d) out[d] = acc[d] / denominator;
        }
      }
    }
  }
  return output;
}

// ------------------------------------------------------------------------------------------------
// Comparing a library output with the oracle
// ------------------------------------------------------------------------------------------------

/// Half the spacing of T's values around `x` (float, bf16_t or fp16_t): the most that storing `x`
/// as T can change it (round to nearest).
template <class T>
double half_ulp(double x) {
  int mantissa_bits = 23;  // float
  int min_exponent = -126;
  if constexpr (std::is_same_v<T, bf16_t>) {
    mantissa_bits = 7;
  } else if constexpr (std::is_same_v<T, fp16_t>) {
    mantissa_bits = 10;
    min_exponent = -14;
  }
  const int exponent = x == 0.0 ? min_exponent : std::max(std::ilogb(x), min_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits - 1);
}

/// Largest |output - reference| over all elements, and where it occurs. A non-finite output
/// element makes the error infinite.
struct ErrorMeasure {
  double max_abs = 0.0;     ///< Largest absolute difference (infinity when an output is NaN/inf).
  std::int64_t token = -1;  ///< Where it occurs: token,
  std::int64_t head = -1;   ///< head,
  std::int64_t dim = -1;    ///< and element.
  double got = 0.0;         ///< The library's value there.
  double expected = 0.0;    ///< The oracle's value there.
  /// Largest |output - reference| - half_ulp<T>(reference), at least 0: a lower bound of the
  /// kernels' own error before the final rounding to the output type.
  double max_beyond_rounding = 0.0;
};

/// Compares `output` ([num_tokens][Hq][head_dim], any strides) with `reference` (row-major, the
/// same shape).
template <class T>
ErrorMeasure max_abs_error(TokenHeadsView<const T> output, std::span<const double> reference) {
  reference_require(static_cast<std::size_t>(output.num_tokens * output.num_heads * output.head_dim) ==
                        reference.size(),
                    "reference size");
  ErrorMeasure worst;
  std::size_t index = 0;
  for (std::int64_t t = 0; t < output.num_tokens; ++t) {
    for (std::int64_t h = 0; h < output.num_heads; ++h) {
      const T* row = output.row(t, h);
      for (std::int64_t d = 0; d < output.head_dim; ++d, ++index) {
        const double got = element_value(row[d]);
        const double expected = reference[index];
        const double error = std::isfinite(got) ? std::abs(got - expected)
                                                : std::numeric_limits<double>::infinity();
        if (error > worst.max_abs || (worst.token < 0 && error >= worst.max_abs)) {
          const double beyond = worst.max_beyond_rounding;
          worst = {error, t, h, d, got, expected, beyond};
        }
        worst.max_beyond_rounding =
            std::max(worst.max_beyond_rounding, error - half_ulp<T>(expected));
      }
    }
  }
  return worst;
}

// ------------------------------------------------------------------------------------------------
// Test data
// ------------------------------------------------------------------------------------------------

/// An owning batch description; view() gives the AttentionBatch the library and the oracle take.
struct TestBatch {
  std::vector<std::int32_t> query_start_loc{0};   ///< [num_requests + 1].
  std::vector<std::int32_t> seq_lens;             ///< [num_requests].
  std::vector<std::uint8_t> causal_per_request;   ///< Empty, or one 0/1 flag per request.
  bool causal = true;                             ///< Batch-wide causal flag.
  int window_left = -1;                           ///< -1 = unbounded.
  int window_right = -1;                          ///< -1 = unbounded.
  int num_query_heads = 1;                        ///< Hq.
  int num_kv_heads = 1;                           ///< Hkv.

  /// Appends a request with `q_len` new tokens and `seq_len` KV positions.
  void add_request(int q_len, int seq_len) {
    query_start_loc.push_back(query_start_loc.back() + q_len);
    seq_lens.push_back(seq_len);
  }
  /// Query rows.
  [[nodiscard]] std::int64_t num_tokens() const { return query_start_loc.back(); }
  /// Requests.
  [[nodiscard]] std::int64_t num_requests() const {
    return static_cast<std::int64_t>(seq_lens.size());
  }
  /// Query length of request `r`.
  [[nodiscard]] int q_len(std::int64_t r) const {
    const auto i = static_cast<std::size_t>(r);
    return query_start_loc[i + 1] - query_start_loc[i];
  }
  /// Sum of seq_lens: the KV tokens reshape_and_cache writes.
  [[nodiscard]] std::int64_t total_kv_tokens() const {
    return std::accumulate(seq_lens.begin(), seq_lens.end(), std::int64_t{0});
  }
  /// The non-owning AttentionBatch (valid while this object lives unchanged).
  [[nodiscard]] AttentionBatch view() const {
    AttentionBatch batch;
    batch.query_start_loc = query_start_loc;
    batch.seq_lens = seq_lens;
    batch.num_tokens = num_tokens();
    batch.num_query_heads = num_query_heads;
    batch.num_kv_heads = num_kv_heads;
    batch.causal = causal;
    batch.causal_per_request = causal_per_request;
    batch.window_left = window_left;
    batch.window_right = window_right;
    return batch;
  }
};

/// A random mixed batch of `num_requests` requests (decode, chunked prefill, prefill, and now and
/// then q_len = 0), q_len <= max_q_len, seq_len <= max_seq_len, causal, no window.
inline TestBatch random_batch(std::mt19937_64& rng, int num_requests, int max_q_len,
                              int max_seq_len, int num_query_heads, int num_kv_heads) {
  TestBatch batch;
  batch.num_query_heads = num_query_heads;
  batch.num_kv_heads = num_kv_heads;
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<int> seq(1, max_seq_len);
  for (int r = 0; r < num_requests; ++r) {
    const int seq_len = seq(rng);
    int q_len = 1;  // decode
    switch (kind(rng)) {
      case 0: q_len = 0; break;                                      // nothing new this step
      case 1: case 2: q_len = std::min(seq_len, max_q_len); break;   // prefill (or its last chunk)
      case 3: case 4:                                                // chunked prefill
        q_len = std::uniform_int_distribution<int>(1, std::min(seq_len, max_q_len))(rng);
        break;
      default: break;
    }
    batch.add_request(q_len, seq_len);
  }
  return batch;
}

/// NaN of element type T (what never-written cache positions and padding hold in the tests).
template <class T>
T nan_element() {
  return T(std::numeric_limits<float>::quiet_NaN());
}

/// `count` elements of T drawn uniformly from [-sqrt(3), sqrt(3)] (mean 0, variance 1, and
/// bounded, so outputs stay well inside the range where bf16 rounding is below the tolerance),
/// rounded to T. Seeded: the same seed gives the same values.
template <class T>
std::vector<T> random_unit_variance(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.7320508f, 1.7320508f);
  std::vector<T> values;
  values.reserve(count);
  for (std::size_t i = 0; i < count; ++i) values.push_back(T(uniform(rng)));
  return values;
}

/// An owning `[num_tokens][num_heads][head_dim]` tensor with padding after each head and each
/// token (padding holds NaN, so a kernel that reads it is caught). Move-only: the view points
/// into the storage.
template <class T>
struct StridedTensor {
  std::vector<T> storage;   ///< All elements, padding included.
  TokenHeadsView<T> view;   ///< The live elements.

  StridedTensor() = default;
  StridedTensor(StridedTensor&&) noexcept = default;
  StridedTensor& operator=(StridedTensor&&) noexcept = default;
  StridedTensor(const StridedTensor&) = delete;
  StridedTensor& operator=(const StridedTensor&) = delete;

  /// Read-only view.
  [[nodiscard]] TokenHeadsView<const T> const_view() const { return view; }
};

/// A random unit-variance tensor (see random_unit_variance) of the given shape, with `head_pad`
/// elements after every head and `token_pad` after every token.
template <class T>
StridedTensor<T> random_tensor(std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
                               std::int64_t head_pad, std::int64_t token_pad, std::uint64_t seed) {
  StridedTensor<T> tensor;
  const std::int64_t head_stride = head_dim + head_pad;
  const std::int64_t token_stride = num_heads * head_stride + token_pad;
  tensor.storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, num_tokens * token_stride)),
                        nan_element<T>());
  tensor.view = {tensor.storage.data(), num_tokens, num_heads, head_dim, token_stride, head_stride};
  const std::vector<T> values =
      random_unit_variance<T>(static_cast<std::size_t>(num_tokens * num_heads * head_dim), seed);
  std::size_t next = 0;
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    for (std::int64_t h = 0; h < num_heads; ++h) {
      T* row = tensor.view.row(t, h);
      for (std::int64_t d = 0; d < head_dim; ++d) row[d] = values[next++];
    }
  }
  return tensor;
}

/// A paged cache with its block table, owning both. Physical blocks are a random permutation;
/// block-table entries past a request's last block are -1 (never read); every cache position not
/// written by reshape_and_cache holds NaN.
template <class CacheT, int HeadDim>
struct TestCache {
  std::vector<CacheT> storage;          ///< The cache elements.
  std::int64_t num_blocks = 0;          ///< Physical blocks.
  int num_kv_heads = 0;                 ///< KV heads.
  int block_size = 0;                   ///< Tokens per block.
  std::vector<std::int32_t> table;      ///< Block table, [table_rows][table_stride].
  std::int64_t table_rows = 0;          ///< Rows (= requests).
  std::int64_t table_cols = 0;          ///< Usable entries per row.
  std::int64_t table_stride = 0;        ///< Elements between rows.

  /// Writable view (for reshape_and_cache).
  [[nodiscard]] KvCacheView<CacheT, HeadDim> view() {
    return KvCacheView<CacheT, HeadDim>(storage.data(), num_blocks, num_kv_heads, block_size);
  }
  /// Read-only view (for paged_attention).
  [[nodiscard]] KvCacheView<const CacheT, HeadDim> const_view() const {
    return KvCacheView<const CacheT, HeadDim>(storage.data(), num_blocks, num_kv_heads, block_size);
  }
  /// What the oracle reads.
  [[nodiscard]] ReferenceCache<CacheT> reference() const {
    return {storage.data(), num_blocks, num_kv_heads, block_size, HeadDim};
  }
  /// The block table as the oracle reads it.
  [[nodiscard]] ReferenceBlockTable reference_table() const {
    return {table.data(), table_rows, table_cols, table_stride};
  }
};

/// Builds a cache for `batch` with `block_size` tokens per block and `spare_blocks` blocks no
/// request uses, and fills every position < seq_len of every request through the library's
/// reshape_and_cache (on `isa`) from `key`/`value`: `[batch.total_kv_tokens()][Hkv][HeadDim]`,
/// request-major (request 0's positions 0..seq_len-1, then request 1's...).
template <class CacheT, int HeadDim, class Source>
TestCache<CacheT, HeadDim> make_filled_cache(const TestBatch& batch, int block_size,
                                             TokenHeadsView<const Source> key,
                                             TokenHeadsView<const Source> value, float k_scale,
                                             float v_scale, std::uint64_t seed, IsaId isa,
                                             int spare_blocks = 2) {
  reference_require(key.num_tokens == batch.total_kv_tokens() &&
                        value.num_tokens == batch.total_kv_tokens(),
                    "key/value rows");
  TestCache<CacheT, HeadDim> cache;
  cache.num_kv_heads = batch.num_kv_heads;
  cache.block_size = block_size;
  std::vector<std::int64_t> blocks_needed;
  std::int64_t total_blocks = 0;
  for (std::int32_t seq_len : batch.seq_lens) {
    blocks_needed.push_back((seq_len + block_size - 1) / block_size);
    total_blocks += blocks_needed.back();
  }
  cache.num_blocks = total_blocks + spare_blocks;
  reference_require(cache.num_blocks > 0, "cache needs at least one block");
  const auto elements = kv_cache_elements(cache.num_blocks, cache.num_kv_heads, block_size, HeadDim);
  reference_require(elements.has_value(), "cache size");
  cache.storage.assign(static_cast<std::size_t>(*elements), nan_element<CacheT>());

  std::vector<std::int32_t> physical(static_cast<std::size_t>(cache.num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(physical.begin(), physical.end(), rng);

  cache.table_rows = batch.num_requests();
  cache.table_cols =
      1 + (blocks_needed.empty() ? 0 : *std::max_element(blocks_needed.begin(), blocks_needed.end()));
  cache.table_stride = cache.table_cols + 3;
  cache.table.assign(
      static_cast<std::size_t>(std::max<std::int64_t>(1, cache.table_rows * cache.table_stride)), -1);
  std::size_t next_physical = 0;
  for (std::int64_t r = 0; r < cache.table_rows; ++r) {
    for (std::int64_t b = 0; b < blocks_needed[static_cast<std::size_t>(r)]; ++b) {
      cache.table[static_cast<std::size_t>(r * cache.table_stride + b)] = physical[next_physical++];
    }
  }

  std::vector<std::int64_t> slots;
  slots.reserve(static_cast<std::size_t>(batch.total_kv_tokens()));
  for (std::int64_t r = 0; r < cache.table_rows; ++r) {
    for (std::int64_t j = 0; j < batch.seq_lens[static_cast<std::size_t>(r)]; ++j) {
      const std::int64_t block =
          cache.table[static_cast<std::size_t>(r * cache.table_stride + j / block_size)];
      slots.push_back(block * block_size + j % block_size);
    }
  }
  if (!slots.empty()) {
    reshape_and_cache(key, value, std::span<const std::int64_t>(slots), cache.view(), k_scale,
                      v_scale, isa);
  }
  return cache;
}

/// Owns the per-head arrays an AttentionParams points to.
struct TestParams {
  float scale = 1.0f;             ///< Logit scale.
  float softcap = 0.0f;           ///< 0 = off.
  std::vector<float> alibi;       ///< Empty or one slope per query head.
  std::vector<float> sinks;       ///< Empty or one sink logit per query head.
  float k_scale = 1.0f;           ///< K dequantisation scale (FP8 caches only).
  float v_scale = 1.0f;           ///< V dequantisation scale (FP8 caches only).

  /// The non-owning AttentionParams (valid while this object lives unchanged).
  [[nodiscard]] AttentionParams view() const {
    AttentionParams params;
    params.scale = scale;
    params.softcap = softcap;
    params.alibi_slopes = alibi;
    params.sinks = sinks;
    params.k_scale = k_scale;
    params.v_scale = v_scale;
    return params;
  }
};

/// The ALiBi slopes of the original paper for `num_heads` heads: 2^(-8 (h + 1) / num_heads).
inline std::vector<float> alibi_slopes(int num_heads) {
  std::vector<float> slopes;
  for (int h = 0; h < num_heads; ++h) {
    slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(num_heads)));
  }
  return slopes;
}

/// Random per-head sink logits in [-2, 4] (comparable to the logits, so they change the result).
inline std::vector<float> random_sinks(int num_heads, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 4.0f);
  std::vector<float> sinks;
  for (int h = 0; h < num_heads; ++h) sinks.push_back(uniform(rng));
  return sinks;
}

}  // namespace pagedattn::test
