"""Checkpoints: plain dicts of tensors and primitives, loadable with `torch.load(weights_only=True)`,
written atomically so a crash mid-write never leaves a truncated file behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from grpo_robot.policies import Policy, build_policy

FORMAT_VERSION = 1


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temporary file in the same folder, fsynced and
    renamed over `path` when the block ends without error, removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_atomic(obj: dict[str, Any], path: str | Path) -> None:
    """`torch.save` to `path` atomically (see `atomic_file`)."""
    with atomic_file(path) as f:
        torch.save(obj, f)


def resolve(path: str | Path) -> Path:
    """A checkpoint file, or a run directory meaning its `checkpoints/last.pt`."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoints" / "last.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path} (give a .pt file or a run directory)")
    return path


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    ckpt = torch.load(resolve(path), map_location=map_location, weights_only=True)
    if ckpt.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: checkpoint format {ckpt.get('format_version')!r}, expected {FORMAT_VERSION}")
    return ckpt


def policy_record(policy: Policy) -> dict[str, Any]:
    return {
        "type": policy.kind,
        "obs_dim": policy.obs_dim,
        "action_dim": policy.action_dim,
        "kwargs": policy.init_kwargs(),
        "state_dict": policy.state_dict(),
    }


def policy_from_record(record: dict[str, Any], device: str | torch.device = "cpu") -> Policy:
    policy = build_policy(record["type"], record["obs_dim"], record["action_dim"], **record["kwargs"])
    policy.load_state_dict(record["state_dict"])
    return policy.to(device)
