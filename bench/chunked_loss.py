"""The chunked output layer and loss (model/lm/linear_cross_entropy.h) against the unchunked one: a
training step's peak memory and its tokens/s, for a random Llama with a large vocabulary.

usage: .venv/bin/python bench/chunked_loss.py --hotloop-before OLD [--hotloop build/hotloop]
           [--vocab 151936] [--context 2048] [--batch 4] [--steps 3] [--rounds 3] [--out FILE.json]

OLD is a hotloop binary whose language models take their loss on the whole (tokens x vocabulary)
logits (any commit before the chunked loss); the two binaries run the same command, alternating which
goes first in each round, each in a process of its own: `hotloop train --model llama-nano --vocab V
--context T --batch B --steps S` on text:fortunes (byte-level ids, all below V), fp32, no evaluation,
no telemetry, on the CPU. The peak is summary.json's peak RSS (the whole process: LibTorch, weights,
optimizer state, data and the step's tensors); tokens/s is the summary's, over the steps after the
first. Each ratio is the median of the per-round ratios (new / old), with their range.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile

from bench_common import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(binary, args):
    out = os.path.join(tempfile.mkdtemp(prefix="chunked-loss-"), "run")
    cmd = [binary, "train", "--model", "llama-nano", "--vocab", str(args.vocab), "--context",
           str(args.context), "--batch", str(args.batch), "--steps", str(args.steps), "--data",
           "text:fortunes", "--device", "cpu", "--precision", "fp32", "--no-eval", "--telemetry",
           "false", "--log-every", "0", "--keep-checkpoints", "0", "--out", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "summary.json")))
    return {"peak_rss_bytes": s["peak_memory_bytes"]["rss"], "tokens_per_s": s["tokens_per_s"],
            "step_time_ms_median": s["step_time_ms"]["median"], "command": " ".join(cmd)}


def summary(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hotloop", default=os.path.join(ROOT, "build", "hotloop"))
    ap.add_argument("--hotloop-before", required=True)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rounds = []
    for r in range(args.rounds):
        order = [("chunked", args.hotloop), ("unchunked", args.hotloop_before)]
        if r % 2 == 1:
            order.reverse()
        rounds.append({name: run(binary, args) for name, binary in order})
    memory = [x["chunked"]["peak_rss_bytes"] / x["unchunked"]["peak_rss_bytes"] for x in rounds]
    speed = [x["chunked"]["tokens_per_s"] / x["unchunked"]["tokens_per_s"] for x in rounds]
    report({"machine": {"host": platform.node(), "cpus": os.cpu_count(), "device": "cpu"},
            "model": f"llama-nano, vocabulary {args.vocab}, context {args.context}, batch {args.batch}",
            "peak_rss_chunked_vs_unchunked": summary(memory),
            "tokens_per_s_chunked_vs_unchunked": summary(speed), "rounds": rounds}, args.out)


if __name__ == "__main__":
    main()
