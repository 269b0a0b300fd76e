"""What a measurement ran on: printed and stored next to every reported number.

The one description of the machine: the trainer stores `describe()` in summary.json, and every
benchmark and report prints `one_line()` or builds its header from `describe()`.
"""

from __future__ import annotations

import os
import platform
from importlib import import_module


def _cpuinfo(field: str) -> str | None:
    """The first `field` of /proc/cpuinfo (Linux), else None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_vendor() -> str:
    """The CPU's vendor id (`GenuineIntel`, `AuthenticAMD`) from /proc/cpuinfo, else what
    `platform.processor()` says, else "unknown"."""
    return _cpuinfo("vendor_id") or platform.processor() or "unknown"


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown"


def describe(*packages: str) -> dict[str, str | int | None]:
    """CPU, cores (usable by this process, and logical), OS, GPU (if torch sees one) and the
    versions that decide speed and results; `packages` (import names, e.g. "gymnasium") adds
    their versions under those names."""
    import mujoco
    import numpy as np
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    info: dict[str, str | int | None] = {
        "cpu": cpu_model(),
        "cores": usable_cores(),
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
    """`describe()` (or a stored one, e.g. from summary.json; a missing entry shows as ?) as one line."""
    info = describe() if info is None else info
    get = lambda key: info.get(key, "?")  # noqa: E731
    gpu = f", {info['gpu']}" if info.get("gpu") else ", no GPU"
    return (
        f"{get('cpu')}, {get('cores')} cores{gpu}; Python {get('python')}, torch {get('torch')}, "
        f"mujoco {get('mujoco')}, numpy {get('numpy')}"
    )


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; all logical cores where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate without swapping: /proc/meminfo's
    MemAvailable, or less where a cgroup limit leaves less; None where neither is known."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    for limit_path, usage_path in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),  # cgroup v2
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),  # v1
    ):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < 1 << 60:  # v1 writes a huge number for none
            left = max(limit - usage, 0)
            available = left if available is None else min(available, left)
            break
    return available


def format_bytes(n: float) -> str:
    """`4.1 TB`, `21.3 GB`, `512 MB` (decimal units)."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{n:.0f} B"


def mujoco_gl_error() -> str | None:
    """A one-line error for a `MUJOCO_GL` that `import mujoco` would refuse with a traceback (the
    values its bindings accept on this system), or None."""
    value = os.environ.get("MUJOCO_GL", "").strip().lower()
    allowed = ["egl", "osmesa", "glx", "glfw"] if platform.system() == "Linux" else ["glfw"]
    allowed += {"Windows": ["wgl"], "Darwin": ["cgl"]}.get(platform.system(), [])
    switches = ("", "enable", "enabled", "on", "true", "1", "disable", "disabled", "off", "false", "0")
    if value in switches or value in allowed:
        return None
    return (f"MUJOCO_GL={os.environ['MUJOCO_GL']!r} is invalid: must be one of {', '.join(allowed)} (or unset: "
            "the first headless one that renders is chosen)")
