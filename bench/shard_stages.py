"""What ZeRO's stages cost and save on this machine: `hotloop launch --nproc 2 -- train --shard S` for
S = 0 (plain data parallel), 1 (optimizer state sharded), 2 (gradients too) and 3 (the blocks'
parameters too, each gathered before its forward and again before its backward), on Gloo, in one run.

usage: shard_stages.py [--hotloop build/hotloop] [--rounds 5] [--steps 40] [--model gpt-nano]
                       [--data text:fortunes] [--batch 32] [--precision fp32] [--out FILE]
With --precision bf16, stage 3 gathers the blocks' matrices as bf16 copies (half the bytes).
The stages rotate within each round so that drift hits all alike. Each run's figure is its summary's
tokens_per_s (median over steady-state steps) divided by the 2 ranks, and the bytes each rank holds
(summary.json's model_state_bytes: parameters, gradients and optimizer state at the update) and its
peak resident memory. A stage's speed is the median of its paired per-round ratios to stage 0, with
their range. Gloo's reduce-scatter is an all-reduce underneath (it sums the whole buffer on every rank,
then keeps the rank's part), so on Gloo stage 2 moves as many bytes as stage 0 and adds nothing to
save time; stages 1 and 2 add the all-gather of the updated parameters after each step, stage 3 two
all-gathers of each block a step instead (one before its forward, one before its backward).
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
p.add_argument("--steps", type=int, default=40)
p.add_argument("--model", default="gpt-nano")
p.add_argument("--data", default="text:fortunes")
p.add_argument("--batch", type=int, default=32)
p.add_argument("--precision", default="fp32")
p.add_argument("--out")
a = p.parse_args()


STAGES = [0, 1, 2, 3]
rates = {s: [] for s in STAGES}
state = {}
rss = {s: [] for s in STAGES}
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        order = STAGES[r % len(STAGES):] + STAGES[:r % len(STAGES)]
        for stage in order:
            run = os.path.join(tmp, f"{r}-{stage}")
            cmd = [a.hotloop, "launch", "--nproc", "2", "--master-port", str(free_port()), "--", "train",
                   "--model", a.model, "--data", a.data, "--steps", str(a.steps), "--batch", str(a.batch),
                   "--device", "cpu", "--no-eval", "--log-every", "0", "--precision", a.precision,
                   "--shard", str(stage), "--out", run]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            s = json.load(open(os.path.join(run, "summary.json")))
            rates[stage].append(s["tokens_per_s"] / 2)
            state[stage] = s["model_state_bytes"]
            rss[stage].append(s["peak_memory_bytes"]["rss"])
            print(f"round {r + 1}/{a.rounds} stage {stage}: {rates[stage][-1]:.0f} tokens/s per rank, "
                  f"model state {state[stage]}", flush=True)

ratios = {s: [rates[s][i] / rates[0][i] for i in range(a.rounds)] for s in STAGES[1:]}
report({
    "command": "bench/shard_stages.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("out", "hotloop")),
    **run_info(),
    "model": a.model, "data": a.data, "batch": a.batch, "steps": a.steps, "ranks": 2, "backend": "gloo",
    "precision": a.precision,
    "tokens_per_s_per_rank": rates,
    "median_tokens_per_s_per_rank": {s: statistics.median(v) for s, v in rates.items()},
    "vs_stage_0": {s: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                   for s, v in ratios.items()},
    "model_state_bytes_per_rank": state,
    "median_peak_rss_bytes": {s: statistics.median(v) for s, v in rss.items()},
}, a.out)
