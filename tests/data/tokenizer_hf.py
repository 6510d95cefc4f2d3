#!/usr/bin/env python3
"""hotloop's tokenizer.json reader (`--tokenizer hf:DIR`) against Hugging Face `tokenizers`.

Run by ctest (data.tokenizer_hf) as: tokenizer_hf.py HOTLOOP_BINARY. No download: the test trains four
byte-level BPE tokenizers (vocabulary 2000) on the fortunes corpus with `tokenizers` and saves each as
tokenizer.json, as Llama 3's, Qwen2's, GPT-2's and SmolLM2's are built:
- Llama 3's: a Split by Llama 3's pattern (digits in runs of up to 3), ByteLevel without its own regex,
  ignore_merges, special tokens in the vocabulary and one added after it;
- Qwen2's: the same with single digits and an NFC normalizer;
- GPT-2's: ByteLevel with GPT-2's regex;
- SmolLM2's: Digits (individual_digits) before ByteLevel with GPT-2's regex.
For each, `hotloop pack --text T --tokenizer hf:DIR` must give exactly the ids of tokenizers'
encode(text, add_special_tokens=False) for the whole corpus and for a text of edge cases (special
tokens in the text, Unicode letters and numbers, digit runs, contractions in both cases, whitespace runs
with CR LF, no-break spaces, emoji, invalid-free but unusual punctuation). For Qwen2's, text that NFC
would change is refused naming the byte. Then a random Llama folder with that tokenizer.json is
fine-tuned on the packed ids and `hotloop generate --weights DIR` decodes with the folder's tokenizer.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:  # a machine without scripts/setup's Python packages (the GPU machine)
    print("skipped: Hugging Face tokenizers is not installed (scripts/setup installs it)")
    sys.exit(77)

HOTLOOP = sys.argv[1]
FORTUNES = "/usr/share/games/fortunes"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
EDGES = (
    "<|begin_of_text|>Hello  world!<|end_of_text|>\n\n\tTabs,\tnumbers 12345 1234567 and 3.14159, ½ ² ³ Ⅻ,"
    " émigré naïve Ωμέγα 日本語テキスト\r\n"
    "don't we'll they're I'M IT'S 'sun 're 'LL You'Ve rock'n'roll\u00a0nbsp\u3000ideographic\u2028line "
    "emoji 🙂🙂 mixed123abc ---- ==== ... !!!   trailing spaces   \n   \n\n  \r\n\r\n x"
    "    indented code(x) -> y;  // comment\n(parenthesised) \"quoted\" 'single' #hash @at\n"
    "ＦＵＬＬ width　and Ώ, Arabic ١٢٣ digits<|eot_id|><|eot_id|>end<|end_of_text|\n  "
    # NFC as they are, with marks NFC keeps apart (Qwen2's normalizer changes nothing here):
    "বাংলা তামিল தமிழ் हिन्दी क\u093c 한국어\n"
)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, expect=0):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, errors="replace")
    if r.returncode != expect:
        print(r.stdout, r.stderr)
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}, expected {expect}")
    return r


def shard_ids(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    # llm.c's magic 20240520 version 1: uint16 ids; 20240801 version 7 (its Llama 3 shards): uint32.
    return list(struct.unpack(f"<{header[2]}{'I' if header[0] == 20240801 else 'H'}", data[1024:]))


def train_share(data):
    line = data.find(b"\n", len(data) * 9 // 10)
    return len(data) if line < 0 else line + 1


def build(kind, corpus, path):
    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif kind == "smollm2":  # every digit its own piece, then GPT-2's ByteLevel regex
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"])
    tok.train_from_iterator([corpus, EDGES], trainer)
    tok.add_special_tokens(["<|eot_id|>"])  # after the vocabulary, as Llama 3's are
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    return tok


def compare(tok, tok_dir, name, text, tmp):
    src = os.path.join(tmp, "text.txt")
    data = text.encode("utf-8")
    with open(src, "wb") as f:
        f.write(data)
    out = os.path.join(tmp, "packed-" + name.replace(" ", "-"))
    r = hotloop("pack", "--text", src, "--tokenizer", f"hf:{tok_dir}", "--to", out)
    cut = train_share(data)
    want = (tok.encode(data[:cut].decode("utf-8"), add_special_tokens=False).ids,
            tok.encode(data[cut:].decode("utf-8"), add_special_tokens=False).ids)
    got = (shard_ids(os.path.join(out, "text_train_000000.bin")),
           shard_ids(os.path.join(out, "text_val_000000.bin")) if want[1] else [])
    same = got == want
    if not same:
        for i, (a, b) in enumerate(zip(got[0] + got[1], want[0] + want[1])):
            if a != b:
                print(f"  first difference at token {i}: hotloop {a}, tokenizers {b}"
                      f" ({tok.id_to_token(a)!r} vs {tok.id_to_token(b)!r})")
                break
    check(same, f"{name}: {len(got[0]) + len(got[1])} ids equal tokenizers' ({len(data)} bytes)")
    check(os.path.isfile(os.path.join(out, "tokenizer.json")), f"{name}: pack copied tokenizer.json")
    return out, r


def main():
    files = sorted(
        p for p in glob.glob(os.path.join(FORTUNES, "*"))
        if os.path.isfile(p) and not os.path.islink(p) and os.path.splitext(p)[1] not in (".dat", ".u8"))
    if not files:
        print(f"skipped: no fortunes in {FORTUNES} (scripts/setup installs Debian's fortunes)")
        sys.exit(77)
    corpus = "".join(open(p, "rb").read().decode("utf-8", errors="replace") for p in files)
    with tempfile.TemporaryDirectory() as tmp:
        packed = None
        for kind in ("llama3", "qwen2", "gpt2", "smollm2"):
            tok_dir = os.path.join(tmp, kind)
            tok = build(kind, corpus, tok_dir)
            compare(tok, tok_dir, f"{kind}: edge cases", EDGES, tmp)
            out, _ = compare(tok, tok_dir, f"{kind}: the fortunes corpus", corpus, tmp)
            if kind == "llama3":
                packed = out
        # ignore_merges, and ids past uint16: Llama 3's tokenizer with a word in its vocabulary that merges
        # would not make, at id 70000 (Llama 3's own vocabulary is 128,256). pack writes llm.c's uint32
        # shards (magic 20240801, version 7) for it, and a model of that vocabulary trains on them.
        with open(os.path.join(tmp, "llama3", "tokenizer.json")) as f:
            extended = json.load(f)
        extended["model"]["vocab"]["Ġzzqx"] = 70000
        os.makedirs(os.path.join(tmp, "wide"))
        with open(os.path.join(tmp, "wide", "tokenizer.json"), "w") as f:
            json.dump(extended, f)
        wide_tok = Tokenizer.from_file(os.path.join(tmp, "wide", "tokenizer.json"))
        text = "a zzqx b zzq zzqxx 12345\n" * 40
        wide, _ = compare(wide_tok, os.path.join(tmp, "wide"), "ids past uint16 and ignore_merges", text, tmp)
        with open(os.path.join(wide, "text_train_000000.bin"), "rb") as f:
            magic, version = struct.unpack("<3i", f.read(12))[:2]
        check((magic, version) == (20240801, 7) and 70000 in shard_ids(os.path.join(wide, "text_train_000000.bin")),
              f"a 70,001-token vocabulary packs into llm.c's uint32 shards holding id 70000 ({magic}, {version})")
        from transformers import LlamaConfig, LlamaForCausalLM
        big = os.path.join(tmp, "big-model")
        LlamaForCausalLM(LlamaConfig(vocab_size=70016, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1,
                                     max_position_embeddings=64)).save_pretrained(big)
        r = hotloop("train", "--init", big, "--data", f"tokens:{wide}", "--context", "16", "--steps", "2",
                    "--batch", "2", "--eval-every", "0", "--out", os.path.join(tmp, "big-run"),
                    "--telemetry", "false")
        check("largest id 70000" in r.stdout, "a model trains on uint32 shards (their largest id read as 70000)")

        # Qwen2's NFC: text NFC would change is refused, naming where.
        src = os.path.join(tmp, "decomposed.txt")
        with open(src, "w", encoding="utf-8") as f:
            f.write("fine so far, then a decomposed e\u0301 here\n" * 20)
        r = hotloop("pack", "--text", src, "--tokenizer", "hf:" + os.path.join(tmp, "qwen2"),
                    "--to", os.path.join(tmp, "nfc"), expect=1)
        check("NFC" in r.stderr and "U+0301" in r.stderr and "byte 32" in r.stderr,
              f"qwen2: text NFC would change is refused: {r.stderr.strip()[:160]}")

        # A model folder with its tokenizer.json: fine-tuned on the packed ids, generating through it.
        folder = os.path.join(tmp, "model")
        LlamaForCausalLM(LlamaConfig(vocab_size=2048, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     max_position_embeddings=64)).save_pretrained(folder)
        with open(os.path.join(tmp, "llama3", "tokenizer.json")) as f:
            tokenizer_json = f.read()
        with open(os.path.join(folder, "tokenizer.json"), "w") as f:
            f.write(tokenizer_json)
        run = os.path.join(tmp, "run")
        hotloop("train", "--init", folder, "--data", f"tokens:{packed}", "--context", "32", "--steps", "3",
                "--batch", "4", "--eval-every", "0", "--out", run, "--telemetry", "false")
        check(os.path.isfile(os.path.join(run, "tokenizer", "tokenizer.json")), "the run kept tokenizer.json")
        g = hotloop("generate", "--weights", folder, "--prompt", "The computer", "--tokens", "10", "--seed", "1")
        as_bytes = subprocess.run([HOTLOOP, "generate", "--weights", folder, "--prompt", "The computer",
                                   "--tokens", "10", "--seed", "1", "--tokenizer", "bytes"],
                                  capture_output=True, text=True, errors="replace")
        check(g.stdout.startswith("The computer") and g.stdout != as_bytes.stdout,
              f"generate --weights DIR decodes with the folder's tokenizer.json: {g.stdout[:60]!r}")
        # Refused with the reason: a SentencePiece-style tokenizer.
        spm = json.loads(tokenizer_json)
        spm["model"]["byte_fallback"] = True
        os.makedirs(os.path.join(tmp, "spm"))
        with open(os.path.join(tmp, "spm", "tokenizer.json"), "w") as f:
            json.dump(spm, f)
        r = hotloop("pack", "--text", src, "--tokenizer", "hf:" + os.path.join(tmp, "spm"),
                    "--to", os.path.join(tmp, "spm-out"), expect=1)
        check("byte_fallback" in r.stderr and "SentencePiece" in r.stderr,
              f"a SentencePiece-style tokenizer is refused: {r.stderr.strip()[:120]}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
