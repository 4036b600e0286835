// OpenMpExecutor: an Executor that runs parallel_for as an OpenMP dynamic-schedule loop. Exists
// only when compiling with OpenMP (_OPENMP defined); PAGEDATTN_HAS_OPENMP_EXECUTOR says which.
#pragma once

#if defined(_OPENMP)

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <exception>
#include <limits>

#include "pagedattn/config.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/exec/executor.hpp"

/// 1 when pagedattn::OpenMpExecutor is available (this translation unit is compiled with
/// OpenMP), 0 otherwise.
#define PAGEDATTN_HAS_OPENMP_EXECUTOR 1

namespace pagedattn {

/// Executor running each parallel_for as `#pragma omp parallel for schedule(dynamic)` with
/// num_workers() threads; worker = omp_get_thread_num(). The thread calling parallel_for is
/// worker 0. OpenMP may give a loop fewer threads than asked for; worker ids stay in range.
///
/// Called from inside an active OpenMP parallel region (for example from one of its own tasks),
/// parallel_for runs its loop serially on the calling thread with worker =
/// omp_get_thread_num() % num_workers(): distinct from the other running tasks' ids when the
/// enclosing region is one of this executor's loops (or has at most num_workers() threads).
/// Concurrent parallel_for calls from several non-OpenMP threads each start their own team and
/// may then share worker ids.
class OpenMpExecutor {
 public:
  /// An executor with omp_get_max_threads() workers (at least 1).
  OpenMpExecutor()
      : OpenMpExecutor(static_cast<std::size_t>(std::max(1, omp_get_max_threads()))) {}

  /// An executor with `num_workers` workers. Throws Error(Errc::invalid_argument) when
  /// num_workers is 0 or does not fit in an int.
  explicit OpenMpExecutor(std::size_t num_workers) : num_workers_(num_workers) {
    if (num_workers == 0) {
      detail::throw_if_error(detail::make_error(Errc::invalid_argument, "num_workers",
                                                num_workers, "must be at least 1"));
    }
    if (num_workers > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      detail::throw_if_error(detail::make_error(Errc::invalid_argument, "num_workers",
                                                num_workers, "must fit in an int"));
    }
  }

  /// The number of OpenMP threads each loop asks for (>= 1).
  [[nodiscard]] std::size_t num_workers() const noexcept { return num_workers_; }

  /// Calls `fn(task, worker)` exactly once for every task in [0, num_tasks), worker in
  /// [0, num_workers()), and returns when all have finished; see the Executor concept. Returns
  /// at once when num_tasks is 0. `fn` is called concurrently from several threads. No
  /// exception leaves the parallel region: the first one caught is rethrown here after the
  /// loop, and tasks not started by then are skipped.
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void parallel_for(std::size_t num_tasks, F&& fn) const {
    if (num_tasks == 0) return;
    if (omp_in_parallel() != 0) {
      const std::size_t worker = static_cast<std::size_t>(omp_get_thread_num()) % num_workers_;
      for (std::size_t task = 0; task < num_tasks; ++task) fn(task, worker);
      return;
    }
    const std::size_t num_threads = std::min(num_workers_, num_tasks);
    if (num_threads == 1) {
      for (std::size_t task = 0; task < num_tasks; ++task) fn(task, std::size_t{0});
      return;
    }
    std::atomic<bool> failed{false};
    std::exception_ptr error;
#pragma omp parallel for schedule(dynamic) num_threads(static_cast<int>(num_threads))
    for (std::size_t task = 0; task < num_tasks; ++task) {
      if (failed.load(std::memory_order_relaxed)) continue;
      const auto worker = static_cast<std::size_t>(omp_get_thread_num());
#if PAGEDATTN_HAS_EXCEPTIONS
      try {
        fn(task, worker);
      } catch (...) {
        if (!failed.exchange(true, std::memory_order_relaxed)) error = std::current_exception();
      }
#else
      fn(task, worker);
#endif
    }
#if PAGEDATTN_HAS_EXCEPTIONS
    if (error) std::rethrow_exception(error);
#endif
  }

 private:
  std::size_t num_workers_;
};

static_assert(Executor<OpenMpExecutor>);

}  // namespace pagedattn

#else  // !defined(_OPENMP)

/// 1 when pagedattn::OpenMpExecutor is available (this translation unit is compiled with
/// OpenMP), 0 otherwise.
#define PAGEDATTN_HAS_OPENMP_EXECUTOR 0

#endif
