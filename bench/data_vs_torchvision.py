"""hotloop's loader against torchvision's, in one run on the same machine (issue: data pipeline).

usage: .venv/bin/python bench/data_vs_torchvision.py [--seconds 10] [--images 3000] [--out FILE.json]

1. Photos: a folder of ~256 px photo-like JPEGs (~25 KB each); random-resized-crop 224 + flip +
   normalize, batch 64, 2 workers. torchvision ImageFolder + DataLoader(num_workers=2) against
   `hotloop bench data --data folder:...`, and the TurboJPEG decode rate of the same files on the same
   threads (`--decode-only`), the ceiling.
2. Fashion-MNIST: torchvision FashionMNIST + DataLoader(num_workers=2) with RandomCrop(28, padding=4) +
   flip + normalize, batch 256, against hotloop's loader (threaded and resident) with the same transform.
Every figure is images/s; ratios are against torchvision measured in the same run.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms

from bench_common import report, torchvision_fashion_mnist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOTLOOP = os.path.join(ROOT, "build", "hotloop")


def make_photos(root, n, classes=5, seed=0):
    """Photo-like JPEGs: smooth color fields with texture, 256x(256..320) px, quality 85 (~25 KB)."""
    rng = np.random.default_rng(seed)
    sizes = []
    for i in range(n):
        cls = f"class{i % classes}"
        os.makedirs(os.path.join(root, "train", cls), exist_ok=True)
        h, w = 256, int(rng.integers(256, 321))
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        img = np.zeros((h, w, 3), np.float32)
        for c in range(3):
            fx, fy, ph = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.3)]
            img[..., c] = 128 + 90 * np.sin(fx * xx + ph) * np.cos(fy * yy)
        img += rng.normal(0, 12, img.shape)
        path = os.path.join(root, "train", cls, f"{i:06d}.jpg")
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=85)
        sizes.append(os.path.getsize(path))
    return sum(sizes) / len(sizes)


def time_torch_loader(loader, seconds):
    it = iter(loader)
    next(it)  # workers started, first batch done
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            x, _ = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        images += x.shape[0]
    return images / (time.perf_counter() - start)


def hotloop_bench(args):
    out = subprocess.run([HOTLOOP, "bench", "data", "--json", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["images_per_s"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--images", type=int, default=3000)
    p.add_argument("--out", default="")
    a = p.parse_args()
    torch.set_num_threads(1)
    results = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "torch": torch.__version__,
               "torchvision": torchvision.__version__, "seconds_per_measurement": a.seconds,
               "command": "python bench/data_vs_torchvision.py " + " ".join(sys.argv[1:])}
    norm = transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    with tempfile.TemporaryDirectory() as tmp:
        photos = os.path.join(tmp, "photos")
        avg = make_photos(photos, a.images)
        tv = torchvision.datasets.ImageFolder(os.path.join(photos, "train"), transform=transforms.Compose([
            transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), norm]))
        tv_rate = time_torch_loader(DataLoader(tv, batch_size=64, shuffle=True, num_workers=2, drop_last=True,
                                               persistent_workers=True), a.seconds)
        common = ["--data", f"folder:{photos}", "--workers", "2", "--seconds", str(a.seconds)]
        hl_rate = hotloop_bench(common + ["--batch", "64", "--size", "224"])
        decode_rate = hotloop_bench(common + ["--decode-only"])
        results["photos"] = {"images": a.images, "avg_jpeg_bytes": round(avg), "batch": 64, "workers": 2,
                             "torchvision_images_per_s": tv_rate, "hotloop_images_per_s": hl_rate,
                             "turbojpeg_decode_images_per_s": decode_rate, "ratio_vs_torchvision": hl_rate / tv_rate,
                             "fraction_of_decode_ceiling": hl_rate / decode_rate}

        torchvision_fashion_mnist(tmp)
        fm = torchvision.datasets.FashionMNIST(tmp, train=True, download=False, transform=transforms.Compose([
            transforms.RandomCrop(28, padding=4), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
            transforms.Normalize((0.2860,), (0.3530,))]))
        fm_rate = time_torch_loader(DataLoader(fm, batch_size=256, shuffle=True, num_workers=2, drop_last=True,
                                               persistent_workers=True), a.seconds)
        fm_args = ["--data", "fashion-mnist", "--workers", "2", "--batch", "256", "--seconds", str(a.seconds)]
        threaded = hotloop_bench(fm_args + ["--resident", "off"])
        resident = hotloop_bench(fm_args + ["--resident", "on"])
        results["fashion_mnist"] = {"batch": 256, "workers": 2, "torchvision_images_per_s": fm_rate,
                                    "hotloop_threaded_images_per_s": threaded,
                                    "hotloop_resident_images_per_s": resident,
                                    "ratio_threaded_vs_torchvision": threaded / fm_rate,
                                    "ratio_resident_vs_torchvision": resident / fm_rate}
    report(results, a.out)


if __name__ == "__main__":
    main()
