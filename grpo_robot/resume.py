"""Resuming a run: the checkpoint's config is the run's config; the command line may change only
what does not change what is trained (how long, how often it is evaluated and saved, where).

`resumed_config(saved, composed, touched)` builds the config of a resumed run; `check_same_run`
refuses, in one line naming both values, a config that would train something else than the run
the checkpoint belongs to (another env, policy, algorithm or seed).
"""

from __future__ import annotations

import copy
from typing import Any

from grpo_robot.config import TrainConfig, config_dict, migrate, policy_kwargs, to_train_config
from grpo_robot.rundir import shell_override

# keys a resumed run may change: budgets, schedules of evaluation and saving, how evaluation acts
# (a tokenized policy's decode too: training samples), the device, the console, and physics threads
# (bit-identical for any count)
SAFE_KEYS = (
    "iterations", "max_env_steps", "time_limit_min", "eval_every", "eval_min_train_success", "eval_seeds",
    "eval_deterministic", "policy.decode", "eval_at_start", "target_success", "checkpoint_every", "progress",
    "device", "resume",
    "env.nthread", "env.step_timeout_s", "env.vector", "rollout", "ray", "loggers", "wandb", "video_every",
    "video_episodes", "render", "hooks", "plugins",
)  # fmt: skip


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested dict's leaves by dotted key (lists, and empty dicts below the root, are leaves)."""
    if not isinstance(node, dict) or (not node and prefix):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}{key}." if isinstance(value, dict) and value else f"{prefix}{key}"))
    return out


def _is_safe(key: str) -> bool:
    return any(key == k or key.startswith(f"{k}.") for k in SAFE_KEYS)


def touched_keys(with_overrides: dict[str, Any], without: dict[str, Any]) -> set[str]:
    """The leaves the command line's overrides changed (a group override changes many)."""
    a, b = flatten(with_overrides), flatten(without)
    return {k for k in a.keys() | b.keys() if a.get(k, "<missing>") != b.get(k, "<missing>")}


def _set(node: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    for p in parents:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[leaf] = value


def resumed_config(saved: dict[str, Any], composed: dict[str, Any], touched: set[str]) -> TrainConfig:
    """The checkpoint's config `saved` with the values of the `touched` keys taken from the
    command line's config `composed` (whether safe or not: `check_same_run` judges)."""
    values = copy.deepcopy(config_dict(to_train_config(migrate(saved))))
    flat = flatten(composed)
    for key in sorted(touched):
        if key in flat:
            _set(values, key, flat[key])
    return to_train_config(values)


def mirror_in_effect(cfg: TrainConfig) -> list[dict[str, Any]] | None:
    """The mirror axes `cfg`'s policy takes (`policy.mirror_axes`, else the env's own), or None
    when it does not mirror. A run from before `env.mirror_axes` resumed with its preset, which
    now declares the env's axes, mirrors as it did: the same axes, or none."""
    if not cfg.policy.mirror:
        return None
    try:
        return policy_kwargs(cfg.policy, cfg.env)["mirror"]
    except ValueError:  # no axes at all: validation names it
        return None


def check_same_run(saved: dict[str, Any], cfg: TrainConfig, where: str) -> None:
    """`ValueError` when `cfg` differs from the checkpoint's config `saved` in a key that is not
    in `SAFE_KEYS`; the message names the key and both values."""
    theirs_cfg = to_train_config(migrate(saved))
    theirs, mine = flatten(config_dict(theirs_cfg)), flatten(config_dict(cfg))
    for flat, run in ((theirs, theirs_cfg), (mine, cfg)):  # where the axes are declared does not matter
        flat.pop("env.mirror_axes", None)
        flat.pop("env.mirror_obs_keys", None)
        flat["policy.mirror_axes"] = mirror_in_effect(run)
    if cfg.algo.lr_schedule == "linear":  # the rate decays over the budget: a new budget is another schedule
        for key in ("iterations", "max_env_steps"):
            if mine.get(key) != theirs.get(key):
                raise ValueError(
                    f"{where}: {key}={mine.get(key)!r} differs from the run's {key}={theirs.get(key)!r}; with "
                    "algo.lr_schedule=linear the learning rate decays to 0 over the run's budget, so another budget "
                    "would change what was trained so far: resume with the run's budget, or start a new run "
                    f"with {shell_override('init_from', where.split('=', 1)[-1])}"
                )  # fmt: skip
    for key in sorted(mine.keys() | theirs.keys()):
        if _is_safe(key) or mine.get(key) == theirs.get(key):
            continue
        may_change = ", ".join(k for k in SAFE_KEYS if k != "resume")
        raise ValueError(
            f"{where}: {key}={mine.get(key)!r} differs from the run's {key}={theirs.get(key)!r}; a resumed run "
            f"keeps its env, policy, algorithm and seed (only {may_change} may change); to train "
            "something else from its weights, start a new run with init_from="
            f"{where.split('=', 1)[-1]}"
        )
