"""A labelled photo-sized set for the packed-shards accuracy check (issue 55): five product classes.

usage: .venv/bin/python bench/make_product_photos.py OUT_DIR [--train 600] [--val 100] [--seed 0]

The source documents' example sorts product photos into five classes; no such photos can be had here, so
this renders real Fashion-MNIST items (Debian's dataset-fashion-mnist) as phone-sized product photos:
shoes (sandals, sneakers, ankle boots), bags, coats, dresses and trousers. Each item is scaled up to
600-1100 px (bicubic), tinted, and placed near the middle of a 1600 x 1200 (or 1200 x 1600) photo of a
light studio backdrop (an even color with a faint make_image_sets.py texture), with grain, saved at
JPEG quality 85. The class depends on the item's shape only. Train images come from Fashion-MNIST's
training set, val from its test set.
Writes OUT_DIR/{train,val}/<class>/<n>.jpg, the layout `folder:` reads; the same seed gives the same files.
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image

from make_image_sets import textures

FMNIST = "/usr/share/datasets/fashion-mnist"
CLASSES = {"shoes": (5, 7, 9), "bags": (8,), "coats": (4,), "dresses": (3,), "trousers": (1,)}


def idx(name):
    with gzip.open(os.path.join(FMNIST, name)) as f:
        data = f.read()
    if data[2] == 8 and data[3] == 3:  # images
        n, h, w = (int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(3))
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, h, w)
    return np.frombuffer(data, np.uint8, offset=8)


def render(item, rng, bases):
    w, h = (1600, 1200) if rng.random() < 0.75 else (1200, 1600)
    base = bases[int(rng.integers(0, len(bases)))]
    side = base.shape[0]
    cw = int(rng.integers(side // 2, side))
    ch = min(side, int(cw * h / w))
    x0, y0 = int(rng.integers(0, side - cw + 1)), int(rng.integers(0, side - ch + 1))
    bg = Image.fromarray(base[y0 : y0 + ch, x0 : x0 + cw]).resize((w, h), Image.BILINEAR)
    # A studio backdrop: a light, even color with a faint texture (the photo's grain and shadows).
    backdrop = rng.uniform(170, 235) + rng.uniform(-15, 15, 3)
    px = backdrop + 0.25 * (np.asarray(bg, np.float32) - 128)
    s = int(rng.integers(600, min(w, h) - 100))
    mask = np.asarray(Image.fromarray(item).resize((s, s), Image.BICUBIC), np.float32) / 255
    mask = mask[:, ::-1] if rng.random() < 0.5 else mask
    color = rng.uniform(40, 255, 3)
    # Near the middle, as a product photo frames its item.
    x = int(np.clip((w - s) / 2 + rng.normal(0, 0.15) * w, 0, w - s))
    y = int(np.clip((h - s) / 2 + rng.normal(0, 0.15) * h, 0, h - s))
    region = px[y : y + s, x : x + s]
    alpha = np.clip(mask * 1.6, 0, 1)[..., None]
    shade = (0.55 + 0.45 * mask)[..., None] * color
    px[y : y + s, x : x + s] = region * (1 - alpha) + shade * alpha
    px += rng.normal(0, 4, px.shape)
    return Image.fromarray(np.clip(px, 0, 255).astype(np.uint8))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train", type=int, default=600, help="images per class")
    p.add_argument("--val", type=int, default=100, help="images per class")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    bases = textures(rng, 4, 2048)
    for split, prefix, count in (("train", "train", a.train), ("val", "t10k", a.val)):
        images, labels = idx(f"{prefix}-images-idx3-ubyte.gz"), idx(f"{prefix}-labels-idx1-ubyte.gz")
        for name, ids in CLASSES.items():
            folder = os.path.join(a.out, split, name)
            os.makedirs(folder, exist_ok=True)
            picks = rng.permutation(np.flatnonzero(np.isin(labels, ids)))[:count]
            for n, i in enumerate(picks):
                render(images[i], rng, bases).save(os.path.join(folder, f"{n:05d}.jpg"), quality=85)
        print(f"{split}: {count} images in each of {len(CLASSES)} classes")


if __name__ == "__main__":
    main()
