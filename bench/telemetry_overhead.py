"""What telemetry costs: `hotloop train` with telemetry on and off, in one run.

usage: telemetry_overhead.py [--hotloop build/hotloop] [--rounds 4] [--steps 80] [--model cnn-small]
                             [--data synthetic:8192x1x28x28] [--batch 128] [--device cpu] [--out FILE]
The two settings alternate (on, off, off, on, on, off, ...) so that drift on a noisy machine and the
order within a round hit both alike.
Each run's figure is its summary's images_per_s (the median over steady-state steps); the result is
the median per setting and overhead = 1 - on/off, and the median and range of the per-round on/off
ratios (each round runs both settings back to back). With telemetry on, the sampler reads NVML and the
host at --telemetry-interval (1 s) and every step records its phases, TensorBoard scalars and a
diagnosis every 50 steps.
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
p.add_argument("--rounds", type=int, default=4)
p.add_argument("--steps", type=int, default=80)
p.add_argument("--model", default="cnn-small")
p.add_argument("--data", default="synthetic:8192x1x28x28")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--device", default="cpu")
p.add_argument("--out")
a = p.parse_args()

rates = {"on": [], "off": []}
overheads = []
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        # on-off, then off-on: neither setting always runs first.
        for setting in (("on", "off") if r % 2 == 0 else ("off", "on")):
            run = os.path.join(tmp, f"{setting}{r}")
            subprocess.run(
                [a.hotloop, "train", "--model", a.model, "--data", a.data, "--steps", str(a.steps),
                 "--batch", str(a.batch), "--device", a.device, "--no-eval", "--log-every", "0",
                 "--telemetry", "true" if setting == "on" else "false", "--out", run],
                check=True, stdout=subprocess.DEVNULL)
            s = json.load(open(os.path.join(run, "summary.json")))
            rates[setting].append(s["images_per_s"])
            if setting == "on":
                overheads.append(s["telemetry_overhead"])
            print(f"round {r + 1}/{a.rounds} telemetry {setting}: {s['images_per_s']:.1f} images/s", flush=True)

on = statistics.median(rates["on"])
off = statistics.median(rates["off"])
# Each round ran both settings back to back: its on/off ratio is one paired measurement.
paired = [a_on / a_off for a_on, a_off in zip(rates["on"], rates["off"])]
report({
    "command": "bench/telemetry_overhead.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("out", "hotloop")),
    "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
    "model": a.model, "data": a.data, "batch": a.batch, "steps": a.steps, "device": a.device,
    "images_per_s": {"telemetry_on": rates["on"], "telemetry_off": rates["off"]},
    "median_on": on, "median_off": off,
    "overhead": 1 - on / off,
    "on_over_off_paired": {"median": statistics.median(paired), "min": min(paired), "max": max(paired),
                           "per_round": paired},
    "sampler_cpu_share": statistics.median(overheads),
}, a.out)
