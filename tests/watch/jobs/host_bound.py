"""Host-bound on purpose: one process, its Python thread busy all the time (as a loop of tiny kernels and
.item() calls keeps it), no helper processes. Runs for SECONDS (argv[1], default 6)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from hotloop_watch import report_step  # noqa: E402

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
start = time.time()
step = 0
while time.time() - start < seconds:
    x = 0
    for k in range(20_000):
        x = (x * 31 + k) % 1_000_003
    report_step(step, loss=1.0 / (1 + step))
    step += 1
print("done", flush=True)
