"""WebDataset interop, both ways, against the Python `webdataset` library.

usage: wds_interop.py HOTLOOP_BINARY
  1. hotloop pack writes shards from an image folder; webdataset reads them: same images (byte for
     byte with --restart-markers false; by default the JPEGs rewritten with restart markers decode in
     PIL to the originals' pixels), same labels, every sample once.
  2. webdataset.TarWriter writes shards (with a key too long for plain ustar, so a pax header);
     `hotloop data check --data wds:GLOB` reads them: same count and per-class counts, no bad sample.
Exits 77 (ctest: skipped) when webdataset or Pillow is not installed.
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

try:
    import numpy as np
    import webdataset as wds
    from PIL import Image
except ImportError as e:  # the GPU machine's Python has no webdataset
    print(f"skipped: {e}")
    sys.exit(77)

HOTLOOP = sys.argv[1]
CLASSES = ["bags", "coats", "shoes"]
rng = np.random.default_rng(0)


def image_bytes(fmt, h, w):
    buf = io.BytesIO()
    Image.fromarray((rng.random((h, w, 3)) * 255).astype("uint8")).save(buf, format=fmt)
    return buf.getvalue()


def pixels(data):
    return hashlib.sha1(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).tobytes()).hexdigest()


def hotloop_to_python(tmp):
    src = os.path.join(tmp, "photos")
    by_bytes, by_pixels = Counter(), Counter()  # (sha1, label) -> count
    for label, cls in enumerate(CLASSES):
        os.makedirs(os.path.join(src, "train", cls))
        for i in range(7):
            fmt, ext = ("PNG", "png") if i % 2 else ("JPEG", "jpg")
            data = image_bytes(fmt, 20 + i, 30)
            with open(os.path.join(src, "train", cls, f"{i}.{ext}"), "wb") as f:
                f.write(data)
            by_bytes[(hashlib.sha1(data).hexdigest(), label)] += 1
            by_pixels[(pixels(data), label)] += 1
    for name, extra, key, expected in (("copied", ["--restart-markers", "false"], hashlib.sha1, by_bytes),
                                       ("rewritten", [], None, by_pixels)):
        out = os.path.join(tmp, f"shards-{name}")
        subprocess.run([HOTLOOP, "pack", "--from", f"folder:{src}", "--to", out, "--shard-size", "40KiB",
                        "--seed", "3", *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        index = json.load(open(os.path.join(out, "index.json")))
        assert index["classes"] == CLASSES, index["classes"]
        shards = sorted(os.path.join(out, s) for s in index["splits"]["train"]["shards"])
        assert len(shards) > 1, "expected several shards at 40KiB"
        seen = Counter()
        for sample in wds.WebDataset(shards, shardshuffle=False):
            data = sample.get("jpg") or sample.get("png")
            seen[(key(data).hexdigest() if key else pixels(data), int(sample["cls"]))] += 1
        assert seen == expected, f"{name}: python read {sum(seen.values())} samples, not the {sum(expected.values())} expected"
        print(f"hotloop -> webdataset ({name}): {sum(seen.values())} samples in {len(shards)} shards match")


def python_to_hotloop(tmp):
    out = os.path.join(tmp, "pyshards")
    os.makedirs(out)
    counts = Counter()
    n = 0
    for shard in range(2):
        with wds.TarWriter(os.path.join(out, f"train-{shard:06d}.tar")) as sink:
            for i in range(9):
                label = (i * 7 + shard) % 3
                key = f"s{shard}_{i:04d}"
                if i == 0:
                    key = "deep/" + "d" * 120 + f"/{key}"  # > 100 bytes: Python writes a pax header
                fmt, ext = ("PNG", "png") if i % 3 == 0 else ("JPEG", "jpg")
                sink.write({"__key__": key, ext: image_bytes(fmt, 16, 24), "cls": label})
                counts[label] += 1
                n += 1
    result = subprocess.run([HOTLOOP, "data", "check", "--data", f"wds:{out}/train-*.tar", "--json"],
                            check=True, capture_output=True, text=True)
    report = json.loads(result.stdout)
    assert report["samples"] == n, report
    assert report["bad_samples"] == [], report["bad_samples"]
    assert report["per_class"] == [counts[c] for c in range(3)], (report["per_class"], counts)
    assert report["min_size"] == [3, 16, 24], report["min_size"]
    print(f"webdataset -> hotloop: {n} samples match")


with tempfile.TemporaryDirectory() as tmp:
    hotloop_to_python(tmp)
    python_to_hotloop(tmp)
print("1 passed, 0 failed")
