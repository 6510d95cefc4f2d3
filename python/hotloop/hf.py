"""A Hugging Face TrainerCallback that gives a transformers Trainer run hotloop's telemetry, verdicts and
run folder.

    from hotloop.hf import HotloopTrainerCallback
    trainer = transformers.Trainer(..., callbacks=[HotloopTrainerCallback("runs/exp1")])

Each optimizer step is a step: it begins at on_step_begin and ends at on_step_end (the data phase is the
time between steps: the Trainer fetches the step's batches there). Losses come from the Trainer's own
logs (on_log, every logging_steps: the mean since the last log, given to the step it was logged at):
the callback never reads a loss itself.
"""

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

    def on_train_begin(self, args, state, control, **kwargs):
        options = dict(self.run_options)
        options.setdefault("device", str(args.device))
        options.setdefault("precision", _precision(args))
        options.setdefault("rank", args.process_index)
        options.setdefault("world_size", args.world_size)
        options.setdefault("total_steps", max(0, state.max_steps or 0))
        self.run = Run(self.out_dir or f"{args.output_dir}/hotloop", **options)

    def on_step_begin(self, args, state, control, **kwargs):
        self.run.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        lr = 0.0
        optimizer = kwargs.get("optimizer")
        if optimizer is not None and optimizer.param_groups:
            lr = float(optimizer.param_groups[0].get("lr", 0.0))
        # The Trainer logs the loss after this call at every logging_steps-th step: its metrics line waits.
        every = args.logging_steps
        logs_now = (str(getattr(args.logging_strategy, "value", args.logging_strategy)) == "steps"
                    and every >= 1 and state.global_step % int(every) == 0)
        self.run.end_step(samples, lr=lr, loss_follows=logs_now)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and self.run is not None and self.run.steps > 0:
            self.run.loss(float(logs["loss"]), step=self.run.steps)

    def on_train_end(self, args, state, control, **kwargs):
        if self.run is not None:
            self.run.close()
