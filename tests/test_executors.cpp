// Executors: every task runs exactly once on a valid, exclusive worker id; exceptions reach the
// caller; pools start and stop cleanly, survive nesting and concurrent callers; ThreadPoolOptions
// (spin time, pinning) are checked and obeyed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pagedattn/exec/executors.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

using namespace pagedattn;

namespace {

static_assert(Executor<SerialExecutor>);
static_assert(Executor<ThreadPool>);
#if PAGEDATTN_HAS_OPENMP_EXECUTOR
static_assert(Executor<OpenMpExecutor>);
#endif
static_assert(!Executor<int>);

// The task counts every executor is checked with.
constexpr std::size_t task_counts[] = {0, 1, 2, 7, 1000};

// Per-task run counts plus checks that worker ids are in range and never used by two tasks at
// the same time.
class TaskLedger {
 public:
  TaskLedger(std::size_t num_tasks, std::size_t num_workers)
      : runs_(num_tasks), worker_busy_(num_workers) {}

  // Records one run of `task` on `worker` (called from the executor's task).
  void record(std::size_t task, std::size_t worker) {
    if (task >= runs_.size() || worker >= worker_busy_.size()) {
      out_of_range_.store(true);
      return;
    }
    if (worker_busy_[worker].exchange(true)) shared_worker_.store(true);
    runs_[task].fetch_add(1);
    worker_busy_[worker].store(false);
  }

  // The number of tasks that did not run exactly once.
  [[nodiscard]] std::size_t wrong_counts() const {
    std::size_t wrong = 0;
    for (const auto& runs : runs_) wrong += runs.load() != 1 ? 1 : 0;
    return wrong;
  }
  [[nodiscard]] bool out_of_range() const { return out_of_range_.load(); }
  [[nodiscard]] bool shared_worker() const { return shared_worker_.load(); }

 private:
  std::vector<std::atomic<int>> runs_;
  std::vector<std::atomic<bool>> worker_busy_;
  std::atomic<bool> out_of_range_{false};
  std::atomic<bool> shared_worker_{false};
};

template <class E>
void check_every_task_once(E& executor, std::size_t num_tasks) {
  TaskLedger ledger(num_tasks, executor.num_workers());
  executor.parallel_for(num_tasks, [&](std::size_t task, std::size_t worker) {
    ledger.record(task, worker);
  });
  REQUIRE_FALSE(ledger.out_of_range());
  REQUIRE_FALSE(ledger.shared_worker());
  REQUIRE(ledger.wrong_counts() == 0);
}

template <class E>
void check_exceptions_reach_caller(E& executor) {
  // One failing task among many.
  std::atomic<int> runs_of_failing{0};
  REQUIRE_THROWS_AS(executor.parallel_for(100,
                                          [&](std::size_t task, std::size_t) {
                                            if (task == 37) {
                                              runs_of_failing.fetch_add(1);
                                              throw std::runtime_error("task 37");
                                            }
                                          }),
                    std::runtime_error);
  REQUIRE(runs_of_failing.load() == 1);

  // Every task fails: exactly one exception arrives, each task ran at most once.
  std::vector<std::atomic<int>> runs(64);
  try {
    executor.parallel_for(runs.size(), [&](std::size_t task, std::size_t) {
      runs[task].fetch_add(1);
      throw std::logic_error("task " + std::to_string(task));
    });
    FAIL("expected an exception");
  } catch (const std::logic_error& error) {
    REQUIRE(std::string(error.what()).rfind("task ", 0) == 0);
  }
  for (const auto& count : runs) REQUIRE(count.load() <= 1);

  // The executor is still usable.
  check_every_task_once(executor, 500);
}

template <class E>
void check_nested_calls(E& executor) {
  constexpr std::size_t outer_tasks = 8;
  constexpr std::size_t inner_tasks = 16;
  std::vector<std::atomic<int>> runs(outer_tasks * inner_tasks);
  std::atomic<bool> bad_worker{false};
  executor.parallel_for(outer_tasks, [&](std::size_t outer, std::size_t outer_worker) {
    executor.parallel_for(inner_tasks, [&](std::size_t inner, std::size_t inner_worker) {
      if (inner_worker >= executor.num_workers()) bad_worker.store(true);
      runs[outer * inner_tasks + inner].fetch_add(1);
    });
    if (outer_worker >= executor.num_workers()) bad_worker.store(true);
  });
  REQUIRE_FALSE(bad_worker.load());
  std::size_t wrong = 0;
  for (const auto& count : runs) wrong += count.load() != 1 ? 1 : 0;
  REQUIRE(wrong == 0);
}

}  // namespace

TEST_CASE("SerialExecutor runs every task in order on worker 0", "[exec]") {
  SerialExecutor executor;
  REQUIRE(executor.num_workers() == 1);
  const auto num_tasks = GENERATE(as<std::size_t>{}, 0, 1, 2, 7, 1000);
  std::vector<std::size_t> order;
  std::vector<std::size_t> workers;
  executor.parallel_for(num_tasks, [&](std::size_t task, std::size_t worker) {
    order.push_back(task);
    workers.push_back(worker);
  });
  REQUIRE(order.size() == num_tasks);
  for (std::size_t i = 0; i < order.size(); ++i) {
    REQUIRE(order[i] == i);
    REQUIRE(workers[i] == 0);
  }
}

TEST_CASE("SerialExecutor passes exceptions on and stops at the first", "[exec]") {
  SerialExecutor executor;
  std::size_t last_task = 0;
  REQUIRE_THROWS_AS(executor.parallel_for(10,
                                          [&](std::size_t task, std::size_t) {
                                            last_task = task;
                                            if (task == 4) throw std::runtime_error("four");
                                          }),
                    std::runtime_error);
  REQUIRE(last_task == 4);
  check_exceptions_reach_caller(executor);
  check_nested_calls(executor);
}

TEST_CASE("ThreadPool runs every task exactly once on a valid, exclusive worker", "[exec]") {
  const auto num_workers = GENERATE(as<std::size_t>{}, 1, 2, 3, 4);
  ThreadPool pool(num_workers);
  REQUIRE(pool.num_workers() == num_workers);
  for (const std::size_t num_tasks : task_counts) {
    CAPTURE(num_workers, num_tasks);
    check_every_task_once(pool, num_tasks);
  }
  // Back-to-back calls reuse the same threads.
  for (int round = 0; round < 20; ++round) check_every_task_once(pool, 37);
}

TEST_CASE("ThreadPool accepts lvalue, const and mutable callables", "[exec]") {
  ThreadPool pool(3);
  std::atomic<std::size_t> sum{0};
  const auto add = [&sum](std::size_t task, std::size_t) { sum.fetch_add(task); };
  pool.parallel_for(10, add);
  REQUIRE(sum.load() == 45);
  auto mutable_add = [&sum](std::size_t task, std::size_t) mutable { sum.fetch_add(task); };
  pool.parallel_for(10, mutable_add);
  REQUIRE(sum.load() == 90);
  pool.parallel_for(10, [&sum](std::size_t task, std::size_t) { return sum.fetch_add(task); });
  REQUIRE(sum.load() == 135);
}

TEST_CASE("ThreadPool rethrows a task's exception and stays usable", "[exec]") {
  const auto num_workers = GENERATE(as<std::size_t>{}, 1, 2, 4);
  ThreadPool pool(num_workers);
  check_exceptions_reach_caller(pool);
  check_exceptions_reach_caller(pool);
}

TEST_CASE("ThreadPool can be created and destroyed while idle", "[exec]") {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(static_cast<std::size_t>(1 + i % 4));
    REQUIRE(pool.num_workers() == static_cast<std::size_t>(1 + i % 4));
  }
  for (int i = 0; i < 10; ++i) {
    ThreadPool pool(4);
    check_every_task_once(pool, 5);
  }
}

TEST_CASE("ThreadPool runs every task once whatever its spin time, calls close together or apart", "[exec]") {
  // 0: every idle worker sleeps at once, so every call wakes them; 1 ms: calls 2 ms apart find
  // them asleep, calls back to back find them spinning.
  const auto spin = GENERATE(as<std::chrono::microseconds>{}, 0, 1000);
  ThreadPoolOptions options;
  options.spin_time = spin;
  ThreadPool pool(3, options);
  REQUIRE(pool.options().spin_time == spin);
  for (int round = 0; round < 8; ++round) {
    CAPTURE(spin.count(), round);
    check_every_task_once(pool, 37);
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  check_exceptions_reach_caller(pool);
}

TEST_CASE("ThreadPool: threads waking after a call's tasks are done skip it, later calls still count them",
          "[exec]") {
  // Thousands of short calls with workers that sleep at once (spin 0) or spin briefly, more
  // workers than this machine may have cores: threads often wake when the caller has run every
  // task, and must neither be waited for nor take a task of the next call.
  const auto spin = GENERATE(as<std::chrono::microseconds>{}, 0, 20);
  const auto num_workers = GENERATE(as<std::size_t>{}, 2, 5);
  ThreadPoolOptions options;
  options.spin_time = spin;
  ThreadPool pool(num_workers, options);
  std::size_t wrong = 0;
  for (int call = 0; call < 3000; ++call) {
    const std::size_t num_tasks = 1 + static_cast<std::size_t>(call) % (2 * num_workers);
    TaskLedger ledger(num_tasks, num_workers);
    const auto busy = std::chrono::microseconds(call % 7);  // tasks of 0-6 us: joins race the caller
    pool.parallel_for(num_tasks, [&](std::size_t task, std::size_t worker) {
      const auto end = std::chrono::steady_clock::now() + busy;
      while (std::chrono::steady_clock::now() < end) {
      }
      ledger.record(task, worker);
    });
    wrong += ledger.wrong_counts() + (ledger.out_of_range() ? 1 : 0) + (ledger.shared_worker() ? 1 : 0);
  }
  CAPTURE(spin.count(), num_workers);
  REQUIRE(wrong == 0);
}

TEST_CASE("ThreadPool options out of range are refused with the argument named", "[exec]") {
  const auto refused = [](std::size_t num_workers, ThreadPoolOptions options, Errc code, const char* argument) {
    const Status status = validate_thread_pool_options(num_workers, options);
    REQUIRE(status.code() == code);
    REQUIRE(status.argument() == argument);
    try {
      ThreadPool pool(num_workers, options);
      FAIL("expected an Error");
    } catch (const Error& error) {
      REQUIRE(error.code() == code);
      REQUIRE(error.argument() == argument);
    }
  };
  ThreadPoolOptions options;
  REQUIRE(validate_thread_pool_options(2, options).ok());
  refused(0, options, Errc::invalid_argument, "num_workers");
  refused(ThreadPool::max_workers() + 1, options, Errc::invalid_argument, "num_workers");
  options.spin_time = std::chrono::microseconds{-1};
  refused(2, options, Errc::invalid_argument, "options.spin_time");
  options.spin_time = std::chrono::microseconds{1'000'001};
  refused(2, options, Errc::invalid_argument, "options.spin_time");
  options.spin_time = std::chrono::microseconds{1'000'000};
  REQUIRE(validate_thread_pool_options(2, options).ok());
#if !defined(__linux__)
  options.pin_threads = true;
  refused(2, options, Errc::unsupported, "options.pin_threads");
#endif
}

#if defined(__linux__)
namespace {
// The CPUs the calling thread may run on, ascending (empty if the system does not say). No
// Catch assertion inside: it is called from pool tasks.
std::vector<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}
}  // namespace

TEST_CASE("ThreadPool pins helper w to the w-th allowed CPU (mod their count), never the caller", "[exec]") {
  const std::vector<int> allowed = affinity_of_this_thread();
  REQUIRE_FALSE(allowed.empty());
  // More workers than CPUs wrap around.
  const auto num_workers = GENERATE_COPY(as<std::size_t>{}, 2, allowed.size() + 2);
  ThreadPoolOptions options;
  options.pin_threads = true;
  ThreadPool pool(num_workers, options);
  // One task per worker: each task waits (10 s at most) until all have started, so no worker
  // takes two, and records the affinity of the thread it runs on.
  std::vector<std::vector<int>> seen(num_workers);
  std::vector<int> worker_of_task(num_workers, -1);
  std::atomic<std::size_t> arrived{0};
  std::atomic<bool> timed_out{false};
  pool.parallel_for(num_workers, [&](std::size_t task, std::size_t worker) {
    worker_of_task[task] = static_cast<int>(worker);
    seen[worker] = affinity_of_this_thread();
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < num_workers) {
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out.store(true);
        return;
      }
      std::this_thread::yield();
    }
  });
  REQUIRE_FALSE(timed_out.load());
  std::vector<int> workers = worker_of_task;
  std::sort(workers.begin(), workers.end());
  for (std::size_t w = 0; w < num_workers; ++w) REQUIRE(workers[w] == static_cast<int>(w));
  REQUIRE(seen[0] == allowed);  // the calling thread keeps its affinity
  for (std::size_t w = 1; w < num_workers; ++w) {
    CAPTURE(num_workers, w);
    REQUIRE(seen[w] == std::vector<int>{allowed[w % allowed.size()]});
  }
  REQUIRE(affinity_of_this_thread() == allowed);
  // The pinned pool works as any other.
  check_every_task_once(pool, 1000);
  check_exceptions_reach_caller(pool);
}
#endif

TEST_CASE("ThreadPool rejects zero workers", "[exec]") {
  REQUIRE_THROWS_AS(ThreadPool(0), Error);
  try {
    ThreadPool pool(0);
    FAIL("expected an Error");
  } catch (const Error& error) {
    REQUIRE(error.code() == Errc::invalid_argument);
    REQUIRE(error.argument() == "num_workers");
  }
}

TEST_CASE("ThreadPool::hardware_workers is at least 1", "[exec]") {
  REQUIRE(ThreadPool::hardware_workers() >= 1);
}

TEST_CASE("ThreadPool runs nested calls serially on the calling worker", "[exec]") {
  const auto num_workers = GENERATE(as<std::size_t>{}, 1, 2, 4);
  ThreadPool pool(num_workers);
  check_nested_calls(pool);

  // The nested loop keeps the worker id of the task that issued it.
  std::atomic<bool> changed_worker{false};
  pool.parallel_for(16, [&](std::size_t, std::size_t outer_worker) {
    pool.parallel_for(4, [&](std::size_t, std::size_t inner_worker) {
      if (inner_worker != outer_worker) changed_worker.store(true);
    });
  });
  REQUIRE_FALSE(changed_worker.load());

  // An exception from a nested loop travels out through both levels.
  REQUIRE_THROWS_AS(pool.parallel_for(6,
                                      [&](std::size_t outer, std::size_t) {
                                        pool.parallel_for(3, [&](std::size_t inner, std::size_t) {
                                          if (outer == 2 && inner == 1) {
                                            throw std::runtime_error("nested");
                                          }
                                        });
                                      }),
                    std::runtime_error);
  check_every_task_once(pool, 100);
}

TEST_CASE("ThreadPool tasks may use a second pool", "[exec]") {
  ThreadPool outer_pool(2);
  ThreadPool inner_pool(3);
  std::vector<std::atomic<int>> runs(4 * 8);
  outer_pool.parallel_for(4, [&](std::size_t outer, std::size_t) {
    inner_pool.parallel_for(8, [&](std::size_t inner, std::size_t) {
      runs[outer * 8 + inner].fetch_add(1);
    });
  });
  for (const auto& count : runs) REQUIRE(count.load() == 1);
}

TEST_CASE("ThreadPool serves two external callers at once", "[exec]") {
  ThreadPool pool(3);
  constexpr int rounds = 20;
  constexpr std::size_t num_tasks = 200;
  // One ledger per round and caller; worker exclusivity is checked across both callers.
  std::vector<std::atomic<bool>> worker_busy(pool.num_workers());
  std::atomic<bool> shared_worker{false};
  std::vector<std::atomic<int>> runs(2 * rounds * num_tasks);
  const auto caller = [&](std::size_t caller_index) {
    for (int round = 0; round < rounds; ++round) {
      const std::size_t base =
          (caller_index * rounds + static_cast<std::size_t>(round)) * num_tasks;
      pool.parallel_for(num_tasks, [&](std::size_t task, std::size_t worker) {
        if (worker_busy[worker].exchange(true)) shared_worker.store(true);
        runs[base + task].fetch_add(1);
        worker_busy[worker].store(false);
      });
    }
  };
  std::thread first(caller, 0);
  std::thread second(caller, 1);
  first.join();
  second.join();
  REQUIRE_FALSE(shared_worker.load());
  std::size_t wrong = 0;
  for (const auto& count : runs) wrong += count.load() != 1 ? 1 : 0;
  REQUIRE(wrong == 0);
}

#if PAGEDATTN_HAS_OPENMP_EXECUTOR

TEST_CASE("OpenMpExecutor runs every task exactly once on a valid, exclusive worker", "[exec]") {
  REQUIRE(OpenMpExecutor().num_workers() >= 1);
  const auto num_workers = GENERATE(as<std::size_t>{}, 1, 2, 3, 4);
  OpenMpExecutor executor(num_workers);
  REQUIRE(executor.num_workers() == num_workers);
  for (const std::size_t num_tasks : task_counts) {
    CAPTURE(num_workers, num_tasks);
    check_every_task_once(executor, num_tasks);
  }
}

TEST_CASE("OpenMpExecutor rethrows a task's exception, nests, and rejects zero workers",
          "[exec]") {
  const auto num_workers = GENERATE(as<std::size_t>{}, 1, 2, 4);
  OpenMpExecutor executor(num_workers);
  check_exceptions_reach_caller(executor);
  check_nested_calls(executor);
  REQUIRE_THROWS_AS(OpenMpExecutor(0), Error);
}

#endif
