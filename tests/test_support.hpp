// Shared helpers for the test binaries: the ISA chosen with --isa, the skip exit code, and
// 64-byte aligned workspace memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "pagedattn/isa/dispatch.hpp"

namespace pagedattn::test {
/// Exit code ctest maps to "skipped" (SKIP_RETURN_CODE).
inline constexpr int skip_exit_code = 77;
/// The ISA tier selected with --isa (scalar when not given); always runnable here.
extern IsaId selected_isa;

/// 64-byte aligned memory of exactly `size` bytes (freed on destruction), every byte `fill`
/// (0xFF: NaN floats and bf16 pairs, so a result that depends on stale workspace shows).
struct Workspace {
  explicit Workspace(std::uint64_t size, unsigned char fill = 0xFF)
      : bytes(static_cast<std::size_t>(size)), data(static_cast<std::byte*>(std::aligned_alloc(64, rounded()))) {
    std::memset(data, fill, rounded());
  }
  ~Workspace() { std::free(data); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  /// The `size` bytes.
  [[nodiscard]] std::span<std::byte> span() const { return {data, bytes}; }
  std::size_t bytes;
  std::byte* data;

 private:
  [[nodiscard]] std::size_t rounded() const { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }
};
}  // namespace pagedattn::test
