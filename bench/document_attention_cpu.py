"""Attention on packed rows on the CPU: the block-causal mask hotloop uses (one SDPA call over each row with a
(B, 1, T, T) boolean mask, model/lm/document_attention.h) against attention run per example (one causal
SDPA call per example, the other correct way), forward and backward.

usage: .venv/bin/python bench/document_attention_cpu.py [--rows 4] [--context 2048] [--heads 14]
           [--kv-heads 2] [--head-width 64] [--rounds 5] [--out FILE.json]

Both sides are LibTorch's own kernels through torch (the same ATen calls the C++ makes), fp32, the
threads torch picks; each round runs the two back to back in alternating order, over the same rows of
examples of 64 to 640 tokens (best-fit packed, seed 0), and times forward + backward with the wall clock.
The ratio is the median of the per-round ratios (mask / per-example; below 1: the mask is faster).
"""
import argparse
import os
import platform
import random
import statistics
import time

import torch
import torch.nn.functional as F

from bench_common import report


def packed_rows(rows, context, seed=0):
    """Lengths of examples best-fit packed into `rows` rows of `context` tokens (a padding tail counts as a
    sequence of its own, as hotloop's rows have it)."""
    rng = random.Random(seed)
    lengths = sorted((rng.randint(64, 640) for _ in range(rows * context // 300)), reverse=True)
    rooms, out = [], []
    for n in lengths:
        fits = [i for i, r in enumerate(rooms) if r >= n]
        if fits:
            i = min(fits, key=lambda k: rooms[k])
            rooms[i] -= n
            out[i].append(n)
        elif len(rooms) < rows:
            rooms.append(context - n)
            out.append([n])
    for i, room in enumerate(rooms):
        if room > 0:
            out[i].append(room)
    return out


def mask_of(row_lengths, context):
    seq = torch.zeros(len(row_lengths), context, dtype=torch.long)
    for b, lengths in enumerate(row_lengths):
        seq[b] = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    same = seq.unsqueeze(2) == seq.unsqueeze(1)
    return (same & torch.ones(context, context, dtype=torch.bool).tril()).unsqueeze(1)


def with_mask(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def per_example(q, k, v, row_lengths):
    out = torch.empty_like(q)
    for b, lengths in enumerate(row_lengths):
        start = 0
        for n in lengths:
            s = slice(start, start + n)
            out[b, :, s] = F.scaled_dot_product_attention(q[b:b + 1, :, s], k[b:b + 1, :, s], v[b:b + 1, :, s],
                                                          is_causal=True, enable_gqa=True)[0]
            start += n
    return out


def timed(fn, q, k, v):
    for t in (q, k, v):
        t.grad = None
    start = time.perf_counter()
    fn(q, k, v).sum().backward()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-width", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = packed_rows(args.rows, args.context)
    mask = mask_of(rows, args.context)
    shape = (args.rows, args.heads, args.context, args.head_width)
    kv_shape = (args.rows, args.kv_heads, args.context, args.head_width)
    q = torch.randn(shape, requires_grad=True)
    k = torch.randn(kv_shape, requires_grad=True)
    v = torch.randn(kv_shape, requires_grad=True)
    sides = {"mask": lambda a, b, c: with_mask(a, b, c, mask), "per_example": lambda a, b, c: per_example(a, b, c, rows)}
    # Both give the same attention.
    same = torch.allclose(sides["mask"](q, k, v), sides["per_example"](q, k, v), atol=1e-5)
    for fn in sides.values():  # warm-up
        timed(fn, q, k, v)
    rounds = []
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        rounds.append({name: timed(sides[name], q, k, v) for name in order})
    ratios = [x["mask"] / x["per_example"] for x in rounds]
    report({"machine": {"host": platform.node(), "cpus": os.cpu_count(), "threads": torch.get_num_threads()},
            "shape": {"rows": args.rows, "context": args.context, "heads": args.heads, "kv_heads": args.kv_heads,
                      "head_width": args.head_width, "examples_per_row": [len(r) for r in rows]},
            "same_attention": same,
            "seconds_median": {name: statistics.median(x[name] for x in rounds) for name in sides},
            "mask_vs_per_example": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
            "torch": torch.__version__, "rounds": rounds}, args.out)


if __name__ == "__main__":
    main()
