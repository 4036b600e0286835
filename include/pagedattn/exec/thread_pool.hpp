// ThreadPool: an Executor with persistent worker threads, dynamic task distribution, the calling
// thread as worker 0, serial nested calls, serialised concurrent callers, a timed spin before
// sleeping and optional pinning (ThreadPoolOptions).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "pagedattn/config.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/exec/cpu_affinity.hpp"
#include "pagedattn/exec/executor.hpp"

namespace pagedattn {
namespace detail {

/// One entry of a thread's stack of "this thread is worker `worker` of `pool`" records, newest
/// first. Lets a pool recognise a parallel_for issued from inside one of its own tasks.
struct PoolWorkerFrame {
  const void* pool;              ///< The pool (identity only, never dereferenced).
  std::size_t worker;            ///< This thread's worker id in that pool.
  const PoolWorkerFrame* outer;  ///< The enclosing record, or nullptr.
};

/// Newest PoolWorkerFrame of the current thread (nullptr when it runs no pool's task).
inline thread_local const PoolWorkerFrame* current_pool_worker_frame = nullptr;

/// Pushes a PoolWorkerFrame for the current thread for the lifetime of this object.
class ScopedPoolWorkerFrame {
 public:
  /// Marks the current thread as worker `worker` of `pool` until destruction.
  ScopedPoolWorkerFrame(const void* pool, std::size_t worker) noexcept
      : frame_{pool, worker, current_pool_worker_frame} {
    current_pool_worker_frame = &frame_;
  }
  /// Restores the previous frame.
  ~ScopedPoolWorkerFrame() { current_pool_worker_frame = frame_.outer; }
  ScopedPoolWorkerFrame(const ScopedPoolWorkerFrame&) = delete;
  ScopedPoolWorkerFrame& operator=(const ScopedPoolWorkerFrame&) = delete;

 private:
  PoolWorkerFrame frame_;
};

/// The worker frame of `pool` on the current thread, or nullptr when the thread is not running
/// one of `pool`'s tasks.
inline const PoolWorkerFrame* find_pool_worker_frame(const void* pool) noexcept {
  for (const PoolWorkerFrame* frame = current_pool_worker_frame; frame != nullptr;
       frame = frame->outer) {
    if (frame->pool == pool) return frame;
  }
  return nullptr;
}

/// Bits of a ThreadPool's job word that count the threads taking part in a job: the pool's
/// worker limit is 2^thread_pool_participant_bits.
inline constexpr unsigned thread_pool_participant_bits = 24;

/// Hints the CPU that the caller is in a spin-wait loop.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Spin-waits until `ready()` returns true, for a bounded time: polls separated by cpu_relax()
/// until `pause_time` has passed, then `yield_spins` polls separated by
/// std::this_thread::yield() (which lets a thread sharing this core, such as the one being
/// waited for, run). With pause_time 0, polls once. Returns the last `ready()`.
template <class Ready>
bool spin_until(Ready ready, std::chrono::nanoseconds pause_time, int yield_spins) {
  if (ready() || pause_time.count() <= 0) return ready();
  constexpr int polls_per_clock_read = 16;  // a clock read costs about one pause
  const auto deadline = std::chrono::steady_clock::now() + pause_time;
  do {
    for (int i = 0; i < polls_per_clock_read; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
  } while (std::chrono::steady_clock::now() < deadline);
  for (int i = 0; i < yield_spins; ++i) {
    if (ready()) return true;
    std::this_thread::yield();
  }
  return ready();
}

}  // namespace detail

/// How a ThreadPool's threads wait for work and where they run.
struct ThreadPoolOptions {
  /// How long an idle worker polls for the next parallel_for (and the calling thread for the
  /// other workers' end) with the CPU's pause hint before it yields 32 times and then sleeps on a
  /// condition variable. Calls that come less than this apart find the workers awake; waking a
  /// sleeping one takes tens of microseconds (more in a virtual machine). Longer costs CPU time
  /// while the pool idles. 0: sleep at once. Must lie in [0, 1 s].
  std::chrono::microseconds spin_time{100};
  /// Pins helper thread w (1 .. num_workers - 1) to CPU c[w mod n] of the n CPUs c[0] < c[1] <
  /// ... the constructing thread may run on, so the system cannot move it. The calling thread
  /// (worker 0) is not pinned: pin it to c[0] to keep it off the helpers' CPUs (after
  /// constructing the pool: pinned first, it would leave c[0] as the only CPU). Linux only.
  bool pin_threads = false;
};

/// The verdict ThreadPool's constructor acts on: ok, or Errc::invalid_argument (num_workers 0 or
/// above 2^24, spin_time outside [0, 1 s]) or Errc::unsupported (pin_threads where threads cannot
/// be pinned).
inline Status validate_thread_pool_options(std::size_t num_workers, const ThreadPoolOptions& options) {
  if (num_workers == 0) {
    return detail::make_error(Errc::invalid_argument, "num_workers", num_workers, "must be at least 1");
  }
  if (const std::size_t limit = std::size_t{1} << detail::thread_pool_participant_bits; num_workers > limit) {
    return detail::make_error(Errc::invalid_argument, "num_workers", num_workers,
                              "must be at most " + std::to_string(limit));
  }
  if (options.spin_time < std::chrono::microseconds{0} || options.spin_time > std::chrono::seconds{1}) {
    return detail::make_error(Errc::invalid_argument, "options.spin_time", options.spin_time.count(),
                              "must lie in [0, 1000000] microseconds");
  }
  if (options.pin_threads && !detail::thread_pinning_supported) {
    return detail::make_error(Errc::unsupported, "options.pin_threads", true,
                              "this system has no thread affinity pagedattn can set (Linux only)");
  }
  return {};
}

/// Executor backed by persistent worker threads. The thread calling parallel_for takes part as
/// worker 0, so a pool of N workers owns N - 1 threads. Tasks are handed out one at a time from
/// an atomic counter (dynamic distribution). Idle workers spin for options.spin_time, then sleep
/// on a condition variable; options.pin_threads pins them to CPUs. A call returns when its
/// tasks have finished: it does not wait for a thread still waking up when no task is left (that
/// thread then skips the call). Use at most
/// hardware_workers() workers: with more threads than free cores every call pays for context
/// switches.
///
/// Thread safety: parallel_for may be called from several external threads at once; the calls
/// are serialised (one runs at a time). A parallel_for issued from inside a task of the same
/// pool runs its loop serially on that thread, with that thread's worker id. Cyclic nesting
/// across pools (a task of pool A waiting on pool B whose task waits on pool A from another
/// thread) can deadlock and is not supported.
class ThreadPool {
 public:
  /// Starts a pool of `num_workers` workers (the caller of parallel_for plus num_workers - 1
  /// threads) that wait and run as `options` says. Throws Error with the code of
  /// validate_thread_pool_options where that fails, and Error(Errc::runtime_failure) when the
  /// operating system refuses to start a thread or to pin one.
  explicit ThreadPool(std::size_t num_workers, ThreadPoolOptions options = {})
      : num_workers_(num_workers), options_(options) {
    detail::throw_if_error(validate_thread_pool_options(num_workers, options));
    const std::vector<int> cpus = options.pin_threads ? detail::allowed_cpus() : std::vector<int>{};
    if (options.pin_threads && cpus.empty()) {
      detail::throw_if_error(detail::make_error(Errc::runtime_failure, "options.pin_threads", true,
                                                "the system did not say which CPUs this thread may use"));
    }
    threads_.reserve(num_workers - 1);
#if PAGEDATTN_HAS_EXCEPTIONS
    try {
#endif
      for (std::size_t worker = 1; worker < num_workers; ++worker) {
        threads_.emplace_back([this, worker] { worker_main(worker); });
        if (options.pin_threads && !detail::pin_thread(threads_.back(), cpus[worker % cpus.size()])) {
          stop_and_join();
          detail::throw_if_error(detail::make_error(Errc::runtime_failure, "options.pin_threads", true,
                                                    "could not pin worker " + std::to_string(worker) + " to CPU " +
                                                        std::to_string(cpus[worker % cpus.size()])));
        }
      }
#if PAGEDATTN_HAS_EXCEPTIONS
    } catch (const std::system_error&) {
      stop_and_join();
      detail::throw_if_error(detail::make_error(Errc::runtime_failure, "num_workers",
                                                num_workers, "could not start the worker threads"));
    } catch (...) {
      stop_and_join();
      throw;
    }
#endif
  }

  /// Stops and joins the worker threads. Precondition: no parallel_for is running on this pool.
  ~ThreadPool() { stop_and_join(); }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ThreadPool(ThreadPool&&) = delete;
  ThreadPool& operator=(ThreadPool&&) = delete;

  /// The number of workers given at construction (>= 1), the calling thread included.
  [[nodiscard]] std::size_t num_workers() const noexcept { return num_workers_; }

  /// The options given at construction.
  [[nodiscard]] const ThreadPoolOptions& options() const noexcept { return options_; }

  /// The largest number of workers a pool accepts (2^24).
  [[nodiscard]] static constexpr std::size_t max_workers() noexcept {
    return std::size_t{1} << participant_bits;
  }

  /// The number of hardware threads of this machine (std::thread::hardware_concurrency()), or 1
  /// when that is unknown: a sensible default for num_workers.
  [[nodiscard]] static std::size_t hardware_workers() noexcept {
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
  }

  /// Calls `fn(task, worker)` exactly once for every task in [0, num_tasks), worker in
  /// [0, num_workers()), and returns when all have finished; see the Executor concept. Returns
  /// at once when num_tasks is 0. `fn` is called concurrently from several threads. When tasks
  /// throw, the first exception caught is rethrown here once every started task finished; tasks
  /// not started by then are skipped. Called from inside a task of this pool, runs the tasks in
  /// order on the calling thread with the calling task's worker id. Does not allocate.
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void parallel_for(std::size_t num_tasks, F&& fn) {
    if (num_tasks == 0) return;
    if (const detail::PoolWorkerFrame* frame = detail::find_pool_worker_frame(this)) {
      // Nested call from one of our own tasks: the other workers may all be busy (or waiting on
      // this very task), so run serially as the calling worker.
      for (std::size_t task = 0; task < num_tasks; ++task) fn(task, frame->worker);
      return;
    }
    run(num_tasks, detail::TaskFunction(fn));
  }

 private:
  // Bits of job_word_ holding the number of participating threads; the rest is a generation.
  static constexpr unsigned participant_bits = detail::thread_pool_participant_bits;
  static constexpr std::uint64_t participant_mask = (std::uint64_t{1} << participant_bits) - 1;
  // Yields after the timed spin: they keep waiting cheap when threads outnumber free cores.
  static constexpr int yield_spins = 32;
  // entry_: the job's generation (its low 32 bits) in the high half, a closed flag, and in the
  // low bits the number of threads inside the job (at most 2^24 - 1).
  static constexpr unsigned entry_generation_shift = 32;
  static constexpr std::uint64_t entry_closed = std::uint64_t{1} << 31;
  static constexpr std::uint64_t entry_count_mask = entry_closed - 1;

  // Runs one parallel_for from an external thread (not one of this pool's tasks).
  void run(std::size_t num_tasks, const detail::TaskFunction& fn) {
    const std::lock_guard<std::mutex> call_lock(call_mutex_);
    const detail::ScopedPoolWorkerFrame frame(this, 0);
    const std::size_t participants = std::min(threads_.size(), num_tasks - 1);
    if (participants == 0) {
      for (std::size_t task = 0; task < num_tasks; ++task) fn(task, 0);
      return;
    }
    // No thread reads the job fields now: the threads that joined the previous job have left it,
    // and a thread that missed it reads only job_word_ and entry_ (whose generation has passed).
    job_ = &fn;
    job_num_tasks_ = num_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    {
      const std::lock_guard<std::mutex> lock(state_mutex_);
      ++generation_;
      entry_.store(open_entry(generation_), std::memory_order_release);
      job_word_.store((generation_ << participant_bits) | participants, std::memory_order_release);
    }
    wake_cv_.notify_all();
    run_tasks(0);
    close_and_wait();
    job_ = nullptr;
#if PAGEDATTN_HAS_EXCEPTIONS
    if (failed_.load(std::memory_order_relaxed)) {
      std::rethrow_exception(std::exchange(error_, nullptr));
    }
#endif
  }

  // Takes tasks of the current job until none is left (or a task failed).
  void run_tasks(std::size_t worker) noexcept {
    const detail::TaskFunction& fn = *job_;
    const std::size_t num_tasks = job_num_tasks_;
    while (!failed_.load(std::memory_order_relaxed)) {
      const std::size_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
      if (task >= num_tasks) return;
#if PAGEDATTN_HAS_EXCEPTIONS
      try {
        fn(task, worker);
      } catch (...) {
        if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
      }
#else
      fn(task, worker);
#endif
    }
  }

  // entry_ of job `generation` while threads may still join it, none inside.
  static std::uint64_t open_entry(std::uint64_t generation) noexcept {
    return (generation & 0xFFFFFFFFu) << entry_generation_shift;
  }

  // Caller side, once no task is left to take: closes the job to threads that have not joined it
  // yet (they may still be waking up; there is nothing left for them) and waits until the
  // threads that did join have left, so every task has finished.
  void close_and_wait() {
    const std::uint64_t before = entry_.fetch_or(entry_closed, std::memory_order_acq_rel);
    if ((before & entry_count_mask) == 0) return;
    const auto done = [this] { return (entry_.load(std::memory_order_acquire) & entry_count_mask) == 0; };
    if (detail::spin_until(done, options_.spin_time, yield_spins)) return;
    std::unique_lock<std::mutex> lock(state_mutex_);
    done_cv_.wait(lock, done);
  }

  // Worker side: enters job `generation` unless it has been closed (or replaced); true if in.
  bool join(std::uint64_t generation) noexcept {
    const std::uint64_t open = open_entry(generation);
    std::uint64_t entry = entry_.load(std::memory_order_relaxed);
    while ((entry & ~entry_count_mask) == open) {  // this generation, not closed
      if (entry_.compare_exchange_weak(entry, entry + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  // Worker side: leaves the job joined last; the last to leave a closed job wakes the caller.
  void leave() {
    const std::uint64_t before = entry_.fetch_sub(1, std::memory_order_acq_rel);
    if ((before & entry_closed) != 0 && (before & entry_count_mask) == 1) {
      const std::lock_guard<std::mutex> lock(state_mutex_);
      done_cv_.notify_one();
    }
  }

  // Worker side: waits until job_word_ differs from `seen` or the pool stops; returns job_word_.
  std::uint64_t wait_for_job(std::uint64_t seen) {
    const auto changed = [this, seen] {
      return job_word_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_acquire);
    };
    if (!detail::spin_until(changed, options_.spin_time, yield_spins)) {
      std::unique_lock<std::mutex> lock(state_mutex_);
      wake_cv_.wait(lock, changed);
    }
    return job_word_.load(std::memory_order_acquire);
  }

  // Body of the thread that is worker `worker` (1 .. num_workers - 1).
  void worker_main(std::size_t worker) {
    const detail::ScopedPoolWorkerFrame frame(this, worker);
    std::uint64_t seen = 0;
    for (;;) {
      seen = wait_for_job(seen);
      if (stop_.load(std::memory_order_acquire)) return;
      if (worker > (seen & participant_mask)) continue;  // not needed for this job
      if (!join(seen >> participant_bits)) continue;     // woke too late: the job is done
      run_tasks(worker);
      leave();
    }
  }

  // Asks every thread to exit and joins them.
  void stop_and_join() noexcept {
    {
      const std::lock_guard<std::mutex> lock(state_mutex_);
      stop_.store(true, std::memory_order_release);
    }
    wake_cv_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    threads_.clear();
  }

  std::size_t num_workers_;
  ThreadPoolOptions options_;
  std::vector<std::thread> threads_;

  std::mutex call_mutex_;   // serialises parallel_for calls from external threads
  std::mutex state_mutex_;  // guards sleeping and waking (with wake_cv_ and done_cv_)
  std::condition_variable wake_cv_;  // workers wait here for a job or stop_
  std::condition_variable done_cv_;  // the caller waits here for the joined threads to leave
  std::uint64_t generation_ = 0;     // jobs published so far (written under state_mutex_)

  // (generation << participant_bits) | number of threads taking part in the current job.
  std::atomic<std::uint64_t> job_word_{0};
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> next_task_{0};  // next task index to hand out
  std::atomic<std::uint64_t> entry_{0};    // who may join the current job, who is inside (above)
  std::atomic<bool> failed_{false};        // a task of the current job threw
  std::exception_ptr error_;               // the first exception, set by whoever set failed_

  const detail::TaskFunction* job_ = nullptr;  // the current job's task function
  std::size_t job_num_tasks_ = 0;              // the current job's task count
};

static_assert(Executor<ThreadPool>);

}  // namespace pagedattn
