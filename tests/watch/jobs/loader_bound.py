"""Input-bound on purpose: two DataLoader workers burn the CPU preparing each sample while the main loop's
step is trivial, so the main process mostly waits for batches. Runs for SECONDS (argv[1], default 6)."""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from hotloop_watch import report_step  # noqa: E402


class SlowDecode(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        x = 0
        for k in range(60_000):  # a slow decoder/augmentation in pure Python
            x = (x * 31 + k) % 1_000_003
        return torch.full((8,), float(x % 7)), i % 10


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
    torch.set_num_threads(1)
    # Deep prefetch: a worker never waits for the main process to hand it the next indices.
    loader = DataLoader(SlowDecode(), batch_size=4, num_workers=2, prefetch_factor=16)
    model = torch.nn.Linear(8, 10)
    start = time.time()
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        report_step(step, loss=loss.item(), samples=len(x))
        if time.time() - start > seconds:
            break
    print("done", flush=True)
