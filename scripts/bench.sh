#!/usr/bin/env bash
# The README's benchmark command: installs what is missing, builds the benchmark suite, runs every
# binary (each measures this machine's limits first) and writes bench/results/summary.json and
# bench/results/summary.md (the target table); raw Google Benchmark JSON goes to bench/results/raw/.
# Extra arguments go to every binary (e.g. --benchmark_filter=avx512). Where PyTorch is importable,
# bench/torch_gemm.py times bench_gemm's cases in PyTorch too (raw/torch_gemm.json; the summary
# then states each GEMM row against it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
PAGEDATTN_DEBIAN_PACKAGES+=(python3)
pagedattn_ensure_packages
cmake --preset bench >/dev/null
cmake --build --preset bench
mkdir -p bench/results/raw
for component in roofline tile_gemm attention reshape_and_cache fp8_convert scheduler gemm; do
  echo "=== pagedattn: bench_$component ==="
  "./build/bench/bench/bench_$component" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="bench/results/raw/bench_$component.json" --benchmark_out_format=json "$@"
done
rm -f bench/results/raw/torch_gemm.json
if python3 -c "import torch" 2>/dev/null; then
  echo "=== pagedattn: bench/torch_gemm.py (PyTorch CPU, bench_gemm's cases) ==="
  python3 bench/torch_gemm.py --out bench/results/raw/torch_gemm.json
else
  echo "=== pagedattn: PyTorch is not importable: no PyTorch comparison ==="
fi
python3 bench/summarize.py bench/results/raw bench/results/summary.json bench/results/summary.md
