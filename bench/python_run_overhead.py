"""What hotloop.Run costs a Python training loop (issue 39): the same CPU loop with and without Run's calls.

usage: .venv/bin/python bench/python_run_overhead.py [--rounds 30] [--block 20] [--threads 1] [--out FILE.json]

The loop: a small CNN (two 3x3 convolutions, 32 and 64 channels, then a linear layer) on a batch of 64
Fashion-MNIST-sized images held in memory (no loader: the loop's own work only), SGD, --threads torch
threads (default 1: two threads on the 2-core VM vary by 10-20% from block to block).

Two processes, one per mode: `run` (hotloop.Run with telemetry: phases, the NVML/host sampler thread, a
diagnosis every 50 steps; metrics.jsonl, telemetry.jsonl, TensorBoard) and `run-no-sampler` (the same
with telemetry=False). In each, after 20 warm-up steps, every round times a block of --block bare steps
and a block of as many steps inside the Run (begin_step, the step, end_step with the loss tensor), in
alternating order (ABBA), on the same clock; a round's cost is its Run block's time over its bare
block's, minus 1, and the figure is the median over rounds with its range. Run being alive during both
blocks, its sampler thread's CPU time is reported beside it (the sampler counts its own: summary.json's
telemetry.sampler_cpu_s, over the run's wall time). Then the calls alone: 5000 steps of begin_step +
end_step with an empty body, their time per step over the bare step's median.
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
MODES = ["run", "run-no-sampler"]
WARMUP = 20


def one(mode, rounds, block, threads):
    import torch

    try:
        import hotloop
    except ImportError:
        sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "build", "python")]
        import hotloop

    torch.manual_seed(0)
    torch.set_num_threads(threads)
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

    out = tempfile.mkdtemp(prefix="hotloop-run-overhead-")
    run = hotloop.Run(out, num_classes=10, telemetry=mode == "run")

    def bare_block():
        t = time.perf_counter()
        for _ in range(block):
            step()
        return time.perf_counter() - t

    def run_block():
        t = time.perf_counter()
        for _ in range(block):
            run.begin_step()
            loss = step()
            run.end_step(64, loss=loss)
        return time.perf_counter() - t

    for _ in range(WARMUP):
        step()
    costs, bare_step = [], []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = bare_block(), run_block()
        else:
            b, a = run_block(), bare_block()
        costs.append(b / a - 1)
        bare_step.append(a / block)
    calls = 5000
    t = time.perf_counter()
    for _ in range(calls):
        run.begin_step()
        run.end_step(64, loss=0.5)
    call_s = (time.perf_counter() - t) / calls
    summary = run.close()
    telemetry = summary.get("telemetry", {})
    return {"cost": costs, "bare_step_s": statistics.median(bare_step), "calls_per_step_s": call_s,
            "calls_share": call_s / statistics.median(bare_step),
            "sampler_cpu_share": telemetry.get("overhead", 0.0), "steps": summary["steps"]}


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="torch's threads (1: the least scheduling noise)")
    p.add_argument("--out", default="")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.rounds, a.block, a.threads)))
        return
    results = {
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "command": "python bench/python_run_overhead.py " + " ".join(sys.argv[1:]),
        "rounds": a.rounds, "block": a.block, "threads": a.threads, "modes": {}}
    for mode in MODES:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", mode, "--rounds", str(a.rounds),
                              "--block", str(a.block), "--threads", str(a.threads)], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["cost_summary"] = summary(r["cost"])
        results["modes"][mode] = r
        print(f"{mode:15s} cost {r['cost_summary']['median'] * 100:+.2f}% "
              f"({r['cost_summary']['min'] * 100:+.2f}% to {r['cost_summary']['max'] * 100:+.2f}%), "
              f"calls {r['calls_per_step_s'] * 1e6:.0f} us/step = {r['calls_share'] * 100:.2f}% of a "
              f"{r['bare_step_s'] * 1e3:.1f} ms step, sampler {r['sampler_cpu_share'] * 100:.3f}% of the wall time",
              file=sys.stderr, flush=True)
    print(json.dumps(results, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
