#!/usr/bin/env python3
"""Parity of hotloop's models and weight files with PyTorch/torchvision.

Run by ctest (model.parity) as: parity.py HOTLOOP_BINARY. For resnet18, resnet50 and resnet18-small it
builds the torchvision model with random weights and non-trivial BatchNorm statistics, saves the state
dict (torch.save zip, or safetensors) and a random input, runs `hotloop predict`, and requires the logits
to match PyTorch's within 1e-4 relative L2 (fp32 on the CPU: the same math in a different order of
summation gives ~1e-6). Then it round-trips weight files through `hotloop weights convert` both ways and
checks that hotloop refuses a pickle that refers to a class. Exits 77 (skipped) without torchvision or
safetensors.
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torchvision
    from safetensors.torch import load_file, save_file
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

HOTLOOP = sys.argv[1]
TOLERANCE = 1e-4
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, expect=0):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True)
    if r.returncode != expect:
        print(r.stdout, r.stderr)
    return r


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                m.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=g)))
    return model.eval()


def build(name, num_classes):
    torch.manual_seed(0)
    small = name.endswith("-small")
    model = getattr(torchvision.models, name.removesuffix("-small"))(num_classes=num_classes)
    if small:  # the -small stem: one 3x3 stride-1 convolution, no max-pool
        model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = torch.nn.Identity()
    return randomize(model, seed=1)


def rel_l2(a, b):
    return float((a - b).norm() / b.norm())


with tempfile.TemporaryDirectory() as tmp:
    cases = [("resnet18", 1000, 64, "pt"), ("resnet50", 7, 64, "safetensors"), ("resnet18-small", 10, 32, "pt")]
    for name, classes, size, fmt in cases:
        model = build(name, classes)
        weights = os.path.join(tmp, f"{name}.{fmt}")
        if fmt == "pt":
            torch.save(model.state_dict(), weights)
        else:
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, weights)
        x = torch.randn(4, 3, size, size, generator=torch.Generator().manual_seed(2))
        save_file({"x": x}, os.path.join(tmp, "x.safetensors"))
        with torch.no_grad():
            want = model(x)
        out = os.path.join(tmp, f"{name}-logits.safetensors")
        r = hotloop("predict", "--model", name, "--weights", weights, "--input", os.path.join(tmp, "x.safetensors"),
                    "--output", out)
        if r.returncode == 0:
            got = load_file(out)["logits"]
            err = rel_l2(got, want)
            check(got.shape == want.shape and err < TOLERANCE,
                  f"{name} ({fmt}): logits {tuple(got.shape)} within {TOLERANCE} relative L2 of torchvision ({err:.2e})")
        else:
            check(False, f"{name}: hotloop predict exited {r.returncode}")

    # Round trips: torch file -> safetensors -> torch file, each read by the Python libraries.
    original = build("resnet18", 1000).state_dict()
    pt = os.path.join(tmp, "r18.pt")
    torch.save(original, pt)
    st = os.path.join(tmp, "r18.safetensors")
    pt2 = os.path.join(tmp, "r18-again.pt")
    check(hotloop("weights", "convert", pt, st).returncode == 0, "weights convert .pt -> .safetensors")
    check(hotloop("weights", "convert", st, pt2).returncode == 0, "weights convert .safetensors -> .pt")
    via_st = load_file(st)
    via_pt = torch.load(pt2, weights_only=True)
    for label, loaded in (("safetensors.load_file", via_st), ("torch.load(weights_only=True)", via_pt)):
        same = set(loaded) == set(original) and all(torch.equal(loaded[k], original[k]) for k in original)
        check(same, f"{label} reads hotloop's file: the same {len(original)} tensors, bit for bit")
    half = {k: v.half() if v.is_floating_point() else v for k, v in original.items()}
    half["extra.bf16"] = torch.randn(3, 5).bfloat16()
    save_file(half, st)
    check(hotloop("weights", "convert", st, pt2).returncode == 0, "weights convert F16/BF16 safetensors -> .pt")
    back = torch.load(pt2, weights_only=True)
    check(all(torch.equal(back[k], half[k]) and back[k].dtype == half[k].dtype for k in half),
          "F16, BF16 and I64 tensors survive the round trip with their dtypes")

    # A non-contiguous tensor (a transposed view) is saved with its strides; hotloop must honour them.
    t = torch.arange(12.0).reshape(3, 4).t()
    torch.save({"t": t}, pt)
    check(hotloop("weights", "convert", pt, st).returncode == 0 and torch.equal(load_file(st)["t"], t),
          "a strided (transposed) tensor in a torch file is read with its strides")

    # A pickle that names a class is refused, with the class in the message.
    class Opaque:
        pass

    torch.save({"w": torch.zeros(2), "obj": Opaque()}, pt)
    r = hotloop("weights", "show", pt, expect=1)
    check(r.returncode == 1 and "refusing" in r.stderr and "Opaque" in r.stderr,
          "a pickle referring to a class is refused by name (exit 1)")

    # A 5-class fine-tune of a 1000-class file: loads with the head replaced, elsewhere exact.
    r = hotloop("predict", "--model", "resnet18", "--num-classes", "5", "--weights",
                os.path.join(tmp, "resnet18.pt"), "--input", os.path.join(tmp, "x.safetensors"), "--output",
                os.path.join(tmp, "o.safetensors"), expect=1)
    check(r.returncode == 1 and "fc.weight: model [5, 512] vs file [1000, 512]" in r.stderr,
          "predict with the wrong class count names fc.weight and both shapes")

if failures:
    print(f"{len(failures)} parity check(s) failed")
    sys.exit(1)
print("all parity checks passed")
