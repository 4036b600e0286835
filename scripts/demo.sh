#!/usr/bin/env bash
# The README's demo command: installs what is missing, builds the main demo and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
pagedattn_ensure_packages
cmake --preset demo >/dev/null
cmake --build --preset demo
./build/demo/examples/pagedattn_demo
