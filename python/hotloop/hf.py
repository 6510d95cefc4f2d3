"""A Hugging Face TrainerCallback that gives a transformers Trainer run hotloop's telemetry, verdicts and
run folder.

    from hotloop.hf import HotloopTrainerCallback
    trainer = transformers.Trainer(..., callbacks=[HotloopTrainerCallback("runs/exp1")])

Each optimizer step is a step: it begins at on_step_begin and ends at on_step_end (the data phase is the
time between steps, where the Trainer fetches the step's batches, less its evaluations and saves).
Losses come from the Trainer's own logs (on_log, when the Trainer logs: the mean since the last log,
given to the step it was logged at): the callback never reads a loss itself.
"""

import time

from transformers import TrainerCallback

from .run import Run


def _precision(args):
    if getattr(args, "bf16", False):
        return "bf16"
    if getattr(args, "fp16", False):
        return "fp16"
    if getattr(args, "tf32", False):
        return "tf32"
    return "fp32"


class HotloopTrainerCallback(TrainerCallback):
    """out_dir: the run folder (default: the Trainer's output_dir/hotloop; the main process writes it).
    Other keyword arguments go to hotloop.Run. After training, `.run` is the Run."""

    def __init__(self, out_dir=None, **run_options):
        self.out_dir = None if out_dir is None else str(out_dir)
        self.run_options = run_options
        self.run = None
        self._since = None  # when the time outside steps last stopped being the data's

    def on_train_begin(self, args, state, control, **kwargs):
        options = dict(self.run_options)
        options.setdefault("device", str(args.device))
        options.setdefault("precision", _precision(args))
        options.setdefault("rank", args.process_index)
        options.setdefault("world_size", args.world_size)
        options.setdefault("total_steps", max(0, state.max_steps or 0))
        self.run = Run(self.out_dir or f"{args.output_dir}/hotloop", **options)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.run is None or self.run._native.in_step():
            return
        self.run.begin_step(data_wait_s=None if self._since is None else time.perf_counter() - self._since)
        self._since = None

    def on_step_end(self, args, state, control, **kwargs):
        if self.run is None or not self.run._native.in_step():
            return
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        lr = 0.0
        optimizer = kwargs.get("optimizer")
        if optimizer is not None and optimizer.param_groups:
            lr = float(optimizer.param_groups[0].get("lr", 0.0))
        # The Trainer's flow callback (first in its list) has decided whether it logs after this step:
        # if so, the step's metrics line waits for that loss.
        self.run.end_step(samples, lr=lr, loss_follows=bool(control.should_log))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and self.run is not None and self.run.steps > 0:
            self.run.loss(float(logs["loss"]), step=self.run.steps)

    # Evaluations and saves between steps are not the data's time.
    def on_evaluate(self, args, state, control, **kwargs):
        self._since = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        self._since = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        if self.run is not None:
            self.run.close()
