"""Hostile JPEGs through everything that reads images (issue 54): no signal, memory bounded, every bad
file counted and named.

usage: hostile_jpegs.py HOTLOOP_BINARY
A folder of 48 good photos (its train split: 3 classes, 320 x 240) and a generated corpus of bad ones made from them:
random byte flips in the headers, the tables and the scan; cuts anywhere; inserted bytes; decompression
bombs (a header that claims 60000 x 60000, and 16000 x 16000, just under the pixel limit, over a small
scan); 12-bit and arithmetic-coded files; marker-only and empty files. Then:
  1. `hotloop data check --decode auto`: exits 1; names every file that must be bad and no good one;
  2. `hotloop.Loader` (the eval transform, full decodes): its bad samples are data check's, by name;
     with the training transform (region decodes): every file that must be bad is named;
  3. `hotloop train` at 224 px, one epoch: exits 0, its summary counts the bad samples it skipped;
  4. `hotloop pack --verify` (which rewrites every JPEG it can with restart markers): exits 1, names
     every file that must be bad and no good one.
Each command's peak memory stays under 3 GiB. Exits 77 (ctest: skipped) without Pillow or the package.
"""
import io
import json
import os
import random
import resource
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from PIL import Image
    import hotloop
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

HOTLOOP = sys.argv[1]
MAX_RSS_BYTES = 3 << 30
rng = random.Random(54)


def photo(seed):
    g = np.random.default_rng(seed)
    y, x = np.mgrid[0:240, 0:320]
    base = np.stack([x * 255 // 319, y * 255 // 239, ((x + y) * 3) % 256], axis=-1)
    return np.clip(base + g.integers(0, 40, size=(240, 320, 3)), 0, 255).astype(np.uint8)


def jpeg(array, **options):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="JPEG", quality=90, **options)
    return out.getvalue()


def segments(data):
    """(marker, start, end) of each marker segment before the scan data, and the scan's start."""
    out, at = [], 2
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        out.append((marker, at, at + 2 + length))
        at += 2 + length
        if marker == 0xDA:
            break
    return out, at


def flip(data, lo, hi, n=3):
    b = bytearray(data)
    for _ in range(n):
        i = rng.randrange(lo, hi)
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def with_size(data, width, height):
    """The file with its frame header (SOF0/SOF2) claiming another size."""
    b = bytearray(data)
    for marker, start, _ in segments(data)[0]:
        if marker in (0xC0, 0xC2):
            b[start + 5:start + 7] = height.to_bytes(2, "big")
            b[start + 7:start + 9] = width.to_bytes(2, "big")
    return bytes(b)


def with_precision(data, bits):
    b = bytearray(data)
    for marker, start, _ in segments(data)[0]:
        if marker == 0xC0:
            b[start + 4] = bits
    return bytes(b)


def arithmetic():
    """An arithmetic-coded JPEG (libjpeg-turbo's encoder through PIL cannot write one): the SOF9
    file fuzz/seeds/jpeg/arithmetic.jpg, which libjpeg-turbo decodes."""
    seed = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "seeds", "jpeg", "arithmetic.jpg")
    return open(seed, "rb").read()


def corpus(root):
    """Writes the folder; returns (good, must_be_bad, maybe_bad) as sets of paths."""
    good, must, maybe = set(), set(), set()
    classes = ["bags", "coats", "shoes"]
    sources = []
    for i in range(48):
        path = os.path.join(root, "train", classes[i % 3], f"good{i:02d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # Every fourth progressive, every fourth with a restart marker per row (crops start there).
        data = jpeg(photo(i), progressive=(i % 4 == 0), **({"restart_marker_rows": 1} if i % 4 == 1 else {}))
        open(path, "wb").write(data)
        good.add(path)
        sources.append(data)

    def bad(name, data, certain):
        path = os.path.join(root, "train", classes[len(must) % 3], name)
        open(path, "wb").write(data)
        (must if certain else maybe).add(path)

    for i in range(20):
        src = sources[i % len(sources)]
        heads, scan = segments(src)
        dht = [s for s in heads if s[0] == 0xC4]
        bad(f"flip-header{i:02d}.jpg", flip(src, 2, heads[0][2] if i % 2 else scan), False)
        bad(f"flip-tables{i:02d}.jpg", flip(src, dht[0][1] + 4, dht[-1][2]), False)
        bad(f"flip-scan{i:02d}.jpg", flip(src, scan, len(src) - 2, n=8), False)
        bad(f"cut{i:02d}.jpg", src[:rng.randrange(3, len(src) - 2)], True)
        at = rng.randrange(2, len(src) - 2)
        bad(f"insert{i:02d}.jpg", src[:at] + bytes(rng.randrange(256) for _ in range(7)) + src[at:], False)
    small = jpeg(photo(99)[:64, :64])
    bad("bomb-60000.jpg", with_size(small, 60000, 60000), True)
    bad("bomb-16000.jpg", with_size(small, 16000, 16000), True)
    bad("twelve-bit.jpg", with_precision(sources[1], 12), True)
    bad("markers-only.jpg", b"\xff\xd8\xff\xd9", True)
    bad("app0-only.jpg", sources[2][:segments(sources[2])[0][0][2]] + b"\xff\xd9", True)
    bad("empty.jpg", b"", True)
    bad("soi-only.jpg", b"\xff\xd8\xff", True)
    arith = os.path.join(root, "train", "bags", "arithmetic.jpg")
    open(arith, "wb").write(arithmetic())
    good.add(arith)
    return good, must, maybe


def run(args):
    p = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, timeout=600)
    assert p.returncode >= 0, f"{args[0]} died of signal {-p.returncode}:\n{p.stderr[-3000:]}"
    # The largest child's peak so far: every command before this one was held to the same bound.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert peak < MAX_RSS_BYTES, f"{args[0]}: peak memory {peak >> 20} MiB"
    return p


def named(text, paths):
    return {p for p in paths if p in text}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "photos")
        good, must, maybe = corpus(root)
        every = good | must | maybe

        check = run(["data", "check", "--data", f"folder:{root}", "--decode", "auto", "--threads", "2",
                     "--json"])
        assert check.returncode == 1, check.stderr[-2000:]
        report = check.stdout
        checked_bad = named(report, every)
        assert must <= checked_bad, f"not named by data check: {sorted(must - checked_bad)}"
        assert not (checked_bad & good), f"good files named bad: {sorted(checked_bad & good)}"
        print(f"data check: {len(every)} files, {len(checked_bad)} named bad "
              f"({len(must)} certain, {len(checked_bad - must)} of {len(maybe)} damaged ones)")

        def loader_bad(**options):
            loader = hotloop.Loader(f"folder:{root}", split="train", batch_size=16, workers=2, on_bad_sample="skip", **options)
            seen = sum(x.shape[0] for x, _ in loader)
            stats = loader.stats()
            names = named("\n".join(stats["bad_sample_names"]), every)
            assert stats["bad_samples"] == len(names), (stats["bad_samples"], len(names))
            assert seen + stats["bad_samples"] == len(every), (seen, stats["bad_samples"], len(every))
            return names

        eval_bad = loader_bad(train=False, decode="full", size=224)
        assert eval_bad == checked_bad, f"loader vs data check: {sorted(eval_bad ^ checked_bad)}"
        train_bad = loader_bad(train=True, decode="auto", size=224, drop_last=False)
        assert must <= train_bad and not (train_bad & good), sorted((must - train_bad) | (train_bad & good))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        assert peak < MAX_RSS_BYTES, f"hotloop.Loader: peak memory {peak >> 20} MiB"
        print(f"hotloop.Loader: eval {len(eval_bad)} bad (as data check), train {len(train_bad)} bad")

        out = os.path.join(tmp, "run")
        train = run(["train", "--data", f"folder:{root}", "--model", "cnn-small", "--size", "224",
                     "--epochs", "1", "--batch", "32", "--threads", "2", "--out", out, "--eval", "false"])
        assert train.returncode == 0, train.stderr[-3000:]
        summary = json.load(open(os.path.join(out, "summary.json")))
        assert summary["bad_samples"] >= len(must), summary["bad_samples"]
        assert "skipping a bad sample" in train.stderr
        print(f"train: {summary['bad_samples']} bad samples skipped, exit 0")

        pack = run(["pack", "--from", f"folder:{root}", "--to", os.path.join(tmp, "shards"), "--verify"])
        assert pack.returncode == 1, pack.stderr[-3000:]
        packed_bad = named(pack.stdout, every)
        assert must <= packed_bad and not (packed_bad & good), sorted((must - packed_bad) | (packed_bad & good))
        print(f"pack --verify: {len(packed_bad)} named bad, exit 1")


if __name__ == "__main__":
    main()
