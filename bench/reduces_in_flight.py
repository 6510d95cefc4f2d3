"""What bounding the reduce-scatters in flight costs and saves at ZeRO stages 2-3 on this machine:
`hotloop launch --nproc 2 -- train --shard S --reduces-in-flight K` for K = 0 (every bucket's whole
gradient buffer alive until the step's end, as before the bound) and K = --bound (2, the default: a
bucket that would be a third first waits for the oldest, whose whole buffer is then freed), on Gloo,
in one run.

usage: reduces_in_flight.py [--hotloop build/hotloop] [--rounds 5] [--steps 30] [--shard 2]
                            [--model gpt-nano] [--layers 4] [--width 256] [--context 16]
                            [--batch 4] [--bucket-mb 1] [--bound 2] [--data text:fortunes]
                            [--out FILE]
The default model is a GPT whose gradients outweigh its activations (small micro-batch, short
context), so that the gradients set the step's peak. The two settings alternate within each round
(which goes first alternates too). Each run's figures: its summary's tokens_per_s (median over
steady-state steps) divided by the 2 ranks; rank 0's peak allocated bytes (host memory counted by
HOTLOOP_COUNT_HOST_MEMORY=1); and model_state_bytes.reduce_scatter (the largest bucket's whole
buffer, the most the buffers being reduce-scattered held at once). The bound's speed and peak are
the medians of their paired per-round ratios to K = 0, with their range.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from bench_common import free_port, report, run_info

p = argparse.ArgumentParser()
p.add_argument("--hotloop", default="build/hotloop")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--shard", type=int, default=2)
p.add_argument("--model", default="gpt-nano")
p.add_argument("--layers", type=int, default=4)
p.add_argument("--width", type=int, default=256)
p.add_argument("--context", type=int, default=16)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--bucket-mb", type=float, default=1)
p.add_argument("--bound", type=int, default=2)
p.add_argument("--data", default="text:fortunes")
p.add_argument("--out")
a = p.parse_args()


SETTINGS = [0, a.bound]
rates = {k: [] for k in SETTINGS}
peaks = {k: [] for k in SETTINGS}
reducing = {}
env = dict(os.environ, HOTLOOP_COUNT_HOST_MEMORY="1")
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        for k in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            run = os.path.join(tmp, f"{r}-{k}")
            cmd = [a.hotloop, "launch", "--nproc", "2", "--master-port", str(free_port()), "--", "train",
                   "--model", a.model, "--layers", str(a.layers), "--width", str(a.width),
                   "--context", str(a.context), "--data", a.data, "--steps", str(a.steps),
                   "--batch", str(a.batch), "--bucket-mb", str(a.bucket_mb), "--device", "cpu",
                   "--no-eval", "--log-every", "0", "--shard", str(a.shard),
                   "--reduces-in-flight", str(k), "--out", run]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
            s = json.load(open(os.path.join(run, "summary.json")))
            rates[k].append(s["tokens_per_s"] / 2)
            peaks[k].append(s["peak_memory_bytes"]["allocated"])
            reducing[k] = s["model_state_bytes"]["reduce_scatter"]
            print(f"round {r + 1}/{a.rounds} --reduces-in-flight {k}: {rates[k][-1]:.0f} tokens/s per rank, "
                  f"peak {peaks[k][-1]:.0f} bytes, reduce-scatter {reducing[k]}", flush=True)


def paired(figures):
    ratios = [figures[a.bound][i] / figures[0][i] for i in range(a.rounds)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


report({
    "command": "bench/reduces_in_flight.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("out", "hotloop")),
    **run_info(),
    "model": a.model, "layers": a.layers, "width": a.width, "context": a.context, "data": a.data,
    "batch": a.batch, "bucket_mb": a.bucket_mb, "steps": a.steps, "shard": a.shard, "ranks": 2,
    "backend": "gloo",
    "tokens_per_s_per_rank": rates,
    "peak_allocated_bytes": peaks,
    "reduce_scatter_bytes": reducing,
    "speed_bound_vs_0": paired(rates),
    "peak_bound_vs_0": paired(peaks),
}, a.out)
