"""A plain PyTorch training loop on an image folder, fed by hotloop.Loader and watched by hotloop.Run.

usage: python examples/python/train_folder.py DIR [--device cuda] [--epochs 1] [--batch-size 64]
                                                  [--size 224] [--out runs/python-folder]

DIR holds train/<class>/*.jpg (and optionally val/<class>/*.jpg), as `hotloop train --data folder:DIR`
reads it. The model is torchvision's ResNet-18 (random weights); on a GPU the loop runs in bf16 autocast
with channels-last batches. Only hotloop's two lines differ from a torchvision loop: the loader, and the
run's begin/end around each step. At the end: the run's verdict and fix, and where its report is.
"""
import argparse
import os

import torch
import torchvision

import hotloop


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", help="an image folder: DIR/train/<class>/*.jpg")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default: 0.1 x batch size / 256, the linear scaling rule)")
    p.add_argument("--out", default="runs/python-folder")
    a = p.parse_args()

    if a.lr is None:
        a.lr = 0.1 * a.batch_size / 256
    cuda = a.device.startswith("cuda")
    loader = hotloop.Loader(f"folder:{a.data}", batch_size=a.batch_size, size=a.size, device=a.device,
                            channels_last=cuda)
    classes = len(loader.info()["classes"])
    model = torchvision.models.resnet18(num_classes=classes).to(a.device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-5)
    steps = a.epochs * len(loader)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps)

    with hotloop.Run(a.out, loader=loader, num_classes=classes, precision="bf16" if cuda else "fp32",
                     total_steps=steps, config=vars(a)) as run:
        for epoch in range(a.epochs):
            loader.set_epoch(epoch)
            for x, y in run.track(loader):  # each batch is one step; its wait is the data phase
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                run.phase("backward")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                run.phase("optimizer")
                opt.step()
                sched.step()
                run.loss(loss)  # a tensor: read a few steps later, never a sync per step
    s = run.summary
    print(f"{s['steps']} steps, {s['images_per_s']:.0f} images/s, data wait {100 * s['data_wait_fraction']:.0f}%,"
          f" training loss {s['train_loss']:.3f}")
    if run.verdict:
        print(f"verdict: {run.verdict.verdict}: {run.verdict.evidence}"
              + (f"\n   fix: {run.verdict.fix}" if run.verdict.fix else ""))
    print(f"report: {os.path.join(a.out, 'report.html')}")


if __name__ == "__main__":
    main()
