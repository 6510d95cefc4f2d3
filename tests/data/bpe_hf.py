#!/usr/bin/env python3
"""hotloop's byte-level BPE (`pack --tokenizer bpe:DIR`) against Hugging Face `tokenizers`.

Run by ctest (data.bpe_hf) as: bpe_hf.py HOTLOOP_BINARY. No download: the test trains its own
ByteLevelBPETokenizer (vocabulary 1000) on the fortunes corpus (Debian's `fortunes`, which
scripts/setup installs), saves vocab.json + merges.txt, and then:
1. packs a text with `hotloop pack --text T --tokenizer bpe:DIR` and checks that the train and val
   shards hold exactly the ids that tokenizers' encode gives for the two parts (the whole corpus, plus
   a text of edge cases: Unicode letters and numbers, contractions, runs of spaces, tabs, CR LF,
   no-break spaces, emoji, a word split by an apostrophe);
2. trains a few steps of gpt-nano on that folder: the model's vocabulary follows the tokenizer's
   (1000; the model pads it to 1024), the run keeps the tokenizer, and `hotloop generate` decodes with it.
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import ByteLevelBPETokenizer
except ImportError:  # a machine without scripts/setup's Python packages (the GPU machine)
    print("skipped: Hugging Face tokenizers is not installed (scripts/setup installs it)")
    sys.exit(77)

HOTLOOP = sys.argv[1]
FORTUNES = "/usr/share/games/fortunes"
failures = []

EDGES = (
    "Hello  world!\n\n\tTabs,\tnumbers 12345 and 3.14159, ½ ² ³ Ⅻ, émigré naïve Ωμέγα 日本語テキスト\r\n"
    "don't we'll they're I'M it's 'sun 're 'LL rock'n'roll\u00a0nbsp\u3000ideographic\u2028line "
    "emoji 🙂🙂 mixed123abc ---- ==== ... !!!   trailing spaces   \n   \n\n"
    "    indented code(x) -> y;  // comment\n"
    "ＦＵＬＬ width　and a Ω\u0301 combining mark, Arabic ١٢٣ digits\n  "
)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(f"hotloop {' '.join(args)} exited {r.returncode}")
    return r


def shard_ids(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    assert header[0] == 20240520 and header[1] == 1, path
    return list(struct.unpack(f"<{header[2]}H", data[1024:]))


def train_share(data):
    # hotloop's split: 90% of the bytes, moved on to the next line's start.
    line = data.find(b"\n", len(data) * 9 // 10)
    return len(data) if line < 0 else line + 1


def main():
    files = sorted(
        p for p in glob.glob(os.path.join(FORTUNES, "*"))
        if os.path.isfile(p) and not os.path.islink(p) and os.path.splitext(p)[1] not in (".dat", ".u8"))
    if not files:
        print(f"skipped: no fortunes in {FORTUNES} (scripts/setup installs Debian's fortunes)")
        sys.exit(77)
    corpus = "".join(open(p, "rb").read().decode("utf-8", errors="replace") for p in files)
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir = os.path.join(tmp, "tok")
        os.makedirs(tok_dir)
        trained = ByteLevelBPETokenizer()
        trained.train_from_iterator([corpus, EDGES], vocab_size=1000, min_frequency=2, show_progress=False)
        trained.save_model(tok_dir)
        tok = ByteLevelBPETokenizer.from_file(
            os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))

        for name, text in (("edge cases", EDGES), ("the fortunes corpus", corpus)):
            src = os.path.join(tmp, "text.txt")
            data = text.encode("utf-8")
            with open(src, "wb") as f:
                f.write(data)
            out = os.path.join(tmp, "packed")
            r = hotloop("pack", "--text", src, "--tokenizer", f"bpe:{tok_dir}", "--to", out)
            cut = train_share(data)
            want_train = tok.encode(data[:cut].decode("utf-8")).ids
            want_val = tok.encode(data[cut:].decode("utf-8")).ids
            got_train = shard_ids(os.path.join(out, "text_train_000000.bin"))
            got_val = shard_ids(os.path.join(out, "text_val_000000.bin")) if want_val else []
            same = got_train == want_train and got_val == want_val
            if not same:
                for i, (a, b) in enumerate(zip(got_train + got_val, want_train + want_val)):
                    if a != b:
                        print(f"  first difference at token {i}: hotloop {a}, tokenizers {b}"
                              f" ({tok.id_to_token(a)!r} vs {tok.id_to_token(b)!r})")
                        break
            check(same, f"{name}: {len(got_train) + len(got_val)} ids equal tokenizers' "
                        f"({len(data)} bytes, {len(want_train) + len(want_val)} ids)")
            check("vocabulary 1000" in r.stdout, f"{name}: pack names the vocabulary: {r.stdout.strip()}")
            check(os.path.isfile(os.path.join(out, "vocab.json")) and os.path.isfile(os.path.join(out, "merges.txt")),
                  f"{name}: pack copied vocab.json and merges.txt beside the shards")

        run = os.path.join(tmp, "run")
        hotloop("train", "--model", "gpt-nano", "--data", f"tokens:{out}", "--steps", "3", "--batch", "4",
                "--eval-every", "0", "--out", run)
        import json
        with open(os.path.join(run, "config.json")) as f:
            vocab = json.load(f)["model"]["vocab"]
        check(vocab == 1000, f"the model's vocabulary follows the tokenizer's: {vocab}")
        check(os.path.isfile(os.path.join(run, "tokenizer", "vocab.json")), "the run kept its tokenizer")
        ckpt = sorted(glob.glob(os.path.join(run, "checkpoints", "*.safetensors")))[-1]
        sample = ["generate", "--weights", ckpt, "--prompt", "The computer", "--tokens", "20", "--seed", "1"]
        g = hotloop(*sample)
        named = hotloop(*sample, "--tokenizer", "bpe:" + os.path.join(run, "tokenizer"))
        as_bytes = subprocess.run([HOTLOOP, *sample, "--tokenizer", "bytes"], capture_output=True, text=True,
                                  errors="replace")
        # The prompt is echoed whatever the decoder, so what shows the run's tokenizer is used: the same
        # text as with it named, and not the text (or the refusal) of the byte decoder.
        check(g.stdout.startswith("The computer") and g.stdout == named.stdout and g.stdout != as_bytes.stdout,
              f"generate decodes with the run's tokenizer: {g.stdout[:80]!r} (bytes: "
              f"{(as_bytes.stdout or as_bytes.stderr)[:80]!r})")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
