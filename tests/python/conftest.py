"""Shared fixtures of the Python package's tests (run by ctest: tests/CMakeLists.txt, python.*)."""

import io
import os
import pathlib
import tarfile

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def hotloop_bin():
    path = pathlib.Path(os.environ.get("HOTLOOP_BIN", ROOT / "build" / "hotloop"))
    if not path.exists():
        pytest.skip(f"no hotloop binary at {path} (set HOTLOOP_BIN)")
    return str(path)


def textured(rng, h, w):
    """An image with edges and texture (JPEG's worst case is not flat color)."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3) % 256], axis=-1)
    noise = rng.integers(0, 40, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def jpeg_bytes(array, quality=90):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(array).save(out, format="JPEG", quality=quality)
    return out.getvalue()


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    """folder:DIR with train/ and val/: 3 classes x 16 JPEGs of assorted sizes."""
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    for split, n in (("train", 16), ("val", 4)):
        for c in ("cat", "dog", "fox"):
            d = root / split / c
            d.mkdir(parents=True)
            for i in range(n):
                h, w = int(rng.integers(60, 140)), int(rng.integers(60, 140))
                (d / f"{i:03d}.jpg").write_bytes(jpeg_bytes(textured(rng, h, w)))
    return root


@pytest.fixture()
def folder_with_bad_file(tmp_path):
    """A train split of 2 classes x 8 JPEGs, one of them corrupt (cat/003.jpg)."""
    rng = np.random.default_rng(1)
    for c in ("cat", "dog"):
        d = tmp_path / "train" / c
        d.mkdir(parents=True)
        for i in range(8):
            (d / f"{i:03d}.jpg").write_bytes(jpeg_bytes(textured(rng, 64, 80)))
    bad = tmp_path / "train" / "cat" / "003.jpg"
    data = bytearray(bad.read_bytes())
    data[len(data) // 2:len(data) // 2 + 400] = b"\x00" * 400  # inside the entropy-coded data
    data = data[: len(data) * 3 // 4]  # and cut short
    bad.write_bytes(bytes(data))
    return tmp_path, bad


@pytest.fixture(scope="session")
def wds_shards(tmp_path_factory):
    """wds:DIR with two train shards of 12 JPEG samples (cls labels)."""
    root = tmp_path_factory.mktemp("wds")
    rng = np.random.default_rng(2)
    for shard in range(2):
        with tarfile.open(root / f"train-{shard:06d}.tar", "w") as tar:
            for i in range(12):
                key = f"s{shard}_{i:04d}"
                for ext, payload in (("jpg", jpeg_bytes(textured(rng, 72, 72))), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    return root


def have_fashion_mnist():
    return (FASHION / "train-images-idx3-ubyte.gz").exists() or (FASHION / "train-images-idx3-ubyte").exists()
