"""What hotloop.Run costs a Python training loop (issue 39): the same CPU loop bare and inside a Run.

usage: .venv/bin/python bench/python_run_overhead.py [--rounds 7] [--steps 300] [--out FILE.json]

The loop: a small CNN (two 3x3 convolutions, 32 and 64 channels, then a linear layer) on batches of 64
Fashion-MNIST-sized images held in memory (no loader: the loop's own work only), SGD, 2 threads.
Variants, each its own process, taking turns in every round (the order rotating):
- bare: the loop alone;
- run: inside hotloop.Run (telemetry on: phases, the NVML/host sampler thread, a diagnosis every 50
  steps; metrics.jsonl, telemetry.jsonl, TensorBoard), begin_step/end_step per step with the loss;
- run-no-sampler: the same with telemetry=False (no sampler thread, no phases or diagnosis).
Each process times --steps steps after 20 warm-up steps (wall clock, the loop's own clock); a variant's
cost is its time over bare's in the same round, minus 1; the figure is the median over rounds (range).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ["bare", "run", "run-no-sampler"]
WARMUP = 20


def one(variant, steps):
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    run = None
    if variant != "bare":
        try:
            import hotloop
        except ImportError:
            sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "build", "python")]
            import hotloop
        out = tempfile.mkdtemp(prefix="hotloop-run-overhead-")
        run = hotloop.Run(out, num_classes=10, telemetry=variant == "run")
    for i in range(WARMUP + steps):
        if i == WARMUP:
            start = time.perf_counter()
        if run is None:
            step()
        else:
            run.begin_step()
            loss = step()
            run.end_step(64, loss=loss)
    seconds = time.perf_counter() - start
    if run is not None:
        run.close()
    return seconds / steps


def measure(variant, steps):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", variant, "--steps", str(steps)],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", default="")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(one(a.one, a.steps))
        return
    times = {v: [] for v in VARIANTS}
    for r in range(a.rounds):
        order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
        for v in order:
            times[v].append(measure(v, a.steps))
            print(f"round {r + 1}/{a.rounds} {v:15s} {times[v][-1] * 1e3:7.3f} ms/step", file=sys.stderr,
                  flush=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    results = {
        "commit": commit,
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "command": "python bench/python_run_overhead.py " + " ".join(sys.argv[1:]),
        "rounds": a.rounds, "steps": a.steps,
        "step_ms": {v: summary([t * 1e3 for t in times[v]]) for v in VARIANTS},
        "cost": {v: summary([t / b - 1 for t, b in zip(times[v], times["bare"])]) for v in VARIANTS[1:]},
        "per_round_s": times}
    print(json.dumps(results, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
