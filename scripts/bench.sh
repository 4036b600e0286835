#!/usr/bin/env bash
# The README's benchmark command: installs what is missing, builds the benchmark suite, runs every
# binary (each measures this machine's limits first) and writes bench/results/summary.json and
# bench/results/summary.md (the target table); raw Google Benchmark JSON goes to bench/results/raw/.
# Extra arguments go to every binary (e.g. --benchmark_filter=avx512). Where PyTorch is importable,
# bench/torch_gemm.py and bench/torch_attention.py time the GEMM and prefill cases in PyTorch too
# (raw/torch_*.json; the summary then states those rows against it). The run itself is
# bench/run_suite.sh, which also runs binaries built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
PAGEDATTN_DEBIAN_PACKAGES+=(python3)
pagedattn_ensure_packages
cmake --preset bench >/dev/null
cmake --build --preset bench
bash bench/run_suite.sh build/bench/bench bench/results "$@"
