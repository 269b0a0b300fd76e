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
        "type": policy.type,
        "obs_dim": policy.obs_dim,
        "action_dim": policy.action_dim,
        "kwargs": policy.init_kwargs(),
        "state_dict": policy.state_dict(),
    }


def policy_from_record(record: dict[str, Any], device: str | torch.device = "cpu") -> Policy:
    policy = build_policy(record["type"], record["obs_dim"], record["action_dim"], **record["kwargs"])
    policy.load_state_dict(record["state_dict"])
    return policy.to(device)


# architecture keys that must match between an init_from checkpoint and the config; the
# others (temperature, init_std) are sampling settings or superseded by the loaded weights
ARCHITECTURE_KEYS = ("hidden_sizes", "activation", "obs_norm", "state_dependent_std", "squash", "bins", "head",
                     "embed_dim")  # fmt: skip


def initial_policy_weights(path: str, cfg, env, device: torch.device) -> dict[str, torch.Tensor]:
    """The state_dict of the policy in checkpoint `path` (a BC or training checkpoint), after
    checking that it fits the `TrainConfig` `cfg` and `env` (name, obs_dim, action_dim); a mismatch
    raises `ValueError` naming both sides."""
    from grpo_robot.config import policy_kwargs
    from grpo_robot.environment import check_identity, env_identity

    ckpt = load(path, map_location=device)
    record = ckpt["policy"]
    where = f"init_from={path!s}"
    if record["type"] != cfg.policy.type:
        raise ValueError(f"{where} holds a {record['type']} policy, but the config has policy.type={cfg.policy.type}")
    their_env = (ckpt.get("config") or {}).get("env")
    if their_env:  # the same env, kwargs and observation layout
        theirs = {**env_identity(their_env), "obs_dim": record["obs_dim"], "action_dim": record["action_dim"]}
        check_identity(theirs, env_identity(cfg.env, env), where)
    if (record["obs_dim"], record["action_dim"]) != (env.obs_dim, env.action_dim):
        raise ValueError(
            f"{where} has obs_dim={record['obs_dim']}, action_dim={record['action_dim']}, but {env.name} has "
            f"obs_dim={env.obs_dim}, action_dim={env.action_dim}"
        )
    mine = policy_kwargs(cfg.policy)
    for key in ARCHITECTURE_KEYS:
        if key in mine and key in record["kwargs"] and record["kwargs"][key] != mine[key]:
            raise ValueError(
                f"{where} has policy.{key}={record['kwargs'][key]!r}, but the config has policy.{key}={mine[key]!r}"
            )
    return record["state_dict"]


def check_resumable(ckpt: dict[str, Any], policy: Policy, needs_reference: bool, needs_critic: bool) -> None:
    """`ValueError` unless checkpoint `ckpt` holds what resuming into `policy` needs."""
    record, mine = ckpt["policy"], policy_record(policy)
    for key in ("type", "obs_dim", "action_dim", "kwargs"):
        if record[key] != mine[key]:
            raise ValueError(f"cannot resume: checkpoint policy {key}={record[key]!r}, config gives {mine[key]!r}")
    if needs_reference and ckpt["reference"] is None:
        raise ValueError("cannot resume with algo.kl.beta > 0: the checkpoint holds no reference policy")
    if needs_critic and ckpt.get("critic") is None:
        raise ValueError("cannot resume with a critic (algo.advantage=gae): the checkpoint holds no value function")
