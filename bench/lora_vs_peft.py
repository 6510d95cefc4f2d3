"""hotloop's LoRA fine-tuning against a PyTorch + peft loop, in one run on the same machine (issue 40).

usage: .venv/bin/python bench/lora_vs_peft.py [--rounds 5] [--steps 30] [--warmup 5] [--threads 2]
                                              [--batch 8] [--rank 16] [--hotloop build/hotloop] [--out FILE.json]

Both sides fine-tune the same random Qwen2-shaped model (a folder saved here with save_pretrained: 4
layers, width 256, 4 heads on 2 key/value heads, SwiGLU 704, tied, byte vocabulary 256, context 128),
float32 on the CPU, with LoRA rank --rank (alpha 2 x rank) on every projection (q/k/v/o, gate/up/down),
from the same starting adapter (a PEFT folder both load: hotloop's --lora-init), on the same windows in
the same order (a byte text file, windows in file order: hotloop's --shuffle false), with AdamW at
2e-4 constant, betas (0.9, 0.999), no weight decay, no clipping.
- peft: transformers' Qwen2ForCausalLM (SDPA attention) under peft.get_peft_model's adapters,
  torch.optim.AdamW(foreach) over the trainable parameters, zero_grad(set_to_none=True), no .item() in
  the loop; the same --threads.
- hotloop: `hotloop train --init BASE --lora-rank R --lora-init ADAPTER --shuffle false ...`.
Each side runs in its own process, one after the other within a round, the order rotating; speed is
tokens/s from each side's median per-step wall time after --warmup steps (hotloop's from the
step_time_ms of its metrics.jsonl, the same median). A round's ratio is hotloop / peft; the result is the median of the per-round ratios
with their min and max. The first and last step's loss of each side are reported (the same batches:
they must agree).
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

import torch

from bench_common import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CONTEXT, LR = 128, 2e-4


def make_inputs(d, args):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    base = os.path.join(d, "base")
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=256, hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, tie_word_embeddings=True))
    model.save_pretrained(base)
    adapter = os.path.join(d, "adapter")
    get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=TARGETS,
                                     task_type="CAUSAL_LM")).save_pretrained(adapter)
    corpus = os.path.join(d, "corpus")
    os.makedirs(corpus)
    text = b""
    for name in sorted(os.listdir("/usr/share/games/fortunes")):
        path = os.path.join("/usr/share/games/fortunes", name)
        if os.path.isfile(path) and not name.endswith(".dat") and not name.endswith(".u8"):
            text += open(path, "rb").read()
        if len(text) > (args.steps + 1) * args.batch * CONTEXT * 2:
            break
    with open(os.path.join(corpus, "a.txt"), "wb") as f:
        f.write(text)
    return base, adapter, corpus


def peft_worker(args):
    """One peft loop in this process; prints a JSON line."""
    from peft import PeftModel
    from transformers import Qwen2ForCausalLM
    torch.set_num_threads(args.threads)
    data = torch.tensor(list(open(os.path.join(args.corpus, "a.txt"), "rb").read()), dtype=torch.long)
    model = PeftModel.from_pretrained(Qwen2ForCausalLM.from_pretrained(args.base, attn_implementation="sdpa"),
                                      args.adapter, is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), weight_decay=0.0, foreach=True)
    times, losses = [], []
    for step in range(args.steps):
        start = (step * args.batch) * CONTEXT
        w = torch.stack([data[start + i * CONTEXT:start + (i + 1) * CONTEXT + 1] for i in range(args.batch)])
        t0 = time.perf_counter()
        logits = model(w[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach())
    step_s = statistics.median(times[args.warmup:])
    print(json.dumps({"tokens_per_s": args.batch * CONTEXT / step_s, "first_loss": losses[0].item(),
                      "last_loss": losses[-1].item()}))


def hotloop_run(args, base, adapter, corpus, out):
    cmd = [args.hotloop, "train", "--init", base, "--data", "text:" + corpus, "--context", str(CONTEXT),
           "--batch", str(args.batch), "--steps", str(args.steps), "--shuffle", "false", "--lora-rank",
           str(args.rank), "--lora-alpha", str(2 * args.rank), "--lora-init", adapter, "--optimizer", "adamw",
           "--lr", str(LR), "--beta2", "0.999", "--weight-decay", "0", "--schedule", "constant",
           "--warmup-steps", "0", "--clip-grad-norm", "0", "--precision", "fp32", "--threads",
           str(args.threads), "--no-eval", "--telemetry", "false", "--checkpoint-every", "0",
           "--keep-checkpoints", "0", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"hotloop failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    # The same median as the peft side: per-step wall times after the warm-up.
    steps = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
    step_s = statistics.median(s["step_time_ms"] / 1000 for s in steps[args.warmup:])
    return {"tokens_per_s": args.batch * CONTEXT / step_s, "first_loss": steps[0]["loss"],
            "last_loss": steps[-1]["loss"]}


def main(args):
    with tempfile.TemporaryDirectory() as d:
        base, adapter, corpus = make_inputs(d, args)
        rounds = []
        for i in range(args.rounds):
            order = ["hotloop", "peft"] if i % 2 == 0 else ["peft", "hotloop"]
            got = {}
            for side in order:
                if side == "hotloop":
                    got[side] = hotloop_run(args, base, adapter, corpus, os.path.join(d, f"run{i}"))
                else:
                    r = subprocess.run([sys.executable, __file__, "--worker", "--base", base, "--adapter", adapter,
                                        "--corpus", corpus, "--steps", str(args.steps), "--warmup",
                                        str(args.warmup), "--threads", str(args.threads), "--batch",
                                        str(args.batch)], capture_output=True, text=True, check=True)
                    got[side] = json.loads(r.stdout.strip().splitlines()[-1])
            got["ratio"] = got["hotloop"]["tokens_per_s"] / got["peft"]["tokens_per_s"]
            print(f"round {i + 1}: hotloop {got['hotloop']['tokens_per_s']:.0f} tokens/s, peft "
                  f"{got['peft']['tokens_per_s']:.0f} tokens/s, ratio {got['ratio']:.3f}", file=sys.stderr)
            rounds.append(got)
        ratios = [r["ratio"] for r in rounds]
        import peft
        import transformers
        report({
            "what": "LoRA fine-tuning tokens/s, hotloop vs PyTorch + peft (same model, adapter, batches, optimizer)",
            "command": " ".join(["bench/lora_vs_peft.py", *sys.argv[1:]]),
            "machine": f"{platform.node()}, {os.cpu_count()} cpus, {args.threads} threads",
            "versions": {"torch": torch.__version__, "peft": peft.__version__,
                         "transformers": transformers.__version__},
            "model": "Qwen2 shape: 4 layers, width 256, heads 4/2, SwiGLU 704, vocab 256, context 128, fp32",
            "lora": {"rank": args.rank, "alpha": 2 * args.rank, "targets": TARGETS},
            "batch": args.batch, "steps": args.steps, "warmup": args.warmup,
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "rounds": rounds}, args.out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--hotloop", default=os.path.join(ROOT, "build", "hotloop"))
    p.add_argument("--out", default="")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--base", help=argparse.SUPPRESS)
    p.add_argument("--adapter", help=argparse.SUPPRESS)
    p.add_argument("--corpus", help=argparse.SUPPRESS)
    a = p.parse_args()
    peft_worker(a) if a.worker else main(a)
