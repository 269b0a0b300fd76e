"""Every range check of the configuration, in one place, before any environment is built.

A bad value raises `ConfigError` with one line naming the key, the value and what is allowed.
Three layers, each generic where it can be:

- `check_values` walks a config dataclass, nested ones included: every float must be finite,
  every string non-empty, every `choice`/`registered` field one of its values
  (grpo_robot/config/schema.py), and every field listed in `RANGES` inside its range. A new
  float field is checked for finiteness without new code; a bound is one line in `RANGES`.
- per-command functions add what depends on several keys: `validate` (training),
  `validate_eval`, `validate_collect`, `validate_pretrain`, and the shared `validate_env`,
  `validate_policy`, `validate_demos`, `validate_bc`, `validate_device`.
- sizes bounded by this machine (grpo_robot/machine.py): `env.nthread` by its cores, and the
  memory one iteration or one evaluation takes, estimated from the config before anything is
  allocated, by its available memory (`check_memory`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from grpo_robot.config.schema import (
    AlgoConfig,
    BCConfig,
    ClipConfig,
    CollectDemosConfig,
    CriticConfig,
    CurriculumConfig,
    DemoConfig,
    DynamicSamplingConfig,
    EnvConfig,
    EvalConfig,
    KLConfig,
    PolicyConfig,
    PretrainConfig,
    RenderConfig,
    RolloutConfig,
    StartReplayConfig,
    StdAnnealConfig,
    TrainConfig,
    env_source,
)
from grpo_robot.registry import ADVANTAGE_ESTIMATORS, DECODES, POLICY_LOSSES, Registry, needs_critic
from grpo_robot.seed_ranges import DEMO_RUNS, DEMO_SEEDS_PER_RUN, EVAL_SEED_START, TEST_SEED_START


class ConfigError(ValueError):
    """A config value out of range; the message is one line naming key, value and what is allowed."""


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is invalid: {allowed}")


# -- bounds ------------------------------------------------------------------------------------

MAX_VIDEO_EPISODES = 64
MAX_FRAME = (1920, 1080)  # pixels; the built-in tasks' offscreen buffer is smaller (envs/scene.py)
# a seed is one 32-bit word of the random streams' keys ([seed, iteration, stream]: grpo_robot/seeding.py);
# numpy splits a larger one into words, so seed a + 2**32 * b would draw seed a's streams of iteration b
MAX_SEED = 2**32
MAX_EVAL_SEEDS = TEST_SEED_START - EVAL_SEED_START  # each half of the held-out range (grpo_robot/seed_ranges.py)
MINUTES_PER_YEAR = 365 * 24 * 60
MAX_HORIZON = 1_000_000  # control steps per episode: hours of simulated time at any control rate
MAX_EPOCHS = 1000  # passes over one batch: epochs x minibatches optimizer steps per iteration
MAX_SAMPLING_ROUNDS = 100  # each round simulates a whole iteration's groups again
MAX_BC_STEPS = 1_000_000  # gradient steps of behaviour cloning, run before any training output
MAX_DEMO_EPISODES = 10_000  # demonstrations collected before any training output
MAX_GYM_WORLDS = 4096  # Gymnasium worlds per iteration: each is a whole env object (or process)
# What one Gymnasium world takes at least: a FetchPush-v4 world measured 9.2 MB (RSS over 256
# worlds, sync); other MuJoCo envs are as large or larger (robosuite: a whole robot model).
GYM_WORLD_BYTES = 8e6
MEMORY_FRACTION = 0.8  # of the memory available now, the most one run's estimate may take


@dataclass(frozen=True)
class Range:
    """`low <= value <= high` (either end open, or absent). `guard`: the high end is a sanity
    bound against absurd values, named in the message only when exceeded. `why` follows the
    range in the message; `null` says what null means where the field may be null."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    guard: bool = False
    why: str = ""
    null: str = ""

    def contains(self, v: float) -> bool:
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return self.high is None or (v < self.high if self.high_open else v <= self.high)

    def text(self, value: float, nullable: bool) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {_num(self.low)}"
        high = None if self.high is None else f"{'<' if self.high_open else '<='} {_num(self.high)}"
        why = self.why
        if self.guard and self.low is not None and math.isfinite(value) and value < self.low:
            high, why = None, ""  # only the natural end was crossed
        if low and high:
            text = (
                f"in {'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.high_open else ']'}"
            )
        else:
            text = low or high or "a number"
        if why:
            text += f" ({why})"
        if nullable:
            text += f" or null ({self.null})" if self.null else " or null"
        return f"must be {text}"


def _num(x: float) -> str:
    """1000000 for a whole number (no exponent, no separators: they read as list commas), else 0.28."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# the bounds the policies hold a std and a learned temperature to (grpo_robot/policies: LOG_STD_MIN and
# LOG_STD_MAX, LOG_TEMPERATURE_MIN and LOG_TEMPERATURE_MAX; tests/test_config_fuzz.py checks they agree):
# a value outside was accepted and then replaced by the bound without a word
STD_BOUNDS = (math.exp(-5.0), math.e)
TEMPERATURE_BOUNDS = (0.02, 50.0)
_STD_WHY = "the policy holds its std to [e^-5, e]"

# (config class, field) -> its range. A config class used in several places (bc in training and
# in pretrain_bc) is bounded the same everywhere.
RANGES: dict[tuple[type, str], Range] = {
    (EnvConfig, "horizon"): Range(1, MAX_HORIZON, guard=True, null="the env's own"),
    (EnvConfig, "nthread"): Range(1, null="all cores"),  # and at most the cores (validate_env)
    # a bound far below one Python call (1e-300) would only time out every healthy world
    (EnvConfig, "step_timeout_s"): Range(0.01, 86400, why="seconds; 86400 is a day"),
    (PolicyConfig, "init_std"): Range(*STD_BOUNDS, why=_STD_WHY),
    (PolicyConfig, "max_std"): Range(*STD_BOUNDS, why=_STD_WHY, null="e"),
    (PolicyConfig, "min_std"): Range(*STD_BOUNDS, why=_STD_WHY, null="e^-5"),
    # far below the floor the float32 logits it divides overflow, and sampling gives NaN actions
    (PolicyConfig, "temperature"): Range(1e-6, 100, why="it divides the logits"),
    (PolicyConfig, "bins"): Range(2, 65536, guard=True),
    (PolicyConfig, "embed_dim"): Range(1, 65536, guard=True),
    (PolicyConfig, "free_logits_lr"): Range(0, 10, why="a fraction of algo.lr; 0 freezes the free logits"),
    (ClipConfig, "eps"): Range(0, 1, low_open=True, high_open=True),
    (ClipConfig, "low"): Range(0, 1, low_open=True, high_open=True, null="eps"),
    (ClipConfig, "high"): Range(0, 10, low_open=True, why="the ratio is clipped at 1 + high", null="eps"),
    (ClipConfig, "dual"): Range(
        1, 100, low_open=True, why="a negative advantage's objective is at least dual x A", null="off"
    ),  # fmt: skip
    (KLConfig, "beta"): Range(0, 1000),
    (DynamicSamplingConfig, "max_rounds"): Range(
        1, MAX_SAMPLING_ROUNDS, guard=True, why="each round simulates the iteration's groups again"
    ),  # fmt: skip
    (StartReplayConfig, "fraction"): Range(0, 1, why="a share of algo.groups_per_iter; 0 is off"),
    (StartReplayConfig, "max_replays"): Range(1, 1000, guard=True, why="times one start is replayed"),
    (StdAnnealConfig, "final"): Range(0, 10, low_open=True, why="a std on actions that live in [-1, 1]", null="off"),
    (StdAnnealConfig, "iterations"): Range(1, 1000000, guard=True, why="iterations over which the cap falls"),
    (CurriculumConfig, "start"): Range(0, 1, low_open=True, high_open=True, why="1 is the task's own starts",
                                       null="off"),  # fmt: skip
    (CurriculumConfig, "step"): Range(0, 1, low_open=True, why="added to a difficulty in (0, 1]"),
    (CurriculumConfig, "threshold"): Range(0, 1, low_open=True, why="a training success rate"),
    (CriticConfig, "gamma"): Range(0, 1, low_open=True),
    (CriticConfig, "gae_lambda"): Range(0, 1),
    (CriticConfig, "vf_coef"): Range(0, 1000, low_open=True),
    (CriticConfig, "shaping_coef"): Range(0, 1000, low_open=True),
    (AlgoConfig, "adv_eps"): Range(0, 1, why="it is added to the group std of 0/1 outcomes"),
    (AlgoConfig, "group_size"): Range(1),  # and >= 2 without a critic (validate)
    (AlgoConfig, "groups_per_iter"): Range(1),
    (AlgoConfig, "epochs"): Range(1, MAX_EPOCHS, guard=True, why="passes over each batch"),
    (AlgoConfig, "minibatches"): Range(1),  # and at most the trajectories (validate)
    (AlgoConfig, "lr"): Range(0, 1, low_open=True),
    (AlgoConfig, "desired_kl"): Range(0, 10, low_open=True),
    (AlgoConfig, "max_grad_norm"): Range(0, low_open=True, null="no clipping"),
    (AlgoConfig, "max_skipped_steps"): Range(1),
    (AlgoConfig, "entropy_coef"): Range(0, 1000),
    (AlgoConfig, "noise_correlation"): Range(0, 1, high_open=True, why="1 would never draw fresh noise"),
    (AlgoConfig, "train_horizon"): Range(1, MAX_HORIZON, guard=True, null="env.horizon"),  # and <= it (validate)
    (DemoConfig, "episodes"): Range(
        1, MAX_DEMO_EPISODES, guard=True, why="they are collected before anything else is printed"
    ),  # fmt: skip
    (DemoConfig, "noise"): Range(0, 10, why="a std on actions that live in [-1, 1]"),
    (DemoConfig, "seed"): Range(0, DEMO_RUNS, high_open=True, null="the run's seed; 0 for collect_demos.py"),
    (DemoConfig, "max_attempts"): Range(
        1, DEMO_SEEDS_PER_RUN, guard=True, why="the seeds of one demo run", null="10 x episodes + 64"
    ),  # fmt: skip
    (BCConfig, "max_steps"): Range(
        1, MAX_BC_STEPS, guard=True, why="behaviour cloning runs before anything else is printed"
    ),  # fmt: skip
    (BCConfig, "batch_size"): Range(1),
    (BCConfig, "lr"): Range(0, 1, low_open=True),
    (BCConfig, "weight_decay"): Range(0, 1000),
    (BCConfig, "val_fraction"): Range(0, 1, high_open=True),
    (BCConfig, "eval_every"): Range(1),
    (BCConfig, "patience"): Range(1),
    (BCConfig, "token_sigma"): Range(0),
    (BCConfig, "seed"): Range(0, MAX_SEED, high_open=True, why="one 32-bit word of every stream's key",
                              null="the run's seed; 0 for pretrain_bc.py"),  # fmt: skip
    (RolloutConfig, "workers"): Range(1, 1024, guard=True),
    (RolloutConfig, "cpus_per_worker"): Range(0, 1024, low_open=True),
    (RolloutConfig, "worker_timeout_s"): Range(0, 86400, low_open=True, why="seconds; 86400 is a day"),
    (RolloutConfig, "max_restarts"): Range(0, 1000),
    (RolloutConfig, "split"): Range(1, 64, why="parts of the worlds"),
    (RolloutConfig, "policy_threads"): Range(1, 1024, null="torch's own"),
    (TrainConfig, "seed"): Range(0, MAX_SEED, high_open=True, why="one 32-bit word of every stream's key"),
    (TrainConfig, "iterations"): Range(1),
    (TrainConfig, "max_env_steps"): Range(1, null="no budget"),
    (TrainConfig, "time_limit_min"): Range(
        0, MINUTES_PER_YEAR, low_open=True, guard=True, why="a year", null="no limit"
    ),  # fmt: skip
    (TrainConfig, "eval_every"): Range(1),
    (TrainConfig, "eval_seeds"): Range(1, MAX_EVAL_SEEDS, guard=True, why="the held-out seed range"),
    (TrainConfig, "target_success"): Range(0, 1, low_open=True, null="off"),
    (TrainConfig, "eval_min_train_success"): Range(0, 1, null="evaluate every eval_every iterations"),
    (TrainConfig, "checkpoint_every"): Range(1),
    (TrainConfig, "video_every"): Range(0, why="evaluations between videos; 0 = none"),
    (TrainConfig, "video_episodes"): Range(1, MAX_VIDEO_EPISODES, guard=True, why="each is rendered frame by frame"),
    (EvalConfig, "video"): Range(0, MAX_VIDEO_EPISODES, guard=True, why="each is rendered frame by frame"),
    (RenderConfig, "width"): Range(16, MAX_FRAME[0], guard=True, why="pixels"),
    (RenderConfig, "height"): Range(16, MAX_FRAME[1], guard=True, why="pixels"),
    (EvalConfig, "n_seeds"): Range(1, MAX_EVAL_SEEDS, guard=True, why="the held-out seed range"),
    (EvalConfig, "seed"): Range(0, MAX_SEED, high_open=True, why="one 32-bit word of every stream's key"),
    (EvalConfig, "worlds"): Range(1, MAX_EVAL_SEEDS, guard=True, null="the run's training worlds"),
    (PretrainConfig, "eval_worlds"): Range(1, MAX_EVAL_SEEDS, guard=True),
    (CollectDemosConfig, "nthread"): Range(1, null="all cores"),  # and at most the cores (validate_collect)
    (PretrainConfig, "eval_seeds"): Range(0, MAX_EVAL_SEEDS, guard=True, why="0 skips the evaluation"),
}

# what an empty string field should have been (by field name); any other: "a non-empty string"
_STRING_KINDS = {
    "resume": "a path", "init_from": "a path", "path": "a path", "checkpoint": "a path", "output": "a path",
    "dataset": "a path or a minari:<dataset id>", "expert": "module:attr", "entry_point": "module:Class",
    "success_fn": "module:function", "id": "a registered Gymnasium id", "success_key": "a key of the env's info",
    "device": "auto, cpu, cuda or cuda:N", "task": "a built-in task", "imports": "module names",
}  # fmt: skip


def _spelled(name: str) -> str:
    return "import" if name == "imports" else name


def _nullable(f: dataclasses.Field) -> bool:
    return "None" in str(f.type) or f.type is Any or str(f.type) == "Any"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_values(node: Any, prefix: str = "") -> None:
    """Check every field of the config dataclass `node`, nested dataclasses included: floats
    (alone or in lists) finite, strings non-empty, `choice`/`registered` fields one of their
    values, and the fields in `RANGES` inside their range."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        key = f"{prefix}{_spelled(f.name)}"
        if dataclasses.is_dataclass(value):
            check_values(value, f"{key}.")
            continue
        table = f.metadata.get("registry", ())
        allowed = f.metadata.get("choices") or (table.names() if isinstance(table, Registry) else tuple(table))
        if allowed and value is not None and value not in allowed:
            _check(False, key, value, f"must be one of {', '.join(allowed)}")
        rng = RANGES.get((type(node), f.name))
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                if isinstance(value, list | tuple):
                    _check(False, key, value, "must be a list of finite numbers")
                bounds = rng.text(item, _nullable(f)).removeprefix("must be ") if rng else ""
                extra = f" {bounds}" if rng else (" or null" if _nullable(f) else "")
                _check(False, key, value, f"must be a finite number{extra}")
            if isinstance(item, str) and not item.strip():
                kind = _STRING_KINDS.get(f.name, "a non-empty string")
                _check(False, key, value, f"must be {kind}" + (" or null" if _nullable(f) else ""))
        if rng is not None and _is_number(value) and not rng.contains(value):
            _check(False, key, value, rng.text(value, _nullable(f)))


def _check_keys(node: Any, cls: type, prefix: str = "") -> None:
    """Refuse a key of the composed `node` that `cls` does not have (one appended with `+key=...`
    passes Hydra's composition) or a missing mandatory value, nested nodes included."""
    from omegaconf import DictConfig, OmegaConf

    from grpo_robot.config.errors import unknown_key_message

    fields = {_spelled(f.name): f for f in dataclasses.fields(cls)}
    for name in map(str, node.keys()):
        key = f"{prefix}{name}"
        if name == "hydra" and not prefix:
            continue
        if name not in fields:
            raise ConfigError(unknown_key_message(key, list(fields)))
        if OmegaConf.is_missing(node, name):
            kind = _STRING_KINDS.get(name, "a value")
            raise ConfigError(f"{key} is missing: give {key}=<{kind.removeprefix('a ')}>")
        sub_cls = next((c for c in _CONFIG_CLASSES if c.__name__ == str(fields[name].type)), None)
        if sub_cls is not None and isinstance(node._get_node(name), DictConfig):
            _check_keys(node[name], sub_cls, f"{key}.")


def _typed(cfg: Any, cls: type, prefix: str = "") -> Any:
    """`cfg` as a `cls` dataclass: itself, or a composed config (DictConfig or dict) whose keys
    are checked first (`_check_keys`); a value that does not convert is a one-line `ConfigError`."""
    if isinstance(cfg, cls):
        return cfg
    from omegaconf import DictConfig, OmegaConf

    from grpo_robot.config.errors import one_line

    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg or {}))
    _check_keys(node, cls, prefix)
    try:
        if cls in (TrainConfig, EnvConfig):  # the env node may spell `import`
            from grpo_robot.config.store import env_config, to_train_config

            return to_train_config(node) if cls is TrainConfig else env_config(node)
        values = OmegaConf.to_container(node, resolve=True)
        values.pop("hydra", None)  # type: ignore[union-attr]
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), values))
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001  (an interpolation that does not resolve, a wrong type)
        raise ConfigError(one_line(err, prefix)) from None


_CONFIG_CLASSES = (EnvConfig, PolicyConfig, ClipConfig, KLConfig, DynamicSamplingConfig, StartReplayConfig,
                   StdAnnealConfig, CurriculumConfig, CriticConfig, AlgoConfig, DemoConfig, BCConfig, TrainConfig,
                   EvalConfig, CollectDemosConfig, PretrainConfig)  # fmt: skip


# -- training ----------------------------------------------------------------------------------


def check_curriculum(cfg: TrainConfig) -> None:
    """`algo.curriculum` needs a built-in task with easier starts."""
    from grpo_robot.envs import TASK_NAMES, TASKS

    start = cfg.algo.curriculum.start
    easier = sorted(name for name, task in TASKS.items() if task.easier_starts)
    _check(bool(cfg.env.task) and getattr(TASK_NAMES.get(cfg.env.task), "easier_starts", False),
           "algo.curriculum.start", start, f"needs a built-in task with easier starts ({', '.join(easier)}); "
           f"{env_source(cfg.env)} has none: set it to null")  # fmt: skip


def check_mirror(pol: PolicyConfig, env: EnvConfig) -> None:
    """`policy.mirror` needs the env's mirror symmetries (a built-in task's own, or for another env
    `policy.mirror_axes` or the env config's `env.mirror_axes`) and a policy class that takes them."""
    if pol.mirror_axes is not None:
        _check_mirror_axes(pol.mirror_axes, env, "policy.mirror_axes")
    if not pol.mirror:
        return
    from grpo_robot.config.schema import constructor_arguments, given_axes, plain
    from grpo_robot.envs import TASK_NAMES
    from grpo_robot.registry import POLICIES

    if env.task:
        declared = sorted(name for name, task in TASK_NAMES.items() if task.mirror_key is not None and "-v" not in name)
        _check(getattr(TASK_NAMES.get(env.task), "mirror_key", None) is not None, "policy.mirror", pol.mirror,
               f"needs a task that declares its mirror symmetries ({', '.join(declared)}); {env_source(env)} "
               "declares none")  # fmt: skip
    else:
        _check(bool(given_axes(pol, env)), "policy.mirror", pol.mirror,
               f"needs the env's mirror symmetries: {env_source(env)} is not a built-in task, so declare them in its "
               "env config, env.mirror_axes=[{key: [i, j], obs: [...], action: [...]}, ...], or give them as "
               "policy.mirror_axes (docs/custom_envs.md)")  # fmt: skip
    if pol.mirror_axes is None and env.mirror_obs_keys is not None:  # the env's own axes, for its layout
        _check(env.obs_keys is not None and list(env.obs_keys) == list(env.mirror_obs_keys), "env.obs_keys",
               env.obs_keys, f"moves the observation entries that env.mirror_axes count in (they are for "
               f"env.obs_keys={list(env.mirror_obs_keys)}): give policy.mirror_axes for this layout, or "
               "keep env.obs_keys")  # fmt: skip
    axes = plain(given_axes(pol, env))
    swaps_actions = isinstance(axes, list) and any(isinstance(axis, dict) and axis.get("swap_action") for axis in axes)
    _check(not (swaps_actions and pol.type == "tokenized" and pol.head == "autoregressive"), "policy.head", pol.head,
           "must be factorized where the mirror axes swap actions (swap_action): the autoregressive head decodes "
           "the dimensions in a fixed order")  # fmt: skip
    if pol.type not in POLICIES.builtin and pol.type in POLICIES:  # a plugin's class (the built-in ones take them)
        _check("mirror" in constructor_arguments(POLICIES[pol.type]), "policy.mirror", pol.mirror,
               f"needs a policy class that takes mirror axes; policy.type={pol.type}'s constructor does not")


def _check_mirror_axes(axes: Any, env: EnvConfig, key: str) -> None:
    """`policy.mirror_axes` or `env.mirror_axes` (`key`): for an env that is not a built-in task
    (which declares its own), axes that pick a frame (grpo_robot/symmetry.py; their bounds are
    checked against the env's sizes when the policy is built)."""
    from grpo_robot.config.schema import plain
    from grpo_robot.symmetry import axes_problem

    _check(not env.task, key, axes, f"is for an env that is not a built-in task; {env_source(env)} declares its own "
           "(Task.mirror_axes)")  # fmt: skip
    problem = axes_problem(plain(axes))
    if problem is not None:
        where, value, allowed = problem
        _check(False, f"{key}{where}", value, allowed)


def policy_family(kind: str) -> str | None:
    """`gaussian` or `tokenized` for those policies and for the registered classes that extend them
    (a plugin's subclass takes their settings), else None. The built-in names load nothing."""
    if kind in ("gaussian", "tokenized"):
        return kind
    from grpo_robot.registry import POLICIES

    if kind not in POLICIES:
        return None
    from grpo_robot.policies import GaussianPolicy, TokenizedPolicy

    cls = POLICIES[kind]
    return "gaussian" if issubclass(cls, GaussianPolicy) else "tokenized" if issubclass(cls, TokenizedPolicy) else None


def check_plugins(cfg: TrainConfig) -> None:
    """Import `plugins`, and check that each of `hooks` imports and can be called (one line each)."""
    from grpo_robot.registry import import_plugins

    try:
        import_plugins(cfg.plugins)
        if cfg.hooks:
            from grpo_robot.gym_vector import load_callable

            for path in cfg.hooks:
                _check(":" in str(path), "hooks", cfg.hooks, f"{path!r} must be module:Class (or module:function)")
                load_callable(path, "hooks")
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(str(err)) from None


def validate(cfg: TrainConfig) -> None:
    """Raise `ConfigError` on the first out-of-range value of a training config."""
    cfg = _typed(cfg, TrainConfig)
    check_plugins(cfg)  # before the names they register are checked
    check_memory(cfg)  # first: a size this machine cannot hold is refused with its estimate
    validate_env(cfg.env)
    validate_policy(cfg.policy)
    check_mirror(cfg.policy, cfg.env)
    check_values(cfg.algo, "algo.")
    algo, critic, sampling = cfg.algo, cfg.algo.critic, cfg.algo.dynamic_sampling
    _check(not algo.options or algo.advantage not in ADVANTAGE_ESTIMATORS.builtin
           or algo.policy_loss not in POLICY_LOSSES.builtin, "algo.options", dict(algo.options),
           f"is for a registered advantage or policy loss of one's own (plugins=[...]); algo.advantage="
           f"{algo.advantage} and algo.policy_loss={algo.policy_loss} take none")  # fmt: skip
    critic_advantage = needs_critic(algo.advantage)
    _check(algo.group_size >= (1 if critic_advantage else 2), "algo.group_size", algo.group_size,
           "must be >= 1" if critic_advantage else
           "must be >= 2 (advantages are group-relative; only a critic's advantage, gae, takes 1)")  # fmt: skip
    _check(not (sampling.enabled and critic_advantage), "algo.dynamic_sampling.enabled", sampling.enabled,
           f"is for group advantages; advantage={algo.advantage} learns from every trajectory")  # fmt: skip
    _check(critic_advantage or not algo.normalize_advantages, "algo.normalize_advantages", algo.normalize_advantages,
           f"applies to a critic's advantages (algo.advantage=gae); advantage={algo.advantage} is group-relative "
           "already, and re-centred over steps, the long failed episodes outweigh the short successes (a failure's "
           "advantage can turn positive)")  # fmt: skip
    if critic.reward == "shaped":
        _check(critic_advantage, "algo.critic.reward", critic.reward,
               "shaped needs a critic (algo=ppo); GRPO's advantages come from the outcome alone")  # fmt: skip
        _check(bool(cfg.env.task), "algo.critic.reward", critic.reward,
               "shaped needs a built-in env.task, whose potential it uses")  # fmt: skip
    if algo.start_replay.fraction > 0:  # it replays the starts of groups that both succeeded and failed
        _check(algo.start_replay.fraction * algo.groups_per_iter >= 1 - 1e-9, "algo.start_replay.fraction",
               algo.start_replay.fraction, f"replays a whole number of the algo.groups_per_iter="
               f"{algo.groups_per_iter} groups, rounded down: below 1/{algo.groups_per_iter} it replays none; set "
               f"at least {1 / algo.groups_per_iter:.4g} or 0")  # fmt: skip
        _check(algo.group_size >= 2, "algo.start_replay.fraction", algo.start_replay.fraction,
               f"replays starts whose group both succeeded and failed; groups of algo.group_size={algo.group_size} "
               "never do: set it to 0")  # fmt: skip
        _check(cfg.env.group_start != "clone", "algo.start_replay.fraction", algo.start_replay.fraction,
               "replays a start by its seed; with env.group_start=clone the env ignores the seed (a replayed seed "
               "is a fresh start): set it to 0")  # fmt: skip
    n_traj = algo.group_size * algo.groups_per_iter
    _check(1 <= algo.minibatches <= n_traj, "algo.minibatches", algo.minibatches,
           f"must be in [1, group_size * groups_per_iter = {n_traj}]")  # fmt: skip
    if algo.train_horizon is not None and (cfg.env.horizon or cfg.env.task):
        horizon = env_sizes(cfg.env).horizon
        _check(algo.train_horizon <= horizon, "algo.train_horizon", algo.train_horizon,
               f"must be <= the env's horizon ({horizon}), which evaluation runs; null = that horizon")  # fmt: skip
    lr_range = list(algo.lr_range)
    _check(len(lr_range) == 2 and 0 < lr_range[0] <= lr_range[1] <= 1, "algo.lr_range", lr_range,
           "must be [low, high] with 0 < low <= high <= 1")  # fmt: skip
    if algo.lr_schedule == "adaptive":
        _check(lr_range[0] <= algo.lr <= lr_range[1], "algo.lr", algo.lr,
               f"must lie in algo.lr_range {lr_range} with lr_schedule=adaptive (it is the starting rate)")  # fmt: skip
    anneal = algo.std_anneal
    if anneal.final is not None:
        pol = cfg.policy
        gaussian = policy_family(pol.type) == "gaussian"
        has = f"policy.type={pol.type}" + (" with state_dependent_std=true" if gaussian else "")
        _check(gaussian and not pol.state_dependent_std, "algo.std_anneal.final", anneal.final,
               f"caps a Gaussian's free std; {has} has none: set it to null")  # fmt: skip
        _check(anneal.final < pol.init_std, "algo.std_anneal.final", anneal.final,
               f"must be below policy.init_std={pol.init_std:g}, where the cap starts, or null (off)")  # fmt: skip
        if pol.min_std is not None:
            _check(anneal.final >= pol.min_std, "algo.std_anneal.final", anneal.final,
                   f"must be at least policy.min_std={pol.min_std:g}, the std's floor, or null (off)")  # fmt: skip
    if algo.curriculum.start is not None:
        check_curriculum(cfg)
    lo_hi = list(sampling.keep_range)
    _check(len(lo_hi) == 2 and 0 <= lo_hi[0] < lo_hi[1] <= 1, "algo.dynamic_sampling.keep_range", lo_hi,
           "must be [low, high] with 0 <= low < high <= 1")  # fmt: skip
    if cfg.pretrain and cfg.demos.seed in (None, cfg.seed) and not cfg.demos.path and not 0 <= cfg.seed < DEMO_RUNS:
        # demos.seed null (the default) or ${seed} (the *_bc presets): the value the command line gave is the run's seed
        raise ConfigError(f"seed={cfg.seed} is invalid with pretrain=true and demos.seed=null or ${{seed}}: "
                          f"the demo run's seed must be in [0, {DEMO_RUNS}); give a seed below {DEMO_RUNS}, or "
                          f"demos.seed=<one in [0, {DEMO_RUNS})>")  # fmt: skip
    check_values(cfg)  # the top-level keys (and anything nested not checked above)
    _check(not (cfg.pretrain and cfg.init_from), "pretrain", cfg.pretrain,
           f"cannot be combined with init_from={cfg.init_from!r}; choose one starting policy")  # fmt: skip
    _check(not cfg.pretrain or bool(cfg.env.task or cfg.demos.expert or cfg.demos.path), "pretrain", cfg.pretrain,
           f"on {env_source(cfg.env)} needs demonstrations: an expert (demos.expert=module:attr) or a dataset "
           "(demos.path=...)")  # fmt: skip
    if not cfg.pretrain:  # demonstrations are read only to clone them before GRPO
        for key in ("path", "expert"):
            value = getattr(cfg.demos, key)
            _check(value is None, f"demos.{key}", value,
                   f"demonstrations are cloned only with pretrain=true: add pretrain=true, or set "
                   f"demos.{key}=null to train without them")  # fmt: skip
    _check(not cfg.obs_norm_updates or cfg.policy.obs_norm, "obs_norm_updates", cfg.obs_norm_updates,
           "policy.obs_norm=false has no observation normalizer to update: set policy.obs_norm=true, or "
           "obs_norm_updates=null")  # fmt: skip
    validate_demos(cfg.demos, env=cfg.env)
    validate_bc(cfg.bc)
    validate_device(cfg.device)
    for name in cfg.loggers:
        _check(name in LOGGERS, "loggers", list(cfg.loggers), f"must list some of {', '.join(LOGGERS)}")
    _check(len(set(cfg.loggers)) == len(cfg.loggers), "loggers", list(cfg.loggers), "must not repeat a logger")
    if cfg.rollout.backend == "ray" or cfg.ray.address is not None:
        import importlib.util

        _check(importlib.util.find_spec("ray") is not None, "rollout.backend", cfg.rollout.backend,
               "ray needs the ray package: pip install -e \".[ray]\"")  # fmt: skip
    if "wandb" in cfg.loggers:
        import importlib.util

        _check(importlib.util.find_spec("wandb") is not None, "loggers", list(cfg.loggers),
               "wandb needs the wandb package: pip install -e \".[wandb]\"")  # fmt: skip
    if cfg.video_every:
        validate_video(cfg.render, "video_every", cfg.video_every, cfg.env)
        _check(cfg.video_episodes <= cfg.eval_seeds, "video_episodes", cfg.video_episodes,
               f"must be at most eval_seeds={cfg.eval_seeds} (the videos film evaluated episodes)")  # fmt: skip
    address = cfg.ray.address
    _check(address is None or address == "auto" or bool(_ADDRESS.match(address)), "ray.address", address,
           "must be null (start a local Ray), auto (the cluster started on this machine with `ray start --head`), "
           "ray://host:port or host:port")  # fmt: skip


LOGGERS = ("tensorboard", "wandb")
_ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


# the env keys only Gymnasium envs use (grpo_robot/gym_vector.py): set on a built-in task, refused
GYM_ONLY_ENV_KEYS = ("kwargs", "imports", "success_key", "success_fn", "obs_keys", "vector", "group_start",
                     "check_seeding", "step_timeout_s", "mirror_obs_keys")  # fmt: skip


def validate_env(env: EnvConfig) -> None:
    """The env of any command: exactly one of task/id/entry_point, their forms, and the ranges
    (`env.nthread` at most this machine's cores)."""
    from grpo_robot.machine import usable_cores

    named = [f"env.{k}={getattr(env, k)!r}" for k in ("task", "id", "entry_point") if getattr(env, k)]
    if len(named) != 1:
        given = " and ".join(named) + " are both set" if named else "env.task, env.id and env.entry_point are all null"
        raise ConfigError(
            f"{given}: set exactly one of env.task (a built-in task), env.id (a registered Gymnasium id) "
            "or env.entry_point (module:Class)"
        )
    check_values(env, "env.")
    if env.mirror_axes is not None:
        _check_mirror_axes(env.mirror_axes, env, "env.mirror_axes")
    if env.task:  # a built-in task is stepped by grpo_robot.batched, which has no use for these
        default = EnvConfig()
        for key in GYM_ONLY_ENV_KEYS:
            value = getattr(env, key)
            spelled = "import" if key == "imports" else key
            _check(value == getattr(default, key), f"env.{spelled}", value,
                   f"is for Gymnasium envs (env.id or env.entry_point); the built-in task env.task={env.task} does not "
                   f"use it (run it as a Gymnasium env: env=gym env.id=grpo_robot/<Task>-v<version>)")  # fmt: skip
    else:
        _check(env.nthread is None, "env.nthread", env.nthread,
               "is for built-in tasks (their MuJoCo thread pool); a Gymnasium env steps its own worlds "
               "(env.vector=async spreads them over processes)")  # fmt: skip
    if env.id and ":" in env.id:  # Gymnasium's gym.make("module:Id") form: one spelling per env here
        module, _, name = env.id.partition(":")
        raise ConfigError(f"env.id={env.id!r} is invalid: name the module that registers it in env.import "
                          f"(env.id={name} env.import=[{module}])")  # fmt: skip
    if env.entry_point:
        _check(bool(_CALLABLE.match(env.entry_point)), "env.entry_point", env.entry_point,
               "must be module:Class, e.g. my_package.envs:MyEnv")  # fmt: skip
    if env.success_fn:
        _check(bool(_CALLABLE.match(env.success_fn)), "env.success_fn", env.success_fn,
               "must be module:function taking (obs, info) and returning a bool")  # fmt: skip
        default_key = EnvConfig.__dataclass_fields__["success_key"].default
        _check(env.success_key == default_key, "env.success_key", env.success_key,
               f"is not read with env.success_fn={env.success_fn} (the function decides success): set one of "
               "the two")  # fmt: skip
    cores = usable_cores()
    _check(env.nthread is None or env.nthread <= cores, "env.nthread", env.nthread,
           f"must be in [1, {cores}] (the cores this process may use) or null (all of them)")  # fmt: skip
    _check(env.obs_keys is None or len(env.obs_keys) > 0, "env.obs_keys", env.obs_keys,
           "must be a non-empty list of observation keys or null (all keys)")  # fmt: skip


def validate_demos(demos: DemoConfig, prefix: str = "demos.", env: EnvConfig | None = None) -> None:
    """Demonstrations to collect (training with pretrain=true, collect_demos); `demos` may also be
    the composed config node."""
    demos = _typed(demos, DemoConfig, prefix)
    check_values(demos, prefix)
    if demos.expert is not None:
        _check(bool(_CALLABLE.match(demos.expert)), f"{prefix}expert", demos.expert,
               "must be module:attr, a function (obs, info) -> action or an object with get_action(obs)")  # fmt: skip
        _check(env is None or not env.task, f"{prefix}expert", demos.expert,
               f"is for Gymnasium envs; env.task={env.task if env else None} uses its own scripted expert (or run "
               "it as env=gym env.id=grpo_robot/<Task>-v<version>)")  # fmt: skip
    _check(demos.max_attempts is None or demos.max_attempts >= demos.episodes, f"{prefix}max_attempts",
           demos.max_attempts, f"must be >= {prefix}episodes ({demos.episodes}) or null")  # fmt: skip


def validate_bc(bc: BCConfig, prefix: str = "bc.") -> None:
    """Behaviour cloning (training with pretrain=true, pretrain_bc); `bc` may also be the composed node."""
    bc = _typed(bc, BCConfig, prefix)
    check_values(bc, prefix)
    _check(not bc.refit or bc.val_fraction > 0, f"{prefix}refit", bc.refit,
           f"needs held-out episodes ({prefix}val_fraction > 0), on which early stopping chooses the refit's "
           "steps; with none, the fit is on every episode already")  # fmt: skip


def validate_policy(pol: PolicyConfig) -> None:
    """The policy of any command; `pol` may also be the composed node."""
    pol = _typed(pol, PolicyConfig, "policy.")
    check_values(pol, "policy.")
    _check(len(pol.hidden_sizes) > 0 and min(pol.hidden_sizes) > 0, "policy.hidden_sizes", list(pol.hidden_sizes),
           "must be a non-empty list of positive sizes")  # fmt: skip
    if pol.max_std is not None:
        _check(pol.init_std <= pol.max_std, "policy.max_std", pol.max_std,
               f"must be at least policy.init_std={pol.init_std:g}, where the std starts")  # fmt: skip
    if pol.min_std is not None:
        _check(pol.min_std <= pol.init_std, "policy.min_std", pol.min_std,
               f"must be at most policy.init_std={pol.init_std:g}, where the std starts")  # fmt: skip
    tokenized = policy_family(pol.type) == "tokenized"
    if tokenized and pol.learn_temperature:
        low, high = TEMPERATURE_BOUNDS
        _check(low <= pol.temperature <= high, "policy.temperature", pol.temperature,
               f"must be in [{_num(low)}, {_num(high)}] with policy.learn_temperature=true (the bounds it is "
               "learned within)")  # fmt: skip
    where = f"policy.type={pol.type}" + (f" and bin_logits={pol.bin_logits}" if tokenized else "")
    _check((tokenized and pol.bin_logits == "gaussian") or pol.free_logits_lr == 1.0, "policy.free_logits_lr",
           pol.free_logits_lr, f"must be 1 with {where}: only tokenized bin_logits=gaussian has free logits beside "
           "the bump; use algo.lr")  # fmt: skip
    if pol.options:
        _check_policy_options(pol)


def _check_policy_options(pol: PolicyConfig) -> None:
    """`policy.options` names constructor arguments of a registered policy class of one's own that
    no other `policy.` key sets."""
    from grpo_robot.config.schema import constructor_arguments
    from grpo_robot.registry import POLICIES

    options = dict(pol.options)
    _check(pol.type not in POLICIES.builtin, "policy.options", options,
           f"is for a registered policy class of one's own (plugins=[...]); policy.type={pol.type} takes none")
    if pol.type not in POLICIES:  # named in its own line by the type's check
        return
    ours = {f.name for f in dataclasses.fields(PolicyConfig)}
    own = sorted(constructor_arguments(POLICIES[pol.type]) - ours - {"self", "obs_dim", "action_dim"})
    for key in options:
        _check(key not in ours, f"policy.options.{key}", options[key], f"is set by policy.{key}, not in policy.options")
        _check(key in own, f"policy.options.{key}", options[key],
               f"is not an argument of policy.type={pol.type}'s constructor; its own are: {', '.join(own) or 'none'}")


_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def validate_device(device: str) -> None:
    _check(isinstance(device, str) and bool(_DEVICE.match(device)), "device", device,
           "must be auto, cpu, cuda or cuda:N")  # fmt: skip
    if device.startswith("cuda"):
        import torch

        _check(torch.cuda.is_available(), "device", device, "CUDA is not available on this machine; use auto or cpu")
        index = int(device.partition(":")[2] or 0)
        count = torch.cuda.device_count()
        _check(index < count, "device", device, f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}")


# -- the other commands ------------------------------------------------------------------------


def validate_eval(cfg: EvalConfig, train_cfg: TrainConfig | None = None) -> None:
    """scripts/evaluate.py's config (an `EvalConfig` or the composed node), before the checkpoint
    is read; with `train_cfg` (the checkpoint's), also the memory of evaluating `n_seeds` worlds."""
    cfg = _typed(cfg, EvalConfig)
    check_values(cfg)
    validate_device(cfg.device)
    _check(cfg.video <= cfg.n_seeds, "video", cfg.video,
           f"must be at most n_seeds={cfg.n_seeds}: it films evaluated seeds")  # fmt: skip
    _check(cfg.decode in (None, *DECODES), "decode", cfg.decode, f"must be null or one of {', '.join(DECODES)}")
    _check(cfg.outcome in (None, "any_step", "final_step"), "outcome", cfg.outcome,
           "must be null (the run's env.outcome), any_step or final_step")  # fmt: skip
    _check(cfg.decode is None or cfg.deterministic, "decode", cfg.decode,
           "applies to the deterministic action only (deterministic=true); a sampled one draws bins")  # fmt: skip
    _check_output_file(cfg.output, "the JSON file's", checkpoints_too=True)
    if cfg.video:
        _check_output_folder(cfg.video_dir, "video_dir")
    if train_cfg is not None:
        _check(cfg.decode is None or policy_family(train_cfg.policy.type) == "tokenized", "decode", cfg.decode,
               f"applies to tokenized policies only; this checkpoint's policy is {train_cfg.policy.type}")  # fmt: skip
        check_memory(train_cfg, eval_seeds=cfg.n_seeds, eval_key="n_seeds", train=False)
    if cfg.video:
        validate_video(cfg.render, "video", cfg.video, None if train_cfg is None else train_cfg.env)
    if cfg.video_kwargs:
        _check(cfg.video > 0, "video_kwargs", dict(cfg.video_kwargs), "applies to the videos; set video=N as well")
        _check(train_cfg is None or not train_cfg.env.task, "video_kwargs", dict(cfg.video_kwargs),
               "applies to a Gymnasium env's videos; a built-in task's are set by render.camera, render.width "
               "and render.height")  # fmt: skip
    if train_cfg is None:  # every job of a sweep (-m checkpoint=a,b) before the first starts
        path = Path(cfg.checkpoint)
        found = path / "checkpoints" / "last.pt" if path.is_dir() else path
        _check(found.is_file(), "checkpoint", cfg.checkpoint,
               f"no checkpoint at {found} (give a .pt file or a run directory)")  # fmt: skip


def validate_video(render: RenderConfig, key: str, value: int, env: EnvConfig | None) -> None:
    """Filming is asked for (`key=value`): even frame sizes that fit the scene's offscreen buffer,
    imageio installed, and an OpenGL platform that renders here (probed once, in a child process)."""
    from grpo_robot.render import RenderError, gl_backend
    from grpo_robot.video import check_imageio

    for name in ("width", "height"):
        size = getattr(render, name)
        _check(size % 2 == 0, f"render.{name}", size, "must be even (H.264 video stores colour at half resolution)")
    if env is not None and not env.task:  # its own render() decides: the keys would be ignored
        default = RenderConfig()
        for name in ("camera", "width", "height"):
            _check(getattr(render, name) == getattr(default, name), f"render.{name}", getattr(render, name),
                   f"applies to the built-in tasks' scene; {env_source(env)} films what its own render() gives "
                   "(its camera and size are its own arguments: video_kwargs.<name>=... in evaluate.py, "
                   "env.kwargs.<name>=... in training)")  # fmt: skip
    if env is not None and env.task:
        from grpo_robot.envs.scene import OFFSCREEN

        for name, size, limit in zip(("width", "height"), (render.width, render.height), OFFSCREEN, strict=True):
            _check(size <= limit, f"render.{name}", size, f"must be at most {limit} for the built-in tasks' scene")
    try:
        check_imageio()
        gl_backend()
    except (ValueError, RenderError) as err:
        raise ConfigError(f"{key}={value!r} cannot be done: {err}") from None


# a run directory's own records (grpo_robot/trainer.py, bc.py): an output of another command never replaces one
RUN_RECORDS = ("summary.json", "eval.json", "resolved_config.yaml", "bc.json", "bc.pt", "demos.json", "demos.npz")


def run_record(path: Path, checkpoints_too: bool = False) -> str | None:
    """What the existing file `path` is, where writing over it would lose a run's record: a file of
    RUN_RECORDS in a run directory, a checkpoint in a run's `checkpoints/`, and with
    `checkpoints_too` any `.pt` file. None for anything else (or no file)."""
    if not path.is_file():
        return None
    folder = path.resolve().parent
    if path.suffix == ".pt" and (checkpoints_too or folder.name == "checkpoints"):
        return "a checkpoint"
    if path.name in RUN_RECORDS and ((folder / "checkpoints").is_dir() or (folder / ".hydra").is_dir()):
        return f"the {path.name} of the run in {folder}"
    return None


def _check_output_file(output: str | None, what: str, key: str = "output", checkpoints_too: bool = False) -> None:
    """`output=`, written after the work: a folder there, a file where one of its folders would
    be, a place that cannot be written, or a run's record or checkpoint there would lose the
    work or the record, so it is refused first."""
    if not output:
        return
    path = Path(str(output))
    _check(not path.is_dir(), key, output, f"it is a directory; give {what} file path")
    _check_no_file_above(path, key)
    record = run_record(path, checkpoints_too)
    _check(record is None, key, output, f"it is {record}, which this would replace; give another path")
    _check_writable(path, key)


def _check_writable(path: Path, key: str) -> None:
    """The file `path` (or the folder it would be made in) can be written: checked before the work."""
    folder = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    _check(os.access(folder, os.W_OK), key, str(path),
           f"{folder} cannot be written (a read-only file system or no permission)")  # fmt: skip


def _check_no_file_above(path: Path, key: str) -> None:
    """A file where a folder of `path` would be (`afile/x.json`) cannot be written: refused first."""
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    _check(blocked is None, key, str(path), f"{blocked} is a file, not a folder")


def _check_output_folder(folder: str | None, key: str) -> None:
    """A folder written into after the work (`video_dir=`): a file there is refused first."""
    if folder:
        path = Path(str(folder))
        _check(not (path.exists() and not path.is_dir()), key, folder, "it is a file; give a folder")
        _check_no_file_above(path, key)
        _check_writable(path, key)


def validate_collect(cfg: CollectDemosConfig) -> EnvConfig:
    """scripts/collect_demos.py's config (a `CollectDemosConfig` or the composed node) -> the env
    it collects on."""
    from grpo_robot.config.store import env_config
    from grpo_robot.machine import usable_cores

    cfg = _typed(cfg, CollectDemosConfig)
    env = env_config(cfg.env) if cfg.env is not None else EnvConfig(task=cfg.task)
    validate_env(env)
    check_values(cfg)
    _check_output_file(cfg.output, "the dataset's")
    cores = usable_cores()
    _check(cfg.nthread is None or cfg.nthread <= cores, "nthread", cfg.nthread,
           f"must be in [1, {cores}] (the cores this process may use) or null (all of them)")  # fmt: skip
    validate_demos(cfg.demos, env=env)
    _check(cfg.demos.path is None, "demos.path", cfg.demos.path, "is for training; give the file to write as output=")
    if not env.task and not cfg.demos.expert:
        raise ConfigError(f"demos.expert=None: {env_source(env)} has no scripted expert of this project; set "
                          "demos.expert=module:attr, a function (obs, info) -> action or an object with "
                          "get_action(obs), in the env's own units")  # fmt: skip
    return env


def names_env(node: Any) -> bool:
    """Whether an `env` node says which env it is (a task, a Gymnasium id or entry point), not
    only settings of one (`+env.horizon=10` on a command line without `env=`)."""
    if node is None:
        return False
    if isinstance(node, EnvConfig):
        return True
    return any(node.get(key) is not None for key in ("task", "id", "entry_point"))


def validate_pretrain(cfg: PretrainConfig) -> EnvConfig | None:
    """scripts/pretrain_bc.py's config (a `PretrainConfig` or the composed node), before the
    dataset is read -> its env when the config names one (else the dataset's, read later)."""
    from grpo_robot.config.store import env_config

    cfg = _typed(cfg, PretrainConfig)
    env = env_config(cfg.env) if names_env(cfg.env) else None
    if env is not None:
        validate_env(env)
    elif cfg.env:  # keys for the dataset's own env (`+env.horizon=10`): checked once it is read
        env_config(cfg.env)
    validate_policy(cfg.policy)
    validate_bc(cfg.bc)
    check_values(cfg)
    validate_device(cfg.device)
    _check_output_file(cfg.output, "the checkpoint's")
    if cfg.output and Path(str(cfg.output)).resolve() == Path(str(cfg.dataset)).resolve():
        _check(False, "output", cfg.output, "must not be the dataset itself: the clone would replace it")
    if env is not None:
        train_cfg = TrainConfig(env=env, policy=cfg.policy, bc=cfg.bc, eval_seeds=max(cfg.eval_seeds, 1))
        check_memory(train_cfg, eval_seeds=cfg.eval_seeds, eval_key="eval_seeds", train=False)
    if not str(cfg.dataset).startswith("minari:"):  # every job of a sweep, before the first starts
        _check(Path(cfg.dataset).exists(), "dataset", cfg.dataset,
               f"no demo dataset at {cfg.dataset} (give a path or minari:<id>)")  # fmt: skip
    return env


# -- sizes against this machine ----------------------------------------------------------------


@dataclass(frozen=True)
class EnvSizes:
    """What the config says about one world of its env, before building it. `exact`: a built-in
    task (sizes read from its model); else lower bounds (the config's numbers, 1 for the rest)."""

    horizon: int
    obs_dim: int
    action_dim: int
    world_bytes: float  # the simulator's memory per world
    exact: bool


@cache
def _task_sizes(name: str) -> tuple[int, int, int, int]:
    """(horizon, obs_dim, action_dim, bytes of BatchedEnv's buffers per world) of a built-in
    task, from its compiled model (a few milliseconds, no world is built)."""
    import mujoco

    from grpo_robot.envs import make_task

    task = make_task(name)
    m = task.model
    ncontrol = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_CTRL.value | mujoco.mjtState.mjSTATE_MOCAP_POS.value)
    # grpo_robot/batched.py: per-substep control, state and sensor outputs, the state, mocap and
    # sensors, and a few flags, all float64
    floats = task.n_substeps * (ncontrol + task.nstate + m.nsensordata) + task.nstate + 3 * m.nmocap + m.nsensordata
    return task.horizon, task.obs_dim, task.action_dim, 8 * floats + 64


def env_sizes(env: EnvConfig) -> EnvSizes:
    if env.task:
        horizon, obs_dim, action_dim, world = _task_sizes(env.task)
        return EnvSizes(env.horizon or horizon, obs_dim, action_dim, world, True)
    return EnvSizes(env.horizon or 1, 1, 1, GYM_WORLD_BYTES, False)


def _mlp(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in zip(sizes, sizes[1:], strict=False))


def network_parameters(pol: PolicyConfig, obs_dim: int, action_dim: int, critic: bool = False) -> int:
    """The parameters of `pol`'s network (grpo_robot/policies), and of a critic of the same sizes."""
    hidden = list(pol.hidden_sizes)
    h, a = hidden[-1], action_dim
    n = _mlp([obs_dim, *hidden])
    if policy_family(pol.type) == "tokenized":
        n += _mlp([h, a * pol.bins]) + (a if pol.learn_temperature else 0)
        if pol.bin_logits == "gaussian":
            n += _mlp([h, a]) + a  # the bump's mean head and width
        if pol.head == "autoregressive":
            n += a * pol.bins * pol.embed_dim + _mlp([h + a + a * pol.embed_dim, h, pol.bins])
    else:
        n += _mlp([h, a]) + (_mlp([h, a]) if pol.state_dependent_std else a)
    if critic:
        n += _mlp([obs_dim, *hidden, 1])
    return n


def _activation_floats(pol: PolicyConfig, action_dim: int, critic: bool) -> int:
    """Floats one step keeps for the backward pass of the update (outputs and their gradients)."""
    a, h = action_dim, pol.hidden_sizes[-1]
    head = 2 * a
    if policy_family(pol.type) == "tokenized":
        head = 3 * a * pol.bins  # logits, log-softmax, probabilities (entropy)
        if pol.bin_logits == "ordinal":
            head += 4 * a * pol.bins  # both log-sigmoids and their running sums
        elif pol.bin_logits == "gaussian":
            head += 2 * a * pol.bins  # distances to the bump's mean and their squares
        if pol.head == "autoregressive":
            head += a * (2 * h + a + a * pol.embed_dim + 3 * pol.bins)
    return 2 * ((2 if critic else 1) * sum(pol.hidden_sizes) + head)


@dataclass
class MemoryEstimate:
    total: float
    worlds: int
    steps: int
    step_floats: int
    batch: float
    sim: float
    network: float
    parameters: int
    activations: float = 0.0


def estimate_memory(cfg: TrainConfig, worlds: int | None = None, train: bool = True,
                    new_worlds: bool = True) -> MemoryEstimate:  # fmt: skip
    """Bytes one iteration (`train`) or one evaluation of `worlds` worlds takes: the batch of
    `worlds x horizon` steps (observation, raw action, log-probs, mask, in float32; held twice:
    stacked and packed), the simulator's buffers, the network with its gradients, Adam's moments
    and a saved copy (and the KL reference), and an update minibatch's activations. A Gymnasium
    env evaluates in chunks on at most the training worlds: on those very worlds during training
    (`new_worlds=False`), on as many new ones in the other commands."""
    algo, pol = cfg.algo, cfg.policy
    size = env_sizes(cfg.env)
    n_traj = algo.groups_per_iter * algo.group_size
    worlds = n_traj if worlds is None else worlds
    if not size.exact:  # Gymnasium: evaluation runs in chunks on at most the training worlds
        worlds = min(worlds, n_traj) if not train else worlds
    a = size.action_dim
    raw = 2 * a if policy_family(pol.type) == "tokenized" else a  # tokens are int64
    step_floats = size.obs_dim + raw + a + 1
    batch = 4.0 * worlds * size.horizon * step_floats * 2
    sim = worlds * size.world_bytes if (size.exact or train or new_worlds) else 0.0
    critic = needs_critic(algo.advantage)
    params = network_parameters(pol, size.obs_dim, a, critic=critic)
    network = 4.0 * params * (5 + (algo.kl.beta > 0))
    activations = 0.0
    if train:
        per_minibatch = math.ceil(worlds / max(algo.minibatches, 1)) * size.horizon
        activations = 4.0 * per_minibatch * _activation_floats(pol, a, critic)
    total = batch + sim + network + activations
    return MemoryEstimate(total, worlds, size.horizon, step_floats, batch, sim, network, params, activations)


# keys whose value the memory of an iteration grows with, and where their default is read
_ITERATION_KEYS = ("env.horizon", "algo.groups_per_iter", "algo.group_size", "policy.hidden_sizes", "policy.bins",
                   "policy.embed_dim", "algo.minibatches")  # fmt: skip


def _get(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _with(cfg: TrainConfig, key: str, value: Any) -> TrainConfig:
    head, _, rest = key.partition(".")
    if not rest:
        return dataclasses.replace(cfg, **{head: value})
    return dataclasses.replace(cfg, **{head: _with(getattr(cfg, head), rest, value)})


def _default(key: str) -> Any:
    return _get(TrainConfig(env=EnvConfig(task=None, id="x")), key)


def check_memory(cfg: TrainConfig, eval_seeds: int | None = None, eval_key: str = "eval_seeds",
                 train: bool = True) -> None:  # fmt: skip
    """Refuse a config whose iteration (`train`) or evaluation (`eval_seeds` worlds of a built-in
    task, one per seed) would take more than `MEMORY_FRACTION` of the memory available now, or
    more Gymnasium worlds than `MAX_GYM_WORLDS`; the message names the key that grows it most."""
    from grpo_robot.envs import TASK_NAMES
    from grpo_robot.machine import available_memory, format_bytes

    algo, pol = cfg.algo, cfg.policy
    sizes = [cfg.env.horizon or 1, algo.groups_per_iter, algo.group_size, *pol.hidden_sizes, pol.bins, pol.embed_dim]
    if (cfg.env.task and cfg.env.task not in TASK_NAMES) or not pol.hidden_sizes or \
            not all(isinstance(n, int) and n >= 1 for n in sizes):  # fmt: skip
        return  # sizes that are wrong in themselves: their own checks say so
    worlds = algo.groups_per_iter * algo.group_size
    if train and not cfg.env.task and worlds > MAX_GYM_WORLDS:
        raise ConfigError(
            f"algo.groups_per_iter={algo.groups_per_iter} x algo.group_size={algo.group_size} = {worlds:,} Gymnasium "
            f"worlds is too many: must be at most {MAX_GYM_WORLDS} (each world is a whole env object, at least "
            f"{format_bytes(GYM_WORLD_BYTES)}; with env.vector=async a process)"
        )
    if train and not cfg.env.task and cfg.env.vector == "async":
        _check_processes(worlds)
    available = available_memory()
    if available is None:
        return
    limit = MEMORY_FRACTION * available
    jobs = []
    if train:
        jobs.append(("one iteration", None, _ITERATION_KEYS))
    n_eval = cfg.eval_seeds if eval_seeds is None else eval_seeds
    if n_eval > 0:
        jobs.append(("the evaluation", n_eval, (eval_key, "env.horizon", "policy.hidden_sizes", "policy.bins",
                                                "policy.embed_dim")))  # fmt: skip
    for what, n, keys in jobs:
        est = estimate_memory(cfg, n, train=n is None, new_worlds=not train)
        if est.total <= limit:
            continue
        blame, least = keys[0], math.inf
        for key in keys:  # the key whose default would shrink the estimate most
            if key in ("eval_seeds", "n_seeds"):
                smaller = estimate_memory(cfg, 200, train=False, new_worlds=not train).total
            else:
                if _get(cfg, key) == _default(key):
                    continue
                smaller = estimate_memory(
                    _with(cfg, key, _default(key)), n, train=n is None, new_worlds=not train
                ).total
            if smaller < least:
                blame, least = key, smaller
        value = n if blame in ("eval_seeds", "n_seeds") else _get(cfg, blame)
        about = "about" if cfg.env.task else "at least"
        parts = [f"{est.worlds:,} worlds x {est.steps:,} steps x {est.step_floats} floats, twice: "
                 f"{format_bytes(est.batch)}"]  # fmt: skip
        if est.sim >= 0.05 * est.total:
            parts.append(f"the simulator's {format_bytes(est.sim / est.worlds)} per world: {format_bytes(est.sim)}")
        if est.network >= 0.05 * est.total:
            parts.append(f"a {est.parameters:,}-parameter network with its gradients and optimizer state: "
                         f"{format_bytes(est.network)}")  # fmt: skip
        if est.activations >= 0.05 * est.total:
            parts.append(f"the update's activations, algo.minibatches={algo.minibatches}: "
                         f"{format_bytes(est.activations)}")  # fmt: skip
        raise ConfigError(
            f"{blame}={value!r} is too large for this machine: {what} needs {about} {format_bytes(est.total)} "
            f"({'; '.join(parts)}) but this machine has {format_bytes(available)} available "
            f"(at most {MEMORY_FRACTION:.0%} may be used)"
        )


FDS_PER_ASYNC_WORLD = 4  # a worker's pipe and process sentinel: 3.1 measured per world over 16 worlds


def _check_processes(worlds: int) -> None:
    """env.vector=async runs one process per world: refuse more than this process may start or
    talk to (its ulimit -u and -n), which would fail midway through starting the workers."""
    try:
        import resource
    except ImportError:  # not Unix
        return
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    processes = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    need = FDS_PER_ASYNC_WORLD * worlds + 64
    if files != resource.RLIM_INFINITY and need > files:
        raise ConfigError(
            f"env.vector='async' with {worlds:,} worlds (algo.groups_per_iter x algo.group_size) needs about {need:,} "
            f"open files, one process and its pipes per world, but this process may open {files:,} (ulimit -n); "
            "use fewer worlds or env.vector=sync"
        )
    if processes != resource.RLIM_INFINITY and worlds > processes:
        raise ConfigError(
            f"env.vector='async' with {worlds:,} worlds (algo.groups_per_iter x algo.group_size) needs a process per "
            f"world, but this user may run {processes:,} (ulimit -u); use fewer worlds or env.vector=sync"
        )
