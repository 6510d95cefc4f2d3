"""hotloop.Run: the run folder of `hotloop train` from a Python loop, its phases, the verdicts of fed
windows, losses without a sync, and its errors."""

import json
import math

import pytest
import torch

import hotloop


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tiny_loop(run, steps, loss=lambda i: 2.0 / (1 + i), wait=None, work=None):
    for i in range(steps):
        run.begin_step(data_wait_s=None if wait is None else wait(i))
        run.phase("backward")
        if work is not None:
            work()
        run.end_step(8, loss=loss(i), lr=0.1)


def some_compute():
    # A step that takes milliseconds, so that the scheduler's pauses between two of Run's calls (on a
    # loaded machine) are not most of it.
    x = torch.ones(192, 192)
    for _ in range(20):
        x = (x @ x).clamp_(max=1.0)


def test_the_run_folder_has_the_trainers_files(tmp_path):
    out = tmp_path / "run"
    with hotloop.Run(out, num_classes=10, diagnosis_window=5, telemetry_interval_s=0.05) as run:
        tiny_loop(run, 12)
    for name in ("config.json", "metrics.jsonl", "telemetry.jsonl", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    assert any(p.name.startswith("events.out.tfevents") for p in out.rglob("*"))
    config = json.loads((out / "config.json").read_text())
    assert config["source"] == "hotloop.Run"
    steps = [m for m in read_jsonl(out / "metrics.jsonl") if "step_time_ms" in m]
    assert [m["step"] for m in steps] == list(range(1, 13))
    assert all("loss" in m and "phases_ms" in m for m in steps)
    assert steps[3]["loss"] == pytest.approx(2.0 / 4)
    windows = [m for m in read_jsonl(out / "metrics.jsonl") if "diagnosis" in m]
    assert [w["step"] for w in windows] == [5, 10]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["images_per_s"] > 0
    assert summary["telemetry"]["enabled"] is True
    assert run.summary == summary
    report = (out / "report.html").read_text()
    assert "<svg" in report and "Step time" in report


def test_an_input_bound_loop_gets_that_verdict_and_its_fix(tmp_path):
    # The loader's wait is the data phase by itself: 50 ms per step against a step of microseconds.
    run = hotloop.Run(tmp_path / "run", diagnosis_window=10)
    tiny_loop(run, 10, wait=lambda i: 0.05)
    assert run.verdict is not None and run.verdict.verdict == "input-bound"
    assert run.verdict.fix
    summary = run.close()
    assert summary["data_wait_fraction"] > 0.9
    assert summary["diagnosis"] == "input-bound"
    assert "input-bound" in (tmp_path / "run" / "report.html").read_text()


def test_a_fed_loop_is_not_input_bound(tmp_path):
    run = hotloop.Run(tmp_path / "run", diagnosis_window=10)
    tiny_loop(run, 10, wait=lambda i: 0.0, work=some_compute)
    assert run.verdict.verdict != "input-bound"
    run.close()


def test_a_loss_stuck_at_chance_is_not_learning(tmp_path):
    run = hotloop.Run(tmp_path / "run", num_classes=10, diagnosis_window=10)
    tiny_loop(run, 30, loss=lambda i: math.log(10), wait=lambda i: 0.0)
    assert "not-learning" in [f.verdict for f in run.findings]
    run.close()


def test_the_data_phase_is_the_hotloop_loaders_wait(tmp_path):
    loader = hotloop.Loader("synthetic:64x3x16x16", batch_size=8)
    with hotloop.Run(tmp_path / "run", loader=loader) as run:
        for x, y in run.track(loader):
            run.loss(float(x.mean()))
    steps = [m for m in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step_time_ms" in m]
    assert len(steps) == len(loader)
    assert all("loss" in m for m in steps)
    # The first batch's wait (the threads start cold) is what the loader measured for it.
    assert steps[0]["data_wait_ms"] > 0


def test_the_context_manager_step_takes_the_loss_it_is_given(tmp_path):
    with hotloop.Run(tmp_path / "run") as run:
        for i in range(3):
            with run.step(samples=4) as s:
                s.loss = torch.tensor(float(i))
    steps = [m for m in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step_time_ms" in m]
    assert [m["loss"] for m in steps] == [0.0, 1.0, 2.0]


def test_steps_without_losses_still_write_their_lines(tmp_path):
    with hotloop.Run(tmp_path / "run") as run:
        for _ in range(4):
            run.begin_step()
            run.end_step(2)
    steps = [m for m in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step_time_ms" in m]
    assert len(steps) == 4 and all("loss" not in m for m in steps)


def test_a_promised_loss_that_comes_later_joins_its_line(tmp_path):
    with hotloop.Run(tmp_path / "run") as run:
        for _ in range(3):
            run.begin_step()
            run.end_step(2, loss_follows=True)
        run.loss(0.5, step=2)
        run.loss(0.25, step=3)
        run.loss(1.0, step=1)
        run.begin_step()
        run.end_step(2, loss_follows=True)  # promised, never given: written at close, without a loss
    steps = [m for m in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step_time_ms" in m]
    assert [m.get("loss") for m in steps] == [1.0, 0.5, 0.25, None]


def test_misuse_is_a_usage_error_with_what_to_do(tmp_path):
    run = hotloop.Run(tmp_path / "run")
    with pytest.raises(hotloop.UsageError, match="begin_step"):
        run.end_step(4)
    run.begin_step()
    with pytest.raises(hotloop.UsageError, match="end_step"):
        run.begin_step()
    with pytest.raises(hotloop.UsageError, match="not a phase"):
        run.phase("lunch")
    with pytest.raises(hotloop.UsageError, match="at least one sample"):
        run.end_step(0)
    run.end_step(4)
    summary = run.close()
    assert summary["steps"] == 1
    with pytest.raises(hotloop.UsageError, match="finished"):
        run.begin_step()


def test_an_exception_in_the_loop_marks_the_run_stopped_early(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with hotloop.Run(tmp_path / "run") as run:
            run.begin_step()
            raise RuntimeError("boom")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["stopped_early"] is True


def test_only_rank_0_writes_files(tmp_path):
    with hotloop.Run(tmp_path / "run", rank=1, world_size=2) as run:
        tiny_loop(run, 3)
    assert not (tmp_path / "run" / "summary.json").exists()


def test_the_run_prints_nothing(tmp_path, capfd):
    with hotloop.Run(tmp_path / "run", diagnosis_window=5) as run:
        tiny_loop(run, 10, wait=lambda i: 0.05)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_losses_are_read_without_a_sync_per_step(tmp_path):
    x = torch.randn(64, 64, device="cuda")
    with hotloop.Run(tmp_path / "run", device="cuda", loss_every=4) as run:
        for i in range(10):
            run.begin_step()
            loss = (x * i).square().mean()
            run.end_step(64, loss=loss)
    steps = [m for m in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step_time_ms" in m]
    expected = [(x * i).square().mean().item() for i in range(10)]
    assert [m["loss"] for m in steps] == pytest.approx(expected, rel=1e-6)


def test_the_python_example_trains_on_a_folder(image_folder, tmp_path):
    import pathlib
    import subprocess
    import sys

    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "train_folder.py"
    out = subprocess.run([sys.executable, str(example), str(image_folder), "--device", "cpu", "--batch-size", "8",
                          "--size", "32", "--epochs", "2", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "12 steps" in out.stdout and "report:" in out.stdout
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 12


def test_breaking_out_of_track_ends_the_step(tmp_path):
    loader = hotloop.Loader("synthetic:64x3x16x16", batch_size=8)
    with hotloop.Run(tmp_path / "run", loader=loader) as run:
        for i, _ in enumerate(run.track(loader)):
            if i == 2:
                break
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["stopped_early"] is False


def test_a_run_fed_by_a_loader_of_token_data_keeps_its_tokenizer(tmp_path):
    # hotloop train keeps the data's tokenizer in the run folder; a Run fed by the same data does too.
    tokenizers = pytest.importorskip("tokenizers")
    text = open("/usr/share/games/fortunes/fortunes", encoding="utf-8", errors="replace").read()[:20000]
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator([text], vocab_size=400, min_frequency=2, show_progress=False)
    data = tmp_path / "tokens"
    data.mkdir()
    bpe.save(str(data / "tokenizer.json"))
    ids = torch.tensor(bpe.encode(text).ids[:512], dtype=torch.int16)  # raw uint16 ids, all < 400
    for split in ("train.bin", "val.bin"):
        (data / split).write_bytes(ids.numpy().tobytes())
    loader = hotloop.Loader(f"tokens:{data}", context=8, batch_size=2)
    assert loader.info()["tokenizer_files"]
    run = hotloop.Run(tmp_path / "run", loader=loader, telemetry=False)
    tiny_loop(run, 2)
    run.close()
    assert (tmp_path / "run" / "tokenizer" / "tokenizer.json").is_file()
