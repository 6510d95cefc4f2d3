#!/usr/bin/env python3
"""hotloop's packed rows (`--packing best-fit`, the default) against transformers running each example alone.

Run by ctest (model.packing_hf) as: packing_hf.py HOTLOOP_BINARY. No download: a random GPT-2, Llama and
Qwen2 folder with a tokenizer trained here (tests/model/instruct_folders.py). The data: 40 instruction
lines of the three kinds, a few with answers longer than the context (split into pieces).
For each folder, one SGD step on all the data at once (--batch = the rows best-fit makes, --shuffle false,
fp32, --lr 10, no momentum, weight decay, clipping or warm-up):
1. hotloop's step-1 loss equals the mean, over every trained target of every example, of transformers'
   loss on that example alone (a piece alone where it is split) within 1e-5 relative. A row whose
   examples attend to each other, whose positions run on, or that predicts an example's first token
   from the one before it gives another loss.
2. The update, (before - after) / lr, equals that loss's gradient in every parameter within 1e-5 of the
   parameter's largest gradient (the weights read back through `hotloop weights export-hf`).
Skips (exit 0) with the reason when tokenizers or transformers is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

try:
    from transformers import AutoModelForCausalLM

    from instruct_folders import CAPITALS, best_fit_rows, build_folder, examples_loss, lines, pieces, reference_tokens
except ImportError as e:
    print(f"SKIP: {e}; scripts/setup installs tokenizers and transformers")
    sys.exit(0)

HOTLOOP = sys.argv[1]
TOLERANCE = 1e-5
CONTEXT, LR = 48, 10.0
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}")
    return r


def data_lines():
    out = lines(36, 0)
    # Answers longer than the context: split into pieces.
    for country, capital in CAPITALS[:4]:
        out.append({"prompt": f"Tell me about {country}.",
                    "completion": " " + " ".join([f"{capital} is the capital of {country}."] * 8)})
    return out


torch.set_num_threads(2)
with tempfile.TemporaryDirectory() as d:
    train = data_lines()
    path = os.path.join(d, "train.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in train))
    # A val file, so that the train split is every line above.
    with open(os.path.join(d, "val.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines(4, 5)))
    texts = [json.dumps(r) for r in train]
    for kind in ("gpt2", "llama", "qwen"):
        folder = os.path.join(d, kind)
        tok = build_folder(folder, kind, texts, positions=CONTEXT)
        spans = []
        for ex in train:
            ids, mask = reference_tokens(tok, ex)
            spans += [len(p) for p, _ in pieces(ids, mask, CONTEXT)]
        long = sum(1 for ex in train if len(reference_tokens(tok, ex)[0]) > CONTEXT)
        rows = best_fit_rows(spans, CONTEXT)

        # eval(): GPT-2 has dropout; gradients flow all the same.
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").float().eval()
        want = examples_loss(model, tok, train, CONTEXT, grad=True)
        want.backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

        run = os.path.join(d, f"{kind}-run")
        hotloop("train", "--init", folder, "--data", "instruct:" + path, "--steps", "1", "--batch", str(rows),
                "--context", str(CONTEXT), "--shuffle", "false", "--precision", "fp32", "--optimizer", "sgd",
                "--lr", str(LR), "--momentum", "0", "--weight-decay", "0", "--clip-grad-norm", "0",
                "--schedule", "constant", "--warmup-steps", "0", "--no-eval", "--telemetry", "false",
                "--threads", "2", "--out", run)
        got = [json.loads(l)["loss"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l][0]
        rel = abs(got - want.item()) / want.item()
        check(rel <= TOLERANCE, f"{kind}: {len(spans)} examples and pieces ({long} split) in {rows} rows: "
                                f"loss {got:.6f} vs each alone {want.item():.6f} (rel {rel:.1e})")

        out = os.path.join(d, f"{kind}-after")
        hotloop("weights", "export-hf", os.path.join(run, "model.safetensors"), out)
        after = dict(AutoModelForCausalLM.from_pretrained(out).float().named_parameters())
        worst, where = 0.0, ""
        for name, g in grads.items():
            update = (before[name] - after[name].detach()) / LR
            err = ((update - g).abs().max() / g.abs().max().clamp_min(1e-12)).item()
            if err > worst:
                worst, where = err, name
        check(worst <= TOLERANCE, f"{kind}: the update is the gradient of each example alone "
                                  f"(worst {worst:.1e} of the largest, {where})")

if failures:
    sys.exit(f"{len(failures)} check(s) failed: {failures}")
print("all checks passed")
