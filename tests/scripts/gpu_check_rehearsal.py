#!/usr/bin/env python3
"""scripts/gpu-check rehearsed on the CPU (`--rehearse`): every stage runs with a few steps against this
build, so that a mistake in the script (a flag a command no longer takes, a file a stage does not write)
is found here and not in a GPU lease.

Run by ctest (scripts.gpu_check_rehearsal) as: gpu_check_rehearsal.py BUILD_DIR CTEST. Checks: exit 0;
every stage ok (none failed, timed out or skipped); at most 8 files in OUT, each under 16 MiB (what a
lease sends back); results.json carries each stage's figures; the GPM paths ran (a rehearsal's monitor
and profiled run read the fake NVML's busy H200); the tarball holds every stage's log and the trace.
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

BUILD, CTEST = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAGES = ["build", "gpu-tests", "uncapturable", "sdpa", "doctor", "watch", "python", "gpm-mfu-profile", "telemetry-overhead",
          "vs-pytorch", "lm-vs-pytorch", "llama", "exported", "training", "nccl", "tune-batch", "smoke", "bench",
          "bench-data", "gpu-decode"]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as out:
    env = dict(os.environ, HOTLOOP_BUILD_DIR=BUILD, HOTLOOP_PYTHON=sys.executable, HOTLOOP_CTEST=CTEST)
    r = subprocess.run([os.path.join(ROOT, "scripts", "gpu-check"), "--rehearse", out], env=env,
                       capture_output=True, text=True, timeout=900)
    print(r.stdout[-6000:])
    check(r.returncode == 0, f"exit 0 ({r.returncode}; {r.stderr[-500:]})")
    files = sorted(os.listdir(out))
    check(0 < len(files) <= 8 and all(os.path.getsize(os.path.join(out, f)) < 16 << 20 for f in files),
          f"at most 8 files under 16 MiB come back ({files})")
    res = json.load(open(os.path.join(out, "results.json")))
    got = {s["stage"]: s["status"] for s in res["stages"]}
    check(list(got) == STAGES, f"every stage ran, in order ({list(got)})")
    check(all(v == "ok" for v in got.values()), f"every stage ok ({got})")
    check(res["rehearsal"] is True, "results.json says it is a rehearsal")
    check(isinstance(res.get("sdpa"), dict) and "choices" in res["sdpa"], "results.json holds the sdpa stage's choices")
    check("predict: " in r.stdout and "(llama-nano on cpu, fp32: the CPU)" in r.stdout,
          "the llama stage predicts from the defaults run and says its precision")
    check(set(res["watch"]) == {"input-bound", "fixed"} and all(w["verdict"] for w in res["watch"].values()),
          f"both watch runs have a verdict ({ {k: w['verdict'] for k, w in res['watch'].items()} })")
    py = res.get("python") or {}
    check((py.get("steps") or 0) > 0 and (py.get("telemetry") or {}).get("enabled") is True,
          f"the Python loop ran inside hotloop.Run ({res.get('python')})")
    check(all(res["train"].get(f"nccl-shard{s}", {}).get("shard") == s for s in (1, 2, 3)),
          "the nccl stage ran ZeRO stages 1 to 3 and their summaries say so")
    check("resnet18-small-profiled" in res["train"] and res["train"]["resnet18-small-profiled"]["profile"],
          "the profiled run's summary names its trace")
    for key in ("telemetry_overhead", "vs_pytorch", "lm_vs_pytorch", "tune_batch", "smoke", "bench_data",
                "gpu_tests", "monitor", "gpu_decode"):
        check(res.get(key) is not None, f"results.json has {key}")
    gd = res.get("gpu_decode") or {}
    check(any(k.endswith("-gpu") and (r.get("gpu_decoded") or 0) > 0 for k, r in gd.items()),
          f"the gpu-decode stage's runs decoded through the GPU path (the stand-in) ({ {k: r.get('gpu_decoded') for k, r in gd.items()} })")
    gpus = (res.get("monitor") or {}).get("gpus") or [{}]
    check((gpus[0].get("gpm") or {}).get("sm_active_percent") == 93.0,
          "monitor's sample has the fake H200's GPM counters (sm_active 93%)")
    summary = open(os.path.join(out, "summary.txt")).read()
    check("gpm (highest sample): {'sm_active_percent'" in summary,
          "the profiled run's telemetry has GPM samples, and the stage read them")
    with tarfile.open(os.path.join(out, "gpu-check.tar.gz")) as t:
        names = set(t.getnames())
    missing = [s for s in STAGES if f"./logs/{s}.log" not in names]
    check(not missing, f"the tarball holds every stage's log (missing {missing})")
    check(any(n.startswith("./gpm-mfu-profile/") and n.endswith(".pt.trace.json") for n in names),
          "the tarball holds the profiler trace")
    check(any(n.startswith("./watch/") and n.endswith(".html") for n in names), "the tarball holds watch's reports")

print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
