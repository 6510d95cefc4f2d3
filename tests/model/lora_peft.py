#!/usr/bin/env python3
"""hotloop's LoRA against peft and a PyTorch loop, through the folders each writes.

Run by ctest (model.lora_peft) as: lora_peft.py HOTLOOP_BINARY. No download: the bases are small random
Qwen2ForCausalLM (GQA 4/2, q/k/v biases, tied) and GPT2LMHeadModel models saved here with save_pretrained,
trained on bytes (vocabulary 256), fp32 on the CPU.
1. Training: hotloop and a peft + torch.optim.AdamW loop, both starting from the same PEFT adapter (A and
   B random: --lora-init), take 20 steps on the same batches (--shuffle false: windows in file order).
   Every step's loss agrees within 1e-5 relative and the final adapters within 1e-4 relative L2.
2. The adapter hotloop writes (RUN/adapter) loads with peft.PeftModel.from_pretrained and gives
   hotloop's logits within 1e-5 relative L2, through `predict --weights RUN/adapter`, the run's
   RUN/model.safetensors and its last checkpoint (the base from the run's --init); `weights merge-lora`
   writes a folder from_pretrained loads with those logits.
   The same for GPT-2 (Conv1D weights: fan_in_fan_out).
3. The trainer: a checkpoint and the final weights hold only the adapters (and their optimizer state); kill -9 + --resume auto
   ends with the uninterrupted run's adapters bit for bit; 2 Gloo ranks end within 1e-5 of 1 rank; a bf16
   run stores the frozen projections in bf16 and still predicts.
4. Refused with the reason (exit 2): an unknown --lora-targets, LoRA on an image model, a --lora-init
   adapter of another alpha.
Skips (exit 0) with the reason when peft is missing.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

import torch

try:
    import peft
    from peft import LoraConfig, PeftModel, get_peft_model
except ImportError as e:
    print(f"SKIP: peft is not installed ({e}); scripts/setup installs it")
    sys.exit(0)
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

HOTLOOP = sys.argv[1]
TOLERANCE = 1e-5
failures = []
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, expect=0, env=None):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, env=env)
    if expect is not None and r.returncode != expect:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}, expected {expect}")
    return r


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hotloop_logits(d, weights, ids, *flags):
    inp, out = os.path.join(d, "ids.safetensors"), os.path.join(d, "logits.safetensors")
    save_file({"ids": ids}, inp)
    hotloop("predict", "--weights", weights, "--input", inp, "--output", out, *flags)
    return load_file(out)["logits"]


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits


def adapter_weights(folder):
    return load_file(os.path.join(folder, "adapter_model.safetensors"))


SMALL = dict(vocab_size=256, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)
CONTEXT, BATCH, STEPS, LR = 16, 4, 20, 1e-3
PLAIN = ["--telemetry", "false", "--threads", "1", "--no-eval", "--precision", "fp32"]
ADAMW = ["--optimizer", "adamw", "--lr", str(LR), "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8",
         "--weight-decay", "0", "--schedule", "constant", "--warmup-steps", "0", "--clip-grad-norm", "0"]

with tempfile.TemporaryDirectory() as d:
    torch.manual_seed(0)
    base = os.path.join(d, "base")
    qwen = Qwen2ForCausalLM(Qwen2Config(**SMALL)).eval()
    with torch.no_grad():
        for p in qwen.parameters():
            p.add_(0.05 * torch.randn_like(p))
    qwen.save_pretrained(base)
    # Text with every window different: the batches are windows 0.. in order.
    corpus = os.path.join(d, "corpus")
    os.makedirs(corpus)
    g = torch.Generator().manual_seed(1)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "far", "away"]
    text = " ".join(words[i] for i in torch.randint(0, len(words), (2000,), generator=g).tolist())
    with open(os.path.join(corpus, "a.txt"), "w") as f:
        f.write(text)
    data = torch.tensor(list(text.encode()), dtype=torch.long)

    # 1. The starting adapter, A and B random, as peft saves it.
    init = os.path.join(d, "init")
    start = get_peft_model(Qwen2ForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, lora_alpha=8, target_modules=ALL, task_type="CAUSAL_LM"))
    with torch.no_grad():
        for n, p in start.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.02, generator=g)
    start.save_pretrained(init)

    run = os.path.join(d, "run")
    r = hotloop("train", "--init", base, "--data", "text:" + corpus, "--context", str(CONTEXT), "--batch",
                str(BATCH), "--steps", str(STEPS), "--shuffle", "false", "--lora-rank", "4", "--lora-alpha", "8",
                "--lora-init", init, "--out", run, *PLAIN, *ADAMW)
    check("lora: rank 4, alpha 8 (scale 2), dropout 0 on 14 projections (all)" in r.stdout + r.stderr,
          "the run says what it adapts")
    hot_losses = [json.loads(l)["loss"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l]

    # The same 20 steps in PyTorch + peft.
    model = PeftModel.from_pretrained(Qwen2ForCausalLM.from_pretrained(base), init, is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)
    torch_losses = []
    for step in range(STEPS):
        w = torch.stack([data[(step * BATCH + i) * CONTEXT:(step * BATCH + i + 1) * CONTEXT + 1]
                         for i in range(BATCH)])
        logits = model(w[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_losses.append(loss.item())
    worst = max(abs(a - b) / abs(b) for a, b in zip(hot_losses, torch_losses))
    check(len(hot_losses) == STEPS and worst < 1e-5,
          f"{STEPS} steps: each loss within 1e-5 relative of peft + PyTorch's ({worst:.2e}; "
          f"{torch_losses[0]:.4f} -> {torch_losses[-1]:.4f})")
    trained = os.path.join(d, "torch-adapter")
    model.save_pretrained(trained)
    mine, theirs = adapter_weights(os.path.join(run, "adapter")), adapter_weights(trained)
    check(sorted(mine) == sorted(theirs), f"the adapter has peft's {len(theirs)} tensor names")
    worst = max(rel_l2(mine[k], theirs[k]) for k in theirs)
    moved = min(rel_l2(theirs[k], adapter_weights(init)[k]) for k in theirs)
    check(worst < 1e-4 and moved > 1e-3,
          f"the adapters after {STEPS} steps within 1e-4 relative L2 of peft's ({worst:.2e}; each moved >= {moved:.1e})")

    # 2. hotloop's adapter in peft.
    ids = torch.randint(0, 256, (2, CONTEXT), generator=g)
    tuned = PeftModel.from_pretrained(Qwen2ForCausalLM.from_pretrained(base), os.path.join(run, "adapter")).eval()
    want = logits_of(tuned, ids)
    for weights in (os.path.join(run, "adapter"), os.path.join(run, "model.safetensors"),
                    os.path.join(run, "checkpoints", f"step-{STEPS:08d}.safetensors")):
        err = rel_l2(hotloop_logits(d, weights, ids), want)
        check(err < TOLERANCE, f"predict --weights {os.path.relpath(weights, d)}: peft's logits within "
              f"{TOLERANCE} ({err:.2e})")
    merged = os.path.join(d, "merged")
    r = hotloop("weights", "merge-lora", os.path.join(run, "adapter"), merged)
    back = AutoModelForCausalLM.from_pretrained(merged).eval()
    err = rel_l2(logits_of(back, ids), want)
    check(type(back).__name__ == "Qwen2ForCausalLM" and err < TOLERANCE,
          f"merge-lora: from_pretrained's logits within {TOLERANCE} of peft's ({err:.2e})")
    r = hotloop("weights", "export-hf", os.path.join(run, "model.safetensors"), os.path.join(d, "x"), expect=2)
    check("merge-lora" in r.stderr, "export-hf of a LoRA run points to merge-lora")

    # GPT-2: Conv1D weights (in, out), adapters on c_attn and both c_proj.
    gbase = os.path.join(d, "gpt2")
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=CONTEXT, n_embd=32, n_layer=2, n_head=4))
    gpt.save_pretrained(gbase)
    grun = os.path.join(d, "grun")
    hotloop("train", "--init", gbase, "--data", "text:" + corpus, "--context", str(CONTEXT), "--batch", "4",
            "--steps", "3", "--lora-rank", "4", "--lora-targets", "c_attn,c_proj", "--lr", "0.01", "--out", grun,
            *PLAIN)
    config = json.load(open(os.path.join(grun, "adapter", "adapter_config.json")))
    gtuned = PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(gbase), os.path.join(grun, "adapter")).eval()
    err = rel_l2(hotloop_logits(d, os.path.join(grun, "adapter"), ids), logits_of(gtuned, ids))
    moved = max(t.abs().max().item() for k, t in adapter_weights(os.path.join(grun, "adapter")).items()
                if "lora_B" in k)
    check(config["fan_in_fan_out"] and moved > 0 and err < TOLERANCE,
          f"GPT-2: the adapter (fan_in_fan_out) gives peft's logits within {TOLERANCE} ({err:.2e})")

    # 3. The trainer's parts with LoRA.
    common = ["train", "--init", base, "--data", "text:" + corpus, "--context", str(CONTEXT), "--batch", "8",
              "--steps", "8", "--lora-rank", "4", "--checkpoint-every", "4", *PLAIN]
    last = load_file(os.path.join(run, "checkpoints", f"step-{STEPS:08d}.safetensors"))
    weights = [k for k in last if k.startswith("model/")]
    check(len(weights) == 2 * len(ALL) * SMALL["num_hidden_layers"] and all("lora_" in k for k in weights),
          f"a checkpoint holds the {len(weights)} adapter tensors and no base weight")
    final = load_file(os.path.join(run, "model.safetensors"))
    check(sorted(final) == sorted(k[len("base_model.model."):] for k in mine),
          f"the run's model.safetensors holds the {len(final)} adapters (the base is --init's)")
    one = os.path.join(d, "one")
    hotloop(*common, "--out", one)
    a1 = adapter_weights(os.path.join(one, "adapter"))
    killed = os.path.join(d, "killed")
    r = hotloop(*common, "--out", killed, env=dict(os.environ, HOTLOOP_INJECT_KILL="step:6"), expect=None)
    check(r.returncode == -9, f"the LoRA run killed itself with SIGKILL after step 6 (exit {r.returncode})")
    hotloop(*common, "--out", killed, "--resume", "auto")
    ak = adapter_weights(os.path.join(killed, "adapter"))
    check(all(torch.equal(ak[k], a1[k]) for k in a1),
          "kill -9 at step 6 + --resume auto ends with the uninterrupted run's adapters, bit for bit")
    two = os.path.join(d, "two")
    r = hotloop("launch", "--nproc", "2", "--master-port", str(free_port()), "--", *common, "--out", two)
    a2 = adapter_weights(os.path.join(two, "adapter"))
    worst = max(rel_l2(a2[k], a1[k]) for k in a1)
    check(worst < TOLERANCE, f"2 Gloo ranks end within {worst:.2e} relative L2 of 1 rank's adapters")
    half = os.path.join(d, "bf16")
    r = hotloop(*[a for a in common if a not in ("--precision", "fp32")], "--precision", "bf16", "--out", half)
    check("the frozen projections are stored in bf16" in r.stdout + r.stderr,
          "bf16: the frozen projections are stored in bf16")
    got = hotloop_logits(d, os.path.join(half, "adapter"), ids)
    check(torch.isfinite(got).all().item(), "bf16: the run's adapter predicts")

    # 4. Refusals.
    r = hotloop("train", "--init", base, "--data", "text:" + corpus, "--lora-rank", "4", "--lora-targets", "qkv",
                "--steps", "1", "--out", os.path.join(d, "bad1"), *PLAIN, expect=2)
    check("'qkv'" in r.stderr and "q_proj" in r.stderr, f"an unknown target names the projections: "
          f"{r.stderr.strip().splitlines()[-1][:120]}")
    r = hotloop("train", "--model", "cnn-small", "--lora-rank", "4", "--steps", "1", "--out",
                os.path.join(d, "bad2"), *PLAIN, expect=2)
    check("language model" in r.stderr, "LoRA on an image model is refused")
    r = hotloop(*common, "--out", os.path.join(d, "bad3"), "--lora-init", init, "--lora-alpha", "16", expect=2)
    check("lora_alpha is 8" in r.stderr, "an adapter of another alpha is refused")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print(f"all checks passed (peft {peft.__version__})")
