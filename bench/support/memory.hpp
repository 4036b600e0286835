// Benchmark memory: 2 MiB-aligned buffers advised for transparent huge pages (what an engine
// would do for a KV cache), and cheap fills of large buffers with a repeated random pattern.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <vector>

namespace pagedattn_bench {

/// Frees memory from std::aligned_alloc.
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

/// Owning pointer to `count` uninitialised T, 2 MiB aligned, advised for huge pages.
template <class T>
using Buffer = std::unique_ptr<T[], FreeDeleter>;

/// Allocates a Buffer of `count` elements (throws std::bad_alloc when memory is short).
template <class T>
Buffer<T> allocate(std::size_t count) {
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const std::size_t bytes = std::max<std::size_t>(huge_page, (count * sizeof(T) + huge_page - 1) / huge_page * huge_page);
  void* p = std::aligned_alloc(huge_page, bytes);
  if (p == nullptr) throw std::bad_alloc();
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure leaves small pages
  return Buffer<T>(static_cast<T*>(p));
}

/// Fills `data[0, count)` with normal(0, sigma) values converted to T: one 64 Ki-element random
/// period, repeated (cheap for buffers of gigabytes; the values' order does not affect speed).
template <class T>
void fill_normal(T* data, std::size_t count, float sigma = 1.0f, unsigned seed = 5) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  const std::size_t period = std::min<std::size_t>(count, std::size_t{1} << 16);
  for (std::size_t i = 0; i < period; ++i) data[i] = T(normal(rng));
  for (std::size_t done = period; done < count;) {
    const std::size_t n = std::min(done, count - done);
    std::memcpy(static_cast<void*>(data + done), data, n * sizeof(T));
    done += n;
  }
}

}  // namespace pagedattn_bench
