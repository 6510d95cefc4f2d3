"""bench/lm_vs_pytorch.py rehearsed on the CPU with a few steps: every loop runs on the same data from the
same weights (the first step's loss agrees between hotloop and the PyTorch loop, fp32), the JSON holds each
loop's tokens/s and the per-round ratios with their range, and the equal-wall-time comparison runs.

usage: lm_vs_pytorch_rehearsal.py HOTLOOP
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "lm_vs_pytorch.py")


def main():
    out = os.path.join(tempfile.mkdtemp(), "lm.json")
    subprocess.run([sys.executable, SCRIPT, "--hotloop", os.path.abspath(sys.argv[1]), "--rounds", "2",
                    "--steps", "2", "--warmup", "1", "--batch", "8", "--threads", "1", "--no-compile",
                    "--equal-time-steps", "3", "--out", out],
                   check=True, cwd=os.path.dirname(SCRIPT), stdout=subprocess.DEVNULL)
    r = json.load(open(out))
    assert r["equal_work"] is True, r["first_step_loss"]
    assert set(r["tokens_per_s"]) == {"hotloop", "eager"}, r["tokens_per_s"].keys()
    for name, row in r["tokens_per_s"].items():
        assert len(row["per_round"]) == 2 and all(v > 0 for v in row["per_round"]), (name, row)
    ratio = r["ratios"]["hotloop/eager"]
    assert ratio["min"] <= ratio["median"] <= ratio["max"] and len(ratio["per_round"]) == 2, ratio
    e = r["equal_wall_time"]
    assert e["hotloop_steps"] == 3 and e["eager_steps"] >= 1, e
    assert 0 < e["hotloop_val_loss"] < 10 and 0 < e["eager_val_loss"] < 10, e
    print("lm_vs_pytorch rehearsal: ok", json.dumps(r["ratios"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
