"""hotloop.doctor(): the CLI's verdicts as Python objects."""

import json
import os
import pathlib
import subprocess

import pytest

import hotloop

SCENARIOS = pathlib.Path(__file__).resolve().parents[1] / "fakes" / "scenarios"


def test_doctor_gives_the_clis_checks_as_objects(hotloop_bin, capfd):
    report = hotloop.doctor()
    assert capfd.readouterr().out == ""  # prints nothing
    assert report.verdict in ("pass", "warn", "fail", "cpu-only")
    assert report.checks and all(c.name and c.level in ("pass", "warn", "fail", "skip") and c.message
                                 for c in report.checks)
    assert all(c.fix for c in report.problems)  # every warning and failure says what to do
    cli = json.loads(subprocess.run([hotloop_bin, "doctor", "--json"], capture_output=True, text=True).stdout)
    assert [c["id"] for c in cli["checks"]] == [c.name for c in report.checks]
    assert cli["verdict"] == report.verdict
    assert "verdict:" in str(report)


def test_a_hot_gpu_is_a_warning_with_its_fix(monkeypatch):
    # The tests' fake NVML library (tests/fakes) plays a GPU at 89 °C, clocks held down.
    fake = os.environ.get("FAKE_NVML")
    if not fake:
        pytest.skip("FAKE_NVML (the tests' fake NVML library) is not set: run through ctest")
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(SCENARIOS / "thermal.json"))
    report = hotloop.doctor(nvml_library=fake)
    thermal = next(c for c in report.checks if c.name == "gpu0.thermal")
    assert thermal.level == "warn" and "89 °C" in thermal.message and thermal.fix
    throttle = next(c for c in report.checks if c.name == "gpu0.throttle")
    assert "cooling" in throttle.fix
    assert thermal in report.problems
    # (The verdict is "fail" here: the fake GPU is not one torch's CUDA can open.)
    assert report.verdict in ("warn", "fail")


def test_a_module_built_for_another_torch_is_refused_at_import(monkeypatch):
    import torch

    from hotloop import _native

    monkeypatch.setattr(torch, "__version__", "2.10.0+cu130")
    with pytest.raises(ImportError, match=r"built against torch 2\.11\.0 but this Python has torch 2\.10\.0"):
        _native._load()
