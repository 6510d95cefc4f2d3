"""What the benchmark drivers share: Fashion-MNIST in torchvision's layout, and writing results."""
import gzip
import json
import os
import shutil

FMNIST = "/usr/share/datasets/fashion-mnist"


def torchvision_fashion_mnist(root, source=FMNIST):
    """Unpacks Debian's Fashion-MNIST (the .gz files in source) into root/FashionMNIST/raw, where
    torchvision's FashionMNIST(root, download=False) reads it. Returns root."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for f in os.listdir(source):
        if not f.endswith(".gz"):
            continue
        with gzip.open(os.path.join(source, f)) as src, open(os.path.join(raw, f[:-3]), "wb") as dst:
            shutil.copyfileobj(src, dst)
    return root


def report(results, out):
    """Prints the results as JSON and, when out is set, writes them there."""
    print(json.dumps(results, indent=2))
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
