"""hotloop's image loader against torchvision's and NVIDIA DALI's CPU pipeline, in one run (issues 38, 39).

usage: .venv/bin/python bench/data_vs_torchvision.py [--sets DIR] [--rounds 5] [--seconds 6] [--out FILE.json]
                                                      [--which small,imagenet,photo] [--variants ...]
                                                      [--packed N]

The image sets are bench/make_image_sets.py's (made in a temporary folder unless --sets names one):
256 x 256, ImageNet-like (~500 x 375, quality 90) and photo-size (1600 x 1200, quality 85). On each, the
same work: random-resized crop to 224 (area 8-100%, ratio 3/4-4/3, antialiased resize) + horizontal
flip + normalize to float, batches of 64, 2 worker threads/processes:
- torchvision: ImageFolder (PIL decode) + DataLoader(num_workers=2, persistent);
- dali: fn.readers.file + fn.decoders.image_random_crop (libjpeg-turbo ROI decode: only the crop's
  region, DALI's fastest CPU path) + fn.resize(antialias) + fn.crop_mirror_normalize, num_threads=2,
  device_id=None (CPU only);
- hotloop auto / region / full: `hotloop bench data --decode auto|region|full --workers 2`;
- hotloop-python: the Python package's hotloop.Loader (decode auto, workers=2) in the same Python loop
  as torchvision's and DALI's;
- ceiling: `hotloop bench data --decode-only --workers 2`: every image decoded whole at full size by
  TurboJPEG, nothing else (what a full-decode loader cannot beat);
- hotloop-packed (with --packed N): `hotloop bench data` as hotloop-auto, on the set packed once with
  `hotloop pack --max-side N` (the images at training size), against the other variants reading the
  original files;
- VARIANT@restarts (e.g. torchvision@restarts, hotloop-auto@restarts): that variant reading the set as
  `hotloop pack` writes it at its size (each JPEG rewritten losslessly, the same pixels, with a restart
  marker per MCU row), unpacked into a folder beside the set (made once) so that every loader reads
  the same files.
Each variant runs in its own process for --seconds after a warm-up batch; the variants take turns in
every round, the order rotating. A ratio is the median of the per-round ratios (both sides from the
same round) with its min-max range. Then `hotloop data check --decode auto` compares the auto path
with a full decode on every image of every set (PSNR of the 224 px crop, min and median).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import image_sets, report, run_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOTLOOP = os.path.join(ROOT, "build", "hotloop")
SETS = ["small", "imagenet", "photo"]
VARIANTS = ["torchvision", "dali", "hotloop-python", "hotloop-auto", "hotloop-region", "hotloop-full", "ceiling"]
BATCH, SIZE, WORKERS = 64, 224, 2
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def python_loop_rate(loader, seconds):
    """Images/s of a Python loop taking `loader`'s batches for `seconds`, after a first batch (workers or
    threads started), passes restarting at each epoch's end."""
    it = iter(loader)
    next(it)
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            x, _ = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        images += x.shape[0]
    return images / (time.perf_counter() - start)


def rate_torchvision(root, seconds):
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import transforms

    torch.set_num_threads(1)
    ds = torchvision.datasets.ImageFolder(os.path.join(root, "train"), transform=transforms.Compose([
        transforms.RandomResizedCrop(SIZE), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)]))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS, drop_last=True,
                        persistent_workers=True)
    return python_loop_rate(loader, seconds)


def rate_dali(root, seconds):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=WORKERS, device_id=None, seed=0, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=os.path.join(root, "train"), random_shuffle=True,
                                        name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE, antialias=True)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    p = pipe()
    p.build()
    p.run()  # warm-up
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        out, _ = p.run()
        images += len(out)
    return images / (time.perf_counter() - start)


def rate_hotloop_python(root, seconds):
    try:
        import hotloop
    except ImportError:  # a checkout without scripts/setup's hotloop.pth
        sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "build", "python")]
        import hotloop

    loader = hotloop.Loader(f"folder:{root}", batch_size=BATCH, size=SIZE, workers=WORKERS, mean=MEAN, std=STD)
    return python_loop_rate(loader, seconds)


def rate_hotloop(root, seconds, extra):
    return rate_hotloop_spec(f"folder:{root}", seconds, extra)


def rate_hotloop_spec(spec, seconds, extra):
    out = subprocess.run([HOTLOOP, "bench", "data", "--json", "--data", spec, "--workers",
                          str(WORKERS), "--batch", str(BATCH), "--size", str(SIZE), "--seconds", str(seconds),
                          *extra], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["images_per_s"]


def packed_dir(root, max_side):
    """The set packed at max_side (made once, beside it): WebDataset shards with a train split."""
    out = f"{root}-packed-{max_side}"
    if not os.path.exists(os.path.join(out, "index.json")):
        subprocess.run([HOTLOOP, "pack", "--from", f"folder:{root}", "--to", out, "--max-side", str(max_side)],
                       check=True, capture_output=True)
    return out


def restarts_dir(root):
    """The set as `hotloop pack` writes it at its size (every JPEG rewritten losslessly with a restart marker
    per MCU row), unpacked into a folder beside it that every loader reads: made once."""
    import tarfile

    out = f"{root}-restarts"
    if os.path.exists(os.path.join(out, "train")):
        return out
    shards = f"{root}-restarts-shards"
    subprocess.run([HOTLOOP, "pack", "--from", f"folder:{root}", "--to", shards], check=True, capture_output=True)
    with open(os.path.join(shards, "index.json")) as f:
        classes = json.load(f)["classes"]
    tmp = out + ".tmp"
    for name in sorted(os.listdir(shards)):
        if not name.startswith("train-"):
            continue
        members = {}
        with tarfile.open(os.path.join(shards, name)) as tar:
            for m in tar.getmembers():
                key, ext = m.name.rsplit(".", 1)
                members.setdefault(key, {})[ext] = tar.extractfile(m).read()
        for key, parts in members.items():
            label = int(parts.pop("cls"))
            (ext, data), = parts.items()
            folder = os.path.join(tmp, "train", classes[label])
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{key}.{ext}"), "wb") as f:
                f.write(data)
    os.rename(tmp, out)
    return out


def one(variant, root, seconds, packed=0):
    if variant.endswith("@restarts"):  # the same loader on the restart-marked copy
        return one(variant.split("@")[0], restarts_dir(root), seconds, packed)
    if variant == "hotloop-packed":
        return rate_hotloop_spec(f"wds:{packed_dir(root, packed)}", seconds, [])
    if variant == "torchvision":
        return rate_torchvision(root, seconds)
    if variant == "dali":
        return rate_dali(root, seconds)
    if variant == "ceiling":
        return rate_hotloop(root, seconds, ["--decode-only"])
    if variant == "hotloop-python":
        return rate_hotloop_python(root, seconds)
    return rate_hotloop(root, seconds, ["--decode", variant.split("-", 1)[1]])


def measure(variant, root, seconds, packed):
    """One measurement in a fresh process (no threads or caches left over from another variant)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", variant, "--sets", root,
                          "--seconds", str(seconds), "--packed", str(packed)], check=True, capture_output=True,
                         text=True)
    return float(out.stdout.strip().splitlines()[-1])


def folder_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def decode_check(root):
    out = subprocess.run([HOTLOOP, "data", "check", "--data", f"folder:{root}", "--decode", "auto", "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"hotloop data check failed on {root}:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout)["decode_vs_full"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sets", default="", help="a bench/make_image_sets.py folder (default: made in a temp dir)")
    p.add_argument("--which", default=",".join(SETS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--out", default="")
    p.add_argument("--packed", type=int, default=0,
                   help="add hotloop-packed: the set packed with hotloop pack --max-side N")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(one(a.one, a.sets, a.seconds, a.packed))
        return
    variants = a.variants.split(",")
    if a.packed and "hotloop-packed" not in variants:
        variants.append("hotloop-packed")
    sets = a.which.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root, made = image_sets(a.sets, tmp, sets)
        for s in sets if a.packed else []:  # packed once, before any timing
            packed_dir(os.path.join(root, s), a.packed)
        for s in sets if any(v.endswith("@restarts") for v in variants) else []:
            restarts_dir(os.path.join(root, s))
        per_round = {s: {v: [] for v in variants} for s in sets}
        for r in range(a.rounds):
            for s in sets:
                order = variants[r % len(variants):] + variants[:r % len(variants)]
                for v in order:
                    rate = measure(v, os.path.join(root, s), a.seconds, a.packed)
                    per_round[s][v].append(rate)
                    print(f"round {r + 1}/{a.rounds} {s:9s} {v:15s} {rate:8.1f} images/s", file=sys.stderr,
                          flush=True)
        results = {
            **run_info(),
            "command": "python bench/data_vs_torchvision.py " + " ".join(sys.argv[1:]),
            "workers": WORKERS, "batch": BATCH, "size": SIZE, "rounds": a.rounds, "seconds": a.seconds,
            "packed_max_side": a.packed,
            "sets": {}}
        for s in sets:
            rates = per_round[s]
            entry = {"images": made["sets"][s]["images"], "avg_jpeg_bytes": made["sets"][s]["avg_jpeg_bytes"],
                     "images_per_s": {v: summary(rates[v]) for v in variants},
                     "images_per_s_per_core": {v: statistics.median(rates[v]) / WORKERS for v in variants},
                     "per_round": rates, "ratios": {}}
            for v in [v for v in variants if v.startswith("hotloop")]:
                for base in ["torchvision", "dali", "ceiling", "hotloop-full", "torchvision@restarts",
                             "dali@restarts", "hotloop-auto"]:
                    if base in variants and base != v:
                        entry["ratios"][f"{v} / {base}"] = summary(
                            [x / y for x, y in zip(rates[v], rates[base])])
            entry["decode_vs_full"] = decode_check(os.path.join(root, s))
            if any(v.endswith("@restarts") for v in variants):
                entry["restarts_jpeg_bytes"] = folder_bytes(restarts_dir(os.path.join(root, s)))
                entry["original_jpeg_bytes"] = folder_bytes(os.path.join(root, s))
            results["sets"][s] = entry
    report(results, a.out)


if __name__ == "__main__":
    main()
