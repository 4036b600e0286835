// The Executor concept (how kernels run a parallel-for over independent tasks) and TaskFunction,
// a non-owning, allocation-free reference to a task callable used inside executors.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace pagedattn {
namespace detail {

/// Non-owning, trivially copyable reference to a callable invocable as
/// `fn(std::size_t task, std::size_t worker)`; its return value, if any, is discarded. Never
/// allocates. Precondition: the referenced callable outlives every call made through this
/// reference (bind it to a callable that lives for the whole parallel_for).
class TaskFunction {
 public:
  /// Refers to `fn` (which is not copied); `fn` is later called as an lvalue of its own type.
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, TaskFunction> &&
             std::invocable<std::remove_reference_t<F>&, std::size_t, std::size_t>)
  TaskFunction(F&& fn) noexcept  // NOLINT(google-explicit-constructor): a reference wrapper
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(fn)))),
        call_(&call_object<std::remove_reference_t<F>>) {}

  /// Calls the referenced callable with (`task`, `worker`); its exceptions propagate.
  void operator()(std::size_t task, std::size_t worker) const { call_(object_, task, worker); }

 private:
  template <class Fn>
  static void call_object(void* object, std::size_t task, std::size_t worker) {
    static_cast<void>((*static_cast<Fn*>(object))(task, worker));
  }

  void* object_;
  void (*call_)(void*, std::size_t, std::size_t);
};

/// A do-nothing task callable, used only to state the Executor concept.
struct ExecutorProbeTask {
  /// Does nothing.
  void operator()(std::size_t /*task*/, std::size_t /*worker*/) const noexcept {}
};

}  // namespace detail

/// Something that runs a parallel-for over independent tasks. For an executor `e`:
/// - `e.num_workers()` (const, std::size_t) is the number of workers, at least 1; it does not
///   change during the executor's lifetime.
/// - `e.parallel_for(num_tasks, fn)` calls `fn(task, worker)` exactly once for every `task` in
///   [0, num_tasks), with `worker` in [0, num_workers()); two tasks of one call never run at
///   the same time with the same worker id, so `worker` may index per-worker scratch buffers
///   (whether concurrent calls from different threads may share ids depends on the executor:
///   ThreadPool serialises them, SerialExecutor and OpenMpExecutor do not). Tasks must be
///   independent: correctness never depends on tasks running concurrently (an executor may run
///   them all in order on one thread). `fn` may be called from several threads at once. Returns
///   only after every task finished. When tasks throw, one of the exceptions (the first caught)
///   is rethrown in the caller after every started task finished; tasks not yet started may
///   then be skipped.
template <class E>
concept Executor = requires(E& executor, const E& const_executor, std::size_t num_tasks,
                            detail::ExecutorProbeTask& task) {
  { const_executor.num_workers() } -> std::same_as<std::size_t>;
  executor.parallel_for(num_tasks, task);
  executor.parallel_for(num_tasks, detail::ExecutorProbeTask{});
};

}  // namespace pagedattn
