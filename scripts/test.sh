#!/usr/bin/env bash
# The README's test command: installs what is missing, then runs the release suite (with the
# 2^32-input sweeps), the AddressSanitizer+UBSan suite and the clang build with its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
pagedattn_ensure_packages
for preset in release asan clang; do
  echo "=== pagedattn: workflow preset '$preset' ==="
  cmake --workflow --preset "$preset" --fresh
done
echo "=== pagedattn: all test suites passed (release, asan, clang) ==="
