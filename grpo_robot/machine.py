"""What a measurement ran on: printed and stored next to every reported number."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe() -> dict[str, str | int | None]:
    """CPU, cores, GPU (if torch sees one) and the versions that decide speed and results."""
    import mujoco
    import numpy as np
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
    }


def one_line(info: dict | None = None) -> str:
    info = describe() if info is None else info
    gpu = f", {info['gpu']}" if info.get("gpu") else ", no GPU"
    return (
        f"{info['cpu']}, {info['cores']} cores{gpu}; Python {info['python']}, torch {info['torch']}, "
        f"mujoco {info['mujoco']}, numpy {info['numpy']}"
    )
