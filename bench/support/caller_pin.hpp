// CallerPin: pins the benchmark's calling thread (a pool's worker 0) to the first CPU it may use,
// beside a pool whose helpers ThreadPoolOptions::pin_threads put on the others.
#pragma once

#include <sched.h>

#include <vector>

#include <pagedattn/exec/cpu_affinity.hpp>

namespace pagedattn_bench {

/// Pins the calling thread to one CPU for its lifetime, then gives it back its former CPUs.
class CallerPin {
 public:
  /// Pins to the first CPU the thread may use (see ThreadPoolOptions::pin_threads), if `pin`.
  explicit CallerPin(bool pin) {
    if (pin && sched_getaffinity(0, sizeof(saved_), &saved_) == 0) {
      const std::vector<int> cpus = pagedattn::detail::allowed_cpus();
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus.front(), &one);
      pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
    }
  }
  ~CallerPin() {
    if (pinned_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  CallerPin(const CallerPin&) = delete;
  CallerPin& operator=(const CallerPin&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

}  // namespace pagedattn_bench
