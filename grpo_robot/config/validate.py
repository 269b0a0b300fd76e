"""Every range check of the configuration, in one place, before any environment is built.

A bad value raises `ConfigError` with one line naming the key, the value and what is allowed.
Fields declared with `choice`/`registered` (grpo_robot/config/schema.py) are checked by
`check_choices` from their declaration; the rest are checked here by hand.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from grpo_robot.config.schema import BCConfig, DemoConfig, EnvConfig, PolicyConfig, TrainConfig, env_source
from grpo_robot.seeding import DEMO_RUNS


class ConfigError(ValueError):
    """A config value out of range; the message is one line naming key, value and what is allowed."""


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is invalid: {allowed}")


def check_choices(node: Any, prefix: str = "") -> None:
    """Check every `choice`/`registered` field of the dataclass `node`, nested ones included."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        key = f"{prefix}{'import' if f.name == 'imports' else f.name}"
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{key}.")
        allowed = f.metadata.get("choices") or tuple(f.metadata.get("registry", ()))
        if allowed and value is not None and value not in allowed:
            _check(False, key, value, f"must be one of {', '.join(allowed)}")


def validate(cfg: TrainConfig) -> None:
    """Raise `ConfigError` on the first out-of-range value of a training config."""
    from grpo_robot.algo import ADVANTAGE_ESTIMATORS

    validate_env(cfg.env)
    validate_policy(cfg.policy)
    check_choices(cfg.algo, "algo.")
    algo, critic, sampling = cfg.algo, cfg.algo.critic, cfg.algo.dynamic_sampling
    needs_critic = ADVANTAGE_ESTIMATORS[algo.advantage].needs_critic
    _check(algo.group_size >= (1 if needs_critic else 2), "algo.group_size", algo.group_size,
           "must be >= 1" if needs_critic else
           "must be >= 2 (advantages are group-relative; only a critic's advantage, gae, takes 1)")  # fmt: skip
    _check(not (sampling.enabled and needs_critic), "algo.dynamic_sampling.enabled", sampling.enabled,
           f"is for group advantages; advantage={algo.advantage} learns from every trajectory")  # fmt: skip
    if critic.reward == "shaped":
        _check(needs_critic, "algo.critic.reward", critic.reward,
               "shaped needs a critic (algo=ppo); GRPO's advantages come from the outcome alone")  # fmt: skip
        _check(bool(cfg.env.task), "algo.critic.reward", critic.reward,
               "shaped needs a built-in env.task, whose potential it uses")  # fmt: skip
        _check(critic.shaping_coef > 0, "algo.critic.shaping_coef", critic.shaping_coef, "must be > 0")
    _check(0 < critic.gamma <= 1, "algo.critic.gamma", critic.gamma, "must be in (0, 1]")
    _check(0 <= critic.gae_lambda <= 1, "algo.critic.gae_lambda", critic.gae_lambda, "must be in [0, 1]")
    _check(critic.vf_coef > 0, "algo.critic.vf_coef", critic.vf_coef, "must be > 0")
    _check(algo.groups_per_iter >= 1, "algo.groups_per_iter", algo.groups_per_iter, "must be >= 1")
    _check(algo.epochs >= 1, "algo.epochs", algo.epochs, "must be >= 1")
    n_traj = algo.group_size * algo.groups_per_iter
    _check(1 <= algo.minibatches <= n_traj, "algo.minibatches", algo.minibatches,
           f"must be in [1, group_size * groups_per_iter = {n_traj}]")  # fmt: skip
    clip = algo.clip
    _check(0 < clip.eps < 1, "algo.clip.eps", clip.eps, "must be in (0, 1)")
    _check(clip.low is None or 0 < clip.low < 1, "algo.clip.low", clip.low, "must be in (0, 1) or null")
    _check(clip.high is None or clip.high > 0, "algo.clip.high", clip.high, "must be > 0 or null")
    _check(clip.dual is None or clip.dual > 1, "algo.clip.dual", clip.dual, "must be > 1 or null")
    _check(algo.adv_eps >= 0, "algo.adv_eps", algo.adv_eps, "must be >= 0")
    _check(algo.kl.beta >= 0, "algo.kl.beta", algo.kl.beta, "must be >= 0")
    _check(algo.entropy_coef >= 0, "algo.entropy_coef", algo.entropy_coef, "must be >= 0")
    lo_hi = list(sampling.keep_range)
    _check(len(lo_hi) == 2 and 0 <= lo_hi[0] < lo_hi[1] <= 1, "algo.dynamic_sampling.keep_range", lo_hi,
           "must be [low, high] with 0 <= low < high <= 1")  # fmt: skip
    _check(sampling.max_rounds >= 1, "algo.dynamic_sampling.max_rounds", sampling.max_rounds, "must be >= 1")
    _check(algo.lr > 0, "algo.lr", algo.lr, "must be > 0")
    _check(algo.max_grad_norm is None or algo.max_grad_norm > 0, "algo.max_grad_norm", algo.max_grad_norm,
           "must be > 0 or null")  # fmt: skip
    _check(cfg.iterations >= 1, "iterations", cfg.iterations, "must be >= 1")
    _check(cfg.max_env_steps is None or cfg.max_env_steps > 0, "max_env_steps", cfg.max_env_steps,
           "must be > 0 or null")  # fmt: skip
    _check(cfg.time_limit_min is None or cfg.time_limit_min > 0, "time_limit_min", cfg.time_limit_min,
           "must be > 0 or null")  # fmt: skip
    _check(cfg.eval_every >= 1, "eval_every", cfg.eval_every, "must be >= 1")
    _check(cfg.eval_seeds >= 1, "eval_seeds", cfg.eval_seeds, "must be >= 1")
    _check(cfg.target_success is None or 0 < cfg.target_success <= 1, "target_success", cfg.target_success,
           "must be in (0, 1] or null")  # fmt: skip
    _check(cfg.checkpoint_every >= 1, "checkpoint_every", cfg.checkpoint_every, "must be >= 1")
    _check(cfg.seed >= 0, "seed", cfg.seed, "must be >= 0")
    _check(not (cfg.pretrain and cfg.init_from), "pretrain", cfg.pretrain,
           f"cannot be combined with init_from={cfg.init_from!r}; choose one starting policy")  # fmt: skip
    _check(not cfg.pretrain or bool(cfg.env.task or cfg.demos.expert or cfg.demos.path), "pretrain", cfg.pretrain,
           f"on {env_source(cfg.env)} needs demonstrations: an expert (demos.expert=module:attr) or a dataset "
           "(demos.path=...)")  # fmt: skip
    validate_demos(cfg.demos, env=cfg.env)
    validate_bc(cfg.bc)
    validate_device(cfg.device)


_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def validate_env(env: EnvConfig) -> None:
    named = [f"env.{k}={getattr(env, k)!r}" for k in ("task", "id", "entry_point") if getattr(env, k)]
    if len(named) != 1:
        given = " and ".join(named) + (" are both set" if named else "none is set")
        raise ConfigError(
            f"{given}: set exactly one of env.task (a built-in task), env.id (a registered Gymnasium id) "
            "or env.entry_point (module:Class)"
        )
    check_choices(env, "env.")
    if env.entry_point:
        _check(bool(_CALLABLE.match(env.entry_point)), "env.entry_point", env.entry_point,
               "must be module:Class, e.g. my_package.envs:MyEnv")  # fmt: skip
    if env.success_fn:
        _check(bool(_CALLABLE.match(env.success_fn)), "env.success_fn", env.success_fn,
               "must be module:function taking (obs, info) and returning a bool")  # fmt: skip
    _check(env.horizon is None or env.horizon > 0, "env.horizon", env.horizon, "must be a positive integer or null")
    _check(env.nthread is None or env.nthread >= 1, "env.nthread", env.nthread, "must be >= 1 or null")
    _check(env.obs_keys is None or len(env.obs_keys) > 0, "env.obs_keys", env.obs_keys,
           "must be a non-empty list of observation keys or null (all keys)")  # fmt: skip


def validate_demos(demos: DemoConfig, prefix: str = "demos.", env: EnvConfig | None = None) -> None:
    if demos.expert is not None:
        _check(bool(_CALLABLE.match(demos.expert)), f"{prefix}expert", demos.expert,
               "must be module:attr, a function (obs, info) -> action or an object with get_action(obs)")  # fmt: skip
        _check(env is None or not env.task, f"{prefix}expert", demos.expert,
               f"is for Gymnasium envs; env.task={env.task if env else None} uses its own scripted expert (or run "
               "it as env=gym env.id=grpo_robot/<Task>-v<version>)")  # fmt: skip
    _check(demos.episodes >= 1, f"{prefix}episodes", demos.episodes, "must be >= 1")
    _check(demos.noise >= 0, f"{prefix}noise", demos.noise, "must be >= 0")
    _check(0 <= demos.seed < DEMO_RUNS, f"{prefix}seed", demos.seed, f"must be in [0, {DEMO_RUNS})")
    _check(demos.max_attempts is None or demos.max_attempts >= demos.episodes, f"{prefix}max_attempts",
           demos.max_attempts, f"must be >= {prefix}episodes ({demos.episodes}) or null")  # fmt: skip


def validate_bc(bc: BCConfig, prefix: str = "bc.") -> None:
    check_choices(bc, prefix)
    _check(bc.max_steps >= 1, f"{prefix}max_steps", bc.max_steps, "must be >= 1")
    _check(bc.eval_every >= 1, f"{prefix}eval_every", bc.eval_every, "must be >= 1")
    _check(bc.batch_size >= 1, f"{prefix}batch_size", bc.batch_size, "must be >= 1")
    _check(bc.lr > 0, f"{prefix}lr", bc.lr, "must be > 0")
    _check(bc.weight_decay >= 0, f"{prefix}weight_decay", bc.weight_decay, "must be >= 0")
    _check(0 <= bc.val_fraction < 1, f"{prefix}val_fraction", bc.val_fraction, "must be in [0, 1)")
    _check(bc.patience >= 1, f"{prefix}patience", bc.patience, "must be >= 1")
    _check(bc.token_sigma >= 0, f"{prefix}token_sigma", bc.token_sigma, "must be >= 0")


def validate_policy(pol: PolicyConfig) -> None:
    check_choices(pol, "policy.")
    _check(pol.bins >= 2, "policy.bins", pol.bins, "must be >= 2")
    _check(pol.temperature > 0, "policy.temperature", pol.temperature, "must be > 0")
    _check(pol.embed_dim >= 1, "policy.embed_dim", pol.embed_dim, "must be >= 1")
    _check(len(pol.hidden_sizes) > 0 and min(pol.hidden_sizes) > 0, "policy.hidden_sizes", list(pol.hidden_sizes),
           "must be a non-empty list of positive sizes")  # fmt: skip
    _check(pol.init_std > 0, "policy.init_std", pol.init_std, "must be > 0")


def validate_device(device: str) -> None:
    import torch

    ok = device in ("auto", "cpu") or device == "cuda" or device.startswith("cuda:")
    _check(ok, "device", device, "must be auto, cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        _check(torch.cuda.is_available(), "device", device, "CUDA is not available on this machine; use auto or cpu")
