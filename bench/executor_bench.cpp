// ThreadPool wake-up: calls of one 5- or 50-microsecond task per worker, separated by a gap of
// work on the calling thread alone (as an engine's other operators between two attention calls),
// for several spin times and with pinned threads. Counters: the call's time, the last helper's
// start after the call began (how long waking took) and the workers' time before their first task.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <string>

#include <pagedattn/pagedattn.hpp>

#include "support/caller_pin.hpp"
#include "support/machine_limits.hpp"
#include "support/phase_tracer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

/// Keeps this thread busy (no sleep, no yield) for `duration`.
void busy_for(std::chrono::microseconds duration) {
  const Clock::time_point end = Clock::now() + duration;
  while (Clock::now() < end) {
  }
}

void wakeup_benchmark(benchmark::State& state, std::size_t workers, std::chrono::microseconds gap,
                      std::chrono::microseconds task_time, pagedattn::ThreadPoolOptions options) {
  pagedattn::ThreadPool pool(workers, options);
  const pagedattn_bench::CallerPin caller_pin(options.pin_threads);  // after the pool (its CPUs)
  pagedattn_bench::PhaseTracer tracer(pool);
  for (auto _ : state) {
    busy_for(gap);
    tracer.begin_call();
    tracer.parallel_for(workers, [&](std::size_t, std::size_t) { busy_for(task_time); });
    tracer.end_call();
  }
  const pagedattn_bench::PhaseTotals phase = tracer.phase(0);
  if (const auto helper_start = phase.mean_last_helper_start()) state.counters["helper_start_us"] = 1e6 * *helper_start;
  state.counters["before_first_us"] = 1e6 * phase.before_first / static_cast<double>(workers * phase.phases);
  state.counters["call_us"] = 1e6 * phase.wall / static_cast<double>(phase.phases);
}

void register_cases() {
  const std::size_t all = pagedattn::ThreadPool::hardware_workers();
  if (all == 1) return;
  for (int task : {5, 50}) {
    for (int gap : {0, 500}) {
      for (int spin : {0, 100, 1000}) {
        for (bool pinned : {false, true}) {
          pagedattn::ThreadPoolOptions options;
          options.spin_time = std::chrono::microseconds(spin);
          options.pin_threads = pinned;
          const std::string name = "pool_wakeup/task_us:" + std::to_string(task) + "/gap_us:" + std::to_string(gap) +
                                   "/spin_us:" + std::to_string(spin) + (pinned ? "/pinned" : "") +
                                   "/workers:" + std::to_string(all);
          benchmark::RegisterBenchmark(name.c_str(), [all, gap, task, options](benchmark::State& state) {
            wakeup_benchmark(state, all, std::chrono::microseconds(gap), std::chrono::microseconds(task), options);
          })->UseRealTime()->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return pagedattn_bench::run_benchmarks(argc, argv, register_cases); }
