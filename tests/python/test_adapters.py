"""The Lightning callback and the Hugging Face TrainerCallback, each with the real library on the CPU: a
short fit writes hotloop's run folder with a line (and a loss) per step."""

import json

import pytest
import torch


def read_steps(path):
    lines = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [m for m in lines if "step_time_ms" in m]


def test_lightning_callback_records_every_training_batch(tmp_path):
    L = pytest.importorskip("lightning", reason="lightning is not installed (scripts/setup installs it)")
    from hotloop.lightning import HotloopCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 3)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))
    callback = HotloopCallback(tmp_path / "run", num_classes=3, diagnosis_window=5)
    trainer = L.Trainer(max_steps=12, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
                        default_root_dir=str(tmp_path))
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    steps = read_steps(tmp_path / "run")
    assert [m["step"] for m in steps] == list(range(1, 13))
    assert all(m["loss"] > 0 for m in steps) and steps[0]["lr"] == pytest.approx(0.1)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["micro_batch"] == 8
    assert callback.run.verdict is not None


def test_hf_trainer_callback_records_every_optimizer_step_and_the_logged_losses(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate (scripts/setup installs it)")
    from hotloop.hf import HotloopTrainerCallback

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 3)

        def forward(self, x, labels=None):
            logits = self.layer(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Data(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.x = torch.randn(64, 8, generator=g)
            self.y = torch.randint(0, 3, (64,), generator=g)

        def __len__(self):
            return 64

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    callback = HotloopTrainerCallback(tmp_path / "run", num_classes=3, diagnosis_window=5)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10,
                                          per_device_train_batch_size=4, gradient_accumulation_steps=2,
                                          logging_steps=2, report_to=[], use_cpu=True, save_strategy="no",
                                          disable_tqdm=True, learning_rate=0.05)
    trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=Data(), callbacks=[callback])
    trainer.train()
    steps = read_steps(tmp_path / "run")
    assert [m["step"] for m in steps] == list(range(1, 11))
    assert all(m["images_per_s"] > 0 for m in steps)
    logged = [m["step"] for m in steps if "loss" in m]
    assert logged == [2, 4, 6, 8, 10]  # the Trainer's own logged losses, at the steps it logged them
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 10 and summary["micro_batch"] == 8
