"""hotloop train against three PyTorch training loops on the same GPU, in one run (issue 10's benchmark).

usage: python bench/vs_pytorch.py [--hotloop build/hotloop] [--device cuda] [--steps 200] [--warmup 30]
                                  [--workloads cnn-small,resnet18-small,resnet50] [--no-compile]
                                  [--data /usr/share/datasets/fashion-mnist] [--out FILE.json]

Every loop trains the same model (hotloop's cnn-small, or torchvision's resnet18 with the -small stem,
or torchvision's resnet50) with the same batch (256), precision (bf16 autocast), optimizer (SGD, momentum
0.9, constant LR 0.05), seed and number of steps:
- P0, idiomatic PyTorch: torchvision's FashionMNIST + ToTensor/Normalize + DataLoader(shuffle, 8 workers,
  pin_memory, persistent_workers), .to(device, non_blocking=True), loss.item() every step (as tutorials
  log it). Not run for resnet50: its data is synthetic and its target is against P1.
- P1, tuned eager PyTorch: the data set resident on the GPU as uint8, batches gathered and normalized
  there, channels_last, foreach SGD, zero_grad(set_to_none=True), cudnn.benchmark, no host read in the
  loop.
- P2: P1 with torch.compile(model); its compile time (the first steps' time beyond an eager step's) is
  reported on its own. Small models only (their target is against P2); --no-compile skips it.
- hotloop: `hotloop train --resident on --augment none --no-eval --cuda-graphs auto` (data on the
  GPU, the step replayed as a CUDA graph where it can be).
Workloads: Fashion-MNIST (60,000 images, 28 px) for the small models; resnet50 at 224 px on 1,024 synthetic
images, resident on the GPU.

Measure: images/s over the steps after the warm-up. The Python loops synchronize before and after those
steps and divide by the wall time. hotloop's figure is the batch over the sum of its steady-state step
times from metrics.jsonl (the host's clock per step; without a synchronization in the loop, the host runs at
the GPU's pace once the launch queue is full, and the queue's last steps are not in the sum: at most a few
steps in the hundreds). TFLOP/s: the model's training FLOPs per image (torch's FlopCounterMode, forward +
backward) times images/s. hotloop's GPU busy is NVML's utilization averaged over the samples taken during
its steady state (telemetry.jsonl), its data wait its summary's data_wait_fraction.

Targets: small models >= 1.5x P1 and >= 1.0x P2; resnet50 >= 1.0x P1; hotloop's GPU busy >= 95% and data
wait <= 2%. The output says, per workload, each ratio and whether its target is met.

On the CPU (--device cpu), the same loops run as a rehearsal of the script (the test suite does that with
a few steps); no target applies there.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

from bench_common import FMNIST, report, torchvision_fashion_mnist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 256
LR = 0.05
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's, as hotloop normalizes it

WORKLOADS = {
    "cnn-small": {"data": "fmnist", "size": 28, "channels": 1, "target_p1": 1.5, "target_p2": 1.0},
    "resnet18-small": {"data": "fmnist", "size": 28, "channels": 1, "target_p1": 1.5, "target_p2": 1.0},
    "resnet50": {"data": "synthetic", "size": 224, "channels": 3, "target_p1": 1.0, "target_p2": None},
}
SYNTHETIC_IMAGES = 1024


class CnnSmall(torch.nn.Module):
    """hotloop's cnn-small (src/hotloop/model/image/small_models.cpp), layer for layer."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        layers = []
        for a, b in ((in_channels, 32), (32, 64)):
            layers += [torch.nn.Conv2d(a, b, 3, padding=1, bias=False), torch.nn.BatchNorm2d(b),
                       torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2)]
        self.features = torch.nn.Sequential(*layers)
        self.hidden = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc = torch.nn.Linear(128, num_classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 7)
        x = F.relu(self.hidden(torch.flatten(x, 1)))
        return self.fc(F.dropout(x, 0.3, self.training))


def build_model(name, channels):
    torch.manual_seed(0)
    if name == "cnn-small":
        return CnnSmall(channels, 10)
    m = getattr(torchvision.models, name.removesuffix("-small"))(num_classes=10)
    if name.endswith("-small"):
        m.conv1 = torch.nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()
    return m


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device):
    return torch.autocast(device.type, dtype=torch.bfloat16)


def train_flops_per_image(name, w, device):
    """Forward + backward FLOPs of one image (FlopCounterMode at batch 2, halved)."""
    from torch.utils.flop_counter import FlopCounterMode
    net = build_model(name, w["channels"]).to(device).train()
    x = torch.randn(2, w["channels"], w["size"], w["size"], device=device)
    y = torch.randint(0, 10, (2,), device=device)
    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(net(x), y).backward()
    return counter.get_total_flops() / 2


def resident_data(w, device, source):
    """The data set as uint8 on the device, with its labels."""
    if w["data"] == "fmnist":
        root = torchvision_fashion_mnist(tempfile.mkdtemp(prefix="fmnist-"), source)
        ds = torchvision.datasets.FashionMNIST(root, train=True, download=False)
        return ds.data.unsqueeze(1).to(device), ds.targets.to(device)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (SYNTHETIC_IMAGES, 3, w["size"], w["size"]), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (SYNTHETIC_IMAGES,), generator=g)
    return images.to(device), labels.to(device)


def resident_batches(images, labels, channels_last):
    """Shuffled batches gathered and normalized on the device, epoch after epoch."""
    n = images.shape[0]
    while True:
        perm = torch.randperm(n, device=images.device)
        for i in range(n // BATCH):
            idx = perm[i * BATCH:(i + 1) * BATCH]
            x = images.index_select(0, idx).float().sub_(255 * MEAN).div_(255 * STD)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            yield x, labels.index_select(0, idx)


def run_loop(net, batches, steps, warmup, device, read_loss_every_step):
    """Trains for warmup + steps; returns (images/s over the steps after the warm-up, seconds of the
    first step)."""
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9, foreach=True)
    first = None
    for i in range(warmup + steps):
        if i == warmup:
            sync(device)
            t0 = time.perf_counter()
        ts = time.perf_counter()
        x, y = next(batches)
        with autocast(device):
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if read_loss_every_step:
            loss.item()
        if i == 0:
            sync(device)
            first = time.perf_counter() - ts
    sync(device)
    return BATCH * steps / (time.perf_counter() - t0), first


def p0(name, w, device, steps, warmup, source):
    root = torchvision_fashion_mnist(tempfile.mkdtemp(prefix="fmnist-"), source)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    ds = torchvision.datasets.FashionMNIST(root, train=True, download=False, transform=tf)
    workers = min(8, os.cpu_count() or 1)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=True)

    def batches():
        while True:
            for x, y in loader:
                yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    net = build_model(name, w["channels"]).to(device).train()
    rate, _ = run_loop(net, batches(), steps, warmup, device, read_loss_every_step=True)
    return {"images_per_s": rate, "workers": workers}


def p1(name, w, device, steps, warmup, data, compile_model=False):
    net = build_model(name, w["channels"]).to(device).train()
    net = net.to(memory_format=torch.channels_last)
    eager_first = None
    if compile_model:
        # One eager step on a twin, to tell compile time from a step's time.
        twin = build_model(name, w["channels"]).to(device).train().to(memory_format=torch.channels_last)
        _, eager_first = run_loop(twin, resident_batches(*data, True), 1, 0, device, False)
        net = torch.compile(net)
    rate, first = run_loop(net, resident_batches(*data, True), steps, warmup, device, read_loss_every_step=False)
    out = {"images_per_s": rate}
    if compile_model:
        out["compile_s"] = max(0.0, first - eager_first)
    return out


def hotloop_run(args, name, w, device, steps, warmup, flops):
    out_dir = tempfile.mkdtemp(prefix=f"hotloop-{name}-")
    data = f"fashion-mnist:{args.data}" if w["data"] == "fmnist" else \
        f"synthetic:{SYNTHETIC_IMAGES}x3x{w['size']}x{w['size']}"
    cmd = [args.hotloop, "train", "--model", name, "--data", data, "--batch", str(BATCH), "--precision", "bf16",
           "--device", device.type, "--steps", str(warmup + steps), "--optimizer", "sgd", "--lr", str(LR),
           "--momentum", "0.9", "--nesterov=false", "--weight-decay", "0", "--label-smoothing", "0",
           "--schedule", "constant", "--augment", "none", "--resident", "on", "--no-eval",
           "--seed", "0", "--tensorboard", "false", "--telemetry-interval", "0.2", "--log-every", "0",
           "--cuda-graphs", "auto", "--out", os.path.join(out_dir, "run")]
    if device.type == "cpu":
        cmd += ["--threads", str(torch.get_num_threads())]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"hotloop failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    run = os.path.join(out_dir, "run")
    summary = json.load(open(os.path.join(run, "summary.json")))
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    steady = [l for l in lines if "step_time_ms" in l and l["step"] > warmup]
    seconds = sum(l["step_time_ms"] for l in steady) / 1e3
    rate = BATCH * len(steady) / seconds
    busy = None
    telemetry = os.path.join(run, "telemetry.jsonl")
    if os.path.exists(telemetry):
        utils = []
        samples = [json.loads(l) for l in open(telemetry)]
        # The steady state: samples after the first steady step's share of the run's time.
        for s in samples[len(samples) * warmup // max(1, warmup + steps):]:
            for g in s.get("gpus", []):
                if g.get("util_percent") is not None:
                    utils.append(g["util_percent"])
        busy = statistics.mean(utils) if utils else None
    graph_lines = [l for l in proc.stdout.splitlines() if l.startswith("CUDA graphs")]
    return {"images_per_s": rate, "tflops": flops * rate / 1e12, "gpu_busy_percent": busy,
            "data_wait_fraction": summary["data_wait_fraction"], "cuda_graphs": summary.get("cuda_graphs"),
            "cuda_graphs_log": graph_lines, "summary_images_per_s": summary["images_per_s"],
            "wall_s": time.perf_counter() - t0, "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hotloop", default=os.path.join(ROOT, "build", "hotloop"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=200, help="measured steps per loop (default 200)")
    ap.add_argument("--warmup", type=int, default=30, help="steps before the measured ones (default 30)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--no-compile", action="store_true", help="skip P2 (torch.compile)")
    ap.add_argument("--data", default=FMNIST, help="Fashion-MNIST's folder (default %(default)s)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    args.hotloop = os.path.abspath(args.hotloop)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    results = {"machine": {"host": platform.node(), "cpus": os.cpu_count(), "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None},
               "batch": BATCH, "precision": "bf16", "steps": args.steps, "warmup": args.warmup,
               "workloads": {}}
    for name in args.workloads.split(","):
        w = WORKLOADS[name]
        print(f"vs_pytorch: {name} ...", file=sys.stderr, flush=True)
        flops = train_flops_per_image(name, w, device)
        data = resident_data(w, device, args.data)
        rows = {}
        if w["data"] == "fmnist":
            rows["p0"] = p0(name, w, device, args.steps, args.warmup, args.data)
        rows["p1"] = p1(name, w, device, args.steps, args.warmup, data)
        if w["target_p2"] is not None and not args.no_compile:
            rows["p2"] = p1(name, w, device, args.steps, args.warmup, data, compile_model=True)
        rows["hotloop"] = hotloop_run(args, name, w, device, args.steps, args.warmup, flops)
        for r in rows.values():
            r["tflops"] = flops * r["images_per_s"] / 1e12
        h = rows["hotloop"]["images_per_s"]
        ratios = {f"vs_{k}": h / r["images_per_s"] for k, r in rows.items() if k != "hotloop"}
        targets = {}
        if device.type == "cuda":
            targets["vs_p1"] = {"target": w["target_p1"], "met": ratios["vs_p1"] >= w["target_p1"]}
            if "vs_p2" in ratios:
                targets["vs_p2"] = {"target": w["target_p2"], "met": ratios["vs_p2"] >= w["target_p2"]}
            busy = rows["hotloop"]["gpu_busy_percent"]
            targets["gpu_busy"] = {"target": 95, "met": busy is not None and busy >= 95}
            targets["data_wait"] = {"target": 0.02, "met": rows["hotloop"]["data_wait_fraction"] <= 0.02}
        results["workloads"][name] = {"train_flops_per_image": flops, "rows": rows, "ratios": ratios,
                                      "targets": targets}
    report(results, args.out)


if __name__ == "__main__":
    main()
