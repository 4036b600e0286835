#!/usr/bin/env bash
# Runs the benchmark suite from binaries already built (no build, no packages): every bench_<component>
# in BIN_DIR (each measures this machine's limits first), then, where PyTorch is importable,
# bench/torch_gemm.py and bench/torch_attention.py on the same cases, then bench/summarize.py.
# Writes RESULTS_DIR/raw/*.json, RESULTS_DIR/summary.json and RESULTS_DIR/summary.md. Extra
# arguments go to every binary (e.g. --benchmark_filter=avx512); set PAGEDATTN_TORCH_FILTER to a
# regex on case names to time only some PyTorch cases (default: all).
# Usage: bench/run_suite.sh BIN_DIR RESULTS_DIR [benchmark args...]
set -euo pipefail
bin_dir=$(cd "$1" && pwd); results=$2; shift 2
bench_dir=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$results/raw"
for component in roofline tile_gemm attention executor reshape_and_cache fp8_convert scheduler gemm; do
  echo "=== pagedattn: bench_$component ==="
  "$bin_dir/bench_$component" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$results/raw/bench_$component.json" --benchmark_out_format=json "$@"
done
rm -f "$results"/raw/torch_*.json
if python3 -c "import torch" 2>/dev/null; then
  for script in torch_gemm torch_attention; do
    echo "=== pagedattn: bench/$script.py (PyTorch CPU beside the suite's cases) ==="
    python3 "$bench_dir/$script.py" --filter "${PAGEDATTN_TORCH_FILTER:-}" --out "$results/raw/$script.json"
  done
else
  echo "=== pagedattn: PyTorch is not importable: no PyTorch comparison ==="
fi
python3 "$bench_dir/summarize.py" "$results/raw" "$results/summary.json" "$results/summary.md"
