"""What a measurement ran on: printed and stored next to every reported number.

The one description of the machine: the trainer stores `describe()` in summary.json, and every
benchmark and report prints `one_line()` or builds its header from `describe()`.
"""

from __future__ import annotations

import os
import platform
from importlib import import_module


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe(*packages: str) -> dict[str, str | int | None]:
    """CPU, cores (usable by this process, and logical), OS, GPU (if torch sees one) and the
    versions that decide speed and results; `packages` (import names, e.g. "gymnasium") adds
    their versions under those names."""
    import mujoco
    import numpy as np
    import torch

    from grpo_robot.batched import default_threads

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    info: dict[str, str | int | None] = {
        "cpu": cpu_model(),
        "cores": default_threads(),
        "logical_cores": os.cpu_count(),
        "os": platform.platform(),
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
    }
    for name in packages:
        info[name] = import_module(name).__version__
    return info


def one_line(info: dict | None = None) -> str:
    """`describe()` (or a stored one, e.g. from summary.json) as one line."""
    info = describe() if info is None else info
    gpu = f", {info['gpu']}" if info.get("gpu") else ", no GPU"
    return (
        f"{info['cpu']}, {info['cores']} cores{gpu}; Python {info['python']}, torch {info['torch']}, "
        f"mujoco {info['mujoco']}, numpy {info['numpy']}"
    )
