"""hotloop train's step rate on the CPU against two PyTorch loops, in one run on the same machine.

usage: .venv/bin/python bench/train_vs_pytorch.py [--steps 25] [--rounds 1] [--threads 2] [--model resnet18-small]
                                                  [--hotloop build/hotloop] [--hotloop-before OTHER] [--out FILE.json]

All the loops train the same model (torchvision's resnet18 with the -small stem: conv1 3x3 stride 1, no
max-pool) on Fashion-MNIST, batch 64, fp32, SGD with momentum, no augmentation, the same number of threads:
1. hotloop: `hotloop train --augment none --no-eval` (its loader, its multi-tensor SGD), as it runs by
   default (--cpu-conv auto: im2col + GEMM for the 4x4 maps of layer4), and again with --cpu-conv onednn
   (every convolution through oneDNN, as PyTorch's): the GEMM path's share of the result.
2. a tuned PyTorch eager loop: the whole data set as one normalized tensor in memory, index_select
   batches, zero_grad(set_to_none=True), foreach SGD; measured both in NCHW and in channels_last (what
   hotloop uses by default), and the faster of the two is the baseline.
3. the idiomatic loop: torchvision.datasets.FashionMNIST + ToTensor/Normalize + DataLoader(batch_size=64,
   shuffle=True) with PyTorch's defaults (num_workers=0).
Each figure is images/s from the median step time over the steps after the first 3 (hotloop: the median
of its per-step rates after its warm-up steps). Ratios are hotloop / baseline.

hotloop is told the PyTorch loops' optimizer exactly (SGD, lr 0.05, momentum 0.9, no Nesterov, no weight decay,
no label smoothing, a constant schedule), so that the model's recipe does not change its work.

--exported mobilenet_v3_small|vit_tiny measures a model exported from Python instead (issue 21): the model of
examples/bring_your_own/export.py, scripted into a temporary file that hotloop trains (--model torchscript:FILE),
while the PyTorch loops train the same model eagerly (the hotloop_onednn loop is left out: --cpu-conv only
changes the built-in models). One more loop runs the tuned loop on the TorchScript module itself in Python
(channels_last): ratio_vs_tuned_script compares hotloop with that.

--hotloop-before OTHER adds a sixth loop, another hotloop binary with the same flags (a build from before a
change): its rate and the per-round ratio hotloop / hotloop_before say whether the change moved the speed.

With --rounds R > 1 the loops run R times, interleaved, each round in a rotated order, so that a slow
spell of a shared machine falls on all of them rather than on one; each loop's figure is then the median of
its R rounds, and every round's rates and ratios are kept under "per_round".
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

from bench_common import report, torchvision_fashion_mnist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOTLOOP = os.path.join(ROOT, "build", "hotloop")
BATCH = 64


def model(name):
    m = getattr(torchvision.models, name.removesuffix("-small"))(num_classes=10)
    m.conv1 = torch.nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    m.maxpool = torch.nn.Identity()
    return m.train()


def timed_loop(net, batches, steps, channels_last=False):
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, foreach=True)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = next(batches)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t0)
    return BATCH / statistics.median(times[3:])


def tuned_batches(images, labels):
    g = torch.Generator().manual_seed(0)
    while True:
        perm = torch.randperm(images.size(0), generator=g)
        for i in range(0, images.size(0) - BATCH + 1, BATCH):
            idx = perm[i:i + BATCH]
            yield images.index_select(0, idx), labels.index_select(0, idx)


def loader_batches(loader):
    while True:
        yield from loader


def hotloop_rate(a, run_dir, cpu_conv="auto", binary=None):
    """Runs `hotloop train` for a.steps steps into a fresh run_dir and returns its summary's images/s."""
    shutil.rmtree(run_dir, ignore_errors=True)
    subprocess.run([binary or a.hotloop, "train", "--data", "fashion-mnist", "--model", a.model, "--batch", str(BATCH),
                    "--steps", str(a.steps), "--threads", str(a.threads), "--augment", "none", "--no-eval",
                    "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--nesterov=false",
                    "--weight-decay", "0", "--label-smoothing", "0", "--schedule", "constant",
                    "--cpu-conv", cpu_conv, "--out", run_dir, "--log-every", "0"],
                   check=True, capture_output=True, text=True)
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)["images_per_s"]


def figures(rate):
    """The images/s of each loop (rate: loop name -> images/s) and hotloop's ratios to the baselines; the
    tuned baseline is the faster of its two layouts."""
    tuned = max(rate["tuned_pytorch_nchw"], rate["tuned_pytorch_channels_last"])
    out = {**{f"{n}_images_per_s": v for n, v in rate.items()}, "tuned_pytorch_images_per_s": tuned,
           "ratio_vs_tuned": rate["hotloop"] / tuned, "ratio_vs_idiomatic": rate["hotloop"] / rate["idiomatic_pytorch"]}
    if "tuned_pytorch_script_channels_last" in rate:
        out["ratio_vs_tuned_script"] = rate["hotloop"] / rate["tuned_pytorch_script_channels_last"]
    if "hotloop_onednn" in rate:
        out["hotloop_onednn_ratio_vs_tuned"] = rate["hotloop_onednn"] / tuned
        out["gemm_conv_speedup"] = rate["hotloop"] / rate["hotloop_onednn"]
    if "hotloop_before" in rate:
        out["ratio_vs_before"] = rate["hotloop"] / rate["hotloop_before"]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--rounds", type=int, default=1, help="interleaved repetitions; each figure is their median")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default="resnet18-small")
    p.add_argument("--hotloop", default=HOTLOOP, help="the hotloop binary to measure")
    p.add_argument("--hotloop-before", default="", help="another hotloop binary, measured alongside")
    p.add_argument("--exported", default="", choices=["", "mobilenet_v3_small", "vit_tiny"],
                   help="a model of examples/bring_your_own, trained by hotloop as its TorchScript export")
    p.add_argument("--out", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    results = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "torch": torch.__version__,
               "model": a.model, "batch": BATCH, "threads": a.threads, "steps": a.steps, "rounds": a.rounds,
               "hotloop": a.hotloop, "hotloop_before": a.hotloop_before,
               "command": "python bench/train_vs_pytorch.py " + " ".join(sys.argv[1:])}
    with tempfile.TemporaryDirectory() as tmp:
        make = lambda: model(a.model)  # noqa: E731
        if a.exported:
            sys.path.insert(0, os.path.join(ROOT, "examples", "bring_your_own"))
            import export as byo

            make = byo.mobilenet_v3_small if a.exported == "mobilenet_v3_small" else byo.ViT
            path = os.path.join(tmp, a.exported + ".pt")
            byo.export(make(), path)
            a.model = f"torchscript:{path}"
            results["model"] = f"{a.exported} (examples/bring_your_own; hotloop: its TorchScript export)"
        torchvision_fashion_mnist(tmp)
        norm = transforms.Normalize((0.2860,), (0.3530,))
        ds = torchvision.datasets.FashionMNIST(tmp, train=True, download=False,
                                               transform=transforms.Compose([transforms.ToTensor(), norm]))
        images = ds.data.unsqueeze(1).float().div(255).sub(0.2860).div(0.3530).contiguous()
        loops = {
            "hotloop": lambda: hotloop_rate(a, os.path.join(tmp, "run")),
            "hotloop_onednn": lambda: hotloop_rate(a, os.path.join(tmp, "run"), "onednn"),
            "tuned_pytorch_nchw": lambda: timed_loop(make().train(), tuned_batches(images, ds.targets), a.steps),
            "tuned_pytorch_channels_last": lambda: timed_loop(make().train(), tuned_batches(images, ds.targets),
                                                              a.steps, channels_last=True),
            "idiomatic_pytorch": lambda: timed_loop(make().train(),
                                                    loader_batches(DataLoader(ds, batch_size=BATCH, shuffle=True)),
                                                    a.steps),
        }
        if a.exported:
            del loops["hotloop_onednn"]
            loops["tuned_pytorch_script_channels_last"] = lambda: timed_loop(
                torch.jit.load(path).train(), tuned_batches(images, ds.targets), a.steps, channels_last=True)
        if a.hotloop_before:
            loops["hotloop_before"] = lambda: hotloop_rate(a, os.path.join(tmp, "run"), binary=a.hotloop_before)
        names = list(loops)
        rounds = []
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            rates = {}
            for name in order:
                print(f"round {r + 1}/{a.rounds}: {name} ...", file=sys.stderr, flush=True)
                rates[name] = loops[name]()
            rounds.append((order, rates))
    rate = {n: statistics.median(rates[n] for _, rates in rounds) for n in names}
    results.update(figures(rate))
    if a.rounds > 1:
        results["per_round"] = [{"order": order, **figures(rates)} for order, rates in rounds]
        # hotloop against the tuned loop: the median of the paired per-round ratios, with their range.
        for key in ("ratio_vs_tuned", "ratio_vs_tuned_script"):
            if key in results:
                paired = sorted(r[key] for r in results["per_round"])
                results[key + "_paired"] = {"median": statistics.median(paired), "min": paired[0], "max": paired[-1]}
        if a.hotloop_before:
            # The change's effect: the median of the paired per-round ratios, with their range.
            paired = sorted(r["ratio_vs_before"] for r in results["per_round"])
            results["ratio_vs_before_paired"] = {"median": statistics.median(paired), "min": paired[0],
                                                 "max": paired[-1]}
    report(results, a.out)


if __name__ == "__main__":
    main()
