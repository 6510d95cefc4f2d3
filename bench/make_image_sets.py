"""The loader benchmark's JPEG folders, generated from a seed (issue 38).

usage: .venv/bin/python bench/make_image_sets.py OUT_DIR [--sets small,imagenet,photo] [--scale 1.0] [--seed 0]

Writes OUT_DIR/<set>/train/class<k>/<n>.jpg in the layout `folder:` reads:
- small:    256 x 256, quality 85 (the earlier benchmark's size), 2,000 images;
- imagenet: about 500 x 375 (widths 400-500, heights 333-375, some portrait), quality 90, 1,500 images;
- photo:    1600 x 1200 (some 1200 x 1600), quality 85, like a phone's product photos, 400 images.
--scale multiplies the counts. The texture is a photo's: 1/f noise (natural images' spectrum) in
correlated color channels, blurred regions and hard edges, so the files are the size real photos of
that resolution and quality are (ImageNet's JPEGs average about 110 KB). Each image is a random crop,
flip and color gain of one of a few large textures, so generating is fast. Prints the mean file size
per set; the same seed gives the same files.
"""
import argparse
import json
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SETS = {
    # name: (count, quality, sizes as (width, height) choices)
    "small": (2000, 85, [(256, 256)]),
    "imagenet": (1500, 90, [(500, 375), (500, 333), (400, 375), (375, 500), (480, 360), (450, 350)]),
    "photo": (400, 85, [(1600, 1200), (1600, 1200), (1200, 1600)]),
}
CLASSES = 10


def pink_texture(rng, size, beta):
    """size x size x 3 float image in [0, 255] whose amplitude spectrum falls as 1/f^beta."""
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    amp = 1.0 / f**beta
    amp[0, 0] = 0
    mix = rng.normal(0, 1, (3, 3)) * 0.35 + np.eye(3)  # correlated channels, as in photos
    planes = []
    for _ in range(3):
        phase = rng.uniform(0, 2 * np.pi, amp.shape)
        plane = np.fft.irfft2(amp * np.exp(1j * phase), s=(size, size))
        planes.append(plane / plane.std())
    img = np.tensordot(np.stack(planes, -1), mix, axes=([2], [0]))
    img = 128 + 38 * img / img.std()
    return img


def textures(rng, count, size):
    out = []
    for i in range(count):
        t = pink_texture(rng, size, beta=0.95 + 0.15 * (i % 3))
        pil = Image.fromarray(np.clip(t, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(pil)
        for _ in range(60):  # objects with hard edges
            x, y = rng.integers(0, size, 2)
            r = int(rng.integers(size // 60, size // 8))
            color = tuple(int(c) for c in rng.integers(0, 256, 3))
            if rng.random() < 0.5:
                draw.ellipse([x - r, y - r, x + r, y + r], fill=color)
            else:
                draw.rectangle([x - r, y - r // 2, x + r, y + r // 2], fill=color)
        detail = pink_texture(rng, size, beta=0.75) - 128  # grain over the objects
        img = np.asarray(pil.filter(ImageFilter.GaussianBlur(0.6)), np.float32) + 0.9 * detail
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def make_set(root, name, count, quality, sizes, rng, bases):
    total = 0
    for i in range(count):
        w, h = sizes[int(rng.integers(0, len(sizes)))]
        base = bases[int(rng.integers(0, len(bases)))]
        # A region of the texture, resampled to (w, h): a zoom in or out of the same scene.
        side = base.shape[0]
        cw = int(rng.integers(min(side, w) // 2, side))
        ch = min(side, int(cw * h / w))
        x0, y0 = int(rng.integers(0, side - cw + 1)), int(rng.integers(0, side - ch + 1))
        crop = Image.fromarray(base[y0 : y0 + ch, x0 : x0 + cw]).resize((w, h), Image.BILINEAR)
        px = np.asarray(crop, np.float32) * rng.uniform(0.75, 1.25, 3) + rng.uniform(-20, 20, 3)
        if rng.random() < 0.5:
            px = px[:, ::-1]
        cls = f"class{i % CLASSES}"
        folder = os.path.join(root, name, "train", cls)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{i:06d}.jpg")
        Image.fromarray(np.clip(px, 0, 255).astype(np.uint8)).save(path, quality=quality)
        total += os.path.getsize(path)
    return total / count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--sets", default="small,imagenet,photo")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    bases = textures(rng, 4, 2048)
    summary = {}
    unknown = [n for n in a.sets.split(",") if n not in SETS]
    if unknown:
        p.error(f"unknown set {', '.join(unknown)}: the sets are {', '.join(SETS)}")
    for name in a.sets.split(","):
        count, quality, sizes = SETS[name]
        count = max(CLASSES, int(count * a.scale))
        avg = make_set(a.out, name, count, quality, sizes, rng, bases)
        summary[name] = {"images": count, "quality": quality, "avg_jpeg_bytes": round(avg)}
        print(f"{name}: {count} images, quality {quality}, {avg / 1000:.0f} KB on average", flush=True)
    with open(os.path.join(a.out, "sets.json"), "w") as f:
        json.dump({"seed": a.seed, "scale": a.scale, "sets": summary}, f, indent=2)


if __name__ == "__main__":
    main()
