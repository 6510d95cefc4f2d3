"""What the benchmark drivers share: Fashion-MNIST in torchvision's layout, writing results, and a free
port for a launched job's master."""
import gzip
import json
import os
import platform
import shutil
import socket
import subprocess
import sys

FMNIST = "/usr/share/datasets/fashion-mnist"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def run_info():
    """The commit and machine a result was measured at."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit,
            "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
            "cpu": cpu_model()}


def cpu_model():
    """/proc/cpuinfo's model name (a VM's host can change between sessions, and ratios with it)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def image_sets(given, tmp, sets, scale=1.0):
    """The bench/make_image_sets.py folder to read: `given`, or one made in `tmp` holding `sets` at `scale`.
    Returns (folder, its sets.json); exits naming what is missing when `given` lacks one of `sets`."""
    root = given
    if not root:
        root = tmp
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_image_sets.py"), root, "--sets",
                        ",".join(sets), "--scale", str(scale)], check=True)
    with open(os.path.join(root, "sets.json")) as f:
        made = json.load(f)
    missing = [s for s in sets if s not in made["sets"]]
    if missing:
        raise SystemExit(f"{root} has no set {', '.join(missing)}: make it with bench/make_image_sets.py "
                         f"{root} --sets {','.join(sets)}, or pass --which {','.join(made['sets'])}")
    return root, made


def free_port():
    """A TCP port free on this machine now (a launched job's --master-port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
