"""Issue 55's accuracy check: the five-class product photos trained from `pack --max-side 512` shards
against training from the original photos, same seeds, same command otherwise.

usage: .venv/bin/python bench/packed_accuracy.py [--photos DIR] [--epochs 3] [--seeds 0,1,2] [--out JSON]
       [-- extra hotloop train flags]

Makes the photos with bench/make_product_photos.py where DIR does not hold them (600 train and 100 val
images per class), packs them with `hotloop pack --max-side 512`, then for each seed trains
`hotloop train --data folder:DIR` and `--data wds:SHARDS` with the defaults (cnn-small, 224 px, the
recipe's optimizer and schedule) for --epochs, alternating, and reports each run's validation accuracy
and the packed-minus-original difference per seed (the same seed gives both runs the same order, crops
and initial weights). Writes bench/results/packed-accuracy-DATE-cpuN.json.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

from bench_common import ROOT, run_info

HOTLOOP = os.path.join(ROOT, "build", "hotloop")


def train(data, seed, epochs, out, extra):
    cmd = [HOTLOOP, "train", "--data", data, "--epochs", str(epochs), "--seed", str(seed), "--out", out,
           "--log-every", "0", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "summary.json")))
    return {"val_accuracy": s["val_accuracy"], "val_loss": s.get("val_loss"), "wall_s": s.get("wall_s"),
            "images_per_s": s.get("images_per_s")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default="/tmp/hotloop-products")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--out")
    p.add_argument("extra", nargs="*", help="more hotloop train flags, after --")
    a = p.parse_args()
    if not os.path.isdir(os.path.join(a.photos, "val")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_product_photos.py"), a.photos],
                       check=True)
    shards = a.photos.rstrip("/") + "-packed512"
    if not os.path.exists(os.path.join(shards, "index.json")):
        subprocess.run([HOTLOOP, "pack", "--from", f"folder:{a.photos}", "--to", shards, "--max-side", "512"],
                       check=True)
    runs = []
    for seed in (int(s) for s in a.seeds.split(",")):
        row = {"seed": seed}
        for name, data in (("original", f"folder:{a.photos}"), ("packed", f"wds:{shards}")):
            row[name] = train(data, seed, a.epochs, os.path.join(shards + "-runs", f"{name}-{seed}"), a.extra)
        row["difference_points"] = 100 * (row["packed"]["val_accuracy"] - row["original"]["val_accuracy"])
        print(f"seed {seed}: original {100 * row['original']['val_accuracy']:.1f}%, packed "
              f"{100 * row['packed']['val_accuracy']:.1f}%, difference {row['difference_points']:+.1f} points",
              flush=True)
        runs.append(row)
    diffs = sorted(r["difference_points"] for r in runs)
    result = {"run": run_info(), "epochs": a.epochs, "extra_flags": a.extra, "photos": a.photos,
              "runs": runs, "median_difference_points": diffs[len(diffs) // 2],
              "range_points": [diffs[0], diffs[-1]]}
    out = a.out or os.path.join(ROOT, "bench", "results",
                                f"packed-accuracy-{datetime.date.today()}-cpu{os.cpu_count()}.json")
    json.dump(result, open(out, "w"), indent=2)
    print(f"median difference {result['median_difference_points']:+.1f} points "
          f"(range {diffs[0]:+.1f} to {diffs[-1]:+.1f}); {out}")


if __name__ == "__main__":
    main()
