#!/usr/bin/env bash
# The run on an AMX host, from binaries built elsewhere (../shared/device/bundle.sh builds them):
# the amx variants of the kernel tests on the CPU's own tiles (no emulation), the CPU's tiles
# against the emulation, then the attention benchmarks of the amx and avx512bf16 tiers (1 to all
# workers; where each call's time went; decode with other pool setups) beside PyTorch's SDPA on the
# prefill cases, and the pool's wake-up rows, summarized into OUT/bench/summary.md.
# Every step has a timeout, so a slow one cannot eat the host's time. The two tiers' rows run
# interleaved at random: in registration order the amx decode rows at 1 worker read 3-7% slower
# than avx512bf16's (the same vector code) on the 2-core AMX Xeon of 2026-12-06, and equal when
# interleaved; order alone would pass for a difference between the tiers.
# Usage: bench/amx_host_run.sh BIN_DIR OUT [benchmark args...]
set -uo pipefail
bin_dir=$1; out=$2; shift 2
mkdir -p "$out"
for test in test_attention test_attention_semantics test_tile_gemm test_gemm test_moe test_reshape_and_cache; do
  printf '%-28s ' "$test --isa amx:"
  timeout 120 "$bin_dir/$test" --isa amx --no-emulation > "$out/$test.log" 2>&1
  rc=$?
  echo "exit $rc ($(tail -n 2 "$out/$test.log" | tr '\n' ' '))"
done
printf '%-28s ' "test_amx_tiles [amx_native]:"
timeout 60 "$bin_dir/test_amx_tiles" --isa amx --no-emulation "[amx_native]" > "$out/test_amx_tiles.log" 2>&1
echo "exit $? ($(grep -m1 'largest difference' "$out/test_amx_tiles.log"))"
PAGEDATTN_TORCH_FILTER=prefill timeout 480 bash "$(dirname "$0")/run_suite.sh" "$bin_dir" "$out/bench" \
  --benchmark_filter='^(decode|prefill|mixed).*/(amx|avx512bf16)/' --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" > "$out/bench.log" 2>&1
echo "benchmarks: exit $? (log: $out/bench.log)"
# The pool's wake-up rows on their own timeout, so they cannot cost the suite its summary.
timeout 90 "$bin_dir/bench_executor" --benchmark_filter='^pool_wakeup/' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/bench/raw/bench_executor.json" \
  --benchmark_out_format=json >> "$out/bench.log" 2>&1
echo "bench_executor: exit $?"
python3 "$(dirname "$0")/summarize.py" "$out/bench/raw" "$out/bench/summary.json" "$out/bench/summary.md" > /dev/null
cat "$out/bench/summary.md" 2>/dev/null
grep '^left out' "$out/bench.log"
