"""Loads the extension module (hotloop._hotloop) after torch, checking first that this Python's torch is
the one it was built against: a module built against another torch fails to load with undefined symbols,
or worse, loads and crashes."""

import torch

from . import _build


def _load():
    have = torch.__version__.split("+")[0]
    if have != _build.TORCH_VERSION:
        raise ImportError(
            f"hotloop was built against torch {_build.TORCH_VERSION} but this Python has torch {have}: "
            f"install torch=={_build.TORCH_VERSION}, or rebuild hotloop in this environment "
            f"(pip install <hotloop checkout>; with --no-build-isolation it builds against the torch installed here)"
        )
    from . import _hotloop  # noqa: PLC0415 (after the check, on purpose)

    return _hotloop


native = _load()
