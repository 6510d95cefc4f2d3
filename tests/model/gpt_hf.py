#!/usr/bin/env python3
"""hotloop's GPT against Hugging Face's GPT2LMHeadModel, both ways, through safetensors.

Run by ctest (model.gpt_hf) as: gpt_hf.py HOTLOOP_BINARY. No download: the test builds its own small
random GPT2LMHeadModel (2 layers, 2 heads, width 32, context 16, vocabulary 100: hotloop pads it to 128),
with every parameter perturbed so that biases and LayerNorms are not at their initial values.
1. HF -> hotloop: save_pretrained's model.safetensors (no lm_head.weight: it is tied) into
   `hotloop predict`; logits within 2e-5 relative L2 of HF's (fp32 CPU: measured 1.6e-7 and 4.8e-8
   alone, the same math summed in another order, and once 3.9e-6 in a full `ctest -j2` run). Tight on
   purpose: exact GELU in place of GPT-2's tanh form moves the first by 6.7e-5, so 1e-4 would not see it.
2. hotloop -> HF: a few steps of `hotloop train`, `hotloop weights export-hf` of its checkpoint, and
   GPT2LMHeadModel.from_pretrained on that folder gives hotloop's logits within the same tolerance.
"""
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

HOTLOOP = sys.argv[1]
TOLERANCE = 2e-5
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}")
    return r


def rel_l2(a, b):
    return ((a - b).norm() / b.norm()).item()


def hotloop_logits(d, weights, ids, *flags):
    inp, out = os.path.join(d, "ids.safetensors"), os.path.join(d, "logits.safetensors")
    save_file({"ids": ids}, inp)
    hotloop("predict", "--weights", weights, "--input", inp, "--output", out, *flags)
    return load_file(out)["logits"]


with tempfile.TemporaryDirectory() as d:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    hf = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hf.save_pretrained(os.path.join(d, "hf"), safe_serialization=True)
    saved = load_file(os.path.join(d, "hf", "model.safetensors"))
    check("lm_head.weight" not in saved and "transformer.h.0.attn.c_attn.weight" in saved,
          "save_pretrained keeps HF's names and drops the tied lm_head")
    ids = torch.randint(0, 100, (2, 16))
    with torch.no_grad():
        want = hf(ids).logits
    got = hotloop_logits(d, os.path.join(d, "hf", "model.safetensors"), ids, "--model", "gpt-nano",
                         "--layers", "2", "--heads", "2", "--width", "32", "--context", "16", "--vocab", "100")
    check(tuple(got.shape) == (2, 16, 100), f"hotloop's logits have HF's shape: {tuple(got.shape)}")
    err = rel_l2(got, want)
    check(err < TOLERANCE, f"HF -> hotloop: logits within {TOLERANCE} relative L2 ({err:.2e})")

    # hotloop -> HF: train a little, export, load with from_pretrained.
    corpus = os.path.join(d, "corpus")
    os.makedirs(corpus)
    with open(os.path.join(corpus, "a.txt"), "w") as f:
        f.write("the quick brown fox jumps over the lazy dog.\n" * 200)
    run = os.path.join(d, "run")
    hotloop("train", "--model", "gpt-nano", "--layers", "2", "--heads", "2", "--width", "32", "--context", "16",
            "--data", "text:" + corpus, "--steps", "5", "--batch", "8", "--out", run, "--no-eval",
            "--telemetry", "false", "--threads", "1")
    checkpoint = os.path.join(run, "checkpoints", "step-00000005.safetensors")
    hotloop("weights", "export-hf", checkpoint, os.path.join(d, "export"))
    back = GPT2LMHeadModel.from_pretrained(os.path.join(d, "export")).eval()
    check(back.config.vocab_size == 256 and back.config.n_layer == 2, "config.json describes the model")
    ids = torch.randint(0, 256, (3, 16))
    with torch.no_grad():
        want = back(ids).logits
    got = hotloop_logits(d, checkpoint, ids)  # the run's config.json names the size
    err = rel_l2(got, want)
    check(err < TOLERANCE, f"hotloop -> HF: from_pretrained's logits within {TOLERANCE} relative L2 ({err:.2e})")
    # And the weights alone, as a Python user would load them into their own model.
    fresh = GPT2LMHeadModel(back.config).eval()
    missing, unexpected = fresh.load_state_dict(load_file(os.path.join(d, "export", "model.safetensors")),
                                                strict=False)
    check(not unexpected and set(missing) <= {"lm_head.weight"},
          f"load_state_dict: missing {missing}, unexpected {unexpected}")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("all checks passed")
