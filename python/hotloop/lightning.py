"""A Lightning callback that gives a Lightning run hotloop's telemetry, verdicts and run folder.

    from hotloop.lightning import HotloopCallback
    trainer = lightning.Trainer(callbacks=[HotloopCallback("runs/exp1")])

Each training batch is a step: it begins at on_train_batch_start (the batch is in hand: the data phase
is the time since the previous batch ended, or since validation or a checkpoint save ended) and ends at
on_train_batch_end, with the batch's loss (read without a sync per step; under gradient accumulation the
loss as the module returned it, not Lightning's accumulated share). Works with `lightning` and with
`pytorch_lightning`.
"""

import time

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from .run import Run, _batch_samples

_PRECISION = {"bf16": "bf16", "16": "fp16", "32": "fp32", "64": "fp32"}


def _precision(trainer):
    p = str(getattr(trainer, "precision", "32"))
    return _PRECISION.get(p.split("-")[0], "fp32")


class HotloopCallback(Callback):
    """out_dir: the run folder (rank 0 writes it). Other keyword arguments go to hotloop.Run (num_classes,
    flops_per_sample, diagnosis_window, ...). After fit, `.run` is the Run (`.run.verdict`, `.run.summary`)."""

    def __init__(self, out_dir, **run_options):
        super().__init__()
        self.out_dir = str(out_dir)
        self.run_options = run_options
        self.run = None
        self._since = None  # when the time outside steps last stopped being the data's

    def on_fit_start(self, trainer, pl_module):
        options = dict(self.run_options)
        options.setdefault("device", str(pl_module.device))
        options.setdefault("precision", _precision(trainer))
        options.setdefault("rank", trainer.global_rank)
        options.setdefault("world_size", trainer.world_size)
        total = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else 0
        options.setdefault("total_steps", total)
        self.run = Run(self.out_dir, **options)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.run is None or self.run._native.in_step():  # the module skipped the last batch's end
            return
        self.run.begin_step(data_wait_s=None if self._since is None else time.perf_counter() - self._since)
        self._since = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.run is None or not self.run._native.in_step() or batch is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None and getattr(pl_module, "automatic_optimization", True):
            loss = loss * trainer.accumulate_grad_batches  # Lightning divided it for accumulation
        lr = 0.0
        if trainer.optimizers:
            lr = float(trainer.optimizers[0].param_groups[0].get("lr", 0.0))
        self.run.end_step(_batch_samples(batch), loss=loss, lr=lr)

    # Validation and checkpoint saves between steps are not the data's time.
    def on_validation_end(self, trainer, pl_module):
        self._since = time.perf_counter()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._since = time.perf_counter()

    def on_fit_end(self, trainer, pl_module):
        if self.run is not None:
            self.run.close()

    def on_exception(self, trainer, pl_module, exception):
        if self.run is not None:
            self.run.close(stopped_early=True)
