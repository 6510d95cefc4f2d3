"""bench/vs_pytorch.py rehearsed on the CPU with a few steps: every loop runs, the JSON holds each
row's images/s and TFLOP/s and hotloop's ratios, and hotloop says why it did not capture a graph there.
(On the GPU the same script is the benchmark; scripts/gpu-check runs it.)

usage: vs_pytorch_rehearsal.py HOTLOOP    exit 77 (skipped) without torchvision or Fashion-MNIST.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "vs_pytorch.py")


def main():
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("skipped: torchvision is not installed")
        return 77
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("skipped: no Fashion-MNIST")
        return 77
    out = os.path.join(tempfile.mkdtemp(), "vs.json")
    subprocess.run([sys.executable, SCRIPT, "--hotloop", os.path.abspath(sys.argv[1]), "--device", "cpu", "--steps", "2",
                    "--warmup", "1", "--workloads", "cnn-small", "--no-compile", "--out", out],
                   check=True, cwd=os.path.dirname(SCRIPT), stdout=subprocess.DEVNULL)
    w = json.load(open(out))["workloads"]["cnn-small"]
    assert set(w["rows"]) == {"p0", "p1", "hotloop"}, w["rows"].keys()
    for name, row in w["rows"].items():
        assert row["images_per_s"] > 0 and row["tflops"] > 0, (name, row)
    assert set(w["ratios"]) == {"vs_p0", "vs_p1"}, w["ratios"]
    assert w["train_flops_per_image"] > 1e6, w["train_flops_per_image"]
    graphs = w["rows"]["hotloop"]["cuda_graphs"]
    assert graphs["replays"] == 0 and "CPU" in graphs["off_reason"], graphs
    assert w["targets"] == {}, "no target applies on the CPU"
    print("vs_pytorch rehearsal: ok", json.dumps(w["ratios"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
