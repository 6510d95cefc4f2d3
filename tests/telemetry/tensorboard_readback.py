"""TensorBoard reads back the event files hotloop writes.

usage: tensorboard_readback.py HOTLOOP_BINARY
Trains 12 steps on synthetic data, then loads the run directory with TensorBoard's own
EventAccumulator: every step's loss must be there with the value metrics.jsonl holds (to float32
precision), and the phase and host scalars too.
Exits 77 (ctest: skipped) where the tensorboard package is not installed.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:  # the GPU machine's Python has no tensorboard
    print(f"skipped: {e}")
    sys.exit(77)

HOTLOOP = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run")
    subprocess.run(
        [HOTLOOP, "train", "--model", "mlp", "--data", "synthetic:512x1x8x8", "--steps", "12",
         "--batch", "32", "--no-eval", "--threads", "1", "--workers", "1", "--telemetry-interval",
         "0.05", "--out", run, "--log-every", "0"],
        check=True, stdout=subprocess.DEVNULL)
    losses = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j:
                losses[j["step"]] = j["loss"]

    acc = EventAccumulator(run, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in ("train/loss", "train/lr", "train/images_per_s", "train/step_time_ms",
                "phases/forward_ms", "phases/backward_ms", "phases/data_wait_ms"):
        assert tag in tags, f"{tag} missing from {tags}"
    events = acc.Scalars("train/loss")
    assert [e.step for e in events] == list(range(1, 13)), [e.step for e in events]
    for e in events:
        want = losses[e.step]
        assert abs(e.value - want) <= 1e-6 * max(1.0, abs(want)), (e.step, e.value, want)
    assert any(t.startswith("host/") for t in tags), tags
    print(f"tensorboard read {len(tags)} scalar tags and {len(events)} loss events back")
