#!/usr/bin/env python3
"""A plain PyTorch training script to put under `hotloop watch`: Fashion-MNIST, a DataLoader, a CNN.

    hotloop watch -- python examples/watch/train_fashion.py                       # CPU here: cpu-only
    hotloop watch -- python examples/watch/train_fashion.py --device cuda \\
        --model resnet18 --size 96 --augment cpu --workers 1                      # input-bound on purpose
    hotloop watch -- python examples/watch/train_fashion.py --device cuda \\
        --model resnet18 --size 96 --augment gpu --workers 4                      # the fix

--augment cpu does a random affine transform per image with PIL in the DataLoader workers (the usual
torchvision pipeline); --augment gpu does the same kind of transform for the whole batch on the device
(affine_grid + grid_sample), so the workers only index uint8 images. Each step is reported to watch
through python/hotloop_watch.py (nothing happens without watch).
"""
import argparse
import gzip
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from hotloop_watch import report_step  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path, header):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8)


class FashionMnist(Dataset):
    def __init__(self, root, augment, size):
        self.images = read_idx(os.path.join(root, "train-images-idx3-ubyte.gz"), 16).view(-1, 28, 28)
        self.labels = read_idx(os.path.join(root, "train-labels-idx1-ubyte.gz"), 8).long()
        self.augment = augment
        self.size = size
        if augment == "cpu":
            from torchvision import transforms  # the usual per-image pipeline, on PIL images

            self.transform = transforms.Compose([
                transforms.Resize(size),
                transforms.RandomAffine(degrees=15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                transforms.ToTensor(),
                transforms.Normalize((MEAN,), (STD,)),
            ])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if self.augment == "cpu":
            from PIL import Image

            return self.transform(Image.fromarray(self.images[i].numpy())), self.labels[i]
        return self.images[i].unsqueeze(0), self.labels[i]  # uint8: the device does the rest


def gpu_augment(x, size, train):
    """uint8 [N,1,28,28] on the device -> normalized floats [N,1,size,size], a random affine per image."""
    x = x.float().div_(255)
    if size != 28:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    if train:
        n = x.shape[0]
        angle = (torch.rand(n, device=x.device) * 2 - 1) * (15 * math.pi / 180)
        scale = 0.9 + 0.2 * torch.rand(n, device=x.device)
        shift = (torch.rand(n, 2, device=x.device) * 2 - 1) * 0.2
        cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
        theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
    return (x - MEAN) / STD


def make_model(name, size):
    if name == "resnet18":
        from torchvision.models import resnet18

        m = resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
        return m
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * (size // 4) ** 2, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda")
    p.add_argument("--model", default="small", choices=["small", "resnet18"])
    p.add_argument("--size", type=int, default=28, help="image side the model sees")
    p.add_argument("--augment", default="cpu", choices=["cpu", "gpu", "none"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=200, help="stop after this many steps (0: one epoch)")
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if a.device == "auto" else a.device))
    torch.manual_seed(0)
    data = FashionMnist(a.data, a.augment, a.size)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=a.workers > 0)
    model = make_model(a.model, a.size).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    print(f"training {a.model} on {device}, augment {a.augment}, {a.workers} workers, batch {a.batch}", flush=True)
    step, start = 0, time.time()
    while True:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if a.augment != "cpu":
                x = gpu_augment(x, a.size, a.augment == "gpu")
            x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.bf16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % 10 == 0:  # read the loss every 10 steps, as a log would
                report_step(step, loss=loss.item(), samples=len(y))
            else:
                report_step(step, samples=len(y))
            step += 1
            if step == a.steps:
                break
        if a.steps == 0 or step == a.steps:
            break
    print(f"{step} steps in {time.time() - start:.1f} s, last loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
