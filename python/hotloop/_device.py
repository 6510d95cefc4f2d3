"""The device a `device` argument means in this process: one rule for hotloop.Loader and hotloop.Run."""

import os

import torch


def env_int(name, default):
    """$name as an int, `default` when unset or empty; ValueError naming it when it is not an integer."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"hotloop: ${name} is {value!r}, not an integer") from None


def resolve_device(device):
    """`device` ("cpu", "cuda", "cuda:1", a torch.device) as the torch.device it means here.

    An index given stands. "cuda" alone: the current CUDA device once this process has set one
    (torch.cuda.set_device, seen as a current device other than 0); else, under a launcher that sets
    $LOCAL_RANK (torchrun, hotloop launch), this rank's GPU: LOCAL_RANK modulo the visible devices (so where
    the launcher gives each process one visible GPU, that is cuda:0); else the current device (cuda:0).
    The Loader delivers to it and the Run times and reads memory on it: both resolve it here.
    """
    device = torch.device(device)
    if device.type != "cuda" or device.index is not None or not torch.cuda.is_available():
        return device
    current = torch.cuda.current_device()
    if current == 0 and "LOCAL_RANK" in os.environ:
        visible = max(1, torch.cuda.device_count())
        return torch.device("cuda", env_int("LOCAL_RANK", 0) % visible)
    return torch.device("cuda", current)
