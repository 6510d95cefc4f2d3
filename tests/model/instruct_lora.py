#!/usr/bin/env python3
"""hotloop's instruction data (`--data instruct:`) against transformers, and a LoRA fine-tune on it.

Run by ctest (model.instruct_lora) as: instruct_lora.py HOTLOOP_BINARY. No download: three model folders
are built here (tests/model/instruct_folders.py: "qwen", "llama" and "plain", each with its template).
The data: capitals of countries as the three line kinds (prompt/completion text, messages, and
prompt/completion lists of messages), train.jsonl and val.jsonl.
1. The first batch's loss: hotloop's step-1 loss (--packing wrap, --shuffle false, fp32, LoRA B = 0 so the
   base; --chat-template: the built-in the folder's template mirrors) equals the loss transformers computes on the same wrapped windows within 1e-5 relative, where the reference
   tokenizes each line with the folder's tokenizer (prompt/completion: the text tokenized whole, a token
   with a character of the completion trained; messages: apply_chat_template's assistant mask). The Jinja
   templates, written here to mirror hotloop's built-ins with {% generation %} blocks, are the folders'
   own, which hotloop runs (data.chat_templates_hf checks real models' templates). A wrong id, mask or
   window moves the loss far more.
2. A LoRA fine-tune (rank 16, 300 steps at 3e-3) lowers the validation completion loss, computed by peft
   with the run's adapter, below 0.3 x the base's (the base's weights are drawn with std 0.2: with
   transformers' 0.02 the frozen tied embeddings cap the logits and no adapter gets below ~4.7 nats);
   hotloop's own final val_loss (summary.json, the default best-fit packing) equals that computation within
   1e-5 relative, each example alone through the PeftModel (the loss counts completion tokens only).
   `generate --chat` with the run's adapter answers a question greedily with transformers' answer from
   apply_chat_template(add_generation_prompt) through the PeftModel, in the answers' form (ending with
   "."), and ends where it does (<|im_end|>).
3. `text:` data for that folder is encoded with its tokenizer: the token count and the first batch's
   loss are transformers' on the ids tokenizers gives.
4. A bad line is named by file and line (exit 1).
5. `hotloop data show` gives each example's ids and trained tokens as the reference has them, and marks
   the answer in its text.
Skips (exit 0) with the reason when peft or tokenizers is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

try:
    from peft import PeftModel
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2ForCausalLM

    from instruct_folders import CAPITALS, build_folder, examples_loss, lines, reference_tokens
except ImportError as e:
    print(f"SKIP: {e}; scripts/setup installs peft and tokenizers")
    sys.exit(0)

HOTLOOP = sys.argv[1]
TOLERANCE = 1e-5
CONTEXT, BATCH = 32, 8
failures = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, expect=0):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, errors="replace")
    if r.returncode != expect:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}, expected {expect}")
    return r


def packed_windows(tok, examples):
    """hotloop's packing: all examples in order, windows of CONTEXT + 1 every CONTEXT tokens (the last one
    padded; padding is never a target, and causal attention keeps it out of the others' logits), those with
    a trained target kept; (inputs, targets with -100 where not trained)."""
    ids, mask = [], []
    for ex in examples:
        i, m = reference_tokens(tok, ex)
        ids += i
        mask += m
    windows = (len(ids) - 1 + CONTEXT - 1) // CONTEXT
    pad = windows * CONTEXT + 1 - len(ids)
    ids, mask = torch.tensor(ids + [0] * pad), torch.tensor(mask + [0] * pad)
    xs, ys = [], []
    for w in range(windows):
        window = ids[w * CONTEXT:w * CONTEXT + CONTEXT + 1]
        trained = mask[w * CONTEXT + 1:w * CONTEXT + CONTEXT + 1].bool()
        if trained.any():
            xs.append(window[:-1])
            ys.append(torch.where(trained, window[1:], torch.full_like(window[1:], -100)))
    return torch.stack(xs), torch.stack(ys)


def completion_loss(model, x, y):
    with torch.no_grad():
        logits = model(x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).double(), y.reshape(-1)).item()


PLAIN = ["--telemetry", "false", "--threads", "2", "--precision", "fp32", "--context", str(CONTEXT),
         "--batch", str(BATCH), "--shuffle", "false"]

with tempfile.TemporaryDirectory() as d:
    train, val = lines(240, 0), lines(24, 5)
    data = os.path.join(d, "data")
    os.makedirs(data)
    for name, rows in (("train.jsonl", train), ("val.jsonl", val)):
        with open(os.path.join(data, name), "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    texts = [json.dumps(r) for r in train]

    for kind in ("qwen", "llama", "plain"):
        folder = os.path.join(d, kind)
        tok = build_folder(folder, kind, texts)
        base = (Qwen2ForCausalLM if kind == "qwen" else LlamaForCausalLM).from_pretrained(folder).eval()

        # 1. hotloop's first batch against transformers' loss on the reference tokens.
        x, y = packed_windows(tok, train)
        want = completion_loss(base, x[:BATCH], y[:BATCH])
        run = os.path.join(d, f"{kind}-first")
        # The built-in template the folder's mirrors (data show below runs the folder's own).
        builtin = {"qwen": "chatml", "llama": "llama3", "plain": "plain"}[kind]
        r = hotloop("train", "--init", folder, "--data", "instruct:" + os.path.join(data, "train.jsonl"),
                    "--steps", "1", "--no-eval", "--lora-rank", "4", "--packing", "wrap", "--out", run,
                    "--chat-template", builtin, *PLAIN)
        template = {"qwen": "ChatML", "llama": "Llama 3", "plain": "plain"}[kind]
        check(f"{template} template" in r.stdout, f"{kind}: the data line names the {template} template")
        got = [json.loads(l)["loss"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l][0]
        rel = abs(got - want) / want
        check(rel <= TOLERANCE, f"{kind}: first-batch completion loss {got:.6f} vs transformers {want:.6f} "
                                f"(rel {rel:.1e} <= {TOLERANCE})")
        # data show: each example's ids and trained tokens are the reference's (TRL's assistant mask; the
        # first token is never a target), and the text marks the answer.
        shown = [json.loads(hotloop("data", "show", "--data", "instruct:" + os.path.join(data, "train.jsonl"),
                                    "--init", folder, "--index", str(i), "--json").stdout) for i in range(3)]
        refs = [reference_tokens(tok, ex) for ex in train[:3]]
        check(all(s["ids"] == ids and s["trained"] == [False] + [m == 1 for m in mask[1:]]
                  for s, (ids, mask) in zip(shown, refs)),
              f"{kind}: data show --json gives the reference ids and trained tokens of 3 examples")
        text = hotloop("data", "show", "--data", "instruct:" + os.path.join(data, "train.jsonl"), "--init", folder,
                       "--index", "0", "--no-color").stdout
        check(train[0]["completion"].strip() in text.split("[[")[-1], f"{kind}: data show marks the answer: {text!r}")
        # generate puts the tokenizer's prefix first as transformers does (Llama 3's <|begin_of_text|>).
        prompt = "Q: What is the capital of Chile?\nA:"
        r = hotloop("generate", "--weights", folder, "--prompt", prompt, "--temperature", "0", "--tokens", "8")
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = base.generate(ids, max_new_tokens=8, do_sample=False, eos_token_id=tok.eos_token_id,
                                pad_token_id=tok.eos_token_id)
        new = [t for t in out[0, ids.shape[1]:].tolist() if t != tok.eos_token_id]
        check(r.stdout.rstrip("\n") == prompt + tok.decode(new),
              f"{kind}: generate continues the prompt as transformers does ({ids.shape[1]} prompt ids)")

    # 2. A LoRA fine-tune lowers the validation completion loss (the Qwen2 folder).
    folder = os.path.join(d, "qwen")
    tok = PreTrainedTokenizerFast.from_pretrained(folder)
    before = examples_loss(Qwen2ForCausalLM.from_pretrained(folder).eval(), tok, val, CONTEXT)
    run = os.path.join(d, "lora")
    hotloop("train", "--init", folder, "--data", "instruct:" + data, "--steps", "300", "--lora-rank", "16",
            "--lora-alpha", "32", "--lr", "3e-3", "--out", run, *PLAIN)
    tuned = PeftModel.from_pretrained(Qwen2ForCausalLM.from_pretrained(folder), os.path.join(run, "adapter")).eval()
    after = examples_loss(tuned, tok, val, CONTEXT)
    check(after < 0.3 * before, f"LoRA: val completion loss {before:.3f} -> {after:.3f} (< 0.3 x)")
    reported = json.load(open(os.path.join(run, "summary.json")))["val_loss"]
    rel = abs(reported - after) / after
    check(rel <= TOLERANCE, f"hotloop's val_loss {reported:.6f} is peft's completion loss {after:.6f} "
                            f"(rel {rel:.1e} <= {TOLERANCE})")

    # The chat prompt and the stop: hotloop's greedy answer is transformers' (apply_chat_template with the
    # generation prompt, generate stopping at <|im_end|> or EOS).
    question = "Capital of Peru?"
    r = hotloop("generate", "--weights", os.path.join(run, "adapter"), "--chat", "--prompt", question,
                "--temperature", "0", "--tokens", "40")
    ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]
    stops = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    with torch.no_grad():
        out = tuned.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=stops, pad_token_id=stops[1])
    answer = out[0, ids.shape[1]:].tolist()
    want = tok.decode([t for t in answer if t not in stops])
    # The tiny random model does not learn which capital goes with which country (its val loss falls on
    # the answers' form and end marker): what is checked is the answer's form, the prompt and the stop.
    check(want.strip().endswith(".") and r.stdout.strip() == want.strip() and answer[-1] in stops,
          f"generate --chat answers {r.stdout.strip()!r}, transformers {want!r} (ended by {answer[-1]})")

    # 3. text: data for a model folder with a tokenizer is in the folder's tokens, not bytes.
    text = "".join(f"The capital of {c} is {k}.\n" for c, k in CAPITALS * 20).encode()
    with open(os.path.join(d, "capitals.txt"), "wb") as f:
        f.write(text)
    cut = text.find(b"\n", len(text) * 9 // 10) + 1  # the train share: 90%, moved to a line start
    ids = torch.tensor(tok(text[:cut].decode(), add_special_tokens=False)["input_ids"])
    w = torch.stack([ids[i * CONTEXT:(i + 1) * CONTEXT + 1] for i in range(BATCH)])
    want = completion_loss(Qwen2ForCausalLM.from_pretrained(folder).eval(), w[:, :-1], w[:, 1:])
    run = os.path.join(d, "text")
    r = hotloop("train", "--init", folder, "--data", "text:" + os.path.join(d, "capitals.txt"), "--steps", "1",
                "--no-eval", "--out", run, *PLAIN)
    got = [json.loads(l)["loss"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l][0]
    check(f"tokenizer.json: {len(ids)} tokens" in r.stdout and abs(got - want) / want <= TOLERANCE,
          f"text: is in the folder's tokens ({len(ids)} ids; first-batch loss {got:.6f} vs transformers {want:.6f})")

    # 4. A bad line: named by file and line, exit 1.
    bad = os.path.join(d, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps(train[0]) + "\n" + '{"prompt": "x", "completion": ""}\n')
    r = hotloop("train", "--init", folder, "--data", "instruct:" + bad, "--steps", "1", "--no-eval",
                "--out", os.path.join(d, "bad"), *PLAIN, expect=1)
    check(f"{bad}:2: empty completion" in r.stdout + r.stderr, "a bad line is named by file and line")

if failures:
    sys.exit(f"{len(failures)} check(s) failed: {failures}")
print("all checks passed")
