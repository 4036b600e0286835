#!/usr/bin/env python3
"""PyTorch CPU SDPA beside bench_attention's prefill cases: the same shapes in bf16, timed as
bench/torch_gemm.py times its cases, so bench/summarize.py can state bench_attention's time
against PyTorch's.

- prefill_causal/tokens:2048/bf16: one causal prefill of 2048 tokens, 32 query heads over 8 KV
  heads, head dim 128;
- prefill_full/queries:512/keys:10000/bf16: the last 512 positions of a 10,000-token sequence
  over all of its keys, no mask, 32 query heads over 2 KV heads, head dim 256.

Each call is torch.nn.functional.scaled_dot_product_attention on contiguous [1, heads, tokens,
head dim] bf16 tensors, K and V repeated to the query heads once beforehand (what a caller without
a paged cache holds; the repeat is not timed), softmax scale 1/sqrt(head dim). The K/V of these
cases fit in cache, as bench_attention's prefill cases (not cold). FLOPs are counted as
bench_attention counts them: 4 x head dim x visible (query, key) pairs x query heads.
Timing, worker counts, rows and options: bench/torch_timing.py.
Usage: torch_attention.py [--workers 1,2] [--repetitions 5] [--min-time 0.5] [--filter REGEX] [--out PATH]
"""
import sys

import torch
import torch.nn.functional as F

from torch_timing import run_cases


def prefill_case(queries, keys, query_heads, kv_heads, head_dim, causal):
    """(call, row fields) of SDPA over `queries` query tokens (the last of `keys` positions)."""
    generator = torch.Generator().manual_seed(11)

    def tensor(heads, tokens):
        return torch.randn(1, heads, tokens, head_dim, generator=generator).to(torch.bfloat16)
    q = tensor(query_heads, queries)
    group = query_heads // kv_heads
    k = tensor(kv_heads, keys).repeat_interleave(group, dim=1).contiguous()
    v = tensor(kv_heads, keys).repeat_interleave(group, dim=1).contiguous()
    # Causal with queries == keys: query t sees keys [0, t]; otherwise every key.
    visible = queries * (queries + 1) // 2 if causal else queries * keys
    if causal and queries != keys:
        raise ValueError("causal cases here are whole prefills (queries == keys)")

    def call():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return call, {"flops": 4.0 * head_dim * visible * query_heads, "visible_pairs": visible}


def cases():
    """(case name, builder) for bench_attention's prefill cases, in its order."""
    yield "prefill_causal/tokens:2048/bf16", lambda: prefill_case(2048, 2048, 32, 8, 128, True)
    yield "prefill_full/queries:512/keys:10000/bf16", lambda: prefill_case(512, 10000, 32, 2, 256, False)


def main():
    return run_cases(cases(), __doc__.split("\n")[0], {"sdpa": "torch.nn.functional.scaled_dot_product_attention"})


if __name__ == "__main__":
    sys.exit(main())
