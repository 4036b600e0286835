// Library version: the single source of the version number (CMake reads it from here).
#pragma once

/// Major version: incremented on incompatible API or KV-cache layout changes.
#define PAGEDATTN_VERSION_MAJOR 0
/// Minor version: incremented on compatible additions.
#define PAGEDATTN_VERSION_MINOR 1
/// Patch version: incremented on fixes.
#define PAGEDATTN_VERSION_PATCH 0

namespace pagedattn {
/// The library version as {major, minor, patch}.
struct Version {
  int major;  ///< PAGEDATTN_VERSION_MAJOR
  int minor;  ///< PAGEDATTN_VERSION_MINOR
  int patch;  ///< PAGEDATTN_VERSION_PATCH
};
/// The version of the headers in use.
inline constexpr Version version{PAGEDATTN_VERSION_MAJOR, PAGEDATTN_VERSION_MINOR,
                                 PAGEDATTN_VERSION_PATCH};
}  // namespace pagedattn
