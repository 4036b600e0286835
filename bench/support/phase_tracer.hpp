// PhaseTracer: an Executor for benchmarks that runs another executor's parallel_for, timing each
// task on its worker, and sums per phase (the n-th parallel_for of a traced call) where the
// workers' time went: in tasks, before their first task (waking), after their last (waiting).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <pagedattn/exec/executor.hpp>

namespace pagedattn_bench {

/// Where the workers' time went in one phase of the traced calls (their n-th parallel_for),
/// summed over the calls that had one. Times in seconds; worker-seconds count every worker of
/// the executor for the phase's whole wall time.
struct PhaseTotals {
  std::int64_t phases = 0;  ///< parallel_for calls summed
  std::int64_t tasks = 0;   ///< tasks run in them
  double wall = 0;          ///< from parallel_for's start to its return
  double in_tasks = 0;      ///< worker-seconds inside tasks
  double longest_task = 0;  ///< each phase's longest task, summed
  /// Worker-seconds from the phase's start to each worker's first task (to the phase's end for a
  /// worker that got none): waking up, or having nothing to do.
  double before_first = 0;
  double after_last = 0;  ///< worker-seconds from each worker's last task's end to the phase's return
  /// Seconds from the phase's start to the first task of the last worker other than the calling
  /// one (worker 0) to start, summed over the phases where such a worker ran a task (their
  /// number: helper_phases): the wake-up latency.
  double last_helper_start = 0;
  std::int64_t helper_phases = 0;  ///< phases where a worker other than the calling one ran a task

  /// last_helper_start per phase where a helper ran a task (seconds), or nothing where none did.
  [[nodiscard]] std::optional<double> mean_last_helper_start() const noexcept {
    if (helper_phases == 0) return std::nullopt;
    return last_helper_start / static_cast<double>(helper_phases);
  }

  /// Worker-seconds of `workers` workers in none of the above: between tasks (taking the next).
  [[nodiscard]] double between_tasks(std::size_t workers) const noexcept {
    return static_cast<double>(workers) * wall - in_tasks - before_first - after_last;
  }
};

/// Wraps executor `E` (not owned): parallel_for runs E's, recording each task's worker, start
/// and end (two clock reads per task), and adds the phase to phase(n) where n counts the
/// parallel_for calls since begin_call(). Meant for one calling thread; allocates only when a
/// phase has more tasks or a call more phases than any before.
template <pagedattn::Executor E>
class PhaseTracer {
 public:
  /// Traces `inner`, which must outlive this tracer.
  explicit PhaseTracer(E& inner)
      : inner_(inner), first_(inner.num_workers()), last_(inner.num_workers()), ran_(inner.num_workers()) {}

  /// The wrapped executor's worker count.
  [[nodiscard]] std::size_t num_workers() const noexcept { return inner_.num_workers(); }

  /// inner.parallel_for(num_tasks, fn), with each task timed; the results go to the next phase.
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void parallel_for(std::size_t num_tasks, F&& fn) {
    if (records_.size() < num_tasks) records_.resize(num_tasks);
    const Clock::time_point start = Clock::now();
    inner_.parallel_for(num_tasks, [&](std::size_t task, std::size_t worker) {
      TaskRecord& record = records_[task];
      record.start = Clock::now();
      fn(task, worker);
      record.end = Clock::now();
      record.worker = worker;
    });
    add_phase(num_tasks, start, Clock::now());
  }

  /// Starts a traced call (such as one paged_attention): the next parallel_for is its phase 0.
  void begin_call() noexcept {
    call_start_ = Clock::now();
    call_phase_wall_ = 0;
    next_phase_ = 0;
  }

  /// Ends the call begun last; its time outside every parallel_for is added to outside().
  void end_call() noexcept {
    outside_ += seconds(Clock::now() - call_start_) - call_phase_wall_;
    ++calls_;
  }

  /// Traced calls so far.
  [[nodiscard]] std::int64_t calls() const noexcept { return calls_; }
  /// Seconds the traced calls spent outside their parallel_for calls (on the calling thread alone).
  [[nodiscard]] double outside() const noexcept { return outside_; }
  /// The totals of phase `n` (all zero when no call had that many phases).
  [[nodiscard]] PhaseTotals phase(std::size_t n) const { return n < totals_.size() ? totals_[n] : PhaseTotals{}; }

 private:
  using Clock = std::chrono::steady_clock;

  struct TaskRecord {
    Clock::time_point start, end;
    std::size_t worker = 0;
  };

  static double seconds(Clock::duration d) noexcept { return std::chrono::duration<double>(d).count(); }

  void add_phase(std::size_t num_tasks, Clock::time_point start, Clock::time_point end) {
    if (totals_.size() <= next_phase_) totals_.resize(next_phase_ + 1);
    PhaseTotals& totals = totals_[next_phase_++];
    const double wall = seconds(end - start);
    call_phase_wall_ += wall;
    std::fill(ran_.begin(), ran_.end(), false);
    double longest_task = 0;
    for (std::size_t task = 0; task < num_tasks; ++task) {
      const TaskRecord& record = records_[task];
      const std::size_t w = record.worker;
      first_[w] = ran_[w] ? std::min(first_[w], record.start) : record.start;
      last_[w] = ran_[w] ? std::max(last_[w], record.end) : record.end;
      ran_[w] = true;
      const double task_seconds = seconds(record.end - record.start);
      totals.in_tasks += task_seconds;
      longest_task = std::max(longest_task, task_seconds);
    }
    totals.longest_task += longest_task;
    double last_helper_start = -1;
    for (std::size_t w = 0; w < ran_.size(); ++w) {
      if (!ran_[w]) {
        totals.before_first += wall;
        continue;
      }
      totals.before_first += seconds(first_[w] - start);
      totals.after_last += seconds(end - last_[w]);
      if (w > 0) last_helper_start = std::max(last_helper_start, seconds(first_[w] - start));
    }
    if (last_helper_start >= 0) {
      totals.last_helper_start += last_helper_start;
      ++totals.helper_phases;
    }
    totals.wall += wall;
    totals.tasks += static_cast<std::int64_t>(num_tasks);
    ++totals.phases;
  }

  E& inner_;
  std::vector<TaskRecord> records_;        // by task, of the running phase
  std::vector<Clock::time_point> first_;   // by worker: its first task's start in the phase
  std::vector<Clock::time_point> last_;    // by worker: its last task's end in the phase
  std::vector<bool> ran_;                  // by worker: ran a task in the phase
  std::vector<PhaseTotals> totals_;        // by phase number
  std::size_t next_phase_ = 0;
  Clock::time_point call_start_{};
  double call_phase_wall_ = 0;
  double outside_ = 0;
  std::int64_t calls_ = 0;
};

}  // namespace pagedattn_bench
