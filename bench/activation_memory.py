"""Activation checkpointing's memory saving and its recompute cost, in one run: the same training steps
with --activation-checkpointing none, stages, all and blocks.

usage: .venv/bin/python bench/activation_memory.py [--device cpu] [--model resnet18-small] [--batch 256]
                                                   [--size 28] [--steps 4] [--out FILE.json]

Each setting is a separate `hotloop train` process (synthetic data, fp32, no evaluation, no telemetry), so
that each peak is its own. The peak is summary.json's peak_memory_bytes: the CUDA allocator's peak
allocated bytes on a GPU, the process's peak RSS on the CPU. RSS also counts what does not depend on the
batch (LibTorch's own pages, the weights, the optimizer state, the data): a fourth run at batch 2 without
checkpointing measures that floor, and `above_floor_vs_none` compares what each setting adds on top of it,
which is the activations' share. The step time is the summary's median, so the recompute's cost shows as a
ratio too.
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile

from bench_common import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hotloop", default=os.path.join(ROOT, "build", "hotloop"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default="resnet18-small")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    data = f"synthetic:{2 * args.batch}x{args.channels}x{args.size}x{args.size}"
    rows = {}
    for ac, batch in (("none", args.batch), ("stages", args.batch), ("all", args.batch),
                      ("blocks", args.batch), ("floor", 2)):
        run = os.path.join(tempfile.mkdtemp(prefix=f"ac-{ac}-"), "run")
        cmd = [args.hotloop, "train", "--model", args.model, "--data", data, "--batch", str(batch),
               "--steps", str(args.steps), "--device", args.device, "--no-eval", "--telemetry", "false",
               "--augment", "none", "--activation-checkpointing", "none" if ac == "floor" else ac,
               "--log-every", "0", "--out", run]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        s = json.load(open(os.path.join(run, "summary.json")))
        peak = s["peak_memory_bytes"]
        rows[ac] = {"peak_bytes": peak["allocated"] if args.device.startswith("cuda") else peak["rss"],
                    "peak_kind": "cuda allocated" if args.device.startswith("cuda") else "rss",
                    "step_time_ms": s["step_time_ms"]["median"], "command": " ".join(cmd)}
    base = rows["none"]
    floor = rows.pop("floor")["peak_bytes"]
    for ac, r in rows.items():
        r["peak_vs_none"] = r["peak_bytes"] / base["peak_bytes"]
        r["above_floor_bytes"] = r["peak_bytes"] - floor
        r["above_floor_vs_none"] = r["above_floor_bytes"] / (base["peak_bytes"] - floor)
        r["step_time_vs_none"] = r["step_time_ms"] / base["step_time_ms"]
    report({"machine": {"host": platform.node(), "cpus": os.cpu_count()}, "model": args.model,
            "batch": args.batch, "size": args.size, "device": args.device, "floor_bytes_batch_2": floor,
            "rows": rows}, args.out)


if __name__ == "__main__":
    main()
