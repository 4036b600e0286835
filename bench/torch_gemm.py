#!/usr/bin/env python3
"""PyTorch CPU beside bench_gemm: the same cases (router linear, dense projection, MoE), the same
weights cold in the same way, timed the same way, so bench/summarize.py can state bench_gemm's
time against PyTorch's.

- router: torch.nn.functional.linear, fp32 x [M][4096] and fp32 weight [128][4096];
- dense: torch.nn.functional.linear, bf16 x [M][4096] and bf16 weight [14336][4096] (bf16 out);
- moe: a plain per-expert loop (as the Hugging Face reference MoE blocks): for each expert with
  tokens, gather its rows, linear with w13 [1536][2048], silu(gate) * up, linear with w2
  [2048][768], scale by the routing weight and index_add into the output; bf16 throughout;
  128 experts, top-8, with bench_gemm's routing (splitmix64 draws, seed 20240611; step s shifts
  every id by 8 * (s // layers) mod 128, as bench_gemm does).

Cold weights, as in bench_gemm: each case rotates over copies of its weights ("layers") filling
2 GiB, one copy per call. Timing, worker counts, rows and options: bench/torch_timing.py.
Usage: torch_gemm.py [--workers 1,2] [--repetitions 5] [--min-time 0.5] [--filter REGEX] [--out PATH]
"""
import sys

import torch
import torch.nn.functional as F

from torch_timing import run_cases

COLD_POOL_BYTES = 2 << 30  # bench_gemm's cold_pool_bytes
EXPERTS, TOP_K, HIDDEN, INTER = 128, 8, 2048, 768
ROUTING_SEED = 20240611  # bench_gemm's moe_routing_seed
MASK64 = (1 << 64) - 1


def splitmix64(state):
    """(next state, draw): bench_gemm's splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def routing(tokens):
    """bench_gemm's base routing: per token TOP_K distinct experts, [tokens][TOP_K]."""
    ids, state = [], ROUTING_SEED
    for _ in range(tokens):
        row = []
        while len(row) < TOP_K:
            state, draw = splitmix64(state)
            if draw % EXPERTS not in row:
                row.append(draw % EXPERTS)
        ids.append(row)
    return ids


def copies_for(copy_bytes):
    """Copies of `copy_bytes` that fill the cold pool (at least 2), as bench_gemm."""
    return max(2, -(-COLD_POOL_BYTES // copy_bytes))


def cold_copies(shape, dtype, copies, seed):
    """`copies` copies of one random weight of `shape` ([copies, *shape], contiguous)."""
    generator = torch.Generator().manual_seed(seed)
    one = (torch.randn(shape, generator=generator) * 0.02).to(dtype)
    return one.expand(copies, *shape).contiguous()


def linear_case(m, n, k, dtype):
    """(call, row fields) of F.linear on a rotating weight copy."""
    size = torch.tensor([], dtype=dtype).element_size()
    copies = copies_for(n * k * size)
    weights = list(cold_copies((n, k), dtype, copies, 3).unbind(0))
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(7)).to(dtype)
    step = [0]

    def call():
        c = step[0]
        step[0] = (c + 1) % copies
        return F.linear(x, weights[c])
    return call, {"weight_bytes": n * k * size, "flops": 2.0 * m * n * k, "weight_copies": copies}


def moe_loop(x, w13, w2, ids, weights):
    """The plain per-expert loop: out[t] = sum_j weights[t, j] * w2[e] (silu(gate) * up)."""
    out = torch.zeros_like(x)
    for e in torch.unique(ids).tolist():
        tokens, slots = torch.where(ids == e)
        gate, up = F.linear(x[tokens], w13[e]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, w2[e]) * weights[tokens, slots, None]
        out.index_add_(0, tokens, y)
    return out


def moe_case(m):
    """(call, row fields: touched weight bytes, flops, layers, experts touched) of moe_loop on
    bench_gemm's steps."""
    dtype, size = torch.bfloat16, 2
    expert_bytes = (2 * INTER * HIDDEN + HIDDEN * INTER) * size
    layers = copies_for(expert_bytes * EXPERTS)
    w13 = cold_copies((EXPERTS, 2 * INTER, HIDDEN), dtype, layers, 3)
    w2 = cold_copies((EXPERTS, HIDDEN, INTER), dtype, layers, 4)
    base = torch.tensor(routing(m), dtype=torch.int64)
    touched = len(set(base.flatten().tolist()))
    steps = [((base + TOP_K * (s // layers)) % EXPERTS, s % layers) for s in range(layers * (EXPERTS // TOP_K))]
    weights = torch.full((m, TOP_K), 1.0 / TOP_K, dtype=dtype)
    x = torch.randn(m, HIDDEN, generator=torch.Generator().manual_seed(7)).to(dtype)
    step = [0]

    def call():
        ids, layer = steps[step[0]]
        step[0] = (step[0] + 1) % len(steps)
        return moe_loop(x, w13[layer], w2[layer], ids, weights)
    return call, {"weight_bytes": touched * expert_bytes, "flops": 2.0 * m * TOP_K * 3 * INTER * HIDDEN,
                  "weight_copies": layers, "experts_touched": touched}


def cases():
    """(case name, builder) for every bench_gemm case, in its order."""
    for m in (1, 64, 4096):
        yield f"router/K:4096/N:128/M:{m}/fp32", lambda m=m: linear_case(m, 128, 4096, torch.float32)
    for m in (1, 512):
        yield f"dense/K:4096/N:14336/M:{m}/bf16", lambda m=m: linear_case(m, 14336, 4096, torch.bfloat16)
    for m in (1, 16, 512):
        yield f"moe/experts:128/top_k:8/hidden:2048/inter:768/M:{m}/bf16", lambda m=m: moe_case(m)


def main():
    return run_cases(cases(), __doc__.split("\n")[0], {"cold_pool_bytes": COLD_POOL_BYTES})


if __name__ == "__main__":
    sys.exit(main())
