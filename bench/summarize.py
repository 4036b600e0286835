#!/usr/bin/env python3
"""Turns the benchmark binaries' JSON output into bench/results/summary.json: one object per
target of the benchmark suite (value, unit, bar, direction, measured, limit, meets, time_cv; the
read-bandwidth rows also run_limit and value_vs_run_limit, the FLOP/s rows also fp32_fma_limit and
value_vs_fp32_fma_limit; the GEMM rows also torch_time and torch_ratio where PyTorch was timed),
printed as a table too.
Usage: summarize.py RAW_DIR SUMMARY_JSON [MARKDOWN_TABLE [TORCH_JSON...]]

TORCH_JSON (default: every RAW_DIR/torch_*.json) is the output of bench/torch_gemm.py
(PyTorch's time for each bench_gemm case) or bench/torch_attention.py (PyTorch SDPA on
bench_attention's prefill cases). Every GEMM row then also states PyTorch's time / ours
(torch_ratio), the MoE rows against PyTorch's per-expert loop are targets, and each prefill case
gets a row per worker count against SDPA (a target on amx: >= 3x at 1 worker, >= 2x at all; an
informational row on the other tiers); without those files the rows are left out and the table
says so. Rows with direction "info" (the router) have no bar: their meets is null and they are
not counted. A component whose runs are missing (its JSON absent, or a --benchmark_filter left
out a run its rows need) is left out, and the output says which and why.

Limits: every binary of the run probes this machine first (read and copy bandwidth, FP32 FMA
peaks, the bf16 peaks of vdpbf16ps and tdpbf16ps; 1 worker and all workers; "n/a" for a peak the
CPU lacks). A probe can only under-read a limit (another tenant of a shared machine took part of
it meanwhile), so each limit is the highest of the run's probes of it: the strictest bar, and one
disturbed probe cannot inflate a fraction.

Read bandwidth is the exception: on a shared machine it moves between phases (on the README
machine about 38 and about 58 GB/s, seconds apart), so a kernel timed in one phase and a probe
taken in another compare the phases, not the kernel. Each cold decode case therefore probes the
read bandwidth of its own KV pool just before and just after its timed loop; the decode targets
are stated against that adjacent probe (median over the repetitions of each repetition's
fraction; the scaling row uses the adjacent probes' medians), and the table also shows each
against the run's highest probe."""
import glob
import json
import os
import sys

# The targets are stated for AVX-512 (the development machine); each machine is measured with its
# widest tier that the run covers (the one best_isa() runs), and every ISA-dependent target names
# the tier it used. A tier's FLOP/s (prefill's bf16 queries) are stated against the peak of the
# instruction it multiplies them with, the limit named after the tier (limit_<tier>_flop_per_s:
# tdpbf16ps for amx, vdpbf16ps for avx512bf16, the FP32 FMA for avx512 and avx2), and beside it
# against the FP32 FMA peak of the tier's vector width.
ISAS = ("amx", "avx512bf16", "avx512", "avx2")  # widest first
FMA_PROBE = {"amx": "avx512", "avx512bf16": "avx512", "avx512": "avx512", "avx2": "avx2"}
PEAK_NAMES = {"amx": "AMX tdpbf16ps peak", "avx512bf16": "AVX512-BF16 vdpbf16ps peak",
              "avx512": "AVX-512 FP32 FMA peak", "avx2": "AVX2 FP32 FMA peak"}


def read_output(raw_dir, binary):
    """One binary's JSON output, or None where it is absent or empty (a binary whose
    --benchmark_filter matched nothing writes an empty file)."""
    path = os.path.join(raw_dir, binary + ".json")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path) as f:
        return json.load(f)


def load(raw_dir, binary):
    """Median aggregates of one binary's JSON: (results by run name, context). Each result also
    carries "time_cv", its wall time's coefficient of variation over the repetitions (None
    without repetitions). FileNotFoundError where the binary left no results."""
    data = read_output(raw_dir, binary)
    if data is None:
        raise FileNotFoundError(f"no results of {binary} in {raw_dir}")
    runs, cvs = {}, {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "cv":
            cvs[b["run_name"]] = b["real_time"]  # a fraction (stddev / mean)
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        runs[b["run_name"]] = b  # the median aggregate overwrites a single run of the same name
    for name, run in runs.items():
        run["time_cv"] = cvs.get(name)
    return runs, data["context"]


def seconds(run):
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]
    return run["real_time"] * unit


def find(runs, prefix, workers=None):
    """The run whose name starts with `prefix` (and has exactly `workers` workers, when given)."""
    suffix = "" if workers is None else f"/workers:{workers}"
    for name, run in runs.items():
        if name.startswith(prefix) and (workers is None or f"{suffix}/" in name + "/"):
            return run
    raise KeyError(f"no benchmark named {prefix}...{suffix}")


def worker_counts(runs, prefix):
    """The worker counts with a run named `prefix`.../workers:<n>..., ascending."""
    counts = set()
    for name in runs:
        if name.startswith(prefix) and "/workers:" in name:
            counts.add(int(name.split("/workers:")[1].split("/")[0]))
    return sorted(counts)


BINARIES = ("bench_roofline", "bench_tile_gemm", "bench_attention", "bench_executor", "bench_reshape_and_cache",
            "bench_fp8_convert", "bench_scheduler", "bench_gemm")


def run_limits(raw_dir):
    """The highest value of every limit_* context entry over the run's binaries (those present);
    a limit no probe measured ("n/a": a peak the CPU lacks) is left out."""
    limits = {}
    for binary in BINARIES:
        data = read_output(raw_dir, binary)
        if data is None:
            continue
        for key, value in data["context"].items():
            if key.startswith("limit_") and value != "n/a":
                limits[key] = max(float(limits.get(key, 0)), float(value))
    return limits


def peaks(ctx, probe, all_w):
    """limit_<probe>_flop_per_s for 1 and all workers, or None where the run has no such peak."""
    values = {w: ctx.get(f"limit_{probe}_flop_per_s/{w}") for w in (1, all_w)}
    return None if any(v is None or v <= 0 for v in values.values()) else values


def widest_isa(runs, ctx, binary):
    """The widest tier with results in `runs` (and, with `ctx`, a measured peak of its own)."""
    for isa in ISAS:
        peak = ctx is None or peaks(ctx, isa, int(ctx["limit_all_workers"])) is not None
        if peak and any(f"/{isa}/" in n or n.endswith(f"/{isa}") for n in runs):
            return isa
    sys.exit(f"summarize.py: {binary} holds no results of {', '.join(ISAS)}"
             f"{'' if ctx is None else ' with its peak measured'} "
             "(a --benchmark_filter left them out, or the CPU has none of them)")


def spread(*runs):
    """The largest time_cv of the runs a value is computed from (None if any lacks one): how far
    this machine's noise moved them from repetition to repetition."""
    cvs = [run["time_cv"] for run in runs]
    return None if any(cv is None for cv in cvs) else max(cvs)


def target(name, value, unit, bar, direction, measured, limit, time_cv, run_limit=None, value_vs_run_limit=None,
           fp32_fma=None, torch=None):
    """One target. `fp32_fma`, for FLOP/s rows: (the FP32 FMA peak of the tier's width, or for a
    scaling row its probes' ratio, and the measured value against it; both None where unknown).
    `torch`, for GEMM rows: (PyTorch's time, PyTorch's time / ours; both None where not timed).
    Direction "info": no bar (bar and meets None)."""
    if direction == "info":
        meets = None
    else:
        meets = bool(value >= bar if direction == "min" else value <= bar)
    out = {"name": name, "value": value, "unit": unit, "bar": bar, "direction": direction,
           "measured": measured, "limit": limit, "meets": meets, "time_cv": time_cv}
    if run_limit is not None:
        out.update(run_limit=run_limit, value_vs_run_limit=value_vs_run_limit)
    if fp32_fma is not None:
        out.update(fp32_fma_limit=fp32_fma[0], value_vs_fp32_fma_limit=fp32_fma[1])
    if torch is not None:
        out.update(torch_time=torch[0], torch_ratio=torch[1])
    return out


def attention_targets(runs, ctx, isa, torch_rows):
    all_w = int(ctx["limit_all_workers"])
    read = {w: float(ctx[f"limit_read_bytes_per_s/{w}"]) for w in (1, all_w)}
    peak = peaks(ctx, isa, all_w)  # the tier's own (widest_isa saw it measured)
    fma = peaks(ctx, FMA_PROBE[isa], all_w)  # None where unknown: n/a beside

    def beside_fma(measured, fma_limit):  # target()'s fp32_fma
        return (None, None) if fma_limit is None else (fma_limit, measured / fma_limit)

    out = []
    for batch in (1, 16):
        for context in (4096, 16384):
            run = find(runs, f"decode/batch:{batch}/context:{context}/bf16/{isa}/", all_w)
            out.append(target(f"decode bf16, batch {batch}, context {context}: K+V read rate / adjacent read bandwidth",
                              run["read_bw_adjacent_fraction"], "fraction", 0.85, "min",
                              run["kv_bytes_per_s"], run["read_bw_adjacent"], spread(run),
                              read[all_w], run["kv_bytes_per_s"] / read[all_w]))
    for fp8_type in ("fp8_e4m3", "fp8_e5m2"):
        for batch in (1, 16):
            bf16 = find(runs, f"decode/batch:{batch}/context:16384/bf16/{isa}/", all_w)
            fp8 = find(runs, f"decode/batch:{batch}/context:16384/{fp8_type}/{isa}/", all_w)
            out.append(target(f"decode {fp8_type} vs bf16, batch {batch}, context 16384: speedup (bf16 time / fp8 time)",
                              seconds(bf16) / seconds(fp8), "x", 1.8, "min", seconds(fp8), seconds(bf16),
                              spread(bf16, fp8)))
    for prefix, what, bar in (("prefill_causal/tokens:2048", "prefill causal 2048 (32/8 heads, dim 128)", 0.75),
                              ("prefill_full/queries:512/keys:10000",
                               "prefill non-causal 512 x 10000 (2x16 heads, dim 256)", 0.85)):
        run = find(runs, f"{prefix}/bf16/{isa}/", all_w)
        out.append(target(f"{what}: FLOP/s / {PEAK_NAMES[isa]}", run["flop_per_s"] / peak[all_w], "fraction", bar,
                          "min", run["flop_per_s"], peak[all_w], spread(run),
                          fp32_fma=beside_fma(run["flop_per_s"], None if fma is None else fma[all_w])))
        for w in (1, all_w):
            row = None if torch_rows is None else torch_rows.get((f"{prefix}/bf16", w))
            if row is None:
                continue
            run = find(runs, f"{prefix}/bf16/{isa}/", w)
            ratio = row["median_s"] / seconds(run)
            sdpa_bar = ({1: 3.0, all_w: 2.0}[w]) if isa == "amx" else None
            out.append(target(f"{what}, {w} worker{'s' if w > 1 else ''}: PyTorch SDPA time / ours", ratio, "x",
                              sdpa_bar, "info" if sdpa_bar is None else "min", seconds(run), row["median_s"],
                              spread(run), torch=(row["median_s"], ratio)))
    mixed_run = find(runs, f"mixed/prefill:2x512+decode:62/context:2048/bf16/{isa}/", all_w)
    part_runs = (find(runs, f"mixed_part/prefill:2x512/context:2048/bf16/{isa}/", all_w),
                 find(runs, f"mixed_part/decode:62/context:2048/bf16/{isa}/", all_w))
    mixed = seconds(mixed_run)
    parts = sum(seconds(run) for run in part_runs)
    out.append(target("mixed batch (2 x 512 prefill + 62 decodes, context 2048): time / separate batches' time",
                      mixed / parts, "ratio", 1.2, "max", mixed, parts, spread(mixed_run, *part_runs)))
    decode = {w: find(runs, f"decode/batch:16/context:16384/bf16/{isa}/", w) for w in (1, all_w)}
    speedup = seconds(decode[1]) / seconds(decode[all_w])
    probe = decode[all_w]["read_bw_adjacent"] / decode[1]["read_bw_adjacent"]
    run_probe = read[all_w] / read[1]
    out.append(target(f"scaling, decode bf16 batch 16 context 16384: {all_w}-worker speedup / adjacent read probes'",
                      speedup / probe, "fraction", 0.9, "min", speedup, probe, spread(*decode.values()),
                      run_probe, speedup / run_probe))
    prefill = {w: find(runs, f"prefill_causal/tokens:2048/bf16/{isa}/", w) for w in (1, all_w)}
    speedup = seconds(prefill[1]) / seconds(prefill[all_w])
    probe = peak[all_w] / peak[1]
    out.append(target(f"scaling, prefill causal 2048: {all_w}-worker speedup / {PEAK_NAMES[isa]} probe's",
                      speedup / probe, "fraction", 0.9, "min", speedup, probe, spread(*prefill.values()),
                      fp32_fma=beside_fma(speedup, None if fma is None else fma[all_w] / fma[1])))
    # Between 1 and all workers (machines with more than 2): informational rows against the
    # probes taken beside each run (decode: its KV pool's read probe; prefill: the multiply peak).
    for batch in (1, 16):
        prefix = f"decode/batch:{batch}/context:16384/bf16/{isa}/"
        one = find(runs, prefix, 1)
        for w in worker_counts(runs, prefix):
            if w in (1, all_w):
                continue
            run = find(runs, prefix, w)
            speedup, probe = seconds(one) / seconds(run), run["read_bw_adjacent"] / one["read_bw_adjacent"]
            out.append(target(f"scaling, decode bf16 batch {batch} context 16384: {w}-worker speedup / adjacent "
                              "read probes'", speedup / probe, "fraction", None, "info", speedup, probe,
                              spread(one, run)))
    prefix = f"prefill_causal/tokens:2048/bf16/{isa}/"
    for w in worker_counts(runs, prefix):
        if w in (1, all_w):
            continue
        run = find(runs, prefix, w)
        speedup, probe = seconds(prefill[1]) / seconds(run), run["multiply_peak_adjacent"] / peak[1]
        out.append(target(f"scaling, prefill causal 2048: {w}-worker speedup / {PEAK_NAMES[isa]} probe's", speedup / probe,
                          "fraction", None, "info", speedup, probe, spread(prefill[1], run)))
    return out


def phase_rows(runs, isa):
    """Where the time of the decode (batch 1 and 16, context 16384, bf16), causal prefill and
    decode_setup (the same decode with another pool or split setup) calls went at each worker
    count, from bench_attention's phase counters (PhaseTracer), as markdown table rows (header
    first; none without such runs)."""
    groups = ("decode/batch:1/context:16384/bf16/", "decode/batch:16/context:16384/bf16/",
              "prefill_causal/tokens:2048/bf16/", "decode_setup/")
    rows = []
    for name, run in runs.items():
        group = next((g for g in groups if name.startswith(g)), None)
        if group is None or f"/{isa}/workers:" not in name or "attention_us" not in run:
            continue
        case, rest = name.split(f"/{isa}/workers:")
        workers = int(rest.split("/")[0])
        cells = (case, workers, f"{seconds(run) * 1e3:.3f}", f"{run['outside_us']:.1f}", f"{run['attention_us']:.0f}",
                 f"{run['attention_tasks']:.0f}", f"{run.get('item_kv_heads', float('nan')):.1f}",
                 f"{run['task_us']:.0f}", f"{run['longest_task_us']:.0f}",
                 f"{run['attention_in_tasks']:.3f}", f"{run['attention_before_first']:.3f}",
                 f"{run['attention_after_last']:.3f}",
                 f"{run['helper_start_us']:.1f}" if "helper_start_us" in run else "-",
                 f"{run['reduction_us']:.1f} ({run['reduction_tasks']:.0f})")
        rows.append(((groups.index(group), case, workers), "| " + " | ".join(str(cell) for cell in cells) + " |"))
    if not rows:
        return []
    header = ["| case | workers | time ms | calling thread alone us | attention phase us | tasks | KV heads per task "
              "| mean task us "
              "| longest task us | worker time in tasks | before first task | after last task "
              "| last helper's start us | reduction us (tasks) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    return header + [row for _, row in sorted(rows)]


def wakeup_rows(runs):
    """bench_executor's pool_wakeup rows (one 50-us task per worker after a gap on the calling
    thread alone) as markdown table rows, header first."""
    rows = [f"| {name.replace('/real_time', '')} | {seconds(run) * 1e6:.1f} | {run['call_us']:.1f} | {run.get('helper_start_us', float('nan')):.1f} | "
            f"{run['before_first_us']:.1f} |" for name, run in runs.items() if name.startswith("pool_wakeup/")]
    return ["| case | iteration us (gap + call) | call us | last helper's start us | mean wait before first task us |",
            "| --- | ---: | ---: | ---: | ---: |"] + rows if rows else []


def scheduler_targets(runs):
    run = find(runs, "plan_fresh/mixed/prefill:4x512+decode:252/", 2)
    micros = seconds(run) * 1e6
    return [target("scheduler: planning 256 requests (4 prefill chunks + 252 decodes, 2 workers, fresh plan)",
                   micros, "us", 50.0, "max", micros, 50.0, spread(run))]


def reshape_targets(runs, ctx, isa):
    copy = float(ctx["limit_copy_bytes_per_s/1"])
    out = []
    for cache in ("bf16", "fp8_e4m3"):
        run = find(runs, f"prefill/tokens:4096/{cache}/{isa}")
        out.append(target(f"reshape_and_cache {cache} cache, 4096 tokens: (bytes read + written)/s / copy bandwidth",
                          run["bytes_per_s"] / copy, "fraction", 0.5, "min", run["bytes_per_s"], copy,
                          spread(run)))
    return out


def load_torch(paths):
    """The rows of bench/torch_gemm.py and bench/torch_attention.py files by (case, workers), or None
    when `paths` is empty."""
    if not paths:
        return None
    rows = {}
    for path in paths:
        with open(path) as f:
            rows.update({(row["case"], row["workers"]): row for row in json.load(f)["rows"]})
    return rows


def gemm_targets(runs, ctx, isa, torch_rows):
    """The linear and fused-MoE rows (all workers; weights cold): memory-bound cases against the
    read bandwidth probed around their loop (run's highest probe beside), the others against the
    tier's multiply peak (FP32 FMA peak beside); PyTorch's time / ours beside each where timed,
    and the MoE against PyTorch's per-expert loop as targets."""
    all_w = int(ctx["limit_all_workers"])
    read = float(ctx[f"limit_read_bytes_per_s/{all_w}"])
    peak = peaks(ctx, isa, all_w)[all_w]
    fma = peaks(ctx, FMA_PROBE[isa], all_w)
    fma = None if fma is None else fma[all_w]

    def beside_torch(case, run):  # target()'s torch
        row = None if torch_rows is None else torch_rows.get((case, all_w))
        return (None, None) if row is None else (row["median_s"], row["median_s"] / seconds(run))

    def read_row(case, what, bar):
        run = find(runs, f"{case}/{isa}/", all_w)
        return target(f"{what}: weight read rate / adjacent read bandwidth", run["read_bw_adjacent_fraction"],
                      "fraction", bar, "info" if bar is None else "min", run["weight_bytes_per_s"],
                      run["read_bw_adjacent"], spread(run), read, run["weight_bytes_per_s"] / read,
                      torch=beside_torch(case, run))

    def peak_row(case, what, bar):
        run = find(runs, f"{case}/{isa}/", all_w)
        return target(f"{what}: FLOP/s / {PEAK_NAMES[isa]}", run["flop_per_s"] / peak, "fraction", bar,
                      "info" if bar is None else "min", run["flop_per_s"], peak, spread(run),
                      fp32_fma=(None, None) if fma is None else (fma, run["flop_per_s"] / fma),
                      torch=beside_torch(case, run))

    router = "router/K:4096/N:128/M:{}/fp32"
    dense = "dense/K:4096/N:14336/M:{}/bf16"
    moe = "moe/experts:128/top_k:8/hidden:2048/inter:768/M:{}/bf16"
    moe_what = "MoE bf16 (128 experts, top-8, hidden 2048, inter 768), M {}"
    out = [read_row(router.format(1), "router fp32 (K 4096, N 128), M 1", None),
           peak_row(router.format(64), "router fp32 (K 4096, N 128), M 64", None),
           peak_row(router.format(4096), "router fp32 (K 4096, N 128), M 4096", None),
           read_row(dense.format(1), "dense bf16 (K 4096, N 14336), M 1", 0.85),
           peak_row(dense.format(512), "dense bf16 (K 4096, N 14336), M 512", 0.70)]
    for m in (1, 16):
        run = find(runs, f"{moe.format(m)}/{isa}/", all_w)
        touched = int(run["experts_touched"])
        out.append(read_row(moe.format(m), moe_what.format(m) + f" ({touched} experts touched)", 0.75))
    out.append(peak_row(moe.format(512), moe_what.format(512), 0.60))
    if torch_rows is not None and (moe.format(1), all_w) in torch_rows:
        for m in (1, 16, 512):
            run = find(runs, f"{moe.format(m)}/{isa}/", all_w)
            row = torch_rows[(moe.format(m), all_w)]
            ratio = row["median_s"] / seconds(run)
            out.append(target(f"{moe_what.format(m)}: PyTorch per-expert loop time / fused_moe time", ratio, "x",
                              1.5, "min", seconds(run), row["median_s"], spread(run), torch=(row["median_s"], ratio)))
    return out


def main():
    raw_dir, summary_path = sys.argv[1], sys.argv[2]
    table_path = sys.argv[3] if len(sys.argv) > 3 else None
    torch_paths = sys.argv[4:] or sorted(glob.glob(os.path.join(raw_dir, "torch_*.json")))
    torch_rows = load_torch(torch_paths)
    ctx = run_limits(raw_dir)
    left_out = []

    def group(label, targets):  # a component's rows; left out (and said so) where its runs are missing
        try:
            return targets()
        except (KeyError, FileNotFoundError, SystemExit) as missing:
            left_out.append(f"{label}: {missing}")
            return []

    def on_tier(binary, targets_of, peak_ctx=ctx):  # ISA-dependent targets name the tier they measured
        def targets():  # the widest tier with results (and, with peak_ctx, its peak measured)
            runs = load(raw_dir, binary)[0]
            tier = widest_isa(runs, peak_ctx, binary)
            return [dict(t, name=f"{t['name']} [{tier}]") for t in targets_of(runs, tier)]
        return targets
    results = (group("attention", on_tier("bench_attention",
                                          lambda runs, isa: attention_targets(runs, ctx, isa, torch_rows))) +
               group("scheduler", lambda: scheduler_targets(load(raw_dir, "bench_scheduler")[0])) +
               group("reshape_and_cache", on_tier("bench_reshape_and_cache",
                                                  lambda runs, isa: reshape_targets(runs, ctx, isa), None)) +
               group("gemm", on_tier("bench_gemm", lambda runs, isa: gemm_targets(runs, ctx, isa, torch_rows))))
    with open(summary_path, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    lines = ["| target | value | bar | meets | time cv | against the run's highest read probe "
             "| against the FP32 FMA peak | PyTorch time / ours |",
             "| --- | ---: | ---: | :---: | ---: | ---: | ---: | ---: |"]

    def beside(r, key):  # "-": the row has no such limit; "n/a": the CPU lacks it
        if key not in r:
            return "-"
        return "n/a" if r[key] is None else f"{r[key]:.3g}"
    for r in results:
        sign = ">=" if r["direction"] == "min" else "<="
        bar = "-" if r["bar"] is None else f"{sign} {r['bar']:g}"
        meets = "-" if r["meets"] is None else "yes" if r["meets"] else "NO"
        cv = "-" if r["time_cv"] is None else f"{100 * r['time_cv']:.0f}%"
        lines.append(f"| {r['name']} | {r['value']:.3g} {r['unit']} | {bar} | {meets} | {cv} | "
                     f"{beside(r, 'value_vs_run_limit')} | {beside(r, 'value_vs_fp32_fma_limit')} | "
                     f"{beside(r, 'torch_ratio')} |")
    try:
        runs = load(raw_dir, "bench_attention")[0]
        phases = phase_rows(runs, widest_isa(runs, ctx, "bench_attention"))
    except (FileNotFoundError, SystemExit):
        phases = []
    if phases:
        lines += ["", "Where the calls' time went (medians per call; worker time as fractions of workers x "
                  "the attention phase's wall time):", ""] + phases
    try:
        wakeups = wakeup_rows(load(raw_dir, "bench_executor")[0])
    except FileNotFoundError:
        wakeups = []
    if wakeups:
        lines += ["", "ThreadPool wake-up (medians):", ""] + wakeups
    table = "\n".join(lines)
    print(table)
    if table_path:
        with open(table_path, "w") as f:
            f.write(table + "\n")
    counted = [r for r in results if r["meets"] is not None]
    met = sum(r["meets"] for r in counted)
    info = len(results) - len(counted)
    print(f"\n{met} of {len(counted)} targets met ({info} informational rows); written to {summary_path}")
    for line in left_out:
        print(f"left out (runs missing, e.g. a --benchmark_filter) {line}")
    for script, case in (("torch_gemm.py", "moe/experts:128/top_k:8/hidden:2048/inter:768/M:1/bf16"),
                         ("torch_attention.py", "prefill_causal/tokens:2048/bf16")):
        if torch_rows is None or not any(key[0] == case for key in torch_rows):
            print(f"PyTorch not timed by bench/{script} (no such rows in {torch_paths or 'RAW_DIR/torch_*.json'}): "
                  "its rows are left out")


if __name__ == "__main__":
    main()
