"""A small PyTorch training loop on the CPU that reports its steps (hotloop watch's CPU-only case)."""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from hotloop_watch import report_step  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(512, 256)
y = torch.randint(0, 10, (512,))
for step in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    report_step(step, loss=loss.item(), samples=len(x))
print(f"done: loss {loss.item():.4f}", flush=True)
