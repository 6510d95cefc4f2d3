#!/usr/bin/env python3
"""Export two models hotloop does not have built in, as TorchScript, for `hotloop train --model torchscript:FILE`.

    mobilenet_v3_small.pt  torchvision's MobileNetV3-Small for Fashion-MNIST: one input channel, a stride-1
                           stem for 28 px images, 10 classes (1.5 M parameters)
    vit_tiny.pt            a small vision transformer: 7x7 patches, width 96, 4 blocks of 4 heads, 10 classes

Usage: export.py [--out DIR] [--trace] [--dropout P]
  --trace     torch.jit.trace instead of torch.jit.script (control flow is frozen for the example input)
  --dropout   mobilenet's classifier dropout (torchvision's default: 0.2)

Then: hotloop inspect model DIR/mobilenet_v3_small.pt
      hotloop train --model torchscript:DIR/mobilenet_v3_small.pt --data fashion-mnist
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


def mobilenet_v3_small(num_classes=10, in_channels=1, dropout=0.2):
    import torchvision

    model = torchvision.models.mobilenet_v3_small(num_classes=num_classes, dropout=dropout)
    # 28 px inputs: a stride-1 stem keeps 2x2 features at the end instead of 1x1.
    stem = model.features[0][0]
    model.features[0][0] = nn.Conv2d(in_channels, stem.out_channels, 3, stride=1, padding=1, bias=False)
    return model


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, num_classes=10, in_channels=1, image_size=28, patch=7, width=96, depth=4, heads=4):
        super().__init__()
        self.patch = nn.Conv2d(in_channels, width, patch, stride=patch)
        tokens = (image_size // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, width) * 0.02)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


def export(model, path, trace=False, example=None):
    model.train()  # hotloop switches train()/eval() itself; a traced model keeps the mode it was traced in
    if trace:
        scripted = torch.jit.trace(model, example if example is not None else torch.randn(2, 1, 28, 28))
    else:
        scripted = torch.jit.script(model)
    scripted.save(path)
    n = sum(p.numel() for p in model.parameters())
    print(f"{path}: {type(model).__name__}, {n:,} parameters, {'traced' if trace else 'scripted'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="exported")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    try:
        mobilenet = mobilenet_v3_small(dropout=a.dropout)
    except ImportError:
        print("mobilenet_v3_small: skipped (it needs torchvision: pip install torchvision)")
    else:
        export(mobilenet, os.path.join(a.out, "mobilenet_v3_small.pt"), a.trace)
    export(ViT(), os.path.join(a.out, "vit_tiny.pt"), a.trace)


if __name__ == "__main__":
    main()
