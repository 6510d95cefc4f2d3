#!/usr/bin/env python3
"""`hotloop watch` on real jobs: real child processes (PyTorch scripts, DataLoader workers, forks), the fake
NVML where a GPU is needed (tests/watch/scenarios; "child" there is watch's job), real signals.

Run by ctest (watch.jobs) as: watch_jobs.py HOTLOOP_BINARY FAKE_NVML_LIBRARY. Cases:
  - a PyTorch loop on the CPU next to a free GPU: cpu-only, its 400 reported steps and loss, telemetry.jsonl,
    TensorBoard events, report.html with the timelines' series, summary.json;
  - DataLoader workers burning the CPU while the job's kernels run 12% of the time: input-bound;
  - one busy Python process at the same GPU share: host-bound;
  - another pid on the job's GPU: other-process, with its SM share;
  - a job exiting 3: watch exits 3 and writes the report;
  - a job that forks workers after watch started: they join the tree;
  - --pid: attach to a running process, end with it, and receive the steps its helper reports (found by
    its pid);
  - SIGTERM to watch: passed on; a job ignoring it is killed after --grace (exit 137), the report is
    written; Prometheus text is served meanwhile (--metrics-port, a port free at the time);
  - step lines by hand (`echo step=1 loss=0.5 > $HOTLOOP_WATCH_STEPS`), a line that is not a step;
  - bad input: a missing command, --pid of no process, of a process not ours, both or neither: exit 2,
    nothing created.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HOTLOOP = sys.argv[1]
FAKE = sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "jobs")
SCENARIOS = os.path.join(HERE, "scenarios")
PY = sys.executable
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def env_for(scenario):
    env = dict(os.environ)
    if scenario is None:
        env["HOTLOOP_NVML_LIB"] = "/nonexistent/libnvidia-ml.so.1"
    else:
        env["HOTLOOP_NVML_LIB"] = FAKE
        env["FAKE_NVML_SCENARIO"] = os.path.join(SCENARIOS, scenario + ".json")
    return env


def watch(tmp, name, job, scenario=None, extra=(), timeout=120):
    out = os.path.join(tmp, name)
    r = subprocess.run([HOTLOOP, "watch", "--out", out, *extra, "--", *job], capture_output=True, text=True,
                       env=env_for(scenario), timeout=timeout)
    summary = None
    if os.path.exists(os.path.join(out, "summary.json")):
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
    return r, out, summary


def samples(out):
    with open(os.path.join(out, "telemetry.jsonl")) as f:
        return [json.loads(line)["sample"] for line in f if '"sample"' in line[:12]]


def demand(p):
    """How much of a core a process wanted: its CPU use, or its main thread's runnable time (on a core or
    waiting for one) when higher, so a busy process still counts on a machine other tests crowd."""
    return max(p["cpu_percent"], p.get("main_runnable_percent") or 0)


def series_points(html, name):
    """The points of the polyline drawn just before the legend entry `name`."""
    m = re.search(r'points="([^"]*)"/><rect[^>]*/><text[^>]*>' + re.escape(name) + "<", html)
    return m.group(1).split() if m else []


def main():
    tmp = tempfile.mkdtemp(prefix="hotloop-watch-")
    try:
        # CPU-only, next to a free GPU: the classic "it runs on the CPU".
        r, out, s = watch(tmp, "cpu", [PY, os.path.join(JOBS, "cpu_train.py"), "400"], "gpu_free")
        check(r.returncode == 0 and s is not None, f"cpu job: exit 0 and a summary ({r.returncode}: {r.stderr[-400:]})")
        if s:
            check(s["verdict"] == "cpu-only", f"cpu job: verdict cpu-only ({s['verdict']})")
            check("holds memory on none of the 1 GPU" in s["diagnosis"]["findings"][0]["evidence"],
                  "cpu job: the evidence says the GPU is there and unused")
            check(s["steps"] and s["steps"]["reported"] == 400 and s["steps"]["last_step"] == 399,
                  f"cpu job: 400 steps reported through the helper ({s['steps']})")
            check(s["steps"] and isinstance(s["steps"]["last_loss"], float), "cpu job: the loss reported")
            check(s["overhead"]["watch_cpu_s"] > 0 and s["overhead"]["wall_s"] > 0, "cpu job: watch's own cost")
            rows = samples(out)
            check(len(rows) >= 2 and all(x["job"]["processes"] >= 1 for x in rows),
                  f"cpu job: telemetry.jsonl has a sample per second with the job's processes ({len(rows)})")
            check(any(x["steps"]["steps_per_s"] > 0 for x in rows), "cpu job: steps/s in the samples")
            tb = os.listdir(os.path.join(out, "tensorboard"))
            check(any(f.startswith("events.out.tfevents") for f in tb), "cpu job: TensorBoard event file")
            try:
                from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
            except ImportError:
                print("skip  TensorBoard readback: tensorboard is not installed")
            else:
                acc = EventAccumulator(os.path.join(out, "tensorboard"), size_guidance={"scalars": 0})
                acc.Reload()
                tags = acc.Tags()["scalars"]
                check("watch/job/cpu_percent" in tags and "watch/steps/loss" in tags
                      and len(acc.Scalars("watch/job/cpu_percent")) == len(rows),
                      f"cpu job: TensorBoard's reader gets a CPU point per sample and the loss ({sorted(tags)[:6]})")
            with open(os.path.join(out, "report.html")) as f:
                html = f.read()
            check(html.count("<svg") >= 3, "cpu job: report.html has the timelines")
            main_name = [p for p in rows[-1]["processes"] if p["pid"] == s["pid"]][0]["name"]
            check(len(series_points(html, f"{main_name} {s['pid']} (main)")) >= 2,
                  "cpu job: the CPU-per-process timeline has the main process's series")
            check(len(series_points(html, "steps/s")) >= 2, "cpu job: the steps/s timeline has points")

        # Input-bound: saturated loader workers, the job's kernels at 12%.
        # Windows of 3 s: the run's verdict is the one that held longest, past the workers' start-up.
        r, out, s = watch(tmp, "input", [PY, os.path.join(JOBS, "loader_bound.py"), "9"], "job_low_sm",
                          ["--window", "3"])
        check(r.returncode == 0 and s is not None, f"loader job: exit 0 ({r.stderr[-400:]})")
        if s:
            f = s["diagnosis"]["findings"][0]
            check(s["verdict"] == "input-bound", f"loader job: input-bound ({s['verdict']}: {f['evidence']})")
            check("pt_data_worker" in f["evidence"] and "12%" in f["evidence"],
                  "loader job: the evidence names the workers and the job's SM share")
            check(s["processes"]["seen"] >= 3, f"loader job: the workers are in the tree ({s['processes']})")
            rows = samples(out)
            check(all(x["gpus"] and x["gpus"][0]["job_sm_percent"] == 12 for x in rows),
                  "loader job: the job's SM share from NVML's per-process utilization")
            check(all(x["gpus"][0]["job_memory_bytes"] == 2147483648 for x in rows), "loader job: its GPU memory")
            with open(os.path.join(out, "report.html")) as fh:
                html = fh.read()
            check(len(series_points(html, "the job's share")) >= 2, "loader job: the job-share timeline")

        # Host-bound: one saturated Python thread, no helpers.
        r, out, s = watch(tmp, "host", [PY, os.path.join(JOBS, "host_bound.py"), "6"], "job_low_sm",
                          ["--window", "3"])
        if s:
            f = s["diagnosis"]["findings"][0]
            check(s["verdict"] == "host-bound", f"busy main process: host-bound ({s['verdict']}: {f['evidence']})")
        else:
            check(False, f"busy main process: a summary ({r.stderr[-400:]})")

        # Another process on the job's GPU.
        r, out, s = watch(tmp, "other", [PY, "-c", "import time; time.sleep(3.5)"], "other_process")
        if s:
            f = s["diagnosis"]["findings"][0]
            check(s["verdict"] == "other-process", f"another pid on the GPU: other-process ({s['verdict']})")
            check("someone_elses_job (pid 4194000" in f["evidence"] and "9%" in f["evidence"],
                  f"another pid on the GPU: named, with its SM share ({f['evidence']})")
        else:
            check(False, f"another pid on the GPU: a summary ({r.stderr[-400:]})")

        # A failing job: watch exits with its code and still reports.
        code = "import sys, time\nend = time.time() + 1.2\nwhile time.time() < end: pass\nsys.exit(3)"
        r, out, s = watch(tmp, "fails", [PY, "-c", code], None, ["--interval", "0.25"])
        check(r.returncode == 3, f"failing job: watch exits 3 ({r.returncode})")
        check(s is not None and s["exit_code"] == 3 and os.path.exists(os.path.join(out, "report.html")),
              "failing job: summary (exit_code 3) and report written")

        # Workers forked after watch started.
        r, out, s = watch(tmp, "forks", [PY, os.path.join(JOBS, "forks_late.py"), "1.5"], "gpu_free")
        workers = [int(p) for p in re.findall(r"workers: (\d+) (\d+)", r.stdout)[0]] if "workers:" in r.stdout else []
        rows = samples(out) if s else []
        seen = {p["pid"]: max(demand(x) for y in rows for x in y["processes"] if x["pid"] == p["pid"])
                for y in rows for p in y["processes"]}
        check(len(workers) == 2 and all(w in seen for w in workers),
              f"late workers: both are in the tree ({workers}, seen {sorted(seen)})")
        check(all(seen.get(w, 0) > 50 for w in workers), f"late workers: their CPU use is measured ({seen})")

        # Attach to a running process by pid; the job's helper finds watch's FIFO by its pid.
        busy = subprocess.Popen([PY, os.path.join(JOBS, "attached_reporter.py")], stdout=subprocess.PIPE, text=True)
        out = os.path.join(tmp, "attach")
        r = subprocess.run([HOTLOOP, "watch", "--pid", str(busy.pid), "--out", out, "--interval", "0.5"],
                           capture_output=True, text=True, env=env_for("gpu_free"), timeout=60)
        job_out = busy.communicate(timeout=60)[0]
        check(r.returncode == 0 and busy.returncode == 0,
              f"--pid: exits 0 when the process ends ({r.returncode}, job {busy.returncode}: {r.stderr[-300:]})")
        link = f"/tmp/hotloop-watch-{os.geteuid()}/{busy.pid}"
        check(link in r.stderr and f"via {link}" in job_out,
              f"--pid: the job's helper found watch's FIFO at {link} ({job_out.strip()})")
        check(not os.path.lexists(link), "--pid: the link is removed when watch ends")
        mode = os.stat(os.path.dirname(link)).st_mode & 0o777
        check(mode == 0o700, f"--pid: the links' folder is private to the user ({oct(mode)})")
        if os.path.exists(os.path.join(out, "summary.json")):
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            check(not s["started_by_watch"] and s["exit_code"] is None and s["samples"] >= 2,
                  f"--pid: attached, no exit code, samples taken ({s['samples']})")
            rows = samples(out)
            check(max(demand(p) for x in rows for p in x["processes"]) > 50, "--pid: the busy process's CPU use")
            m = re.search(r"written (\d+) dropped (\d+)", job_out)
            check(m is not None and s["steps"] is not None
                  and s["steps"]["reported"] == int(m.group(1)) - int(m.group(2)) >= 90
                  and isinstance(s["steps"]["last_loss"], float),
                  f"--pid: every step the job wrote after watch attached is counted ({s['steps']}; {job_out.strip()})")
        else:
            check(False, "--pid: a summary")

        # SIGTERM to watch: passed on; the job ignores it and is killed after --grace; Prometheus meanwhile.
        out = os.path.join(tmp, "term")
        with socket.socket() as probe:  # a port free now, not a fixed one
            probe.bind(("127.0.0.1", 0))
            free_port = probe.getsockname()[1]
        p = subprocess.Popen([HOTLOOP, "watch", "--out", out, "--grace", "1", "--metrics-port", str(free_port), "--",
                              PY, os.path.join(JOBS, "ignores_term.py")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env_for("job_low_sm"))
        port = None
        ready = False
        for line in p.stdout:
            m = re.search(r"127\.0\.0\.1:(\d+)/metrics", line)
            port = int(m.group(1)) if m else port
            ready = ready or line.strip() == "ready"
            if port and ready:
                break
        metrics = ""
        deadline = time.time() + 15
        while port and "hotloop_watch_job_processes" not in metrics and time.time() < deadline:
            try:
                metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                pass
            if "hotloop_watch_job_processes" not in metrics:
                time.sleep(0.1)  # until the first sample is published (bounded by the deadline)
        check('hotloop_watch_job_sm_percent{gpu="0"} 12' in metrics, "Prometheus: the job's SM share served")
        p.send_signal(signal.SIGTERM)
        rest = p.stdout.read()
        rc = p.wait(timeout=60)
        check(rc == 128 + signal.SIGKILL, f"job ignoring SIGTERM: killed after the grace period, exit 137 ({rc})")
        check("got SIGTERM" in rest, "job ignoring SIGTERM: the signal reached the job (it said so)")
        check("SIGKILL" in rest, "job ignoring SIGTERM: watch says it sent SIGKILL")
        if os.path.exists(os.path.join(out, "summary.json")):
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            check(any("passed on" in n for n in s["notes"]) and any("SIGKILL" in n for n in s["notes"]),
                  f"job ignoring SIGTERM: the summary notes the signal and the kill ({s['notes']})")
            check(s["ended"] == "killed after the grace period", f"job ignoring SIGTERM: how it ended ({s['ended']})")
        else:
            check(False, "job ignoring SIGTERM: the report is still written")

        # Step lines written by hand, and one that is not a step; the job exits right after its last line,
        # which watch must still read (it drains the FIFO after the job has ended).
        sh = ('echo "step=1 loss=0.5" > "$HOTLOOP_WATCH_STEPS"; echo "not a step" > "$HOTLOOP_WATCH_STEPS"; '
              'echo \'{"step": 2, "loss": 0.25}\' > "$HOTLOOP_WATCH_STEPS"')
        r, out, s = watch(tmp, "lines", ["sh", "-c", sh], None, ["--interval", "0.2"])
        check(s is not None and s["steps"] and s["steps"]["reported"] == 2 and s["steps"]["last_loss"] == 0.25
              and s["steps"]["lines_not_understood"] == 1,
              f"step lines: key=value and JSON read, the bad one counted ({s and s['steps']})")

        # Bad input: nothing starts, nothing is written, exit 2.
        out = os.path.join(tmp, "missing")
        r = subprocess.run([HOTLOOP, "watch", "--out", out, "--", "no-such-trainer-xyz", "--lr", "1"],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "no such command" in r.stderr and not os.path.exists(out),
              f"missing command: exit 2, said, nothing created ({r.returncode}: {r.stderr.strip()})")
        not_executable = os.path.join(tmp, "train.py")
        with open(not_executable, "w") as f:
            f.write("print('hi')\n")
        r = subprocess.run([HOTLOOP, "watch", "--out", out, "--", not_executable], capture_output=True, text=True)
        check(r.returncode == 2 and f"cannot run '{not_executable}': not an executable file" in r.stderr
              and "chmod +x" in r.stderr and not os.path.exists(out),
              f"a command that is not executable: exit 2, named, the fix ({r.returncode}: {r.stderr.strip()})")
        for flags, says in ((["--interval", "0"], "--interval 0: must be positive"),
                            (["--interval", "2", "--window", "1"], "--window 1 is shorter than --interval 2"),
                            (["--grace", "-1"], "--grace -1: must be at least 0")):
            r = subprocess.run([HOTLOOP, "watch", "--out", out, *flags, "--", "true"], capture_output=True, text=True)
            check(r.returncode == 2 and says in r.stderr and "hint: the defaults" in r.stderr
                  and not os.path.exists(out),
                  f"watch {' '.join(flags)}: exit 2, the value named, the defaults ({r.returncode}: {r.stderr.strip()})")
        pid_max = int(open("/proc/sys/kernel/pid_max").read())
        free = next(p for p in range(pid_max - 1, 1, -1) if not os.path.exists(f"/proc/{p}"))
        r = subprocess.run([HOTLOOP, "watch", "--pid", str(free), "--out", out], capture_output=True, text=True)
        check(r.returncode == 2 and "no such process" in r.stderr and not os.path.exists(out),
              f"--pid of no process: exit 2 ({r.returncode}: {r.stderr.strip()})")
        cmd = [HOTLOOP, "watch", "--pid", "1", "--out", out]
        if os.geteuid() == 0 and shutil.which("setpriv"):
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True)
        if os.geteuid() == 0 and r.returncode in (126, 127):
            print(f"skip  --pid of another user's process: nobody cannot run {HOTLOOP} ({r.stderr.strip()})")
        else:
            check(r.returncode == 2 and "another user" in r.stderr and not os.path.exists(out),
                  f"--pid of another user's process: exit 2, said ({r.returncode}: {r.stderr.strip()})")
        r = subprocess.run([HOTLOOP, "watch", "python3", "-c", "print(1)"], capture_output=True, text=True)
        check(r.returncode == 2 and "put -- before the job's command" in r.stderr,
              f"the job's flags without --: exit 2 with the hint ({r.stderr.strip()})")
        # The job's own --config is the job's, not a hotloop config file to expand.
        r, out, s = watch(tmp, "config", ["sh", "-c", 'echo "$1 $2"', "sh", "--config", "job.yaml"], None,
                          ["--interval", "0.2"])
        check(r.returncode == 0 and "--config job.yaml" in r.stdout,
              f"a job's --config after -- is passed on untouched ({r.returncode}: {r.stderr[-200:]})")
        r = subprocess.run([HOTLOOP, "watch", "--pid", "1", "--", "true"], capture_output=True, text=True)
        check(r.returncode == 2 and "one of them" in r.stderr, "both --pid and a command: exit 2")
        r = subprocess.run([HOTLOOP, "watch"], capture_output=True, text=True)
        check(r.returncode == 2, "neither --pid nor a command: exit 2")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"\n{len(failures)} check(s) failed")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
