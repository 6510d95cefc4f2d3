#!/usr/bin/env python3
"""A model CUDA graphs cannot capture, trained long enough to show that the fallback leaks nothing.

    uncapturable.py export FILE          writes a TorchScript model whose forward reads a device value on
                                         the host (float(x.abs().max())): every capture of its step fails.
                                         It has dropout, so the eager fallback draws CUDA random numbers
                                         right after the failed capture (a failed capture used to leave
                                         the generator in capture mode: the first dropout threw)
    uncapturable.py check RUN_DIR [OUT]  reads RUN_DIR's summary.json and metrics.jsonl: the run fell back to
                                         eager (the capture failed) and the allocator's reserved memory in its
                                         last telemetry window is within 5% (+64 MiB) of its second window's.
                                         Before the fix, a failed capture left the allocator in capture mode:
                                         every batch the loader's copy stream freed was parked for good, and
                                         reserved memory grew by a batch a step until out of memory.

scripts/gpu-check's `uncapturable` stage runs both around `hotloop train --resident off` (the loader's
record_stream'd batches) on the GPU.
"""
import json
import os
import sys


def export(path):
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(32, 10))

        def forward(self, x):
            if float(x.abs().max()) > 1e6:  # a host read: no CUDA graph can capture it
                x = x / 1e6
            return self.body(x)

    torch.jit.script(Net()).save(path)
    print("wrote", path)


def check(run_dir, out=None):
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    windows = []
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        j = json.loads(line)
        if "memory" in j:
            windows.append((j["step"], j["memory"]["reserved"], j["memory"]["allocated"]))
    graphs = summary.get("cuda_graphs", {})
    result = {"off_reason": graphs.get("off_reason"), "replays": graphs.get("replays"), "windows": windows,
              "steps": summary.get("steps")}
    ok = graphs.get("replays") == 0 and "could not be captured" in (graphs.get("off_reason") or "")
    if len(windows) >= 3:
        second, last = windows[1][1], windows[-1][1]
        result["reserved_second_window"] = second
        result["reserved_last_window"] = last
        ok = ok and last <= second * 1.05 + (64 << 20)
    else:
        ok = False
        result["error"] = "fewer than 3 telemetry windows with memory"
    result["ok"] = ok
    if out:
        json.dump(result, open(out, "w"), indent=2)
    print(("ok: " if ok else "FAILED: ") + json.dumps({k: v for k, v in result.items() if k != "windows"}))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
    else:
        print(__doc__)
        sys.exit(2)
