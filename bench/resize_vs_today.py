"""The resize alone (issue 55): hotloop's fixed-point kernels against its earlier float resize, Pillow
and Pillow-SIMD, one thread, on the same decoded images and the same crops.

usage: .venv/bin/python bench/resize_vs_today.py [--sets DIR] [--which small,imagenet,photo] [--images 64]
                                                 [--rounds 7] [--seconds 1.5] [--size 224] [--out FILE.json]

The images are bench/make_image_sets.py's (made in a temporary folder unless --sets names one); the first
--images of each set, decoded once before timing. The work, per image: torchvision's RandomResizedCrop box
(area 8-100%, ratio 3/4-4/3, drawn from a fixed seed) and a coin-flip mirror, resized antialiased
bilinear (PIL's filter) to --size x --size:
- float: hotloop's resize before the fixed-point one (bench/resize/float_resize.cpp, unchanged);
- scalar, sse2, avx2: src/hotloop/data/resize.h's kernels (avx2 only where the CPU has it);
- pillow: Pillow (.venv, the wheel torchvision uses) `Image.resize(size, BILINEAR, box=...)` then
  `transpose(FLIP_LEFT_RIGHT)` where mirrored (box= is Pillow's fastest crop-and-resize);
- pillow-simd: the same calls in .venv-pillow-simd (scripts/setup builds Pillow-SIMD there for this CPU).
hotloop writes planar (C, H, W) bytes, Pillow interleaved (H, W, C): each its loader's layout. Every
variant runs in its own process, one after another in a round (the order rotating), each timing enough
passes over the images to take about --seconds on the steady clock. A ratio is the median of the
per-round ratios (both sides from the same round) with its min-max range.
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile

from bench_common import image_sets, report, run_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench", "hotloop_bench_resize")
PILLOW_SIMD_PYTHON = os.path.join(ROOT, ".venv-pillow-simd", "bin", "python")
SETS = ["small", "imagenet", "photo"]
HOTLOOP_KERNELS = ["float", "scalar", "sse2", "avx2"]

PILLOW_ROUND = r"""
import sys, time
from PIL import Image
list_file, size, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
items = []
for line in open(list_file):
    path, x0, y0, w, h, flip = line.split()
    im = Image.open(path).convert("RGB")
    im.load()
    x0, y0, w, h = float(x0), float(y0), float(w), float(h)
    items.append((im, (x0, y0, x0 + w, y0 + h), flip == "1"))
start = time.perf_counter()
for _ in range(passes):
    for im, box, flip in items:
        out = im.resize((size, size), Image.Resampling.BILINEAR, box=box)
        if flip:
            out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
print(len(items) * passes / (time.perf_counter() - start))
"""


def crop_box(rng, w, h):
    """torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3) as (x0, y0, cw, ch)."""
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = int(round(math.sqrt(target * ratio)))
        ch = int(round(math.sqrt(target / ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    return 0, 0, w, h


def write_list(set_dir, count, path):
    """The first `count` images of a set (sorted paths) with their boxes and flips, as the bench reads."""
    from PIL import Image

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(set_dir, "train")) for f in fs)
    rng = random.Random(55)
    with open(path, "w") as out:
        for f in files[:count]:
            with Image.open(f) as im:
                w, h = im.size
            x0, y0, cw, ch = crop_box(rng, w, h)
            out.write(f"{f} {x0} {y0} {cw} {ch} {int(rng.random() < 0.5)}\n")


def run_hotloop(list_file, size, passes, kernels):
    out = subprocess.run([BENCH, list_file, str(size), str(passes), ",".join(kernels)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def run_pillow(python, list_file, size, passes):
    out = subprocess.run([python, "-c", PILLOW_ROUND, list_file, str(size), str(passes)], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure_set(list_file, a, variants):
    """Rounds over the variants; returns the per-round images/s and the bench's byte checks."""
    # Passes per variant so that each takes about --seconds: from one timed pass of each.
    passes = {}
    for v in variants:
        rate = (run_hotloop(list_file, a.size, 1, [v])["images_per_s"][v] if v in HOTLOOP_KERNELS
                else run_pillow(PILLOW_SIMD_PYTHON if v == "pillow-simd" else sys.executable, list_file, a.size, 1))
        passes[v] = max(1, round(a.seconds * rate / a.images))
    per_round = {v: [] for v in variants}
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            if v in HOTLOOP_KERNELS:
                out = run_hotloop(list_file, a.size, passes[v], [v])
                rate = out["images_per_s"][v]
            else:
                python = PILLOW_SIMD_PYTHON if v == "pillow-simd" else sys.executable
                rate = run_pillow(python, list_file, a.size, passes[v])
            per_round[v].append(rate)
            print(f"round {r + 1}/{a.rounds} {v:12s} {rate:9.1f} images/s", file=sys.stderr, flush=True)
    # The bytes: every fixed-point kernel the same, and the float baseline's distance from them.
    kernels = [v for v in HOTLOOP_KERNELS if v in variants]
    out = run_hotloop(list_file, a.size, 1, kernels)
    checks = {"fixed_point_kernels_identical": out["fixed_point_kernels_identical"],
              "float_max_diff_levels": out.get("float_max_diff")}
    return per_round, passes, checks


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sets", default="", help="a bench/make_image_sets.py folder (default: made in a temp dir)")
    p.add_argument("--which", default=",".join(SETS))
    p.add_argument("--images", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--out", default="")
    a = p.parse_args()
    if not os.path.exists(BENCH):
        raise SystemExit(f"{BENCH} is missing: build first (scripts/setup)")
    variants = HOTLOOP_KERNELS + ["pillow"]
    if os.path.exists(PILLOW_SIMD_PYTHON):
        variants.append("pillow-simd")
    else:
        print("no .venv-pillow-simd (scripts/setup builds it): Pillow-SIMD left out", file=sys.stderr)
    with open("/proc/cpuinfo") as f:
        if "avx2" not in f.read().split():
            variants.remove("avx2")  # the bench skips what the CPU lacks
    sets = a.which.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root, _ = image_sets(a.sets, tmp, sets, scale=0.1)
        results = {
            **run_info(),
            "command": "python bench/resize_vs_today.py " + " ".join(sys.argv[1:]),
            "threads": 1, "size": a.size, "images": a.images, "rounds": a.rounds, "seconds": a.seconds,
            "sets": {}}
        for s in sets:
            print(f"set {s}", file=sys.stderr, flush=True)
            list_file = os.path.join(tmp, f"{s}.list")
            write_list(os.path.join(root, s), a.images, list_file)
            per_round, passes, checks = measure_set(list_file, a, variants)
            present = [v for v in variants if per_round[v]]
            entry = {"images_per_s": {v: summary(per_round[v]) for v in present}, "passes": passes,
                     "per_round": per_round, "ratios": {}, **checks}
            fastest = next(k for k in ["avx2", "sse2", "scalar"] if k in present)
            for v in [k for k in ["avx2", "sse2", "scalar"] if k in present]:
                entry["ratios"][f"{v} / float"] = summary([x / y for x, y in zip(per_round[v], per_round["float"])])
            for base in ["pillow", "pillow-simd"]:
                if base in present:
                    entry["ratios"][f"{fastest} / {base}"] = summary(
                        [x / y for x, y in zip(per_round[fastest], per_round[base])])
            results["sets"][s] = entry
    report(results, a.out)


if __name__ == "__main__":
    main()
