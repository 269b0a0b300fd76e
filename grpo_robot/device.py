"""Which torch device a config's `device` names."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """`auto` is CUDA when present, else the CPU; any other name is taken as it is."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
