"""hotloop from Python: its data loader, the trainer's telemetry and verdicts inside your loop, and doctor.

    import hotloop
    loader = hotloop.Loader("folder:/data/imagenet", batch_size=64, device="cuda")
    with hotloop.Run("runs/exp1", loader=loader) as run:
        for x, y in run.track(loader):
            loss = step(x, y)
            run.loss(loss)                  # a tensor: read later, never a sync per step
    print(run.verdict)                      # e.g. input-bound, with its fix

See docs/python.md. The package's C++ core is the same library as the `hotloop` command's.
"""

# A checkout's package spans python/hotloop (these files) and build/python/hotloop (the extension module).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from .doctor import Check, DoctorReport, doctor  # noqa: E402
from .errors import ConfigError, DataError, EnvError, Error, OutOfMemoryError, UsageError  # noqa: E402
from .loader import Loader  # noqa: E402
from .run import Finding, Run  # noqa: E402
from ._native import native as _core  # noqa: E402

__version__ = _core.hotloop_version
__all__ = [
    "Check",
    "ConfigError",
    "DataError",
    "DoctorReport",
    "EnvError",
    "Error",
    "Finding",
    "Loader",
    "OutOfMemoryError",
    "Run",
    "UsageError",
    "doctor",
]
