"""A job started without watch that reports steps through python/hotloop_watch.py: it keeps a core busy
and reports a step every 5 ms until 100 lines have reached a `hotloop watch --pid` that attached to it
(the helper finds that watch's FIFO by this pid), then prints what it wrote. After 30 s without a watch
it exits 1."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from hotloop_watch import StepReporter  # noqa: E402

reporter = StepReporter()
written = 0
step = 0
give_up = time.monotonic() + 30
while written < 100:
    if time.monotonic() > give_up:
        print("no watch attached within 30 s", flush=True)
        sys.exit(1)
    busy_until = time.monotonic() + 0.005
    while time.monotonic() < busy_until:
        pass
    reporter.step(step, loss=1.0 / (step + 1))
    if reporter.active:  # the line went to watch's FIFO (or was dropped, counted below)
        written += 1
    step += 1
print(f"written {written} dropped {reporter.dropped} first_step {step - written} via {reporter.path}", flush=True)
