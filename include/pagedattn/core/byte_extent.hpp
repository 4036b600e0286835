// Byte extents of buffers and the overlap check every entry point runs before writing: a written
// buffer must not share a byte with anything the call reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pagedattn/core/error.hpp"

namespace pagedattn::detail {

/// The bytes [begin, end) a buffer occupies (empty: begin == end).
struct ByteExtent {
  std::uintptr_t begin = 0;  ///< First byte's address.
  std::uintptr_t end = 0;    ///< One past the last byte's address.

  /// True when both are non-empty and share a byte.
  [[nodiscard]] bool overlaps(const ByteExtent& other) const noexcept {
    return begin < end && other.begin < other.end && begin < other.end && other.begin < end;
  }
  /// True when `other` is empty or lies inside this one.
  [[nodiscard]] bool contains(const ByteExtent& other) const noexcept {
    return other.begin == other.end || (begin <= other.begin && other.end <= end);
  }
};

/// The extent of `count` elements of `T` at `data`. Precondition: the count's byte size was
/// checked (fits in 64 bits).
template <class T>
ByteExtent extent_of(const T* data, std::uint64_t count) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  return {begin, begin + static_cast<std::uintptr_t>(count * sizeof(T))};
}

/// A buffer a call reads, for the overlap check.
struct NamedExtent {
  const char* name;   ///< The argument's name.
  ByteExtent extent;  ///< Its bytes.
};

/// Checks that the written buffer `written` (named `name`) overlaps none of `read`.
inline Status validate_disjoint(const char* name, const ByteExtent& written, std::span<const NamedExtent> read) {
  for (const NamedExtent& other : read) {
    if (written.overlaps(other.extent)) {
      return make_error(Errc::invalid_argument, name, reinterpret_cast<const void*>(written.begin),
                        "its bytes [" + describe_value(reinterpret_cast<const void*>(written.begin)) + ", " +
                            describe_value(reinterpret_cast<const void*>(written.end)) + ") overlap " + other.name +
                            "'s [" + describe_value(reinterpret_cast<const void*>(other.extent.begin)) + ", " +
                            describe_value(reinterpret_cast<const void*>(other.extent.end)) +
                            "); written buffers must not overlap what the call reads");
    }
  }
  return {};
}

}  // namespace pagedattn::detail
