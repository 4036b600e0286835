"""The timing loop and command line shared by bench/torch_gemm.py and bench/torch_attention.py:
each times its cases in PyTorch at the worker counts bench_gemm / bench_attention use (1 and all)
and writes rows that bench/summarize.py reads beside the pagedattn run.

A case builder returns (call, fields): `call()` runs the case once; `fields` are copied into the
row, and for "weight_bytes", "kv_bytes" and "flops" the row also gets the rate per second.
Each repetition runs calls for at least --min-time seconds and keeps their mean; a row reports the
median over --repetitions (5, as the suite) and the coefficient of variation.
Rows: one JSON object per line on stdout ({"name", "case", "workers", "median_s", "cv", ...});
"case" is the bench binary's name without "/<tier>/workers:<n>", and "name" puts "torch" where
the binary puts the tier. --out writes {"context": ..., "rows": [...]}.
"""
import argparse
import json
import os
import re
import statistics
import time

import torch

RATES = {"weight_bytes": "weight_bytes_per_s", "kv_bytes": "kv_bytes_per_s", "flops": "flop_per_s"}


def time_call(call, repetitions, min_time):
    """Per-call seconds: the median over repetitions of each one's mean, and their cv."""
    for _ in range(3):
        call()  # warm-up: first-call allocations, oneDNN primitive creation
    means = []
    for _ in range(repetitions):
        calls, start = 0, time.perf_counter()
        while True:
            call()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        means.append(elapsed / calls)
    cv = statistics.pstdev(means) / statistics.fmean(means) if len(means) > 1 else None
    return statistics.median(means), cv


def all_workers():
    """The CPUs this process may run on (what the bench binaries' hardware_workers() counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_cases(cases, description, context):
    """Parses the command line, times every case of `cases` ((name, builder) pairs) that --filter
    keeps at each worker count, prints and (--out) writes the rows with `context` added to the
    run's own context. Returns 0."""
    workers_default = f"1,{all_workers()}"
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workers", default=workers_default, help="comma-separated worker counts")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds of calls per repetition")
    parser.add_argument("--filter", default="", help="regex on the case names")
    parser.add_argument("--out", help="JSON file for the rows and the context")
    args = parser.parse_args()
    worker_counts = sorted({int(w) for w in args.workers.split(",")})
    rows = []
    with torch.inference_mode():
        for case, build in cases:
            if args.filter and not re.search(args.filter, case):
                continue
            call, fields = build()
            for workers in worker_counts:
                torch.set_num_threads(workers)
                median, cv = time_call(call, args.repetitions, args.min_time)
                row = {"name": f"{case}/torch/workers:{workers}", "case": case, "workers": workers,
                       "median_s": median, "cv": cv, **fields}
                row.update({rate: fields[amount] / median for amount, rate in RATES.items() if amount in fields})
                rows.append(row)
                print(json.dumps(row), flush=True)
            del call
    if args.out:
        run_context = {"torch_version": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                       "all_workers": all_workers(), "repetitions": args.repetitions, "min_time_s": args.min_time,
                       "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **context}
        with open(args.out, "w") as f:
            json.dump({"context": run_context, "rows": rows}, f, indent=2)
            f.write("\n")
    return 0
