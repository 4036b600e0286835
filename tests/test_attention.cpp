// Correctness of paged_attention on the ISA chosen with --isa: a covering grid of types, shapes,
// masks and options against the float64 oracle, split/executor/deterministic equivalences, and
// bad input rejected before any output byte is written. The big shapes are tagged [large].
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention_reference.hpp"
#include "pagedattn/attention/paged_attention.hpp"
#include "pagedattn/attention/scheduler.hpp"
#include "pagedattn/attention/traits.hpp"
#include "pagedattn/exec/serial_executor.hpp"
#include "pagedattn/exec/thread_pool.hpp"
#include "test_support.hpp"
#include "tolerances.hpp"

using namespace pagedattn;
using pagedattn::test::selected_isa;
namespace pt = pagedattn::test;

namespace {

// ------------------------------------------------------------------------------------------------
// Type pairs, head dims, executors
// ------------------------------------------------------------------------------------------------

/// Number of (query type, cache type) pairs: float/bf16/fp16 queries x {same type, e4m3, e5m2}.
constexpr int num_type_pairs = 9;

/// Calls `f.template operator()<Q, CacheT>()` for type pair `index` (0 .. num_type_pairs - 1).
template <class F>
void visit_type_pair(int index, F&& f) {
  switch (index) {
    case 0: f.template operator()<float, float>(); break;
    case 1: f.template operator()<float, fp8_e4m3_t>(); break;
    case 2: f.template operator()<float, fp8_e5m2_t>(); break;
    case 3: f.template operator()<bf16_t, bf16_t>(); break;
    case 4: f.template operator()<bf16_t, fp8_e4m3_t>(); break;
    case 5: f.template operator()<bf16_t, fp8_e5m2_t>(); break;
    case 6: f.template operator()<fp16_t, fp16_t>(); break;
    case 7: f.template operator()<fp16_t, fp8_e4m3_t>(); break;
    case 8: f.template operator()<fp16_t, fp8_e5m2_t>(); break;
    default: FAIL("no type pair " << index);
  }
}

/// "query/cache" type names of pair `index`, e.g. "bf16/fp8_e4m3".
std::string pair_name(int index) {
  std::string name;
  visit_type_pair(index, [&]<class Q, class CacheT>() {
    name = std::string(dtype_name(dtype_of<Q>)) + "/" + std::string(dtype_name(dtype_of<CacheT>));
  });
  return name;
}

/// Index of the type pair (Q, CacheT) (see visit_type_pair).
template <class Q, class CacheT>
int pair_index() {
  int found = -1;
  for (int index = 0; index < num_type_pairs; ++index) {
    visit_type_pair(index, [&]<class A, class B>() {
      if (std::is_same_v<A, Q> && std::is_same_v<B, CacheT>) found = index;
    });
  }
  return found;
}

/// Tolerance of pair `index` (from tolerances.hpp).
double pair_tolerance(int index) {
  double tol = 0.0;
  visit_type_pair(index, [&]<class Q, class CacheT>() { tol = pt::tolerance<Q, CacheT>(); });
  return tol;
}

/// The head dimensions under test.
constexpr std::array<int, 7> grid_head_dims = {64, 80, 96, 112, 128, 256, 512};

/// Calls `f.template operator()<D>()` with the compile-time head dim equal to `head_dim`.
template <class F>
void visit_head_dim(int head_dim, F&& f) {
  switch (head_dim) {
    case 64: f.template operator()<64>(); break;
    case 80: f.template operator()<80>(); break;
    case 96: f.template operator()<96>(); break;
    case 112: f.template operator()<112>(); break;
    case 128: f.template operator()<128>(); break;
    case 256: f.template operator()<256>(); break;
    case 512: f.template operator()<512>(); break;
    default: FAIL("head_dim " << head_dim << " is not in the grid");
  }
}

/// Which executor a case runs on.
enum class Exec { serial, pool1, pool2 };

/// The executors of one test case (pools are started once and reused).
struct Executors {
  SerialExecutor serial;  ///< SerialExecutor.
  ThreadPool pool1{1};    ///< ThreadPool(1).
  ThreadPool pool2{2};    ///< ThreadPool(2).
};

/// A non-owning, non-allocating reference to a task callable `fn(task, worker)`.
class TaskRef {
 public:
  /// Refers to `fn`, which must outlive this reference.
  template <class F>
  explicit TaskRef(F& fn) noexcept : object_(static_cast<void*>(std::addressof(fn))), call_(&invoke<F>) {}
  /// Calls the referenced callable.
  void operator()(std::size_t task, std::size_t worker) const { call_(object_, task, worker); }

 private:
  template <class F>
  static void invoke(void* object, std::size_t task, std::size_t worker) {
    (*static_cast<F*>(object))(task, worker);
  }

  void* object_;
  void (*call_)(void*, std::size_t, std::size_t);
};

/// An Executor that forwards every parallel_for to the SerialExecutor or ThreadPool `kind` names.
/// Running all three through this one type instantiates paged_attention once per traits instead
/// of once per executor type (the grids need 252 traits; compile time and memory matter, above
/// all under the sanitizers). The error tests call paged_attention with the executor types
/// themselves.
class ChosenExecutor {
 public:
  /// Forwards to `executors`' executor of kind `kind`.
  ChosenExecutor(Executors& executors, Exec kind) : executors_(&executors), kind_(kind) {}

  /// The chosen executor's workers.
  [[nodiscard]] std::size_t num_workers() const noexcept {
    switch (kind_) {
      case Exec::serial: return executors_->serial.num_workers();
      case Exec::pool1: return executors_->pool1.num_workers();
      case Exec::pool2: return executors_->pool2.num_workers();
    }
    return 1;
  }

  /// Runs `fn(task, worker)` for every task on the chosen executor.
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void parallel_for(std::size_t num_tasks, F&& fn) {
    run(num_tasks, TaskRef(fn));
  }

 private:
  void run(std::size_t num_tasks, const TaskRef& task) {
    switch (kind_) {
      case Exec::serial: executors_->serial.parallel_for(num_tasks, task); break;
      case Exec::pool1: executors_->pool1.parallel_for(num_tasks, task); break;
      case Exec::pool2: executors_->pool2.parallel_for(num_tasks, task); break;
    }
  }

  Executors* executors_;
  Exec kind_;
};

static_assert(Executor<ChosenExecutor>);

/// Name of an executor kind.
const char* exec_name(Exec kind) {
  switch (kind) {
    case Exec::serial: return "SerialExecutor";
    case Exec::pool1: return "ThreadPool(1)";
    case Exec::pool2: return "ThreadPool(2)";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------------
// Error summary, memory helpers
// ------------------------------------------------------------------------------------------------

/// Largest error measured per type pair during the run; printed when the program exits (for the
/// README's accuracy table).
class ErrorSummary {
 public:
  /// Records one comparison of pair `pair` with the oracle: the largest `error`, and the largest
  /// `arithmetic_error` (the error beyond the output type's own rounding).
  void record(int pair, double error, double arithmetic_error) {
    const auto i = static_cast<std::size_t>(pair);
    max_error_[i] = std::max(max_error_[i], error);
    max_arithmetic_error_[i] = std::max(max_arithmetic_error_[i], arithmetic_error);
    ++comparisons_[i];
  }
  ErrorSummary() = default;
  ErrorSummary(const ErrorSummary&) = delete;
  ErrorSummary& operator=(const ErrorSummary&) = delete;
  /// Prints the table.
  ~ErrorSummary() {
    bool any = false;
    for (long count : comparisons_) any = any || count > 0;
    if (!any) return;
    std::printf("\ntest_attention [%s]: largest |output - float64 oracle| per (query, cache) type\n"
                "  (second column: beyond the output type's own rounding, i.e. the largest\n"
                "  |output - oracle| - half an ulp of the oracle's value in the output type)\n",
                std::string(isa_name(selected_isa)).c_str());
    for (int pair = 0; pair < num_type_pairs; ++pair) {
      const auto i = static_cast<std::size_t>(pair);
      if (comparisons_[i] == 0) continue;
      std::printf("  %-16s %9.3e  %9.3e  (tolerance %.0e, %ld comparisons)\n",
                  pair_name(pair).c_str(), max_error_[i], max_arithmetic_error_[i],
                  pair_tolerance(pair), comparisons_[i]);
    }
    std::fflush(stdout);
  }

 private:
  std::array<double, num_type_pairs> max_error_{};
  std::array<double, num_type_pairs> max_arithmetic_error_{};
  std::array<long, num_type_pairs> comparisons_{};
};

/// The run's ErrorSummary.
ErrorSummary& error_summary() {
  static ErrorSummary summary;
  return summary;
}

/// Exactly `size` bytes from std::aligned_alloc(64, ...) (size is a multiple of 64), no slack, so
/// AddressSanitizer reports any access past the end.
class AlignedBuffer {
 public:
  /// Allocates `size` bytes (64 when size is 0, exposed as an empty span).
  explicit AlignedBuffer(std::size_t size)
      : size_(size), data_(static_cast<std::byte*>(std::aligned_alloc(64, size == 0 ? 64 : size))) {
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  /// The whole buffer.
  [[nodiscard]] std::span<std::byte> span() const { return {data_, size_}; }
  /// First byte.
  [[nodiscard]] std::byte* data() const { return data_; }
  /// Bytes.
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  std::size_t size_;
  std::byte* data_;
};

/// An output tensor with padding after each head and each token, guard elements before and after,
/// and room for `spare_tokens` more rows, everything filled with a canary byte pattern first.
template <class T>
class CanaryOutput {
 public:
  /// Byte every element starts as.
  static constexpr unsigned char canary = 0xA5;

  /// An output of `num_tokens` x `num_heads` x `head_dim` live elements.
  CanaryOutput(std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
               std::int64_t spare_tokens = 0)
      : num_tokens_(num_tokens),
        num_heads_(num_heads),
        head_dim_(head_dim),
        head_stride_(head_dim + head_pad),
        token_stride_(num_heads * (head_dim + head_pad) + token_pad) {
    storage_.resize(static_cast<std::size_t>(2 * guard + (num_tokens + spare_tokens) * token_stride_));
    reset();
  }

  /// Refills every element with the canary.
  void reset() { std::memset(static_cast<void*>(storage_.data()), canary, storage_.size() * sizeof(T)); }

  /// The live elements.
  [[nodiscard]] TokenHeadsView<T> view() {
    return {storage_.data() + guard, num_tokens_, num_heads_, head_dim_, token_stride_, head_stride_};
  }
  /// The live elements, read-only.
  [[nodiscard]] TokenHeadsView<const T> const_view() const {
    return {storage_.data() + guard, num_tokens_, num_heads_, head_dim_, token_stride_, head_stride_};
  }

  /// Elements outside the live rows (padding, guards, spare rows) that no longer hold the canary.
  [[nodiscard]] std::size_t touched_padding() const {
    std::size_t touched = 0;
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      if (!is_live(i) && !holds_canary(i)) ++touched;
    }
    return touched;
  }
  /// True when no element at all was written.
  [[nodiscard]] bool untouched() const {
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      if (!holds_canary(i)) return false;
    }
    return true;
  }
  /// True when both hold the same bytes everywhere (same shape required).
  [[nodiscard]] bool same_bits(const CanaryOutput& other) const {
    return storage_.size() == other.storage_.size() &&
           std::memcmp(storage_.data(), other.storage_.data(), storage_.size() * sizeof(T)) == 0;
  }

 private:
  static constexpr std::int64_t guard = 32;
  static constexpr std::int64_t head_pad = 8;
  static constexpr std::int64_t token_pad = 3;

  bool is_live(std::size_t index) const {
    const auto i = static_cast<std::int64_t>(index) - guard;
    if (i < 0 || i >= num_tokens_ * token_stride_) return false;
    const std::int64_t within_token = i % token_stride_;
    return within_token / head_stride_ < num_heads_ && within_token % head_stride_ < head_dim_;
  }
  bool holds_canary(std::size_t index) const {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &storage_[index], sizeof(T));
    for (unsigned char b : bytes) {
      if (b != canary) return false;
    }
    return true;
  }

  std::int64_t num_tokens_;
  std::int64_t num_heads_;
  std::int64_t head_dim_;
  std::int64_t head_stride_;
  std::int64_t token_stride_;
  std::vector<T> storage_;
};

/// True when rows [a_first, a_first + count) of `a` and [b_first, ...) of `b` hold identical bits.
template <class T>
bool rows_bitwise_equal(TokenHeadsView<const T> a, std::int64_t a_first, TokenHeadsView<const T> b,
                        std::int64_t b_first, std::int64_t count) {
  for (std::int64_t t = 0; t < count; ++t) {
    for (std::int64_t h = 0; h < a.num_heads; ++h) {
      if (std::memcmp(a.row(a_first + t, h), b.row(b_first + t, h),
                      static_cast<std::size_t>(a.head_dim) * sizeof(T)) != 0) {
        return false;
      }
    }
  }
  return true;
}

// ------------------------------------------------------------------------------------------------
// Cases
// ------------------------------------------------------------------------------------------------

/// How a case splits KV ranges.
enum class Split { off, automatic, fixed, deterministic };

/// Name of a split mode.
const char* split_name(Split split) {
  switch (split) {
    case Split::off: return "off";
    case Split::automatic: return "automatic";
    case Split::fixed: return "fixed";
    case Split::deterministic: return "deterministic";
  }
  return "?";
}

/// Optional logit features of a case (bit set).
enum Feature : unsigned { no_features = 0, softcap = 1, alibi = 2, sinks = 4 };

/// Everything that defines one comparison with the oracle.
struct CaseSpec {
  int pair = 0;                                  ///< Type pair (see visit_type_pair).
  std::vector<std::pair<int, int>> requests;     ///< (q_len, seq_len) per request.
  int num_query_heads = 1;                       ///< Hq.
  int num_kv_heads = 1;                          ///< Hkv.
  int head_dim = 64;                             ///< Head dim (one of grid_head_dims).
  int block_size = 16;                           ///< Tokens per cache block.
  bool causal = true;                            ///< Batch-wide causal flag.
  bool per_request_causal = false;               ///< Per-request flags 0, 1, 0, 1, ... instead.
  int window_left = -1;                          ///< -1 = unbounded.
  int window_right = -1;                         ///< -1 = unbounded.
  unsigned features = no_features;               ///< Feature bits.
  Split split = Split::off;                      ///< Split mode.
  std::int32_t split_tokens = 0;                 ///< For fixed / deterministic.
  Exec exec = Exec::serial;                      ///< Executor.
  std::uint64_t seed = 1;                        ///< Data seed.
};

/// One line describing `spec` (for failure messages).
std::string describe(const CaseSpec& spec) {
  std::ostringstream out;
  out << pair_name(spec.pair) << " requests=[";
  for (std::size_t r = 0; r < spec.requests.size(); ++r) {
    out << (r ? "," : "") << "(" << spec.requests[r].first << "," << spec.requests[r].second << ")";
  }
  out << "] heads=" << spec.num_query_heads << "/" << spec.num_kv_heads << " head_dim=" << spec.head_dim
      << " block=" << spec.block_size << " causal="
      << (spec.per_request_causal ? "per-request" : spec.causal ? "yes" : "no")
      << " window=(" << spec.window_left << "," << spec.window_right << ")"
      << ((spec.features & softcap) ? " softcap" : "") << ((spec.features & alibi) ? " alibi" : "")
      << ((spec.features & sinks) ? " sinks" : "") << " split=" << split_name(spec.split);
  if (spec.split == Split::fixed || spec.split == Split::deterministic) {
    out << "(" << spec.split_tokens << ")";
  }
  out << " exec=" << exec_name(spec.exec) << " seed=" << spec.seed << " isa=" << isa_name(selected_isa);
  return out.str();
}

/// Scheduler options of a split mode for an executor of `num_workers` workers.
SchedulerOptions scheduler_options(Split split, std::int32_t split_tokens, std::size_t num_workers) {
  SchedulerOptions options;
  options.num_workers = num_workers;
  switch (split) {
    case Split::off: options.split_policy = SplitPolicy::off; break;
    case Split::automatic: options.split_policy = SplitPolicy::automatic; break;
    case Split::fixed:
      options.split_policy = SplitPolicy::fixed;
      options.split_tokens = split_tokens;
      break;
    case Split::deterministic:
      options.split_policy = SplitPolicy::automatic;
      options.deterministic = true;
      options.split_tokens = split_tokens;
      break;
  }
  return options;
}

/// FP8 dequantisation scales used everywhere (also passed for non-FP8 caches, where the library
/// must ignore them: k_scale / v_scale apply to FP8 caches only).
constexpr float test_k_scale = 0.37f;
/// See test_k_scale.
constexpr float test_v_scale = 1.9f;

/// What paged_attention reads besides the plan, output and workspace (views; non-owning).
template <class Q, class CacheT, int HeadDim>
struct AttentionInputs {
  AttentionBatch batch;                         ///< The batch the plan is built for.
  TokenHeadsView<const Q> query;                ///< Queries.
  KvCacheView<const CacheT, HeadDim> cache;     ///< The cache.
  BlockTableView block_table;                   ///< The block table.
  AttentionParams params;                       ///< Numeric options.
};

/// What a planned run tells the checking code (which is not templated on the ISA).
struct RunReport {
  IsaId isa = IsaId::scalar;           ///< plan.isa().
  std::int32_t num_partials = 0;       ///< plan.num_partials().
  std::size_t num_reductions = 0;      ///< plan.reductions().size().
  std::uint64_t workspace_bytes = 0;   ///< plan.workspace_bytes().
  bool deterministic = false;          ///< plan.deterministic().
  std::size_t num_items = 0;           ///< plan.work_items().size().
  std::int32_t widest_item_kv_heads = 0;  ///< Most KV heads of one work item.
};

/// One execution of a plan: the executor and where the output goes.
template <class Q>
struct PlanRun {
  ChosenExecutor executor;   ///< Runs the tasks.
  TokenHeadsView<Q> output;  ///< Receives the result.
};

/// Plans `inputs.batch` for AttentionTraits<Q, CacheT, HeadDim> on the --isa ISA
/// (SchedulerOptions::isa) with `options`, then runs that one plan for each entry of `runs` in
/// turn, in a workspace of exactly plan.workspace_bytes() bytes. Holds no assertions: the callers
/// check the report and the outputs.
template <class Q, class CacheT, int HeadDim>
RunReport plan_and_run(const SchedulerOptions& options, const AttentionInputs<Q, CacheT, HeadDim>& inputs,
                       std::initializer_list<PlanRun<Q>> runs) {
  RunReport report;
  {
    using Traits = AttentionTraits<Q, CacheT, HeadDim>;
    SchedulerOptions isa_options = options;
    isa_options.isa = selected_isa;
    const AttentionScheduler<Traits> scheduler(isa_options);
    const AttentionPlan<Traits> plan = scheduler.plan(inputs.batch);
    const AlignedBuffer workspace(static_cast<std::size_t>(plan.workspace_bytes()));
    for (PlanRun<Q> run : runs) {
      paged_attention(plan, inputs.batch, inputs.query, inputs.cache, inputs.block_table, run.output,
                      inputs.params, workspace.span(), run.executor);
    }
    report = {plan.isa(), plan.num_partials(), plan.reductions().size(), plan.workspace_bytes(),
              plan.deterministic(), plan.work_items().size(), 0};
    for (const WorkItem& item : plan.work_items()) {
      report.widest_item_kv_heads = std::max(report.widest_item_kv_heads, item.kv_head_end - item.kv_head);
    }
  }
  return report;
}

/// Inputs of one case and the oracle's answer, computed once and shared by every run of the case.
template <class Q, class CacheT, int HeadDim>
struct CaseData {
  pt::TestBatch batch;                     ///< The batch.
  pt::StridedTensor<Q> query;              ///< [num_tokens][Hq][HeadDim], padded.
  pt::TestCache<CacheT, HeadDim> cache;    ///< Cache and block table.
  pt::TestParams params;                   ///< Numeric options.
  std::vector<double> reference;           ///< The oracle's output.

  /// The block table as paged_attention takes it.
  [[nodiscard]] BlockTableView block_table() const {
    return BlockTableView::with_stride(cache.table.data(), cache.table_rows, cache.table_cols, cache.table_stride);
  }
  /// Everything paged_attention reads, as views.
  [[nodiscard]] AttentionInputs<Q, CacheT, HeadDim> inputs() const {
    return {batch.view(), query.const_view(), cache.const_view(), block_table(), params.view()};
  }
};

/// Builds the batch of `spec`.
pt::TestBatch make_batch(const CaseSpec& spec) {
  pt::TestBatch batch;
  batch.num_query_heads = spec.num_query_heads;
  batch.num_kv_heads = spec.num_kv_heads;
  batch.causal = spec.causal;
  batch.window_left = spec.window_left;
  batch.window_right = spec.window_right;
  for (std::size_t r = 0; r < spec.requests.size(); ++r) {
    batch.add_request(spec.requests[r].first, spec.requests[r].second);
    if (spec.per_request_causal) batch.causal_per_request.push_back(static_cast<std::uint8_t>(r % 2));
  }
  return batch;
}

/// Generates the data of `spec` (queries, K/V written through reshape_and_cache, params); the
/// oracle's answer is left empty.
template <class Q, class CacheT, int HeadDim>
CaseData<Q, CacheT, HeadDim> make_case_data_without_reference(const CaseSpec& spec) {
  CaseData<Q, CacheT, HeadDim> data;
  data.batch = make_batch(spec);
  const pt::TestBatch& batch = data.batch;
  // Query rows sometimes padded, sometimes at odd element offsets (strides need no alignment).
  data.query = pt::random_tensor<Q>(batch.num_tokens(), spec.num_query_heads, HeadDim,
                                    (spec.seed % 2) * 16, (spec.seed % 3) * 5, spec.seed * 7 + 1);
  const pt::StridedTensor<Q> key =
      pt::random_tensor<Q>(batch.total_kv_tokens(), spec.num_kv_heads, HeadDim, 0, 0, spec.seed * 7 + 2);
  const pt::StridedTensor<Q> value =
      pt::random_tensor<Q>(batch.total_kv_tokens(), spec.num_kv_heads, HeadDim, 0, 0, spec.seed * 7 + 3);
  data.cache = pt::make_filled_cache<CacheT, HeadDim>(batch, spec.block_size, key.const_view(),
                                                      value.const_view(), test_k_scale, test_v_scale,
                                                      spec.seed * 7 + 4, selected_isa);
  // Logits with standard deviation about 2 (4 with the soft-cap, so that it bends them).
  const double spread = (spec.features & softcap) ? 4.0 : 2.0;
  data.params.scale = static_cast<float>(spread / std::sqrt(static_cast<double>(HeadDim)));
  data.params.softcap = (spec.features & softcap) ? 50.0f : 0.0f;
  if (spec.features & alibi) data.params.alibi = pt::alibi_slopes(spec.num_query_heads);
  if (spec.features & sinks) data.params.sinks = pt::random_sinks(spec.num_query_heads, spec.seed * 7 + 5);
  data.params.k_scale = test_k_scale;
  data.params.v_scale = test_v_scale;
  return data;
}

/// make_case_data_without_reference, then the oracle's answer for every query row.
template <class Q, class CacheT, int HeadDim>
CaseData<Q, CacheT, HeadDim> make_case_data(const CaseSpec& spec) {
  CaseData<Q, CacheT, HeadDim> data = make_case_data_without_reference<Q, CacheT, HeadDim>(spec);
  const pt::TestBatch& batch = data.batch;
  data.reference = pt::reference_attention<Q, CacheT>(data.cache.reference(), data.cache.reference_table(),
                                                      data.query.const_view(), batch.view(),
                                                      data.params.view());
  return data;
}

/// Compares `output` with the oracle, records the error for pair `pair` and checks the tolerance.
template <class T>
void check_against_reference(int pair, const CanaryOutput<T>& output, const std::vector<double>& reference) {
  const pt::ErrorMeasure error = pt::max_abs_error<T>(output.const_view(), reference);
  error_summary().record(pair, error.max_abs, error.max_beyond_rounding);
  INFO("max |error| " << error.max_abs << " at token " << error.token << " head " << error.head
                      << " dim " << error.dim << ": got " << error.got << ", oracle " << error.expected);
  CHECK(error.max_abs <= pair_tolerance(pair));
}

/// Checks one grid run: the plan's ISA and workspace size, untouched padding, the error against
/// the oracle, and (when given) identical bits from the same plan on SerialExecutor.
template <class Q>
void check_case_run(const CaseSpec& spec, const RunReport& report, const CanaryOutput<Q>& output,
                    const CanaryOutput<Q>* serial_output, const std::vector<double>& reference) {
  CHECK(report.isa == selected_isa);
  CHECK(report.workspace_bytes % 64 == 0);
  if (spec.split == Split::off) CHECK(report.num_partials == 0);
  CHECK(output.touched_padding() == 0);
  check_against_reference(spec.pair, output, reference);
  if (serial_output != nullptr) {
    CHECK(serial_output->touched_padding() == 0);
    CHECK(serial_output->same_bits(output));
  }
}

/// Runs one case of a grid: plan with the case's options for its executor, run, compare with the
/// oracle; on ThreadPool(2) also run the same plan on SerialExecutor and require identical bits.
void run_case_unguarded(const CaseSpec& spec, Executors& executors) {
  visit_type_pair(spec.pair, [&]<class Q, class CacheT>() {
    visit_head_dim(spec.head_dim, [&]<int HeadDim>() {
      const auto data = make_case_data<Q, CacheT, HeadDim>(spec);
      const ChosenExecutor executor(executors, spec.exec);
      const SchedulerOptions options =
          scheduler_options(spec.split, spec.split_tokens, executor.num_workers());
      CanaryOutput<Q> output(data.batch.num_tokens(), spec.num_query_heads, HeadDim);
      if (spec.exec == Exec::pool2) {
        CanaryOutput<Q> serial_output(data.batch.num_tokens(), spec.num_query_heads, HeadDim);
        const RunReport report = plan_and_run(
            options, data.inputs(),
            {{executor, output.view()}, {ChosenExecutor(executors, Exec::serial), serial_output.view()}});
        check_case_run(spec, report, output, &serial_output, data.reference);
      } else {
        const RunReport report = plan_and_run(options, data.inputs(), {{executor, output.view()}});
        check_case_run<Q>(spec, report, output, nullptr, data.reference);
      }
    });
  });
}

/// run_case_unguarded, reporting an exception as a failed check of this case (so the rest of the
/// grid still runs).
void run_case(const CaseSpec& spec, Executors& executors) {
  INFO(describe(spec));
  try {
    run_case_unguarded(spec, executors);
  } catch (const std::exception& error) {
    FAIL_CHECK("threw " << error.what());
  }
}

// ------------------------------------------------------------------------------------------------
// The grids
// ------------------------------------------------------------------------------------------------

/// The axes of a grid row that go together (batch shape, heads, block size, mask).
struct GridRow {
  std::vector<std::pair<int, int>> requests;  ///< (q_len, seq_len) per request.
  int num_query_heads;                        ///< Hq.
  int num_kv_heads;                           ///< Hkv.
  int block_size;                             ///< Tokens per block.
  bool causal;                                ///< Batch-wide causal flag.
  bool per_request_causal;                    ///< Per-request flags 0, 1, 0, ...
  int window_left;                            ///< -1 = unbounded.
  int window_right;                           ///< -1 = unbounded.
};

/// Feature combinations of the grids.
constexpr std::array<unsigned, 5> grid_features = {no_features, softcap, alibi, sinks,
                                                   softcap | alibi | sinks};
/// Split modes of the grids.
constexpr std::array<Split, 4> grid_splits = {Split::off, Split::automatic, Split::fixed,
                                              Split::deterministic};
/// Executors of the grids.
constexpr std::array<Exec, 3> grid_execs = {Exec::serial, Exec::pool1, Exec::pool2};

/// Element `(row + shift) % size` of `axis`: over any `size` consecutive rows, every value once.
template <class T, std::size_t N>
T rotate(const std::array<T, N>& axis, int row, int shift) {
  return axis[static_cast<std::size_t>(row + shift) % N];
}

/// The main grid (small shapes): the 7 rows below, each run for all 9 type pairs, with head dim,
/// features, split mode and executor rotating with the row and the pair. Every axis has at most
/// 7 values, so every value meets every pair.
std::vector<CaseSpec> main_grid() {
  const std::vector<GridRow> rows = {
      // requests                                      Hq  Hkv block  causal per-req  wl   wr
      {{{1, 1}},                                         4,  4,   16, true,  false,  -1,  -1},
      {{{1, 7}},                                         8,  2,   32, false, false,  -1,  -1},
      {{{1, 213}},                                       9,  3,   48, true,  false, 100,  -1},
      {{{5, 5}},                                        16,  2,  128, true,  false, 255,  -1},
      {{{3, 16}},                                       32,  8,   16, false, false,   7,   3},
      {{{1, 213}, {5, 5}, {1, 1}, {3, 16}, {1, 7}},     16,  1, 2176, true,  true,   -1,  -1},
      {{{3, 16}, {1, 213}, {5, 5}},                      4,  4,   48, true,  true,   50,   2},
  };
  std::vector<CaseSpec> grid;
  for (int pair = 0; pair < num_type_pairs; ++pair) {
    for (int c = 0; c < static_cast<int>(rows.size()); ++c) {
      const GridRow& row = rows[static_cast<std::size_t>(c)];
      CaseSpec spec;
      spec.pair = pair;
      spec.requests = row.requests;
      spec.num_query_heads = row.num_query_heads;
      spec.num_kv_heads = row.num_kv_heads;
      spec.block_size = row.block_size;
      spec.causal = row.causal;
      spec.per_request_causal = row.per_request_causal;
      spec.window_left = row.window_left;
      spec.window_right = row.window_right;
      spec.head_dim = rotate(grid_head_dims, c, pair);
      spec.features = rotate(grid_features, c, 2 * pair);
      spec.split = rotate(grid_splits, c, pair);
      spec.split_tokens =
          (spec.split == Split::fixed || (spec.split == Split::deterministic && c % 2 == 1)) ? 32 : 0;
      spec.exec = rotate(grid_execs, c, 2 * pair);
      spec.seed = static_cast<std::uint64_t>(100 * pair + c + 1);
      grid.push_back(spec);
    }
  }
  return grid;
}

/// The large grid: per pair, (2345, 2345) with 4 heads (full causal for the three same-type
/// pairs, a 256-token window otherwise), (134, 5131) with 8/2 heads, and a decode batch around
/// (1, 7812) with 16/1 heads; head dims <= 256, everything else rotating.
std::vector<CaseSpec> large_grid() {
  constexpr std::array<int, 5> blocks = {16, 32, 48, 128, 2176};
  std::vector<CaseSpec> grid;
  for (int pair = 0; pair < num_type_pairs; ++pair) {
    for (int c = 0; c < 3; ++c) {
      CaseSpec spec;
      spec.pair = pair;
      spec.block_size = rotate(blocks, c, pair);
      if (c == 0) {
        spec.requests = {{2345, 2345}};
        spec.num_query_heads = 4;
        spec.num_kv_heads = 4;
        spec.window_left = pair % 3 == 0 ? -1 : 255;
        spec.head_dim = std::array<int, 3>{64, 80, 96}[static_cast<std::size_t>(pair % 3)];
      } else if (c == 1) {
        spec.requests = {{134, 5131}};
        spec.num_query_heads = 8;
        spec.num_kv_heads = 2;
        spec.causal = pair % 3 != 1;
        if (pair % 3 == 1) {
          spec.window_left = 255;
          spec.window_right = 64;
        }
        spec.per_request_causal = pair % 3 == 2;  // one request, flag 0: non-causal
        spec.head_dim = std::array<int, 3>{128, 64, 112}[static_cast<std::size_t>(pair % 3)];
      } else {
        spec.requests = {{1, 7812}, {1, 213}, {5, 5}, {1, 1}};
        spec.num_query_heads = 16;
        spec.num_kv_heads = 1;
        spec.window_left = pair % 2 ? 255 : -1;
        spec.head_dim = std::array<int, 3>{256, 128, 64}[static_cast<std::size_t>(pair % 3)];
      }
      spec.features = rotate(grid_features, c, pair);
      spec.split = rotate(grid_splits, c, pair);
      spec.split_tokens = spec.split == Split::fixed ? 512 : 0;
      spec.exec = rotate(grid_execs, c, pair);
      spec.seed = static_cast<std::uint64_t>(5000 + 100 * pair + c);
      grid.push_back(spec);
    }
  }
  return grid;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------------

namespace {

/// A hand-made cache for the oracle's own test: 2 blocks of 16 tokens, 1 KV head, head dim 16;
/// block 0 is NaN (never referenced), the request's block 1 holds K[j] = k_j e0 and
/// V[j] = v0_j e0 + v1_j e1, stored divided by the scales (exact for the values used).
template <class CacheT>
struct TinyCache {
  std::vector<CacheT> elements = std::vector<CacheT>(2 * 2 * 16 * 16, pt::nan_element<CacheT>());
  std::vector<std::int32_t> table{1, -1};

  /// Stores position `token`.
  void put(int token, float k, float v0, float v1, float k_scale = 1.0f, float v_scale = 1.0f) {
    using Layout = KvBlockLayout<CacheT>;
    CacheT* key_block = elements.data() + 2 * 256;
    CacheT* value_block = key_block + 256;
    for (int d = 0; d < 16; ++d) {
      key_block[Layout::key_index(16, token, d)] = CacheT(d == 0 ? k / k_scale : 0.0f);
      value_block[Layout::value_index(16, 16, token, d)] =
          CacheT(d == 0 ? v0 / v_scale : d == 1 ? v1 / v_scale : 0.0f);
    }
  }
  /// Oracle on request (q_len, seq_len) with every query e0.
  template <class Q>
  std::vector<double> attend(int q_len, int seq_len, bool causal, const AttentionParams& params,
                             int window_left = -1, int window_right = -1) const {
    pt::TestBatch batch;
    batch.add_request(q_len, seq_len);
    batch.causal = causal;
    batch.window_left = window_left;
    batch.window_right = window_right;
    std::vector<Q> query(static_cast<std::size_t>(q_len) * 16, Q(0.0f));
    for (std::size_t i = 0; i < static_cast<std::size_t>(q_len); ++i) query[i * 16] = Q(1.0f);
    return pt::reference_attention<Q, CacheT>(
        {elements.data(), 2, 1, 16, 16}, {table.data(), 1, 2, 2},
        TokenHeadsView<const Q>::packed(query.data(), q_len, 1, 16), batch.view(), params);
  }
};

}  // namespace

TEST_CASE("the oracle matches hand-computed values", "[attention][oracle]") {
  const double e = std::exp(1.0);
  const double w0 = e / (e + e * e);  // softmax of logits (1, 2)
  const double w1 = e * e / (e + e * e);
  TinyCache<float> cache;
  cache.put(0, 1.0f, 1.0f, 0.0f);
  cache.put(1, 2.0f, 0.0f, 1.0f);
  AttentionParams params;
  params.k_scale = 3.0f;  // ignored: not an FP8 cache
  params.v_scale = 5.0f;

  std::vector<double> out = cache.attend<float>(1, 2, true, params);
  CHECK(out[0] == Approx(w0).epsilon(1e-12));
  CHECK(out[1] == Approx(w1).epsilon(1e-12));
  CHECK(out[2] == 0.0);
  const std::vector<float> sink{0.5f};
  params.sinks = sink;
  out = cache.attend<float>(1, 2, true, params);
  CHECK(out[0] == Approx(e / (e + e * e + std::exp(0.5))).epsilon(1e-12));
  const std::vector<float> big_sink{30.0f};  // larger than every logit: m = sink
  params.sinks = big_sink;
  out = cache.attend<float>(1, 2, true, params);
  CHECK(out[0] == Approx(std::exp(-29.0) / (std::exp(-29.0) + std::exp(-28.0) + 1.0)).epsilon(1e-12));
  params.sinks = {};
  out = cache.attend<float>(2, 2, true, params);  // prefill: token 0 sees position 0 only
  CHECK(out[0] == 1.0);
  CHECK(out[16] == Approx(w0).epsilon(1e-12));
  out = cache.attend<float>(2, 2, false, params);  // non-causal: token 0 sees both
  CHECK(out[0] == Approx(w0).epsilon(1e-12));
  out = cache.attend<float>(1, 2, true, params, 0);  // window_left 0: position p only
  CHECK(out[0] == 0.0);
  CHECK(out[1] == 1.0);
  out = cache.attend<float>(2, 2, false, params, -1, 0);  // window_right 0: token 0 sees j <= 0
  CHECK(out[0] == 1.0);
  params.sinks = sink;  // q_len 2 > seq_len 1 puts token 0 at p = -1: nothing visible -> zeros
  out = cache.attend<float>(2, 1, true, params);
  CHECK(out[0] == 0.0);
  CHECK(out[1] == 0.0);
  CHECK(out[16] == Approx(e / (e + std::exp(0.5))).epsilon(1e-12));
  params.sinks = {};
  params.softcap = 1.0f;
  out = cache.attend<float>(1, 2, true, params);
  CHECK(out[0] == Approx(std::exp(std::tanh(1.0)) / (std::exp(std::tanh(1.0)) + std::exp(std::tanh(2.0))))
                      .epsilon(1e-12));
  params.softcap = 0.0f;
  const std::vector<float> slope{0.5f};  // logits (1 - 0.5, 2)
  params.alibi_slopes = slope;
  out = cache.attend<float>(1, 2, true, params);
  CHECK(out[0] == Approx(std::exp(0.5) / (std::exp(0.5) + std::exp(2.0))).epsilon(1e-12));

  TinyCache<fp8_e4m3_t> fp8;  // read back as float(q) * scale
  fp8.put(0, 1.0f, 1.0f, 0.0f, 0.5f, 0.25f);
  fp8.put(1, 2.0f, 0.0f, 1.0f, 0.5f, 0.25f);
  AttentionParams fp8_params;
  fp8_params.k_scale = 0.5f;
  fp8_params.v_scale = 0.25f;
  out = fp8.attend<bf16_t>(1, 2, true, fp8_params);
  CHECK(out[0] == Approx(w0).epsilon(1e-12));
  CHECK(out[1] == Approx(w1).epsilon(1e-12));

  const std::vector<float> with_nan{0.5f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<double> expected{0.25, 0.0};
  CHECK(std::isinf(pt::max_abs_error<float>(TokenHeadsView<const float>::packed(with_nan.data(), 1, 1, 2),
                                            expected)
                       .max_abs));
}

TEST_CASE("the grids cover every axis value for every type pair", "[attention]") {
  std::vector<CaseSpec> all = main_grid();
  const std::vector<CaseSpec> large = large_grid();
  all.insert(all.end(), large.begin(), large.end());
  const std::vector<std::pair<int, int>> shapes = {{1, 1},   {1, 7},   {1, 213},    {1, 7812},
                                                   {5, 5},   {3, 16},  {134, 5131}, {2345, 2345}};
  const std::vector<std::pair<int, int>> heads = {{4, 4}, {8, 2}, {9, 3}, {16, 1}, {32, 8}};
  const std::vector<int> blocks = {16, 32, 48, 128, 2176};
  for (int pair = 0; pair < num_type_pairs; ++pair) {
    INFO(pair_name(pair));
    std::set<std::pair<int, int>> seen_shapes;
    std::set<std::pair<int, int>> seen_heads;
    std::set<int> seen_ratios;
    std::set<int> seen_dims;
    std::set<int> seen_blocks;
    std::set<unsigned> seen_features;
    std::set<Split> seen_splits;
    std::set<Exec> seen_execs;
    bool mixed = false, no_window = false, window_256 = false, right_window = false;
    bool per_request = false, non_causal = false;
    for (const CaseSpec& spec : all) {
      if (spec.pair != pair) continue;
      seen_shapes.insert(spec.requests.begin(), spec.requests.end());
      mixed = mixed || spec.requests.size() >= 3;
      seen_heads.insert({spec.num_query_heads, spec.num_kv_heads});
      seen_ratios.insert(spec.num_query_heads / spec.num_kv_heads);
      seen_dims.insert(spec.head_dim);
      seen_blocks.insert(spec.block_size);
      seen_features.insert(spec.features);
      seen_splits.insert(spec.split);
      seen_execs.insert(spec.exec);
      no_window = no_window || (spec.window_left < 0 && spec.window_right < 0);
      window_256 = window_256 || spec.window_left == 255;
      right_window = right_window || spec.window_right >= 0;
      per_request = per_request || spec.per_request_causal;
      non_causal = non_causal || (!spec.causal && !spec.per_request_causal);
    }
    for (const auto& shape : shapes) CHECK(seen_shapes.count(shape) == 1);
    for (const auto& h : heads) CHECK(seen_heads.count(h) == 1);
    for (int ratio : {1, 3, 4, 8, 16}) CHECK(seen_ratios.count(ratio) == 1);
    for (int dim : grid_head_dims) CHECK(seen_dims.count(dim) == 1);
    for (int block : blocks) CHECK(seen_blocks.count(block) == 1);
    for (unsigned f : grid_features) CHECK(seen_features.count(f) == 1);
    CHECK(seen_splits.size() == grid_splits.size());
    CHECK(seen_execs.size() == grid_execs.size());
    CHECK(mixed);
    CHECK(no_window);
    CHECK(window_256);
    CHECK(right_window);
    CHECK(per_request);
    CHECK(non_causal);
  }
}

TEST_CASE("paged_attention matches the oracle on the covering grid", "[attention]") {
  Executors executors;
  for (const CaseSpec& spec : main_grid()) run_case(spec, executors);
}

TEST_CASE("paged_attention matches the oracle on long contexts and large prefills",
          "[attention][large]") {
  Executors executors;
  for (const CaseSpec& spec : large_grid()) run_case(spec, executors);
}

TEST_CASE("paged_attention matches the oracle on random mixed batches", "[attention]") {
  Executors executors;
  const std::array<int, 3> pairs = {0, 4, 8};
  const std::array<int, 3> dims = {64, 128, 80};
  const std::array<std::pair<int, int>, 3> heads = {{{8, 2}, {9, 3}, {4, 4}}};
  const std::array<int, 3> blocks = {16, 48, 32};
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    std::mt19937_64 rng(900 + k);
    const pt::TestBatch random = pt::random_batch(rng, 7, 9, 300, heads[k].first, heads[k].second);
    CaseSpec spec;
    spec.pair = pairs[k];
    for (std::int64_t r = 0; r < random.num_requests(); ++r) {
      spec.requests.emplace_back(random.q_len(r), random.seq_lens[static_cast<std::size_t>(r)]);
    }
    spec.num_query_heads = heads[k].first;
    spec.num_kv_heads = heads[k].second;
    spec.head_dim = dims[k];
    spec.block_size = blocks[k];
    spec.window_left = k == 1 ? 40 : -1;
    spec.features = k == 2 ? (alibi | sinks) : no_features;
    spec.split = k == 0 ? Split::automatic : Split::fixed;
    spec.split_tokens = 64;
    spec.exec = Exec::pool2;
    spec.seed = 900 + k;
    run_case(spec, executors);
  }
}

namespace {

/// Split modes on one long decode and one chunk (pair of `Q`/`CacheT`, head dim 128, 8/1 heads):
/// every mode agrees with the oracle, splits happen where the rules say, and the same plan gives
/// the same bits on SerialExecutor and on a ThreadPool.
template <class Q, class CacheT>
void check_split_modes(Executors& executors) {
  const int pair = pair_index<Q, CacheT>();
  CaseSpec spec;
  spec.pair = pair;
  spec.requests = {{1, 3000}, {4, 1500}};
  spec.num_query_heads = 8;
  spec.num_kv_heads = 1;
  spec.head_dim = 128;
  spec.block_size = 32;
  spec.features = is_fp8_v<CacheT> ? sinks : no_features;
  spec.seed = 700 + static_cast<std::uint64_t>(pair);
  INFO(describe(spec));
  const auto data = make_case_data<Q, CacheT, 128>(spec);
  /// One split mode and the worker count its plan is built for.
  struct Mode {
    Split split;
    std::int32_t split_tokens;
    std::size_t workers;
  };
  for (const Mode mode : {Mode{Split::off, 0, 1}, Mode{Split::off, 0, 2}, Mode{Split::automatic, 0, 2},
                          Mode{Split::fixed, 256, 2}, Mode{Split::fixed, 1024, 1},
                          Mode{Split::deterministic, 256, 2}, Mode{Split::deterministic, 0, 1}}) {
    INFO("split " << split_name(mode.split) << "(" << mode.split_tokens << "), plan for "
                  << mode.workers << " workers");
    CanaryOutput<Q> serial(data.batch.num_tokens(), spec.num_query_heads, 128);
    CanaryOutput<Q> pooled(data.batch.num_tokens(), spec.num_query_heads, 128);
    const Exec pool = mode.workers == 2 ? Exec::pool2 : Exec::pool1;
    const RunReport report =
        plan_and_run(scheduler_options(mode.split, mode.split_tokens, mode.workers), data.inputs(),
                     {{ChosenExecutor(executors, Exec::serial), serial.view()},
                      {ChosenExecutor(executors, pool), pooled.view()}});
    if (mode.split == Split::off) {
      CHECK(report.num_partials == 0);
      CHECK(report.num_reductions == 0);
    } else if (mode.split != Split::automatic || mode.workers > 1) {
      // Fixed and deterministic cuts, and automatic splitting of a 3000-position decode on
      // 2 workers (SchedulingRules), all produce reductions here.
      CHECK(report.num_reductions > 0);
    }
    CHECK(serial.touched_padding() == 0);
    CHECK(pooled.touched_padding() == 0);
    check_against_reference(pair, serial, data.reference);
    CHECK(pooled.same_bits(serial));
  }
}

/// A decode of 32/8 heads (pair of `Q`/`CacheT`, head dim 128; soft-cap, ALiBi and sinks): one
/// work item of all 8 KV heads (plan for 1 worker) gives the same bits as one item per KV head
/// (plan for 2 workers without splits, which does not pack a lone request), and the packed tile
/// split in 4 pieces and reduced (automatic, 2 workers) agrees with the oracle.
template <class Q, class CacheT>
void check_kv_head_packing(Executors& executors) {
  const int pair = pair_index<Q, CacheT>();
  CaseSpec spec;
  spec.pair = pair;
  spec.requests = {{1, 3000}};
  spec.num_query_heads = 32;
  spec.num_kv_heads = 8;
  spec.head_dim = 128;
  spec.block_size = 64;
  spec.features = softcap | alibi | sinks;
  spec.seed = 750 + static_cast<std::uint64_t>(pair);
  INFO(describe(spec));
  const auto data = make_case_data<Q, CacheT, 128>(spec);
  CanaryOutput<Q> packed(1, 32, 128), unpacked(1, 32, 128), split(1, 32, 128);
  const RunReport packed_report = plan_and_run(scheduler_options(Split::off, 0, 1), data.inputs(),
                                               {{ChosenExecutor(executors, Exec::serial), packed.view()}});
  const RunReport unpacked_report = plan_and_run(scheduler_options(Split::off, 0, 2), data.inputs(),
                                                 {{ChosenExecutor(executors, Exec::pool2), unpacked.view()}});
  const RunReport split_report = plan_and_run(scheduler_options(Split::automatic, 0, 2), data.inputs(),
                                              {{ChosenExecutor(executors, Exec::pool2), split.view()}});
  CHECK(packed_report.num_items == 1);
  CHECK(packed_report.widest_item_kv_heads == 8);
  CHECK(unpacked_report.num_items == 8);
  CHECK(unpacked_report.widest_item_kv_heads == 1);
  CHECK(split_report.num_items == 4);
  CHECK(split_report.widest_item_kv_heads == 8);
  CHECK(split_report.num_reductions == 1);
  for (const CanaryOutput<Q>* output : {&packed, &unpacked, &split}) {
    CHECK(output->touched_padding() == 0);
    check_against_reference(pair, *output, data.reference);
  }
  CHECK(packed.same_bits(unpacked));
}

/// Deterministic mode on a batch with long requests (type pair `pair` of Q/CacheT, head dim
/// HeadDim): the batch gives the same bits on ThreadPool(2), ThreadPool(1) and SerialExecutor,
/// and each request alone gives the same bits as inside the batch, on SerialExecutor and
/// ThreadPool(2).
template <class Q, class CacheT, int HeadDim>
void check_deterministic(int num_query_heads, int num_kv_heads, std::int32_t split_tokens,
                         Executors& executors) {
  const int pair = pair_index<Q, CacheT>();
  CaseSpec spec;
  spec.pair = pair;
  spec.requests = {{1, 3000}, {7, 2100}, {1, 50}, {2, 2500}, {16, 600}};
  spec.num_query_heads = num_query_heads;
  spec.num_kv_heads = num_kv_heads;
  spec.head_dim = HeadDim;
  spec.block_size = 32;
  spec.features = is_fp8_v<CacheT> ? (alibi | sinks) : no_features;
  spec.split = Split::deterministic;
  spec.split_tokens = split_tokens;
  spec.seed = 800 + static_cast<std::uint64_t>(pair);
  INFO(describe(spec));
  const auto options = [&](std::size_t workers) {
    return scheduler_options(Split::deterministic, split_tokens, workers);
  };
  const auto data = make_case_data<Q, CacheT, HeadDim>(spec);
  const std::int64_t num_tokens = data.batch.num_tokens();
  // The whole batch on ThreadPool(2), ThreadPool(1) and SerialExecutor.
  CanaryOutput<Q> batch_pool2(num_tokens, num_query_heads, HeadDim);
  CanaryOutput<Q> batch_pool1(num_tokens, num_query_heads, HeadDim);
  CanaryOutput<Q> batch_serial(num_tokens, num_query_heads, HeadDim);
  const RunReport report = plan_and_run(
      options(2), data.inputs(), {{ChosenExecutor(executors, Exec::pool2), batch_pool2.view()}});
  plan_and_run(options(1), data.inputs(),
               {{ChosenExecutor(executors, Exec::pool1), batch_pool1.view()},
                {ChosenExecutor(executors, Exec::serial), batch_serial.view()}});
  CHECK(report.deterministic);
  CHECK(report.num_reductions > 0);
  CHECK(batch_pool2.touched_padding() == 0);
  check_against_reference(pair, batch_pool2, data.reference);
  CHECK(batch_pool1.same_bits(batch_pool2));
  CHECK(batch_serial.same_bits(batch_pool2));

  // Each request alone (its own query rows and block-table row).
  for (std::int64_t r = 0; r < data.batch.num_requests(); ++r) {
    INFO("request " << r << " alone");
    const auto ur = static_cast<std::size_t>(r);
    pt::TestBatch alone;
    alone.num_query_heads = num_query_heads;
    alone.num_kv_heads = num_kv_heads;
    alone.add_request(data.batch.q_len(r), data.batch.seq_lens[ur]);
    const std::int64_t first = data.batch.query_start_loc[ur];
    AttentionInputs<Q, CacheT, HeadDim> inputs = data.inputs();
    inputs.batch = alone.view();
    inputs.query.data = inputs.query.row(first, 0);
    inputs.query.num_tokens = alone.num_tokens();
    inputs.block_table = BlockTableView::with_stride(data.cache.table.data() + r * data.cache.table_stride, 1,
                                                     data.cache.table_cols, data.cache.table_stride);
    for (const Exec kind : {Exec::serial, Exec::pool2}) {
      INFO(exec_name(kind));
      const ChosenExecutor executor(executors, kind);
      CanaryOutput<Q> output(alone.num_tokens(), num_query_heads, HeadDim);
      plan_and_run(options(executor.num_workers()), inputs, {{executor, output.view()}});
      CHECK(output.touched_padding() == 0);
      CHECK(rows_bitwise_equal<Q>(output.const_view(), 0, batch_pool2.const_view(), first,
                                  alone.num_tokens()));
    }
  }
}

}  // namespace

TEST_CASE("split off, automatic, fixed and deterministic agree with the oracle; serial and "
          "ThreadPool(2) give identical bits",
          "[attention]") {
  Executors executors;
  check_split_modes<float, float>(executors);
  check_split_modes<bf16_t, fp8_e5m2_t>(executors);
  check_split_modes<fp16_t, fp16_t>(executors);
}

TEST_CASE("KV heads sharing a work item give the same bits as one item per KV head", "[attention]") {
  Executors executors;
  check_kv_head_packing<bf16_t, bf16_t>(executors);
  check_kv_head_packing<bf16_t, fp8_e4m3_t>(executors);
  check_kv_head_packing<float, fp8_e5m2_t>(executors);
  check_kv_head_packing<fp16_t, fp16_t>(executors);
}

TEST_CASE("deterministic mode: a request's output is the same bits alone and in any batch, on "
          "any executor",
          "[attention]") {
  Executors executors;
  check_deterministic<float, float, 128>(8, 2, 0, executors);
  check_deterministic<bf16_t, fp8_e4m3_t, 64>(4, 4, 512, executors);
  check_deterministic<fp16_t, fp16_t, 96>(16, 1, 256, executors);
}

TEST_CASE("bad input throws pagedattn::Error naming the argument before writing any output",
          "[attention][errors]") {
  using Q = bf16_t;
  using CacheT = bf16_t;
  constexpr int head_dim = 64;
  CaseSpec spec;
  spec.pair = pair_index<Q, CacheT>();
  spec.requests = {{1, 40}, {3, 20}};
  spec.num_query_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = head_dim;
  spec.block_size = 16;
  spec.seed = 1234;
  const auto data = make_case_data<Q, CacheT, head_dim>(spec);
  Executors executors;

  visit_isa(selected_isa, [&]<class Tag>(Tag) {
    using Traits = AttentionTraits<Q, CacheT, head_dim, Tag>;
    const AttentionScheduler<Traits> scheduler(scheduler_options(Split::off, 0, 1));
    const AttentionPlan<Traits> plan = scheduler.plan(data.batch.view());
    const AlignedBuffer workspace(static_cast<std::size_t>(plan.workspace_bytes()));
    REQUIRE(workspace.size() > 0);
    CanaryOutput<Q> output(data.batch.num_tokens(), spec.num_query_heads, head_dim, 2);

    /// The arguments of one paged_attention call.
    struct Call {
      const AttentionPlan<Traits>* plan;
      AttentionBatch batch;
      TokenHeadsView<const Q> query;
      typename Traits::cache_view cache;
      BlockTableView table;
      TokenHeadsView<Q> output;
      AttentionParams params;
      std::span<std::byte> workspace;
    };
    const Call good{&plan,         data.batch.view(),  data.query.const_view(), data.cache.const_view(),
                    data.block_table(), output.view(), data.params.view(),      workspace.span()};

    // The valid call works (so every rejection below is about the one thing changed).
    paged_attention(*good.plan, good.batch, good.query, good.cache, good.table, good.output, good.params,
                    good.workspace, executors.serial);
    check_against_reference(spec.pair, output, data.reference);

    /// Checks that `call` is rejected by validate_paged_attention and by paged_attention (an
    /// Error) naming one of `names`, with no output byte written.
    const auto expect_rejected = [&](const char* what, std::initializer_list<std::string_view> names,
                                     const Call& call) {
      INFO(what);
      const auto names_match = [&](const std::string& argument) {
        return std::any_of(names.begin(), names.end(), [&](std::string_view name) {
          return argument.find(name) != std::string::npos;
        });
      };
      const Status status = validate_paged_attention(*call.plan, call.batch, call.query, call.cache, call.table,
                                                     call.output, call.params, call.workspace);
      CHECK(!status.ok());
      INFO("validate_paged_attention: " << status.message());
      CHECK(names_match(status.argument()));
      output.reset();
      bool thrown = false;
      try {
        paged_attention(*call.plan, call.batch, call.query, call.cache, call.table, call.output, call.params,
                        call.workspace, executors.serial);
      } catch (const Error& error) {
        thrown = true;
        INFO("paged_attention threw: " << error.what());
        CHECK(error.code() != Errc::ok);
        CHECK(names_match(error.argument()));
      }
      CHECK(thrown);
      CHECK(output.untouched());
    };

    // Block table.
    const std::int64_t stride = data.cache.table_stride;
    std::vector<std::int32_t> table = data.cache.table;
    Call call = good;
    call.table.data = table.data();
    table[1] = -1;  // request 0, logical block 1 (seq_len 40 uses blocks 0..2)
    expect_rejected("block-table entry < 0", {"block_table"}, call);
    std::copy(data.cache.table.begin(), data.cache.table.end(), table.begin());
    table[static_cast<std::size_t>(stride)] = static_cast<std::int32_t>(data.cache.num_blocks);
    expect_rejected("block-table entry == num_blocks", {"block_table"}, call);
    call = good;
    call.table.num_cols = 2;  // request 0 needs 3 blocks of 16
    expect_rejected("too few block-table columns", {"block_table"}, call);
    call = good;
    call.table.num_rows = 1;
    expect_rejected("too few block-table rows", {"block_table", "plan"}, call);

    // Workspace.
    call = good;
    call.workspace = workspace.span().first(workspace.size() - 1);
    expect_rejected("workspace one byte too small", {"workspace"}, call);
    const AlignedBuffer roomy(workspace.size() + 64);
    call.workspace = std::span<std::byte>(roomy.data() + 1, workspace.size());
    expect_rejected("misaligned workspace", {"workspace"}, call);

    // Output and query shapes.
    call = good;
    call.output.num_tokens += 1;
    expect_rejected("output with one token more than the query", {"output"}, call);
    call = good;
    call.output.num_tokens -= 1;
    expect_rejected("output with one token less than the query", {"output"}, call);
    call = good;
    call.output.num_heads -= 1;
    expect_rejected("output with another head count", {"output"}, call);
    call = good;
    call.output.head_dim = 48;
    expect_rejected("output with another head dim", {"output"}, call);
    call = good;
    call.output.head_stride = head_dim - 16;
    expect_rejected("output heads overlapping", {"output"}, call);
    call = good;
    call.query.num_heads = 4;
    expect_rejected("query with another head count", {"query", "plan"}, call);

    // Params.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (float bad : {0.0f, -1.0f, nan, inf}) {
      INFO("value " << bad);
      call = good;
      call.params.scale = bad;
      expect_rejected("bad scale", {"scale"}, call);
    }
    for (float bad : {-1.0f, nan, inf}) {
      call = good;
      call.params.softcap = bad;
      expect_rejected("bad softcap", {"softcap"}, call);
    }
    const std::vector<float> seven(7, 0.5f);
    const std::vector<float> nine(9, 0.5f);
    std::vector<float> eight_with_nan(8, 0.5f);
    eight_with_nan[3] = nan;
    call = good;
    call.params.alibi_slopes = seven;
    expect_rejected("alibi slopes for 7 heads", {"alibi"}, call);
    call.params.alibi_slopes = eight_with_nan;
    expect_rejected("alibi slope NaN", {"alibi"}, call);
    call = good;
    call.params.sinks = nine;
    expect_rejected("sinks for 9 heads", {"sinks"}, call);
    call.params.sinks = eight_with_nan;
    expect_rejected("sink NaN", {"sinks"}, call);

    // A plan built for another batch.
    /// A plan from the same scheduler for another batch shape.
    const auto other_plan = [&](std::vector<std::pair<int, int>> requests, int hq, int hkv) {
      CaseSpec other = spec;
      other.requests = std::move(requests);
      other.num_query_heads = hq;
      other.num_kv_heads = hkv;
      const pt::TestBatch batch = make_batch(other);
      return scheduler.plan(batch.view());
    };
    const AttentionPlan<Traits> more_tokens = other_plan({{1, 40}, {4, 20}}, 8, 2);
    call = good;
    call.plan = &more_tokens;
    expect_rejected("plan with another num_tokens", {"batch"}, call);
    const AttentionPlan<Traits> more_requests = other_plan({{1, 40}, {3, 20}, {0, 5}}, 8, 2);
    call.plan = &more_requests;
    expect_rejected("plan with more requests than block-table rows", {"batch"}, call);
    const AttentionPlan<Traits> more_heads = other_plan({{1, 40}, {3, 20}}, 16, 2);
    call.plan = &more_heads;
    expect_rejected("plan with another Hq", {"batch"}, call);
    const AttentionPlan<Traits> more_kv_heads = other_plan({{1, 40}, {3, 20}}, 8, 4);
    call.plan = &more_kv_heads;
    expect_rejected("plan with another Hkv", {"batch"}, call);

    // An executor with more workers than the plan (and its workspace) was built for.
    output.reset();
    bool thrown = false;
    try {
      paged_attention(plan, good.batch, good.query, good.cache, good.table, good.output, good.params,
                      good.workspace, executors.pool2);
    } catch (const Error& error) {
      thrown = true;
      INFO(error.what());
      CHECK(error.argument().find("executor") != std::string::npos);
    }
    CHECK(thrown);
    CHECK(output.untouched());
  });
}

TEST_CASE("scheduler input errors through the public path", "[attention][errors]") {
  visit_isa(selected_isa, [&]<class Tag>(Tag) {
    using Traits = AttentionTraits<float, float, 64, Tag>;
    const AttentionScheduler<Traits> scheduler(scheduler_options(Split::automatic, 0, 1));
    /// Checks that try_plan reports, and plan throws, an error naming `name` for `batch`.
    const auto expect_plan_error = [&](const char* what, const pt::TestBatch& batch,
                                       std::string_view name) {
      INFO(what);
      AttentionPlan<Traits> plan;
      const Status status = scheduler.try_plan(batch.view(), plan);
      CHECK(!status.ok());
      CHECK(status.argument() == name);
      bool thrown = false;
      try {
        static_cast<void>(scheduler.plan(batch.view()));
      } catch (const Error& error) {
        thrown = true;
        CHECK(error.argument() == name);
      }
      CHECK(thrown);
    };
    pt::TestBatch batch;
    batch.add_request(1, 10);
    batch.add_request(3, 2);
    batch.num_query_heads = 8;
    batch.num_kv_heads = 2;
    expect_plan_error("seq_len < q_len", batch, "seq_lens[1]");
    batch.seq_lens[1] = 3;
    batch.num_kv_heads = 3;
    expect_plan_error("Hq % Hkv != 0", batch, "num_query_heads");
    batch.num_kv_heads = 2;
    batch.window_left = -2;
    expect_plan_error("window_left < -1", batch, "window_left");
    batch.window_left = -1;
    batch.query_start_loc[0] = 1;
    expect_plan_error("query_start_loc[0] != 0", batch, "query_start_loc[0]");

    SchedulerOptions options;
    options.split_policy = SplitPolicy::fixed;
    options.split_tokens = 24;
    CHECK_THROWS_AS(AttentionScheduler<Traits>(options), Error);
  });
}

namespace {
/// Where fp8_single_row puts its code: an odd position and dim (the second element of a K pair
/// and of a V pair), or an even one (the first).
struct CodePlace {
  int position;
  int dim;
};

/// Output of query head 0 of `heads` (1 request, q_len 1, seq_len 40, one KV head of dim 32, block
/// 16; 16 and more heads widen the tiles) over an FP8 cache of random finite codes where K (or V)
/// element `place.dim` of position `place.position` holds `code`.
template <class CacheT>
std::vector<float> fp8_single_row(bool in_key, std::uint8_t code, CodePlace place = {21, 5}, int heads = 1) {
  constexpr int dim = 32, block = 16, seq_len = 40, blocks = 3;
  std::vector<CacheT> memory(*kv_cache_elements(blocks, 1, block, dim));
  const KvCacheView<CacheT, dim> cache(memory.data(), blocks, 1, block);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& element : memory) element = CacheT(uniform(rng));
  const int position = place.position;
  CacheT* sub_block = in_key ? cache.key_block(position / block, 0) : cache.value_block(position / block, 0);
  const std::size_t index = in_key ? KvBlockLayout<CacheT>::key_index(dim, position % block, place.dim)
                                   : KvBlockLayout<CacheT>::value_index(block, dim, position % block, place.dim);
  sub_block[index] = CacheT::from_bits(code);
  const std::vector<std::int32_t> start{0, 1}, lens{seq_len}, table{0, 1, 2};
  AttentionBatch batch;
  batch.query_start_loc = start;
  batch.seq_lens = lens;
  batch.num_tokens = 1;
  batch.num_query_heads = heads;
  batch.num_kv_heads = 1;
  SchedulerOptions options;
  options.isa = selected_isa;
  const AttentionScheduler<AttentionTraits<float, CacheT, dim>> scheduler(options);
  const auto plan = scheduler.plan(batch);
  const auto elements = static_cast<std::size_t>(heads * dim);
  std::vector<float> query(elements, 0.25f), output(elements, -7.0f);
  void* workspace = std::aligned_alloc(64, plan.workspace_bytes());
  SerialExecutor serial;
  paged_attention(plan, batch, TokenHeadsView<const float>::packed(query.data(), 1, heads, dim), cache,
                  BlockTableView::row_major(table.data(), 1, 3), TokenHeadsView<float>::packed(output.data(), 1, heads, dim),
                  AttentionParams{}, std::span<std::byte>(static_cast<std::byte*>(workspace), plan.workspace_bytes()),
                  serial);
  std::free(workspace);
  output.resize(dim);  // head 0
  return output;
}
}  // namespace

TEMPLATE_TEST_CASE("an FP8 NaN code in a visible position reaches the output as NaN", "[attention][fp8]",
                   fp8_e4m3_t, fp8_e5m2_t) {
  const std::uint8_t nan_codes[] = {0x7F, 0xFF};
  // Both elements of a pair (each byte of a 16-bit lane), on one row and on widened tiles.
  for (const CodePlace place : {CodePlace{21, 5}, CodePlace{20, 4}}) {
    for (const int heads : {1, 16}) {
      for (const std::uint8_t code : nan_codes) {
        INFO("code 0x" << std::hex << int{code} << std::dec << " at position " << place.position << " dim "
                       << place.dim << ", " << heads << " heads");
        const std::vector<float> key_nan = fp8_single_row<TestType>(true, code, place, heads);
        for (float x : key_nan) REQUIRE(std::isnan(x));  // a NaN logit poisons the whole row
        const std::vector<float> value_nan = fp8_single_row<TestType>(false, code, place, heads);
        for (int d = 0; d < 32; ++d) REQUIRE(std::isnan(value_nan[static_cast<std::size_t>(d)]) == (d == place.dim));
      }
    }
  }
  // Control: the largest finite codes stay finite.
  const std::uint8_t finite_code = std::is_same_v<TestType, fp8_e4m3_t> ? 0x7E : 0x7B;
  for (float x : fp8_single_row<TestType>(true, finite_code)) REQUIRE(std::isfinite(x));
}

TEST_CASE("the upstream FP8 regression: E4M3 cache, bf16 queries, block 2176, four 1024-token prefills, "
          "16/2 heads, head dim 256, in an exactly sized workspace",
          "[attention][fp8]") {
  // Where scratch was sized with the query type while the kernel tiled with the 1-byte cache type,
  // this case wrote past the workspace. Here the workspace is plan.workspace_bytes() exactly
  // (AddressSanitizer builds catch any byte past it) and sampled rows match the float64 oracle.
  constexpr int head_dim = 256;
  using Q = bf16_t;
  using CacheT = fp8_e4m3_t;
  CaseSpec spec;
  spec.pair = pair_index<Q, CacheT>();
  spec.requests = {{1024, 1024}, {1024, 1024}, {1024, 1024}, {1024, 1024}};
  spec.num_query_heads = 16;
  spec.num_kv_heads = 2;
  spec.head_dim = head_dim;
  spec.block_size = 2176;
  spec.split = Split::automatic;
  spec.exec = Exec::pool2;
  spec.seed = 2176;
  INFO(describe(spec));
  const auto data = make_case_data_without_reference<Q, CacheT, head_dim>(spec);
  Executors executors;
  const ChosenExecutor executor(executors, spec.exec);
  CanaryOutput<Q> output(data.batch.num_tokens(), spec.num_query_heads, head_dim);
  const RunReport report =
      plan_and_run(scheduler_options(spec.split, 0, executor.num_workers()), data.inputs(), {{executor, output.view()}});
  CHECK(report.isa == selected_isa);
  CHECK(output.touched_padding() == 0);

  // The oracle on sampled query tokens: each as a one-token request over the same cache blocks
  // (position t of a full prefill sees [0, t], as a request (1, t + 1) does).
  const std::vector<int> tokens = {0, 1, 15, 16, 31, 255, 511, 512, 777, 1000, 1023};
  pt::TestBatch sampled;
  sampled.num_query_heads = spec.num_query_heads;
  sampled.num_kv_heads = spec.num_kv_heads;
  std::vector<Q> sampled_query;
  std::vector<std::int32_t> sampled_table;
  const TokenHeadsView<const Q> query = data.query.const_view();
  for (int r = 0; r < 4; ++r) {
    for (const int t : tokens) {
      sampled.add_request(1, t + 1);
      const std::int64_t row = data.batch.query_start_loc[static_cast<std::size_t>(r)] + t;
      for (int h = 0; h < spec.num_query_heads; ++h) {
        for (int d = 0; d < head_dim; ++d) {
          sampled_query.push_back(query.data[row * query.token_stride + h * query.head_stride + d]);
        }
      }
      for (std::int64_t b = 0; b < data.cache.table_cols; ++b) {
        sampled_table.push_back(data.cache.table[static_cast<std::size_t>(r * data.cache.table_stride + b)]);
      }
    }
  }
  const auto samples = static_cast<std::int64_t>(4 * tokens.size());
  const std::vector<double> reference = pt::reference_attention<Q, CacheT>(
      data.cache.reference(), {sampled_table.data(), samples, data.cache.table_cols, data.cache.table_cols},
      TokenHeadsView<const Q>::packed(sampled_query.data(), samples, spec.num_query_heads, head_dim), sampled.view(),
      data.params.view());
  const TokenHeadsView<const Q> out = output.const_view();
  double worst = 0.0;
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t row = data.batch.query_start_loc[static_cast<std::size_t>(s / 11)] +
                             tokens[static_cast<std::size_t>(s % 11)];
    for (int h = 0; h < spec.num_query_heads; ++h) {
      for (int d = 0; d < head_dim; ++d) {
        const double got = static_cast<float>(out.data[row * out.token_stride + h * out.head_stride + d]);
        const double expected = reference[static_cast<std::size_t>((s * spec.num_query_heads + h) * head_dim + d)];
        worst = std::max(worst, std::abs(got - expected));
      }
    }
  }
  INFO("largest |output - float64 oracle| over the sampled rows: " << worst);
  CHECK(worst <= pair_tolerance(spec.pair));
}

TEST_CASE("a plan runs only on the ISA whose tile geometry it was built with", "[attention][errors]") {
  // Where the ISA is chosen at plan time, the plan records its step's geometry; a plan whose ISA
  // no longer matches that geometry (another step's tiles and scratch) is refused before any write.
  constexpr int head_dim = 128;
  using Q = bf16_t;
  using CacheT = fp8_e4m3_t;
  using Traits = AttentionTraits<Q, CacheT, head_dim>;
  CaseSpec spec;
  spec.pair = pair_index<Q, CacheT>();
  spec.requests = {{40, 40}};
  spec.num_query_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = head_dim;
  spec.block_size = 32;
  const auto data = make_case_data_without_reference<Q, CacheT, head_dim>(spec);
  SchedulerOptions options;
  options.isa = selected_isa;
  AttentionPlan<Traits> plan = AttentionScheduler<Traits>(options).plan(data.batch.view());
  REQUIRE(plan.geometry() == Traits::geometry(selected_isa));
  // Another runnable ISA whose step lays out different tiles or scratch for these types.
  std::optional<IsaId> other;
  for (IsaId id : all_isa_ids) {
    if (check_isa(id).ok() && Traits::geometry(id) != plan.geometry()) other = id;
  }
  if (!other) {
    WARN("no runnable ISA here has another geometry for bf16/E4M3 than " << isa_name(selected_isa));
    return;
  }
  CAPTURE(isa_name(*other));
  const_cast<detail::PlanData&>(plan.data()).isa = *other;  // the plan's ISA changed under it
  CanaryOutput<Q> output(data.batch.num_tokens(), spec.num_query_heads, head_dim);
  AlignedBuffer workspace(static_cast<std::size_t>(std::max(plan.workspace_bytes(), Traits::geometry(*other).workspace_bytes(1, 0).value().value_or(0))));
  const Status status = validate_paged_attention(plan, data.batch.view(), data.query.const_view(), data.cache.const_view(),
                                                 data.block_table(), output.view(), data.params.view(), workspace.span());
  REQUIRE(status.code() == Errc::invalid_argument);
  REQUIRE(status.argument() == "plan.geometry()");
  SerialExecutor executor;
  REQUIRE_THROWS_AS(paged_attention(plan, data.batch.view(), data.query.const_view(), data.cache.const_view(), data.block_table(),
                                    output.view(), data.params.view(), workspace.span(), executor),
                    Error);
  REQUIRE(output.touched_padding() == 0);
  REQUIRE(output.untouched());
}
