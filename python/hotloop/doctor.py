"""hotloop.doctor(): the verdicts of `hotloop doctor` on the driver, CUDA, torch, each GPU and the host."""

import json
from dataclasses import dataclass, field

from ._native import native


@dataclass
class Check:
    name: str  # stable id: "cuda.driver_compat", "gpu0.throttle", "host.shm", ...
    level: str  # "pass", "warn", "fail" or "skip"
    message: str  # what was measured and what it means
    fix: str = ""  # for warn and fail: what to do
    facts: dict = field(default_factory=dict)  # the measurements


@dataclass
class DoctorReport:
    verdict: str  # "pass", "warn", "fail" or "cpu-only" (no usable GPU: training runs on the CPU)
    checks: list

    @property
    def problems(self):
        """The checks that warn or fail."""
        return [c for c in self.checks if c.level in ("warn", "fail")]

    def __str__(self):
        lines = [f"{c.level.upper():4}  {c.name}: {c.message}" + (f"\n      fix: {c.fix}" if c.fix else "")
                 for c in self.checks]
        return "\n".join(lines + [f"verdict: {self.verdict}"])


def doctor(nvml_library=None):
    """Reads this machine (NVML, torch's CUDA, /proc, /sys) as `hotloop doctor` does; prints nothing."""
    report = json.loads(native.doctor_json(nvml_library or ""))
    checks = [Check(name=c["id"], level=c["status"].lower(), message=c["summary"], fix=c.get("fix", ""),
                    facts=c.get("facts", {})) for c in report["checks"]]
    return DoctorReport(verdict=report["verdict"], checks=checks)
