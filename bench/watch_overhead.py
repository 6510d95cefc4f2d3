"""What `hotloop watch` costs a job: the same PyTorch script alone and under watch, in one run.

usage: watch_overhead.py [--hotloop build/hotloop] [--rounds 4] [--steps 60] [--workers 2] [--out FILE]
The job is examples/watch/train_fashion.py (its defaults: a small CNN on Fashion-MNIST, 2 DataLoader
workers with torchvision augmentation); it prints its own time for its steps, which is the figure
compared (time.time() around the same loop on both sides). The settings alternate (alone, watched, then
watched, alone, ...) so that drift and order hit both alike. Per round, the ratio watched/alone of the
step time; the result is the median of those paired ratios with their range, and watch's own CPU
seconds / wall seconds (summary.json `overhead`), the median over the watched runs.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

from bench_common import report

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "examples", "watch", "train_fashion.py")

p = argparse.ArgumentParser()
p.add_argument("--hotloop", default="build/hotloop")
p.add_argument("--rounds", type=int, default=4)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--out")
a = p.parse_args()

job = [sys.executable, JOB, "--device", "cpu", "--steps", str(a.steps), "--workers", str(a.workers)]
seconds = {"alone": [], "watched": []}
ratios, shares = [], []
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        times = {}
        for setting in (("alone", "watched") if r % 2 == 0 else ("watched", "alone")):
            out = os.path.join(tmp, f"{setting}{r}")
            cmd = job if setting == "alone" else [a.hotloop, "watch", "--out", out, "--"] + job
            text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            times[setting] = float(re.search(r"steps in ([0-9.]+) s", text).group(1))
            seconds[setting].append(times[setting])
            if setting == "watched":
                shares.append(json.load(open(os.path.join(out, "summary.json")))["overhead"]["cpu_share_percent"])
            print(f"round {r + 1}/{a.rounds} {setting}: {times[setting]:.2f} s", flush=True)
        ratios.append(times["watched"] / times["alone"])

report({
    "command": "bench/watch_overhead.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("out", "hotloop")),
    "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
    "job": "examples/watch/train_fashion.py " + " ".join(job[2:]),
    "step_seconds": seconds,
    "watched_over_alone": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                           "per_round": ratios},
    "watch_cpu_share_percent": {"median": statistics.median(shares), "per_run": shares},
}, a.out)
