#!/usr/bin/env python3
"""hotloop's Llama family against Hugging Face transformers, both ways, through model folders.

Run by ctest (model.llama_hf) as: llama_hf.py HOTLOOP_BINARY. No download: each model is a small random
LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM built here, every parameter perturbed so that norms
and biases are not at their initial values, saved with save_pretrained.
1. HF -> hotloop: `hotloop predict --weights DIR` (the folder's config.json says the model) gives HF's logits
   within 1e-5 relative L2 (fp32 CPU): Llama with grouped-query attention, untied, Llama 3 RoPE scaling;
   Llama with attention biases, tied, linear RoPE scaling; Qwen2 (q/k/v biases, tied); Mistral (GQA,
   untied, head_dim set apart from the width). One is saved in shards (model.safetensors.index.json).
2. hotloop -> HF: `hotloop weights export-hf` of each folder loads with from_pretrained and gives the same
   logits; a llama-nano trained a few steps by hotloop, exported, gives hotloop's logits in transformers.
3. Refused with the reason (exit 2): sliding-window attention shorter than the context, another RoPE type,
   a mixture of experts, an architecture hotloop lacks.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)

HOTLOOP = sys.argv[1]
TOLERANCE = 1e-5
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, expect=0):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True)
    if r.returncode != expect:
        print(r.stdout, r.stderr)
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}, expected {expect}")
    return r


def rel_l2(a, b):
    return ((a - b).norm() / b.norm()).item()


def hotloop_logits(d, weights, ids, *flags):
    inp, out = os.path.join(d, "ids.safetensors"), os.path.join(d, "logits.safetensors")
    save_file({"ids": ids}, inp)
    hotloop("predict", "--weights", weights, "--input", inp, "--output", out, *flags)
    return load_file(out)["logits"]


def hf_logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


SMALL = dict(vocab_size=100, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6)
CASES = [
    ("llama, GQA 4/2, untied, llama3 RoPE", LlamaForCausalLM, LlamaConfig(
        **SMALL, num_key_value_heads=2, tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    ("llama, attention biases, tied, linear RoPE", LlamaForCausalLM, LlamaConfig(
        **SMALL, num_key_value_heads=4, tie_word_embeddings=True, attention_bias=True,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    ("qwen2, q/k/v biases, GQA 4/1, tied", Qwen2ForCausalLM, Qwen2Config(
        **SMALL, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=1000000.0)),
    ("mistral, GQA 4/2, untied, head_dim 16", MistralForCausalLM, MistralConfig(
        **SMALL, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, sliding_window=None)),
]

with tempfile.TemporaryDirectory() as d:
    torch.manual_seed(0)
    for i, (name, cls, config) in enumerate(CASES):
        hf = cls(config).eval()
        with torch.no_grad():
            for p in hf.parameters():
                p.add_(0.05 * torch.randn_like(p))
        folder = os.path.join(d, f"hf{i}")
        # The second is saved in shards, as large checkpoints are.
        hf.save_pretrained(folder, max_shard_size="20KB" if i == 1 else "5GB")
        if i == 1:
            check(os.path.exists(os.path.join(folder, "model.safetensors.index.json")),
                  f"{name}: saved in shards with an index")
        ids = torch.randint(0, 100, (2, 24))
        want = hf_logits(hf, ids)
        got = hotloop_logits(d, folder, ids, "--context", "24")
        check(tuple(got.shape) == tuple(want.shape), f"{name}: shape {tuple(got.shape)}")
        err = rel_l2(got, want)
        check(err < TOLERANCE, f"{name}: HF -> hotloop logits within {TOLERANCE} relative L2 ({err:.2e})")
        # And back: hotloop's export loads in transformers with the same logits.
        out = os.path.join(d, f"export{i}")
        hotloop("weights", "export-hf", folder, out)
        back = AutoModelForCausalLM.from_pretrained(out).eval()
        check(type(back).__name__ == cls.__name__, f"{name}: export-hf loads as {type(back).__name__}")
        err = rel_l2(hf_logits(back, ids), want)
        check(err < TOLERANCE, f"{name}: hotloop -> HF logits within {TOLERANCE} relative L2 ({err:.2e})")

    # Token ids outside the vocabulary: a usage error, not a crash (a device-side assert on a GPU).
    save_file({"ids": torch.full((1, 4), 150)}, os.path.join(d, "far.safetensors"))
    r = hotloop("predict", "--weights", os.path.join(d, "hf0"), "--input", os.path.join(d, "far.safetensors"),
                "--output", os.path.join(d, "x.safetensors"), expect=2)
    check("outside the model's vocabulary of 100" in r.stderr, f"ids past the vocabulary: {r.stderr.strip()[:100]}")

    # A llama-nano trained by hotloop, exported, in transformers.
    corpus = os.path.join(d, "corpus")
    os.makedirs(corpus)
    with open(os.path.join(corpus, "a.txt"), "w") as f:
        f.write("the quick brown fox jumps over the lazy dog.\n" * 200)
    run = os.path.join(d, "run")
    hotloop("train", "--model", "llama-nano", "--layers", "2", "--width", "32", "--context", "16",
            "--data", "text:" + corpus, "--steps", "5", "--batch", "8", "--out", run, "--no-eval",
            "--telemetry", "false", "--threads", "1")
    checkpoint = os.path.join(run, "checkpoints", "step-00000005.safetensors")
    hotloop("weights", "export-hf", checkpoint, os.path.join(d, "nano"))
    back = LlamaForCausalLM.from_pretrained(os.path.join(d, "nano")).eval()
    check(back.config.vocab_size == 256 and back.config.num_hidden_layers == 2
          and back.config.num_key_value_heads == 2, "llama-nano's config.json describes the model")
    ids = torch.randint(0, 256, (3, 16))
    err = rel_l2(hotloop_logits(d, checkpoint, ids), hf_logits(back, ids))
    check(err < TOLERANCE, f"llama-nano -> HF: from_pretrained's logits within {TOLERANCE} ({err:.2e})")

    # Fine-tuning a folder: `train --init DIR` takes the folder's model (hf:DIR) and its weights; the
    # checkpoint exports back as a Qwen2ForCausalLM that gives hotloop's logits.
    base = os.path.join(d, "base")
    qwen = Qwen2ForCausalLM(Qwen2Config(**{**SMALL, "vocab_size": 256}, num_key_value_heads=2)).eval()
    qwen.save_pretrained(base)
    tuned = os.path.join(d, "tuned")
    hotloop("train", "--init", base, "--data", "text:" + corpus, "--context", "16", "--steps", "4",
            "--batch", "4", "--out", tuned, "--no-eval", "--telemetry", "false", "--threads", "1")
    with open(os.path.join(tuned, "config.json")) as f:
        recorded = json.load(f)["model"]["name"]
    check(recorded == "hf:" + base, f"train --init DIR runs the folder's model ({recorded})")
    checkpoint = os.path.join(tuned, "checkpoints", "step-00000004.safetensors")
    hotloop("weights", "export-hf", checkpoint, os.path.join(d, "tuned-hf"))
    back = AutoModelForCausalLM.from_pretrained(os.path.join(d, "tuned-hf")).eval()
    ids = torch.randint(0, 256, (2, 16))
    got = hotloop_logits(d, checkpoint, ids)
    check(type(back).__name__ == "Qwen2ForCausalLM" and rel_l2(got, hf_logits(back, ids)) < TOLERANCE,
          "the fine-tuned checkpoint exports as a Qwen2ForCausalLM with hotloop's logits")
    check(rel_l2(got, hf_logits(qwen, ids)) > 1e-4, "the fine-tuning changed the weights")

    # What hotloop does not run is refused with the reason.
    def refused(name, edit, words):
        folder = os.path.join(d, "refused-" + name)
        LlamaForCausalLM(LlamaConfig(**SMALL, num_key_value_heads=2)).save_pretrained(folder)
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        edit(config)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        r = hotloop("predict", "--weights", folder, "--input", os.path.join(d, "ids.safetensors"),
                    "--output", os.path.join(d, "x.safetensors"), expect=2)
        check(all(w in r.stderr for w in words), f"refused: {name} ({r.stderr.strip().splitlines()[0]})")

    def sliding(c):
        c.update(architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=8)

    refused("sliding window", sliding, ["sliding-window attention of 8 tokens", "--context 8"])
    refused("yarn", lambda c: c.update(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                        "rope_theta": 10000.0}), ['"yarn"'])
    refused("moe", lambda c: c.update(num_local_experts=8), ["mixture of experts"])
    refused("architecture", lambda c: c.update(architectures=["GemmaForCausalLM"]), ['"GemmaForCausalLM"'])

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("all checks passed")
