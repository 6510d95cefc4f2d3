"""hotloop.Run: the run folder, telemetry and verdicts of `hotloop train`, inside your own loop."""

import contextlib
import json
from collections import namedtuple

import torch

from ._native import native
from ._device import env_int as _env_int
from ._device import resolve_device
from .loader import Loader

Finding = namedtuple("Finding", ["verdict", "evidence", "fix"])
Finding.__doc__ = """One finding of a diagnosis window: the verdict's name (input-bound, throttled-thermal, not-learning,
under-used, healthy, ...), the figures behind it, and what to do ("" when nothing)."""

_PRECISIONS = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


class Run:
    """The trainer's telemetry for a Python training loop, written to `out_dir` as `hotloop train` writes
    its run folder: config.json, metrics.jsonl (a line per step and per diagnosis window), telemetry.jsonl
    (the NVML/host sampler), TensorBoard events, and at close() summary.json and report.html.

    A step is `run.begin_step()` ... `run.end_step(samples, loss=...)`, or `with run.step(samples):`, or
    implicit: `for batch in run.track(loader):` begins a step as each batch arrives and ends it when the
    loop body is done. Inside a step, run.phase("backward") / run.phase("optimizer") split the time
    (the rest counts as forward).

    The data phase of a step: with `loader=` a hotloop.Loader, the time it waited for that batch;
    otherwise the time since the previous step ended (the loop's fetch).

    Losses: pass a float, or a tensor; a CUDA tensor is read every `loss_every` steps with one non-blocking
    copy, never a sync per step. Each window of `diagnosis_window` steps gets a diagnosis; `run.verdict`
    is the latest (a Finding, or None before the first window closes).

    device: the training device (default: the loader's, else "cpu"; "cuda" resolves as the Loader's does);
    precision: "fp32", "tf32", "bf16" or "fp16" (the tensor-idle verdict and MFU's peak); num_classes: a uniform guess's loss is
    ln(num_classes), for the not-learning verdict (0: off); flops_per_sample: training FLOPs per sample
    (for MFU; 0: unknown); tokens_per_sample: language models' tokens/s. rank, world_size: default
    torchrun's $RANK and $WORLD_SIZE; only rank 0 writes files. console: progress lines on stderr
    (default off: the package prints nothing unless asked).
    """

    def __init__(self, out_dir, *, loader=None, device=None, precision="fp32", num_classes=0,
                 tokens_per_sample=0, flops_per_sample=0.0, warmup_steps=0, total_steps=0, rank=None,
                 world_size=None, telemetry=True, telemetry_interval_s=1.0, diagnosis_window=50,
                 nvml_library="", metrics_file=True, tensorboard=True, console=False, config=None,
                 loss_every=10):
        if device is None:
            device = loader.device if loader is not None and hasattr(loader, "device") else "cpu"
        self.device = resolve_device(device)
        if not isinstance(precision, str):
            precision = _PRECISIONS.get(precision, str(precision))
        self.out_dir = str(out_dir)
        self._loader = loader if hasattr(loader, "last_wait_seconds") else None
        self._loss_every = max(1, int(loss_every))
        info = loader.info() if isinstance(loader, Loader) else {}
        self._native = native.Run(
            out_dir=self.out_dir, device=str(self.device), precision=precision, num_classes=num_classes,
            tokens_per_sample=tokens_per_sample, flops_per_sample=float(flops_per_sample),
            warmup_steps=warmup_steps, total_steps=total_steps,
            rank=_env_int("RANK", 0) if rank is None else rank,
            world_size=_env_int("WORLD_SIZE", 1) if world_size is None else world_size,
            telemetry=telemetry, telemetry_interval_s=telemetry_interval_s, diagnosis_window=diagnosis_window,
            nvml_library=nvml_library, metrics_file=metrics_file, tensorboard=tensorboard, console=console,
            config_json=json.dumps(config or {}, default=str),
            tokenizer_files=list(info.get("tokenizer_files", [])))
        self._step_loss = None  # given with loss() inside the step
        self._pending = []  # (step, loss tensor on a device), not yet copied
        self._copies = []  # (steps, pinned CPU tensor, CUDA event): copies in flight
        self.summary = None

    # ---- steps ------------------------------------------------------------------------------------------
    def begin_step(self, data_wait_s=None):
        """A step begins; its batch is in hand. data_wait_s: how long the loop waited for it (default: the
        hotloop.Loader's wait when the Run has one, else the time since the previous step ended)."""
        if data_wait_s is None and self._loader is not None:
            data_wait_s = self._loader.last_wait_seconds()
        self._native.begin_step(data_wait_s)

    def phase(self, name):
        """Phase `name` begins inside the step: "forward", "backward", "all-reduce", "optimizer"."""
        self._native.phase(name)

    def end_step(self, samples, loss=None, lr=0.0, loss_follows=False):
        """The step ends after `samples` samples (this rank's). loss: a float or a 0-dim tensor (a CUDA
        tensor is read later, without a sync). loss_follows: no loss now, but run.loss(value, step) will
        give it (metrics.jsonl holds the step's line until then). Returns the step's number (1-based)."""
        if loss is None:
            loss, self._step_loss = self._step_loss, None
        step = self._native.end_step(int(samples), float(lr), loss is not None or bool(loss_follows))
        if loss is not None:
            self._take_loss(step, loss)
        if self._pending or self._copies:
            self._read_losses(force=False)
        return step

    def loss(self, value, step=None):
        """The loss of `step`; default: the step in progress (inside a step), else the latest ended one."""
        if step is None and self._native.in_step():
            self._step_loss = value
            return
        self._take_loss(self._native.steps() if step is None else step, value)

    @contextlib.contextmanager
    def step(self, samples, lr=0.0):
        """`with run.step(samples) as s: ...; s.loss = loss`: one step (begin and end; an exception in the
        body ends it too, so that a loop that catches it can go on)."""
        self.begin_step()
        holder = _StepLoss()
        try:
            yield holder
        finally:
            self.end_step(samples, loss=holder.loss, lr=lr)

    def track(self, batches, samples=None):
        """Yields `batches`' items, each a step: it begins when the batch arrives and ends when the loop
        body is done (the next batch is asked for). samples(batch) gives a batch's samples (default: the
        first dimension of its first tensor). A loss given with run.loss() in the body is the step's."""
        if self._loader is None and hasattr(batches, "last_wait_seconds"):
            self._loader = batches
        for batch in batches:
            self.begin_step()
            n = samples(batch) if samples is not None else _batch_samples(batch)
            try:
                yield batch
            except GeneratorExit:  # the loop broke out: its body finished this step
                if self.summary is None and self._native.in_step():
                    self.end_step(n)
                raise
            self.end_step(n)

    # ---- what it found ----------------------------------------------------------------------------------
    @property
    def findings(self):
        """The latest diagnosis window's findings, most important first ([] before the first closes)."""
        d = json.loads(self._native.diagnosis_json())
        if not d:
            return []
        return [Finding(f["verdict"], f["evidence"], f["fix"]) for f in d["findings"]]

    @property
    def verdict(self):
        """The latest window's verdict (a Finding), or None before the first window closes."""
        f = self.findings
        return f[0] if f else None

    @property
    def steps(self):
        return self._native.steps()

    # ---- the end ----------------------------------------------------------------------------------------
    def close(self, stopped_early=False):
        """Ends the run: reads the losses still in flight, writes summary.json and report.html, and returns
        the summary (a dict, summary.json's content). A second call returns the same."""
        if self.summary is None:
            if self._native.in_step():
                stopped_early = True
            self._read_losses(force=True)
            bad = 0
            if self._loader is not None and hasattr(self._loader, "stats"):
                bad = self._loader.stats().get("bad_samples", 0)
            self.summary = json.loads(self._native.finish_json(bad, stopped_early))
        return self.summary

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(stopped_early=exc_type is not None)
        return False

    # ---- losses without a sync per step -----------------------------------------------------------------
    def _take_loss(self, step, value):
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.numel() != 1:
                raise ValueError(f"hotloop.Run: a loss has one value, this tensor has {value.numel()}")
            if value.device.type == "cuda":
                # A copy (one small kernel, no sync): a CUDA graph's output is overwritten by its next replay.
                self._pending.append((step, value.reshape(()).clone()))
                return
            value = value.item()
        self._flush_in_order()
        self._native.record_loss(step, float(value))

    def _flush_in_order(self):
        # Losses reach the run in step order: ones still on the device go first.
        if self._pending or self._copies:
            self._read_losses(force=True)

    def _read_losses(self, force):
        if self._pending and (force or len(self._pending) >= self._loss_every):
            steps = [s for s, _ in self._pending]
            values = torch.stack([v.float() for _, v in self._pending])
            host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
            host.copy_(values, non_blocking=True)
            event = torch.cuda.Event()
            with torch.cuda.device(values.device):  # the losses' device's stream, not the current device's
                event.record()
            self._copies.append((steps, host, event))
            self._pending = []
        while self._copies and (force or self._copies[0][2].query()):
            steps, host, event = self._copies.pop(0)
            event.synchronize()
            for s, v in zip(steps, host.tolist()):
                self._native.record_loss(s, v)


class _StepLoss:
    loss = None


def _batch_samples(batch):
    first = batch
    while isinstance(first, (tuple, list)) and first:
        first = first[0]
    if isinstance(first, dict) and first:
        first = next(iter(first.values()))
    if hasattr(first, "shape") and len(first.shape) > 0:
        return int(first.shape[0])
    raise ValueError("hotloop.Run.track: cannot tell a batch's size; pass samples=lambda batch: ...")
