// SerialExecutor: the Executor that runs every task in order on the calling thread (the
// reference for "correctness never depends on tasks running concurrently").
#pragma once

#include <concepts>
#include <cstddef>

#include "pagedattn/exec/executor.hpp"

namespace pagedattn {

/// Executor with one worker: runs tasks 0, 1, ..., num_tasks - 1 in order on the calling thread.
/// Stateless; one instance may be used from several threads at once (each call then uses worker
/// id 0 on its own thread, so per-worker scratch must not be shared between such calls).
class SerialExecutor {
 public:
  /// Always 1.
  [[nodiscard]] std::size_t num_workers() const noexcept { return 1; }

  /// Calls `fn(task, 0)` for task = 0, 1, ..., num_tasks - 1 in that order. The first exception
  /// thrown by `fn` propagates at once; the remaining tasks are then not run.
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void parallel_for(std::size_t num_tasks, F&& fn) const {
    for (std::size_t task = 0; task < num_tasks; ++task) fn(task, std::size_t{0});
  }
};

static_assert(Executor<SerialExecutor>);

}  // namespace pagedattn
