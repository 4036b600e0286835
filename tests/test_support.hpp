// Shared helpers for the test binaries: the ISA chosen with --isa and the skip exit code.
#pragma once

#include "pagedattn/isa/dispatch.hpp"

namespace pagedattn::test {
/// Exit code ctest maps to "skipped" (SKIP_RETURN_CODE).
inline constexpr int skip_exit_code = 77;
/// The ISA tier selected with --isa (scalar when not given); always runnable here.
extern IsaId selected_isa;
}  // namespace pagedattn::test
