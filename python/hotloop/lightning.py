"""A Lightning callback that gives a Lightning run hotloop's telemetry, verdicts and run folder.

    from hotloop.lightning import HotloopCallback
    trainer = lightning.Trainer(callbacks=[HotloopCallback("runs/exp1")])

Each training batch is a step: it begins at on_train_batch_start (the batch is in hand: the data phase
is the time since the previous batch ended) and ends at on_train_batch_end, with the batch's loss (read
without a sync per step). Works with `lightning` and with `pytorch_lightning`.
"""

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
        self.run.begin_step()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        lr = 0.0
        if trainer.optimizers:
            lr = float(trainer.optimizers[0].param_groups[0].get("lr", 0.0))
        self.run.end_step(_batch_samples(batch), loss=loss, lr=lr)

    def on_fit_end(self, trainer, pl_module):
        if self.run is not None:
            self.run.close()

    def on_exception(self, trainer, pl_module, exception):
        if self.run is not None:
            self.run.close(stopped_early=True)
