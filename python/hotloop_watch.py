"""Report training steps to `hotloop watch`: steps/s and loss join its telemetry and report.

No dependencies; copy this file next to your script or add hotloop's python/ folder to PYTHONPATH.

    from hotloop_watch import report_step

    for step, (x, y) in enumerate(loader):
        loss = train_step(x, y)
        report_step(step, loss=loss_value, samples=len(x))   # a float you already have

Under `hotloop watch -- python train.py`, $HOTLOOP_WATCH_STEPS names a FIFO and every call writes one
line to it (JSON, under 4 KiB, so ranks can share it). A job started without watch looks, at most every
2 s, for the FIFO of a `hotloop watch --pid` that follows it or its parent (torchrun's ranks):
/tmp/hotloop-watch-UID/PID, a link in a folder private to the user. Anywhere else the calls do nothing.
A call never blocks and never raises: when watch is gone or behind, the line is dropped.

Pass numbers you already read: float(loss) on a CUDA tensor waits for the GPU every step (read it
every N steps, as a training loop does for its own log, and report those steps with it).
"""

import json
import os
import time

ENV = "HOTLOOP_WATCH_STEPS"
LOOK_EVERY_S = 2.0  # how often a job started without watch looks for one attached to it


def rendezvous_folder():
    """Where `hotloop watch --pid` links its FIFO for this user (as watch's step_channel.cpp names it)."""
    return "/tmp/hotloop-watch-%d" % os.geteuid()


def _parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def find_attached_watch(pid=None, depth=4):
    """The FIFO of a watch following this process or one of its `depth` nearest ancestors, or None."""
    folder = rendezvous_folder()
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None  # not a private folder of ours: never write there
    pid = os.getpid() if pid is None else pid
    for _ in range(depth + 1):
        if pid <= 1:
            break
        path = os.path.join(folder, str(pid))
        if os.path.exists(path):
            return path
        pid = _parent(pid)
    return None


class StepReporter:
    """Writes `{"step": N, "time": T, "rank": R, ...}` lines to hotloop watch's FIFO."""

    def __init__(self, path=None, rank=None):
        self.path = path if path is not None else os.environ.get(ENV)
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else int(rank)
        self._fd = None
        self.dropped = 0
        # Started without watch: look for one attached by --pid now and then.
        self._looking = not self.path
        self._next_look = 0.0
        if self.path:
            self._open(self.path)

    def _open(self, path):
        try:
            # Non-blocking: opening a FIFO nobody reads fails (ENXIO) instead of waiting.
            self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            self.path = path
        except OSError:
            self._fd = None

    @property
    def active(self):
        return self._fd is not None

    def step(self, step, **values):
        """Reports step `step` with numeric values (loss=..., lr=..., samples=...)."""
        if self._fd is None:
            if not self._looking or time.monotonic() < self._next_look:
                return
            self._next_look = time.monotonic() + LOOK_EVERY_S
            path = find_attached_watch()
            if path is None:
                return
            self._open(path)
            if self._fd is None:
                return
        line = {"step": int(step), "time": time.time(), "rank": self.rank}
        for key, value in values.items():
            if value is not None:
                line[key] = float(value)
        data = (json.dumps(line) + "\n").encode()
        try:
            os.write(self._fd, data)
        except BlockingIOError:
            self.dropped += 1  # watch is behind: drop rather than slow the loop
        except OSError:
            self.close()  # watch has gone (one attached by --pid may come again)

    def close(self):
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


_default = None


def report_step(step, **values):
    """Reports one step through a reporter made on first use (see StepReporter.step)."""
    global _default
    if _default is None:
        _default = StepReporter()
    _default.step(step, **values)
