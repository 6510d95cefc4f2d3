"""What data parallelism costs on this machine, and what overlapping the gradient all-reduce with backward
buys: `hotloop train` as 1 rank, then under `hotloop launch --nproc 2` with the all-reduce after backward
(--overlap-allreduce false) and overlapped with it (true), in one run.

usage: dist_overlap.py [--hotloop build/hotloop] [--rounds 3] [--steps 60] [--model cnn-small]
                       [--data synthetic:8192x1x28x28] [--batch 128] [--bucket-mb 1] [--out FILE]
The settings rotate within each round so that drift hits all alike. Each run's figure is its summary's
images_per_s (median over steady-state steps) and, for 2 ranks, the median exposed all-reduce time per
step (metrics.jsonl phases_ms.allreduce: the time after backward until the mean gradients are there).
Each rank gets its share of the cores (hotloop divides them by LOCAL_WORLD_SIZE).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile

from bench_common import report

p = argparse.ArgumentParser()
p.add_argument("--hotloop", default="build/hotloop")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--model", default="cnn-small")
p.add_argument("--data", default="synthetic:8192x1x28x28")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--bucket-mb", type=float, default=1)
p.add_argument("--out")
a = p.parse_args()

SETTINGS = ["1 rank", "2 ranks, after backward", "2 ranks, overlapped"]
rates = {s: [] for s in SETTINGS}
exposed = {s: [] for s in SETTINGS[1:]}
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        order = SETTINGS[r % 3:] + SETTINGS[:r % 3]
        for i, setting in enumerate(order):
            run = os.path.join(tmp, f"{r}-{i}")
            train = ["train", "--model", a.model, "--data", a.data, "--steps", str(a.steps), "--batch",
                     str(a.batch), "--device", "cpu", "--no-eval", "--log-every", "0", "--telemetry", "true",
                     "--bucket-mb", str(a.bucket_mb), "--out", run]
            if setting == "1 rank":
                cmd = [a.hotloop] + train
            else:
                overlap = "true" if setting.endswith("overlapped") else "false"
                cmd = [a.hotloop, "launch", "--nproc", "2", "--master-port", str(29700 + 3 * r + i), "--"] + \
                    train + ["--overlap-allreduce", overlap]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            s = json.load(open(os.path.join(run, "summary.json")))
            rates[setting].append(s["images_per_s"])
            line = f"round {r + 1}/{a.rounds} {setting}: {s['images_per_s']:.1f} images/s"
            if setting != "1 rank":
                ms = [json.loads(l)["phases_ms"].get("allreduce", 0)
                      for l in open(os.path.join(run, "metrics.jsonl")) if '"phases_ms"' in l]
                exposed[setting].append(statistics.median(ms[len(ms) // 5:]))
                line += f", exposed all-reduce {exposed[setting][-1]:.1f} ms/step"
            print(line, flush=True)

med = {s: statistics.median(v) for s, v in rates.items()}
report({
    "command": "bench/dist_overlap.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("out", "hotloop")),
    "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
    "model": a.model, "data": a.data, "batch": a.batch, "steps": a.steps, "bucket_mb": a.bucket_mb,
    "images_per_s": rates,
    "median_images_per_s": med,
    "exposed_allreduce_ms": exposed,
    "median_exposed_allreduce_ms": {s: statistics.median(v) for s, v in exposed.items()},
    "two_ranks_vs_one": {s: med[s] / med["1 rank"] for s in SETTINGS[1:]},
    "overlapped_vs_after_backward": med["2 ranks, overlapped"] / med["2 ranks, after backward"],
}, a.out)
