// Primary template of the per-ISA reshape_and_cache kernels (backend::CacheWriter), their typed
// arguments, and the ISA-templated pieces the vector back-ends share (run detection, placement).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "pagedattn/backend/cache_line.hpp"
#include "pagedattn/backend/fp8_converter.hpp"
#include "pagedattn/backend/vector/fp8_encode.hpp"
#include "pagedattn/config.hpp"
#include "pagedattn/core/kv_cache.hpp"
#include "pagedattn/core/kv_cache_layout.hpp"
#include "pagedattn/core/minifloat.hpp"

namespace pagedattn::backend {



/// One validated reshape_and_cache call with its element types. `InputT`: float, bf16_t or
/// fp16_t; `CacheT`: InputT, fp8_e4m3_t or fp8_e5m2_t. Strides are in elements; the cache is
/// `[num_blocks][num_kv_heads][2][block_size * head_dim]` in KvBlockLayout<CacheT> order.
/// Member functions are always_inline: they are compiled into every ISA's code.
template <class InputT, class CacheT>
struct CacheWriteArgs {
  const InputT* key;                 ///< Key element (0, 0, 0); rows have head_dim elements.
  std::int64_t key_token_stride;     ///< Elements between key tokens.
  std::int64_t key_head_stride;      ///< Elements between key heads.
  const InputT* value;               ///< Like `key`, for the values.
  std::int64_t value_token_stride;   ///< Elements between value tokens.
  std::int64_t value_head_stride;    ///< Elements between value heads.
  const std::int64_t* slot_mapping;  ///< num_tokens slots, in range, distinct; negative = skip.
  std::size_t num_tokens;            ///< Tokens in key, value and slot_mapping.
  CacheT* cache;                     ///< First cache element.
  int num_kv_heads;                  ///< Heads per token (= the cache's KV heads).
  int block_size;                    ///< Tokens per cache block (a multiple of 16).
  int head_dim;                      ///< Elements per head (a multiple of 16, at most 512).
  float k_scale;                     ///< FP8 caches store K as fp8(x / k_scale); positive, finite.
  float v_scale;                     ///< FP8 caches store V as fp8(x / v_scale); positive, finite.

  /// Key row (token, head): head_dim contiguous elements.
  PAGEDATTN_ALWAYS_INLINE const InputT* key_row(std::size_t token, int head) const noexcept {
    return key + static_cast<std::int64_t>(token) * key_token_stride + head * key_head_stride;
  }
  /// Value row (token, head): head_dim contiguous elements.
  PAGEDATTN_ALWAYS_INLINE const InputT* value_row(std::size_t token, int head) const noexcept {
    return value + static_cast<std::int64_t>(token) * value_token_stride + head * value_head_stride;
  }
  /// K sub-block of (block, head).
  PAGEDATTN_ALWAYS_INLINE CacheT* key_block(std::int64_t block, int head) const noexcept {
    const std::size_t sub_block = KvBlockLayout<CacheT>::sub_block_elements(block_size, head_dim);
    return cache + (static_cast<std::size_t>(block) * static_cast<std::size_t>(num_kv_heads) +
                    static_cast<std::size_t>(head)) * 2 * sub_block;
  }
  /// V sub-block of (block, head).
  PAGEDATTN_ALWAYS_INLINE CacheT* value_block(std::int64_t block, int head) const noexcept {
    return key_block(block, head) + KvBlockLayout<CacheT>::sub_block_elements(block_size, head_dim);
  }
};

/// reshape_and_cache kernels of ISA tier `Isa` (a pagedattn::isa tag). A specialisation provides
///   template <class InputT, class CacheT>
///   static void run(const CacheWriteArgs<InputT, CacheT>& args) noexcept;
/// which, for every token t with slot_mapping[t] = s >= 0 (block s / block_size, offset
/// s % block_size) and every head h and dim d, stores key[t][h][d] at KvBlockLayout's key_index
/// and value[t][h][d] at its value_index: FP8 caches get CacheT(float(x) / k_scale) (v_scale for
/// V), other caches the input bits unchanged. Nothing else in the cache is written. Every
/// specialisation gives the same bytes as the scalar one. Preconditions: validated arguments.
template <class Isa>
struct CacheWriter;

/// Elements of one token's K row that a K group stores contiguously (a "unit"): a pair of
/// consecutive dims for the paired (1- and 2-byte) layouts, one element for fp32.
template <class CacheT>
inline constexpr int key_unit_elements = KvBlockLayout<CacheT>::paired ? 2 : 1;

/// Bytes of one K unit (2 or 4): the vector back-ends move units as 16- or 32-bit lanes.
template <class CacheT>
inline constexpr std::size_t key_unit_bytes =
    static_cast<std::size_t>(key_unit_elements<CacheT>) * sizeof(CacheT);

/// True when KvBlockLayout<CacheT> has the structure the vector back-ends rely on (they compute
/// start addresses with key_index / value_index and step inside them as checked here):
///  - K: unit u of token t is key_unit_elements contiguous elements at
///    key_index(t, 0) + u * 16 * key_unit_elements, and lane t % 16 of a group is
///    t % 16 units after lane 0 (a group is `[units][16 tokens]` of units);
///  - V: dim 16c + j of token t is at value_index(t, 16c) + j * step, step = 2 when paired (the
///    other token of the pair in between, at +1 for the odd token), else 1 (rows contiguous).
/// Checked exhaustively over small shapes at compile time.
template <class CacheT>
constexpr bool layout_matches_writer_assumptions() noexcept {
  using Layout = KvBlockLayout<CacheT>;
  constexpr int unit = key_unit_elements<CacheT>;
  constexpr std::size_t step = Layout::paired ? 2 : 1;
  const int head_dims[] = {16, 48};
  const int block_size = 48;
  for (const int head_dim : head_dims) {
    for (int t = 0; t < block_size; ++t) {
      const int lane = t % kv_token_group;
      const std::size_t group_start = Layout::key_index(head_dim, t - lane, 0);
      if (Layout::key_index(head_dim, t, 0) !=
          group_start + static_cast<std::size_t>(lane * unit)) {
        return false;
      }
      for (int d = 0; d < head_dim; ++d) {
        const std::size_t key =
            Layout::key_index(head_dim, t, 0) +
            static_cast<std::size_t>((d / unit) * kv_token_group * unit + d % unit);
        if (Layout::key_index(head_dim, t, d) != key) return false;
        const std::size_t value = Layout::value_index(block_size, head_dim, t, d - d % 16) +
                                  static_cast<std::size_t>(d % 16) * step;
        if (Layout::value_index(block_size, head_dim, t, d) != value) return false;
        if (Layout::paired && t % 2 == 1 &&
            Layout::value_index(block_size, head_dim, t, d) !=
                Layout::value_index(block_size, head_dim, t - 1, d) + 1) {
          return false;
        }
      }
    }
  }
  return true;
}

static_assert(layout_matches_writer_assumptions<float>());
static_assert(layout_matches_writer_assumptions<bf16_t>());
static_assert(layout_matches_writer_assumptions<fp16_t>());
static_assert(layout_matches_writer_assumptions<fp8_e4m3_t>());
static_assert(layout_matches_writer_assumptions<fp8_e5m2_t>());

/// Length of the run of tokens starting at `first` whose slots continue slot_mapping[first] one
/// by one without leaving its 16-token K group (1 to 16). Such a run lies in one block, at
/// consecutive offsets. Precondition: slot_mapping[first] >= 0 and first < count.
template <class Isa>
PAGEDATTN_ALWAYS_INLINE std::size_t group_run_length(const std::int64_t* slot_mapping,
                                                     std::size_t first,
                                                     std::size_t count) noexcept {
  const std::int64_t start = slot_mapping[first];
  std::size_t length = 1;
  while (first + length < count &&
         slot_mapping[first + length] == start + static_cast<std::int64_t>(length) &&
         (start + static_cast<std::int64_t>(length)) % kv_token_group != 0) {
    ++length;
  }
  return length;
}

/// Stores one token's K row (`head_dim` cache elements) unit by unit into K sub-block
/// `key_block` at block offset `token`: the per-token path of the vector back-ends.
template <class Isa, class CacheT>
PAGEDATTN_ALWAYS_INLINE void place_key_row(const CacheT* row, CacheT* key_block, int token,
                                           int head_dim) noexcept {
  constexpr int unit = key_unit_elements<CacheT>;
  CacheT* target = key_block + KvBlockLayout<CacheT>::key_index(head_dim, token, 0);
  for (int u = 0; u < head_dim / unit; ++u) {
    std::memcpy(static_cast<void*>(target + u * kv_token_group * unit), row + u * unit,
                key_unit_bytes<CacheT>);
  }
}

/// Stores one token's V row (`head_dim` cache elements) element by element into V sub-block
/// `value_block` at block offset `token` (contiguous copy for fp32).
template <class Isa, class CacheT>
PAGEDATTN_ALWAYS_INLINE void place_value_row(const CacheT* row, CacheT* value_block, int token,
                                             int block_size, int head_dim) noexcept {
  using Layout = KvBlockLayout<CacheT>;
  if constexpr (!Layout::paired) {
    CacheT* target = value_block + Layout::value_index(block_size, head_dim, token, 0);
    std::memcpy(static_cast<void*>(target), row,
                static_cast<std::size_t>(head_dim) * sizeof(CacheT));
  } else {
    for (int chunk = 0; chunk < head_dim; chunk += 16) {
      CacheT* target = value_block + Layout::value_index(block_size, head_dim, token, chunk);
      for (int j = 0; j < 16; ++j) target[2 * j] = row[chunk + j];
    }
  }
}

/// Rows of one head for a run of tokens, as cache elements: the input rows themselves when the
/// cache type is the input type, else FP8 rows converted into a staging buffer.
template <class CacheT>
struct CacheRows {
  const CacheT* first;  ///< Row of the run's first token.
  std::int64_t stride;  ///< Elements between consecutive tokens' rows.

  /// Row of the run's `index`-th token.
  PAGEDATTN_ALWAYS_INLINE const CacheT* operator[](std::size_t index) const noexcept {
    return first + static_cast<std::int64_t>(index) * stride;
  }
};

/// bf16 rows of one head that a kernel quantizes to FP8 as it loads them, in registers, instead
/// of staging converted rows first (see stream_group): row `index` starts at first + index *
/// stride elements, and element x is stored as Format(float(x) * 2^j), j as `constants` say.
template <class Format>
struct QuantizingRows {
  const bf16_t* first;                   ///< Row of the first token.
  std::int64_t stride;                   ///< Elements between consecutive tokens' rows.
  Bf16ToFp8Constants<Format> constants;  ///< The encoder's constants for the scale.

  /// Row of the `index`-th token.
  PAGEDATTN_ALWAYS_INLINE const bf16_t* operator[](std::size_t index) const noexcept {
    return first + static_cast<std::int64_t>(index) * stride;
  }
};

/// True when `Kernels` can stream a group straight from bf16 input into an FP8 cache of type
/// CacheT (QuantizingRows): it declares `static constexpr bool quantizes_bf16_rows = true`.
template <class Kernels, class InputT, class CacheT>
inline constexpr bool fuses_quantization =
    std::is_same_v<InputT, bf16_t> && is_fp8_v<CacheT> && requires { requires Kernels::quantizes_bf16_rows; };

/// Prefetches (into L2 and beyond) every cache line that overlaps [start, start + bytes).
template <class Isa>
PAGEDATTN_ALWAYS_INLINE void prefetch_lines(const void* start, std::size_t bytes) noexcept {
  constexpr std::uintptr_t line = cache_line_bytes;
  const auto begin = reinterpret_cast<std::uintptr_t>(start);
  for (std::uintptr_t at = begin & ~(line - 1); at < begin + bytes; at += line) {
    __builtin_prefetch(reinterpret_cast<const void*>(at), 0, 2);
  }
}

/// Prefetches (into L2 and beyond) the input rows (K or V) of every head of `tokens` tokens,
/// row (t, h) at first + t * token_stride + h * head_stride elements, in the address order of a
/// packed input (token, then head), paced over `calls` calls: after n calls (n a multiple of
/// batch_calls), the first tokens * heads * n / calls rows. stream_group has the streaming
/// stores of a group call it once per line they write, so the next group's rows arrive evenly
/// over the current one's work. Issued all at once, ahead of that pace, or head by head (rows
/// 2 KB apart in a packed input), they came slower (see the README). Always inlined: GCC
/// deletes calls to an out-of-line function whose only effect is a prefetch.
template <class Isa, class InputT>
class GroupPrefetcher {
 public:
  /// Prefetches nothing when `tokens` is 0 (then `first` is not used). `calls` > 0.
  PAGEDATTN_ALWAYS_INLINE GroupPrefetcher(const InputT* first, std::int64_t token_stride,
                                          std::int64_t head_stride, int tokens, int heads,
                                          std::size_t row_bytes, std::size_t calls) noexcept
      : first_(first), token_stride_(token_stride), head_stride_(head_stride), heads_(heads),
        row_bytes_(row_bytes), rows_(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads)),
        calls_(calls) {}

  /// Counts a call; every batch_calls calls, prefetches the rows then due.
  PAGEDATTN_ALWAYS_INLINE void operator()() noexcept {
    if (++called_ % batch_calls != 0) return;
    while (issued_ < rows_ && issued_ * calls_ < rows_ * called_) {
      prefetch_lines<Isa>(first_ + token_ * token_stride_ + head_ * head_stride_, row_bytes_);
      ++issued_;
      if (++head_ == heads_) {
        head_ = 0;
        ++token_;
      }
    }
  }

 private:
  /// Calls per batch of prefetches: 8 (512 bytes of rows per batch at one line per call) came
  /// faster than a row at a time or 16 calls.
  static constexpr std::size_t batch_calls = 8;

  const InputT* first_;
  std::int64_t token_stride_;
  std::int64_t head_stride_;
  int heads_;
  std::size_t row_bytes_;
  std::size_t rows_;
  std::size_t calls_;
  std::size_t called_ = 0;
  std::size_t issued_ = 0;
  std::int64_t token_ = 0;
  int head_ = 0;
};

/// The rows of `count` tokens (`first`, then every `stride` elements) as cache elements: the
/// input itself when no conversion is needed, else quantized with Fp8Converter<Isa> (bit-exact
/// with CacheT(float(x) / scale)) into `staging` (count * head_dim elements).
template <class Isa, class InputT, class CacheT>
PAGEDATTN_ALWAYS_INLINE CacheRows<CacheT> stage_rows(const InputT* first, std::int64_t stride,
                                                     std::size_t count, CacheT* staging,
                                                     float scale, int head_dim) noexcept {
  if constexpr (std::is_same_v<InputT, CacheT>) {
    return {first, stride};
  } else {
    static_assert(is_fp8_v<CacheT>);
    const auto length = static_cast<std::size_t>(head_dim);
    Fp8Converter<Isa>::template run_rows<InputT, CacheT>(first, stride, count, length, staging, scale);
    return {staging, head_dim};
  }
}

/// A run of tokens that write_token_runs stores together (group_run_length tokens).
struct TokenRun {
  std::size_t first;  ///< First token of the run.
  std::size_t count;  ///< Tokens in the run; 0 when no token is left.
};

/// The run starting at the first token at or after `from` whose slot is not negative.
template <class Isa>
PAGEDATTN_ALWAYS_INLINE TokenRun next_token_run(const std::int64_t* slot_mapping, std::size_t from,
                                                std::size_t num_tokens) noexcept {
  while (from < num_tokens && slot_mapping[from] < 0) ++from;
  if (from == num_tokens) return {from, 0};
  return {from, group_run_length<Isa>(slot_mapping, from, num_tokens)};
}

/// Prefetches what write_token_runs touches for head `head` of `run` (a non-streamed run): its
/// K and V input rows, and the cache lines it writes (the run's K group, whose every line holds
/// part of each token's row, and the run's V pairs in each 16-dim chunk). Issued one run ahead,
/// so the memory latency of rows and scattered cache lines overlaps the current run's work.
template <class Isa, class InputT, class CacheT>
PAGEDATTN_ALWAYS_INLINE void prefetch_run(const CacheWriteArgs<InputT, CacheT>& args, TokenRun run,
                                          int head) noexcept {
  using Layout = KvBlockLayout<CacheT>;
  const auto row_bytes = static_cast<std::size_t>(args.head_dim) * sizeof(InputT);
  for (std::size_t i = 0; i < run.count; ++i) {
    prefetch_lines<Isa>(args.key_row(run.first + i, head), row_bytes);
    prefetch_lines<Isa>(args.value_row(run.first + i, head), row_bytes);
  }
  const std::int64_t slot = args.slot_mapping[run.first];
  const std::int64_t block = slot / args.block_size;
  const int offset = static_cast<int>(slot % args.block_size);
  const int last = offset + static_cast<int>(run.count) - 1;
  const int group = offset - offset % kv_token_group;
  prefetch_lines<Isa>(args.key_block(block, head) + Layout::key_index(args.head_dim, group, 0),
                      static_cast<std::size_t>(kv_token_group * args.head_dim) * sizeof(CacheT));
  // V of tokens offset..last in one 16-dim chunk: contiguous rows (fp32) or pairs (paired).
  const int chunks = Layout::paired ? args.head_dim / 16 : 1;
  const std::size_t span =
      Layout::paired
          ? (Layout::value_index(args.block_size, args.head_dim, last, 15) -
             Layout::value_index(args.block_size, args.head_dim, offset, 0) + 1) * sizeof(CacheT)
          : run.count * static_cast<std::size_t>(args.head_dim) * sizeof(CacheT);
  for (int c = 0; c < chunks; ++c) {
    prefetch_lines<Isa>(args.value_block(block, head) +
                            Layout::value_index(args.block_size, args.head_dim, offset, 16 * c),
                        span);
  }
}

/// Writes the V rows of a whole 16-token group (`first_token` a multiple of 16) with the Kernels'
/// streaming line store: each 64-byte line holds 16 dims of 4 / sizeof(CacheT) tokens (an fp32
/// row chunk, a 2-byte token pair, or an FP8 token quad: two pairs). `rows`: CacheRows<CacheT>
/// (stream_value_line) or QuantizingRows (stream_quantized_value_line). Calls each_line() after
/// each line.
template <class Kernels, class Rows, class CacheT, class EachLine>
PAGEDATTN_ALWAYS_INLINE void stream_value_group(Rows rows, CacheT* value_block, int first_token,
                                                int block_size, int head_dim,
                                                EachLine& each_line) noexcept {
  using Layout = KvBlockLayout<CacheT>;
  constexpr int line_tokens = 4 / static_cast<int>(sizeof(CacheT));
  for (int t = 0; t < kv_token_group; t += line_tokens) {
    for (int chunk = 0; chunk < head_dim; chunk += 16) {
      CacheT* target = value_block + Layout::value_index(block_size, head_dim, first_token + t, chunk);
      if constexpr (std::is_same_v<Rows, CacheRows<CacheT>>) {
        const CacheT* line_rows[line_tokens];
        for (int i = 0; i < line_tokens; ++i) line_rows[i] = rows[static_cast<std::size_t>(t + i)] + chunk;
        Kernels::stream_value_line(target, line_rows);
      } else {
        Kernels::stream_quantized_value_line(target, rows, t, chunk);
      }
      each_line();
    }
  }
}

/// Writes the K and V rows of a whole 16-token group (tokens first.., block offset `offset`, a
/// multiple of 16) with the Kernels' streaming stores: K of every head, then V of every head.
/// FP8 rows are quantized in registers as the kernels load them when fuses_quantization holds
/// and the scales allow (QuantizingRows: powers of two), else converted into `staging` first
/// (a separate pass, whose stores queued behind the streaming ones: about 1.3x slower on
/// AVX2). Meanwhile a GroupPrefetcher brings in the input rows of the 16 tokens after the group
/// (K during K, V during V; by token index, whatever their slots), paced by the lines written.
/// A streamed group has no cache lines to read.
template <class Isa, class Kernels, class InputT, class CacheT>
PAGEDATTN_ALWAYS_INLINE void stream_group(const CacheWriteArgs<InputT, CacheT>& args,
                                          std::size_t first, std::int64_t block, int offset,
                                          CacheT* staging) noexcept {
  using Layout = KvBlockLayout<CacheT>;
  using Prefetcher = GroupPrefetcher<Isa, InputT>;
  const int head_dim = args.head_dim;
  const int heads = args.num_kv_heads;
  const std::size_t ahead = first + kv_token_group;
  const int ahead_tokens =
      ahead < args.num_tokens ? static_cast<int>(std::min<std::size_t>(kv_token_group, args.num_tokens - ahead)) : 0;
  const std::size_t row_bytes = static_cast<std::size_t>(head_dim) * sizeof(InputT);
  // Lines the group's K (and its V) stores over all heads: 16 rows of head_dim cache elements each.
  const std::size_t lines_written =
      static_cast<std::size_t>(heads) * kv_token_group * static_cast<std::size_t>(head_dim) * sizeof(CacheT) /
      cache_line_bytes;
  Prefetcher next_keys(ahead_tokens != 0 ? args.key_row(ahead, 0) : nullptr, args.key_token_stride,
                       args.key_head_stride, ahead_tokens, heads, row_bytes, lines_written);
  Prefetcher next_values(ahead_tokens != 0 ? args.value_row(ahead, 0) : nullptr, args.value_token_stride,
                         args.value_head_stride, ahead_tokens, heads, row_bytes, lines_written);
  // K of every head, then V of every head, from the rows key_rows(head) and value_rows(head).
  const auto write = [&](const auto& key_rows, const auto& value_rows) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
    for (int head = 0; head < heads; ++head) {
      Kernels::stream_key_group(key_rows(head), args.key_block(block, head) + Layout::key_index(head_dim, offset, 0),
                                head_dim, next_keys);
    }
    for (int head = 0; head < heads; ++head) {
      stream_value_group<Kernels>(value_rows(head), args.value_block(block, head), offset, args.block_size,
                                  head_dim, next_values);
    }
  };
  if constexpr (fuses_quantization<Kernels, InputT, CacheT>) {
    using Format = typename CacheT::format;
    const auto key_constants = Bf16ToFp8Constants<Format>::for_scale(args.k_scale);
    const auto value_constants = Bf16ToFp8Constants<Format>::for_scale(args.v_scale);
    if (key_constants && value_constants) {
      write([&](int head) PAGEDATTN_ALWAYS_INLINE_LAMBDA { return QuantizingRows<Format>{args.key_row(first, head), args.key_token_stride, *key_constants}; },
            [&](int head) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
              return QuantizingRows<Format>{args.value_row(first, head), args.value_token_stride, *value_constants};
            });
      return;
    }
  }
  write([&](int head) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          return stage_rows<Isa>(args.key_row(first, head), args.key_token_stride, kv_token_group, staging,
                                 args.k_scale, head_dim);
        },
        [&](int head) PAGEDATTN_ALWAYS_INLINE_LAMBDA {
          return stage_rows<Isa>(args.value_row(first, head), args.value_token_stride, kv_token_group, staging,
                                 args.v_scale, head_dim);
        });
}

/// The vector back-ends' driver: splits the tokens into runs (group_run_length) and calls, per
/// run and head, `Kernels` (an ISA's kernel set, templated on the ISA tag) for K and V:
///   static constexpr std::size_t min_key_run;  // shortest run written with write_key_run
///   write_key_run(rows, first_lane, count, group_start, head_dim)   // run inside one K group
///   write_value_pair(even_row, odd_row, value_block, even_token, block_size, head_dim)
///   write_value_row(row, value_block, token, block_size, head_dim)
///   streams_group<CacheT>(head_dim)   // true: whole groups may use the two below
///   stream_key_group(rows, group_start, head_dim, each_line)  // 16 tokens, whole lines;
///                                     // each_line() once per 64-byte line
///   stream_value_line(target, rows)   // one 64-byte V line of a group (stream_value_group)
///   end_streaming()                   // orders the streaming stores before later stores
/// and optionally, to stream bf16 input into an FP8 cache without staging (fuses_quantization):
///   static constexpr bool quantizes_bf16_rows = true;  // the two below exist
///   stream_key_group(QuantizingRows, group_start, head_dim, each_line)
///   stream_quantized_value_line(target, QuantizingRows, token, chunk)  // tokens token..+3
/// Shorter K runs go through place_key_row. A run that fills a whole K group (a prefill) is
/// written with streaming stores when the cache is 64-byte aligned (stream_group): every line
/// it writes is written whole, so the stores skip reading the line first (the memory traffic
/// of a copy). Every other (run, head) first prefetches the next run's (prefetch_run).
template <class Isa, class Kernels, class InputT, class CacheT>
PAGEDATTN_ALWAYS_INLINE void write_token_runs(const CacheWriteArgs<InputT, CacheT>& args) noexcept {
  using Layout = KvBlockLayout<CacheT>;
  // FP8 rows of one run and head; unused (size 1) when nothing is converted.
  alignas(64) CacheT staging[is_fp8_v<CacheT> ? kv_token_group * max_head_dim : 1];
  const int head_dim = args.head_dim;
  const bool stream = Kernels::template streams_group<CacheT>(head_dim) &&
                      reinterpret_cast<std::uintptr_t>(args.cache) % 64 == 0;
  bool streamed_any = false;
  TokenRun run = next_token_run<Isa>(args.slot_mapping, 0, args.num_tokens);
  while (run.count != 0) {
    const TokenRun next = next_token_run<Isa>(args.slot_mapping, run.first + run.count, args.num_tokens);
    const std::size_t first = run.first;
    const std::size_t count = run.count;
    const std::int64_t slot = args.slot_mapping[first];
    const std::int64_t block = slot / args.block_size;
    const int offset = static_cast<int>(slot % args.block_size);
    if (stream && count == kv_token_group) {
      stream_group<Isa, Kernels>(args, first, block, offset, staging);
      streamed_any = true;
      run = next;
      continue;
    }
    for (int head = 0; head < args.num_kv_heads; ++head) {
      if (next.count != 0) prefetch_run<Isa>(args, next, head);
      const CacheRows<CacheT> keys =
          stage_rows<Isa>(args.key_row(first, head), args.key_token_stride, count, staging,
                          args.k_scale, head_dim);
      CacheT* key_block = args.key_block(block, head);
      if (count >= Kernels::min_key_run) {
        const int lane = offset % kv_token_group;
        Kernels::write_key_run(keys, lane, static_cast<int>(count),
                               key_block + Layout::key_index(head_dim, offset - lane, 0), head_dim);
      } else {
        for (std::size_t i = 0; i < count; ++i) {
          place_key_row<Isa>(keys[i], key_block, offset + static_cast<int>(i), head_dim);
        }
      }

      const CacheRows<CacheT> values =
          stage_rows<Isa>(args.value_row(first, head), args.value_token_stride, count, staging,
                          args.v_scale, head_dim);
      CacheT* value_block = args.value_block(block, head);
      for (std::size_t i = 0; i < count;) {
        const int token = offset + static_cast<int>(i);
        if constexpr (Layout::paired) {
          if (token % 2 == 0 && i + 1 < count) {
            Kernels::write_value_pair(values[i], values[i + 1], value_block, token,
                                      args.block_size, head_dim);
            i += 2;
            continue;
          }
        }
        Kernels::write_value_row(values[i], value_block, token, args.block_size, head_dim);
        i += 1;
      }
    }
    run = next;
  }
  if (streamed_any) Kernels::end_streaming();
}

}  // namespace pagedattn::backend
