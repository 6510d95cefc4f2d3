#!/usr/bin/env python3
"""Models exported from Python (`--model torchscript:FILE`) against PyTorch itself.

Run by ctest (model.torchscript) as: torchscript.py HOTLOOP_BINARY. It exports the models of
examples/bring_your_own/export.py and checks:
  - `hotloop inspect model` passes a scripted export, warns on a traced one (its frozen train/eval mode),
    fails the bad ones, and counts the same forward FLOPs as torch.utils.flop_counter on the eager model;
  - parity: the same MobileNetV3-Small, the same initial weights and the same Fashion-MNIST batches (file
    order, no augmentation), 20 SGD steps in hotloop and in a plain PyTorch loop: every step's loss within
    1e-5 relative, every final weight and buffer within 1e-5 (relative L2), fp32 on the CPU; the same with
    4 accumulated micro-batches per step;
  - RUN/model.safetensors loads into the Python model with load_state_dict (strict), and `hotloop predict`
    gives the logits PyTorch gives with them;
  - fine-tuning: a 100-class head is replaced for 10 classes (--head) and --freeze by name globs leaves the
    frozen parameters as exported;
  - data parallel: 2 Gloo ranks (`hotloop launch`) end with the weights of 1 rank with the same global batch
    (and with `--shard 2`, ZeRO stage 2, with the unsharded 2 ranks' weights bit for bit; `--shard 3` says
    the export has no units and trains as stage 2);
    kill -9 mid-run + `--resume auto` ends with the uninterrupted run's weights, bit for bit;
  - bad exports (a state_dict, safetensors, garbage, a torch.export package, no forward, a tuple, a wrong
    shape, a batch size frozen by tracing, a forward that cannot take the data) fail with the cause and the
    fix, exit 1 or 2, and leave no run directory.
"""
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision  # noqa: F401  (the example's MobileNetV3)
    import safetensors  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "bring_your_own"))
import export as byo  # noqa: E402

HOTLOOP = sys.argv[1]
FMNIST = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's, as hotloop normalizes it
TOLERANCE = 1e-5
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def hotloop(*args, env=None):
    r = subprocess.run([HOTLOOP, *args], capture_output=True, text=True, env=env)
    return r


def must(r, what):
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"FAIL {what}: exit {r.returncode}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fashion_mnist(n):
    with gzip.open(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 1, 28, 28)
    with gzip.open(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    # hotloop's x * scale - shift, with its float32 factors (cuda/transfer.h)
    mean, std = np.float32(MEAN), np.float32(STD)
    scale = np.float32(1) / (np.float32(255) * std)
    shift = mean / std
    x = torch.from_numpy(images.copy()).float().mul_(float(scale)).sub_(float(shift))
    return x, torch.from_numpy(labels.astype(np.int64))


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def load_weights(path):
    from safetensors.torch import load_file

    return load_file(path)


SGD = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0", "--nesterov=false", "--weight-decay", "0",
       "--schedule", "constant", "--warmup-steps", "0", "--clip-grad-norm", "0", "--label-smoothing", "0"]
PLAIN = ["--data", "fashion-mnist", "--shuffle", "false", "--augment", "none", "--no-eval", "--device", "cpu",
         "--readback-every", "1", "--log-every", "0", "--seed", "0"]


def python_loop(model, steps, batch, accum):
    """The plain PyTorch loop: SGD, file-order batches, `accum` micro-batches per step, channels_last weights
    and inputs as hotloop trains by default (the same convolution kernels)."""
    x, y = fashion_mnist(steps * batch)
    model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0, weight_decay=0)
    model.train()
    losses = []
    micro = batch // accum
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(accum):
            lo = s * batch + m * micro
            loss = F.cross_entropy(model(x[lo:lo + micro]), y[lo:lo + micro]) / accum
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)
    return losses


def parity(tmp, scripted_path, accum):
    steps, batch = 20, 32
    out = os.path.join(tmp, f"parity-accum{accum}")
    args = ["train", "--model", f"torchscript:{scripted_path}", *PLAIN, *SGD, "--steps", str(steps),
            "--batch", str(batch), "--micro-batch", str(batch // accum), "--out", out]
    must(hotloop(*args), f"hotloop train (accumulation {accum})")
    hl_losses = [json.loads(l)["loss"] for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
    model = byo.mobilenet_v3_small(dropout=0.0)
    model.load_state_dict(torch.jit.load(scripted_path).state_dict())
    py_losses = python_loop(model, steps, batch, accum)
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(hl_losses, py_losses))
    # The same kernels on the same data: equal losses. With accumulation the step's loss is a sum of micro-batch
    # losses, in float32 on the device for hotloop and in Python's doubles here: equal to float32 rounding.
    loss_bound = 0 if accum == 1 else 1e-6
    check(len(hl_losses) == steps and worst_loss <= loss_bound,
          f"accumulation {accum}: {len(hl_losses)} step losses, worst relative difference {worst_loss:.2e} "
          f"(<= {loss_bound:g}); step 1 {hl_losses[0]:.6f} vs {py_losses[0]:.6f}, step {steps} "
          f"{hl_losses[-1]:.6f} vs {py_losses[-1]:.6f}")
    trained = load_weights(os.path.join(out, "model.safetensors"))
    theirs = model.state_dict()
    check(sorted(trained) == sorted(theirs), f"accumulation {accum}: model.safetensors has the module's "
          f"{len(theirs)} parameter and buffer names")
    worst = max((rel(trained[k], v), k) for k, v in theirs.items() if v.is_floating_point())
    ints = all(torch.equal(trained[k], v) for k, v in theirs.items() if not v.is_floating_point())
    identical = all(torch.equal(trained[k], v) for k, v in theirs.items())
    check(identical and ints,
          f"accumulation {accum}: final weights bit-identical to the PyTorch loop's (worst relative L2 "
          f"{worst[0]:.2e}: {worst[1]}), integer buffers equal")
    return out, model


def main():
    tmp = tempfile.mkdtemp(prefix="hotloop-torchscript-")
    scripted, traced = os.path.join(tmp, "scripted"), os.path.join(tmp, "traced")
    export = os.path.join(HERE, "..", "..", "examples", "bring_your_own", "export.py")
    for out, extra in ((scripted, []), (traced, ["--trace"])):
        subprocess.run([sys.executable, export, "--out", out, "--dropout", "0", *extra], check=True,
                       capture_output=True)
    mobilenet = os.path.join(scripted, "mobilenet_v3_small.pt")
    vit = os.path.join(scripted, "vit_tiny.pt")

    # inspect: a scripted export passes, a traced one warns, FLOPs as PyTorch counts them.
    r = hotloop("inspect", "model", mobilenet, "--json")
    report = json.loads(r.stdout)
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        byo.mobilenet_v3_small(dropout=0.0).eval()(torch.zeros(1, 1, 28, 28))
    check(r.returncode == 0 and report["trainable"] and statuses["model.backward"] == "PASS",
          f"inspect: the scripted mobilenet is trainable ({statuses})")
    check(report["forward_flops_per_sample"] == counter.get_total_flops(),
          f"inspect: {report['forward_flops_per_sample']:.0f} forward FLOPs per sample = "
          f"torch.utils.flop_counter's {counter.get_total_flops()}")
    r = hotloop("inspect", "model", os.path.join(traced, "mobilenet_v3_small.pt"), "--json")
    t = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    check(r.returncode == 0 and t["model.format"]["status"] == "WARN" and t["model.modes"]["status"] == "WARN"
          and "traced in training mode" in t["model.modes"]["summary"],
          "inspect: a traced export is flagged (frozen control flow; eval() does not switch its BatchNorm)")

    # Parity with a plain PyTorch loop, without and with accumulation.
    out, model = parity(tmp, mobilenet, 1)
    parity(tmp, mobilenet, 4)

    # The weights come back into Python, and predict agrees with PyTorch.
    fresh = byo.mobilenet_v3_small(dropout=0.0)
    try:
        fresh.load_state_dict(load_weights(os.path.join(out, "model.safetensors")))
        loaded = True
    except Exception as e:  # noqa: BLE001
        print(e)
        loaded = False
    check(loaded, "model.load_state_dict(safetensors.torch.load_file(RUN/model.safetensors)) (strict) works")
    from safetensors.torch import save_file

    x, _ = fashion_mnist(8)
    save_file({"x": x[4:8].contiguous()}, os.path.join(tmp, "x.safetensors"))
    must(hotloop("predict", "--model", f"torchscript:{mobilenet}", "--weights", os.path.join(out, "model.safetensors"),
                 "--input", os.path.join(tmp, "x.safetensors"), "--output", os.path.join(tmp, "y.safetensors")),
         "hotloop predict")
    with torch.no_grad():
        want = fresh.eval()(x[4:8])
    got = load_weights(os.path.join(tmp, "y.safetensors"))["logits"]
    check(rel(got, want) <= 1e-5, f"predict: logits within {rel(got, want):.2e} relative L2 of PyTorch's")

    # Fine-tuning: a 100-class head replaced for the data's 10, and frozen parameters stay as exported.
    torch.manual_seed(1)
    vit100 = torch.jit.script(byo.ViT(num_classes=100))
    vit100.save(os.path.join(tmp, "vit100.pt"))
    out = os.path.join(tmp, "finetune")
    r = must(hotloop("train", "--model", f"torchscript:{tmp}/vit100.pt", "--head", "head", "--freeze",
                     "patch.*,blocks.0.*", *PLAIN, "--steps", "3", "--batch", "16", "--out", out), "fine-tune")
    w = load_weights(os.path.join(out, "model.safetensors"))
    exported = vit100.state_dict()
    frozen = [k for k in exported if k.startswith(("patch.", "blocks.0."))]
    check("head 'head' was replaced: 100 outputs in the file, 10 classes in the data" in r.stdout + r.stderr
          and tuple(w["head.weight"].shape) == (10, 96), "fine-tune: the 100-class head is replaced for 10")
    check(all(torch.equal(w[k], exported[k]) for k in frozen)
          and not torch.equal(w["blocks.1.qkv.weight"], exported["blocks.1.qkv.weight"]),
          f"fine-tune: --freeze 'patch.*,blocks.0.*' keeps {len(frozen)} tensors as exported; blocks.1 trains")

    # Data parallel: 2 Gloo ranks = 1 rank with the same global batch; kill -9 + --resume auto = uninterrupted.
    common = ["train", "--model", f"torchscript:{vit}", *PLAIN, *SGD, "--steps", "12", "--batch", "32",
              "--threads", "1", "--checkpoint-every", "4"]
    one = os.path.join(tmp, "one")
    must(hotloop(*common, "--out", one), "1 rank")
    two = os.path.join(tmp, "two")
    r = must(hotloop("launch", "--nproc", "2", "--master-port", str(free_port()), "--", *common, "--out", two),
             "2 ranks")
    w1, w2 = load_weights(os.path.join(one, "model.safetensors")), load_weights(os.path.join(two, "model.safetensors"))
    worst = max(rel(w2[k], w1[k]) for k in w1)
    check("1 x 16 micro-batch(es) x 2 ranks" in r.stdout + r.stderr and worst <= TOLERANCE,
          f"2 Gloo ranks end within {worst:.2e} relative L2 of 1 rank's weights (<= {TOLERANCE:g})")
    sharded = os.path.join(tmp, "sharded")
    r = must(hotloop("launch", "--nproc", "2", "--master-port", str(free_port()), "--", *common, "--shard", "2",
                     "--out", sharded), "2 ranks, --shard 2")
    ws = load_weights(os.path.join(sharded, "model.safetensors"))
    check("shard: ZeRO stage 2 over 2 ranks" in r.stdout + r.stderr and all(torch.equal(ws[k], w2[k]) for k in w2),
          "ZeRO stage 2 over the exported module's parameters ends with the unsharded 2 ranks' weights, bit for bit")
    three = os.path.join(tmp, "three")
    r = must(hotloop("launch", "--nproc", "2", "--master-port", str(free_port()), "--", *common, "--shard", "3",
                     "--out", three), "2 ranks, --shard 3")
    w3 = load_weights(os.path.join(three, "model.safetensors"))
    check("this model has no units hotloop can gather one at a time" in r.stdout + r.stderr
          and all(torch.equal(w3[k], w2[k]) for k in w2),
          "--shard 3 on an export (one graph, no units) says it keeps the parameters whole and trains as stage 2")
    killed = os.path.join(tmp, "killed")
    env = dict(os.environ, HOTLOOP_INJECT_KILL="step:7")
    r = hotloop(*common, "--out", killed, env=env)
    check(r.returncode == -9, f"the run killed itself with SIGKILL after step 7 (exit {r.returncode})")
    r = must(hotloop(*common, "--out", killed, "--resume", "auto"), "resume")
    wk = load_weights(os.path.join(killed, "model.safetensors"))
    check(all(torch.equal(wk[k], w1[k]) for k in w1),
          "kill -9 at step 7 + --resume auto ends with the uninterrupted run's weights, bit for bit")
    # The run is deterministic, so starting again from step 0 would end with the same weights: the resume
    # point and each step's metrics line (once: the killed part's steps 5-7 are dropped) show it resumed.
    resumed_at = json.load(open(os.path.join(killed, "summary.json"))).get("resumed_at")
    steps = [json.loads(l)["step"] for l in open(os.path.join(killed, "metrics.jsonl")) if '"loss"' in l]
    check(resumed_at == 4 and steps == list(range(1, 13)),
          f"the resume started at step 4's checkpoint ({resumed_at}) and metrics.jsonl has steps 1-12 once ({steps})")

    # The rest of the trainer on an exported model: bf16 autocast, OOM recovery (an injected OOM above 8
    # samples halves the micro-batch, keeping the batch), the CUDA-graph step (its CPU seam), tune batch.
    def summary(name, *extra, env=None):
        out = os.path.join(tmp, name)
        must(hotloop("train", "--model", f"torchscript:{vit}", *PLAIN, "--steps", "4", "--batch", "16", "--out", out,
                     *extra, env=env), name)
        return json.load(open(os.path.join(out, "summary.json")))

    fp32 = summary("fp32")
    s = summary("bf16", "--precision", "bf16")
    # Autocast reaches the exported module's ops: its losses are bf16's, near fp32's but not equal to them
    # (were autocast ignored inside TorchScript, they would be fp32's to the bit).
    gap = abs(s["train_loss"] - fp32["train_loss"]) / fp32["train_loss"]
    check(s["precision"] == "bf16" and 0 < gap < 0.05,
          f"bf16 autocast runs inside it: train_loss {s['train_loss']:.5f} vs fp32's {fp32['train_loss']:.5f} "
          f"({gap:.1e} apart: not 0, under 5%)")
    s = summary("oom", env=dict(os.environ, HOTLOOP_INJECT_OOM_ABOVE="8"))
    check(s["oom_recoveries"] >= 1 and s["micro_batch"] == 8 and s["accum_steps"] == 2,
          f"OOM recovery: {s['oom_recoveries']} recovery, micro-batch {s['micro_batch']} x {s['accum_steps']}")
    s = summary("graph", "--cuda-graphs", "auto", env=dict(os.environ, HOTLOOP_FAKE_CUDA_GRAPH="1"))
    replays = s["cuda_graphs"]["replays"]
    check(replays > 0, f"the CUDA-graph step captures and replays it ({replays} replays, CPU seam)")
    r = hotloop("tune", "batch", "--model", f"torchscript:{vit}", "--max-batch", "32")
    check(r.returncode == 0 and "recommended:" in r.stdout, "tune batch finds a batch size for it")

    # A token model: (B, T) ids -> (B, T, 256) logits, trained on the built-in text with --context.
    class CharModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(256, 32)
            self.mix = nn.Linear(32, 32)
            self.head = nn.Linear(32, 256)

        def forward(self, ids):
            return self.head(torch.tanh(self.mix(self.embed(ids))))

    torch.jit.script(CharModel()).save(f"{tmp}/char.pt")
    out = os.path.join(tmp, "char")
    if os.path.exists("/usr/share/games/fortunes"):
        r = must(hotloop("train", "--model", f"torchscript:{tmp}/char.pt", "--data", "text:fortunes", "--context", "32",
                         "--steps", "40", "--batch", "16", "--lr", "0.01", "--out", out), "token model")
        s = json.load(open(os.path.join(out, "summary.json")))
        check(s.get("tokens_per_s", 0) > 0 and s["train_loss"] < 4.5,
              f"a token model trains on text:fortunes: train_loss {s['train_loss']:.3f} (uniform: 5.545), "
              f"{s.get('tokens_per_s', 0):.0f} tokens/s")
        r = hotloop("train", "--model", f"torchscript:{tmp}/char.pt", "--data", "text:fortunes", "--steps", "1",
                    "--out", os.path.join(tmp, "char-no-context"))
        check(r.returncode == 2 and "--context" in r.stderr, "a token model without --context is told to give it")

    # Bad exports: the cause, the fix, no run directory.
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)

    class Tuple(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            y = self.fc(x.flatten(1))
            return y, y

    class Shape(Tuple):
        def forward(self, x):
            return self.fc(x.flatten(1)).unsqueeze(2)

    class FixedBatch(Tuple):
        def forward(self, x):
            return self.fc(x.view(8, 784))

    class ThreeChannels(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            return self.fc(self.conv(x).mean((2, 3)))

    class CudaOnly(Tuple):
        def forward(self, x):
            return self.fc(x.flatten(1)) + torch.zeros(1, device="cuda")

    class NoForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        @torch.jit.export
        def predict(self, x):
            return self.fc(x)

    torch.jit.script(Tuple()).save(f"{bad}/tuple.pt")
    torch.jit.script(Shape()).save(f"{bad}/shape.pt")
    torch.jit.trace(FixedBatch(), torch.randn(8, 1, 28, 28)).save(f"{bad}/fixed_batch.pt")
    torch.jit.script(ThreeChannels()).save(f"{bad}/three_channels.pt")
    torch.jit.script(NoForward()).save(f"{bad}/no_forward.pt")
    torch.jit.script(CudaOnly()).save(f"{bad}/cuda_only.pt")
    torch.save(Tuple().state_dict(), f"{bad}/state_dict.pt")
    save_file(dict(Tuple().state_dict()), f"{bad}/weights.safetensors")
    with open(f"{bad}/garbage.pt", "wb") as f:
        f.write(os.urandom(4096))

    class Plain(nn.Module):
        def forward(self, x):
            return x.flatten(1)[:, :10]

    torch.export.save(torch.export.export(Plain(), (torch.randn(2, 1, 28, 28),)), f"{bad}/exported.pt2")
    cases = {
        "state_dict.pt": "a torch.save() zip",
        "weights.safetensors": "safetensors",
        "garbage.pt": "not a zip archive",
        "exported.pt2": "torch.export",
        "missing.pt": "missing.pt: cannot open",
        "no_forward.pt": "no forward method",
        "tuple.pt": "forward returned a tuple of 2",
        "shape.pt": "an image classifier must give (batch, classes)",
        "fixed_batch.pt": "a traced module keeps its example input's shapes, so its batch size may be fixed",
        "three_channels.pt": "forward fails on a batch of shape [2, 1, 28, 28]",
    }
    if not torch.cuda.is_available():  # a forward that needs a GPU, where there is none
        cases["cuda_only.pt"] = "forward fails on a batch of shape [2, 1, 28, 28]"
    for name, says in cases.items():
        out = os.path.join(tmp, "bad-run-" + name)
        r = hotloop("train", "--model", f"torchscript:{bad}/{name}", "--data", "fashion-mnist", "--steps", "1",
                    "--out", out)
        i = hotloop("inspect", "model", f"{bad}/{name}")
        check(r.returncode in (1, 2) and says in r.stderr and "hint:" in r.stderr and not os.path.exists(out)
              and i.returncode == 1,
              f"{name}: train exits {r.returncode} saying '{says}' with a hint, no run directory; inspect exits "
              f"{i.returncode}")
        if says not in r.stderr:
            print(r.stderr[-1500:])
    # --head naming no submodule: what, where and how to find the name; no run directory.
    out = os.path.join(tmp, "no-head")
    r = hotloop("train", "--model", f"torchscript:{vit}", "--head", "nosuch", "--steps", "1", "--out", out)
    check(r.returncode == 2 and f"--head nosuch: {vit} has no such submodule" in r.stderr
          and "named_modules()" in r.stderr and not os.path.exists(out),
          f"--head nosuch: exit 2, the file named, how to list the names ({r.returncode}: {r.stderr.strip()[-300:]})")

    # A token model whose vocabulary is smaller than the data's ids (bytes go up to 255).
    class SmallVocab(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.head = nn.Linear(16, 100)

        def forward(self, ids):
            return self.head(self.embed(ids))

    torch.jit.script(SmallVocab()).save(f"{bad}/small_vocab.pt")
    if os.path.exists("/usr/share/games/fortunes"):
        out = os.path.join(tmp, "small-vocab")
        r = hotloop("train", "--model", f"torchscript:{bad}/small_vocab.pt", "--data", "text:fortunes", "--context",
                    "16", "--steps", "1", "--out", out)
        check(r.returncode == 1 and "the model's vocabulary is 100 but the data's token ids go up to" in r.stderr
              and "hint: export the model with a vocabulary" in r.stderr and not os.path.exists(out),
              f"a vocabulary smaller than the data's ids: exit 1, both sizes, the fix ({r.returncode}: "
              f"{r.stderr.strip()[-300:]})")

    r = hotloop("train", "--model", f"torchscript:{mobilenet}", "--data", "fashion-mnist", "--steps", "1",
                "--activation-checkpointing", "stages", "--out", os.path.join(tmp, "ac"))
    check(r.returncode == 2 and "cannot split" in r.stderr,
          "--activation-checkpointing stages is refused with the reason (exit 2)")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all torchscript checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
