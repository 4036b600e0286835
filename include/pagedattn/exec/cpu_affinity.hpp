// CPU affinity for executors that pin their threads: the CPUs the calling thread may run on, and
// pinning a thread to one of them (Linux; elsewhere there is nothing to pin with).
#pragma once

#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace pagedattn::detail {

/// True where pin_thread can pin (Linux).
#if defined(__linux__)
inline constexpr bool thread_pinning_supported = true;
#else
inline constexpr bool thread_pinning_supported = false;
#endif

/// The CPUs the calling thread may run on (its affinity mask, CPUs 0 .. CPU_SETSIZE - 1),
/// ascending; empty where the system does not say or thread pinning is not supported.
inline std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
#endif
  return cpus;
}

/// Restricts `thread` to CPU `cpu` (0 <= cpu < CPU_SETSIZE); false where the system refused or
/// thread pinning is not supported.
inline bool pin_thread(std::thread& thread, int cpu) noexcept {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(thread.native_handle(), sizeof(set), &set) == 0;
#else
  static_cast<void>(thread);
  static_cast<void>(cpu);
  return false;
#endif
}

}  // namespace pagedattn::detail
