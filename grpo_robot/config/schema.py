"""Typed configuration (Hydra structured configs) and its validation.

`conf/config.yaml` composes the groups `env/`, `policy/`, `algo/` and `experiment/` over the
`TrainConfig` schema registered here, so a misspelled key or a wrong type fails at composition;
`validate` then checks ranges, before any environment is built.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from grpo_robot.algo import ADVANTAGE_ESTIMATORS, AGGREGATIONS, KL_ESTIMATORS
from grpo_robot.envs import TASKS
from grpo_robot.policies.base import ACTIVATIONS, POLICIES


@dataclass
class EnvConfig:
    """Either a built-in task (`task`) or any Gymnasium env (`id` or `entry_point`), exactly one.

    Gymnasium envs run as Gymnasium vector envs (grpo_robot/gym_vector.py); see docs/custom_envs.md.
    `imports` is written `import` in configs and on the command line (`env.import=[pkg]`).
    """

    task: str | None = "Reach"  # a built-in task: Reach, PushCube, LiftCube, PlaceCube; null for a Gymnasium env
    horizon: int | None = None  # control steps per episode; null = the task's own (the env's TimeLimit)
    outcome: str = "any_step"  # any_step: success at any step ends the episode; final_step: judged at the horizon
    nthread: int | None = None  # built-in tasks: physics threads; null = all cores
    # -- Gymnasium envs --
    id: str | None = None  # a registered id, e.g. FetchReach-v4
    entry_point: str | None = None  # or module:Class, constructed with `kwargs`
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to gymnasium.make / the entry point
    imports: list[str] = field(default_factory=list)  # modules imported first (so their envs register)
    success_key: str = "is_success"  # success is bool(info[success_key]) after each step...
    success_fn: str | None = None  # ...or module:func(obs, info) -> bool, when given
    obs_keys: list[str] | None = None  # Dict observations: keys concatenated in this order; null = all, space order
    vector: str = "sync"  # sync: worlds stepped in this process | async: one process per world
    check_seeding: bool = True  # refuse an env whose equal seeds give unequal first observations


ENV_KEY_ALIASES = {"import": "imports"}  # config spelling -> field name (`import` is a Python keyword)


def env_name(env: EnvConfig | DictConfig | dict) -> str:
    """What the env is called: the built-in task, the Gymnasium id or the entry point."""
    get = env.get if isinstance(env, dict | DictConfig) else lambda k, d=None: getattr(env, k, d)
    return get("task") or get("id") or get("entry_point") or "?"


def env_source(env: EnvConfig) -> str:
    """`env.<key>=<value>` of the key that names the env, for messages."""
    key = "task" if env.task else "id" if env.id else "entry_point"
    return f"env.{key}={getattr(env, key)}"


@dataclass
class PolicyConfig:
    type: str = "gaussian"  # gaussian | tokenized
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "tanh"  # tanh | relu | elu | gelu
    obs_norm: bool = True  # running mean/std observation normalization
    # gaussian only
    init_std: float = 0.5  # initial action std (pre-squash)
    state_dependent_std: bool = False  # log-std from a head instead of a free vector
    squash: bool = False  # tanh-squash actions (log-prob corrected); else clip to [-1, 1]
    # tokenized only
    bins: int = 256  # K uniform bins over [-1, 1] per action dimension
    head: str = "factorized"  # factorized | autoregressive (dimension d conditioned on tokens < d)
    temperature: float = 1.0  # divides the logits
    embed_dim: int = 16  # token embedding size of the autoregressive head


def policy_kwargs(cfg: PolicyConfig) -> dict[str, Any]:
    """The constructor arguments of `cfg.type` taken from `cfg`."""
    common = dict(hidden_sizes=list(cfg.hidden_sizes), activation=cfg.activation, obs_norm=cfg.obs_norm)
    if cfg.type == "gaussian":
        return dict(common, init_std=cfg.init_std, state_dependent_std=cfg.state_dependent_std, squash=cfg.squash)
    return dict(common, bins=cfg.bins, head=cfg.head, temperature=cfg.temperature, embed_dim=cfg.embed_dim)


@dataclass
class AlgoConfig:
    name: str = "grpo"
    advantage: str = "grpo"  # grpo | dr_grpo | rloo (grpo_robot.algo.ADVANTAGE_ESTIMATORS) | gae (PPO's critic)
    ratio: str = "action"  # action: one ratio per step | token: one per token | sequence: GSPO's per trajectory
    aggregation: str = "seq-mean-token-mean"  # | token-mean (DAPO) | seq-mean-token-sum-norm (Dr. GRPO)
    group_size: int = 16  # N rollouts per initial condition
    groups_per_iter: int = 32  # G initial conditions per iteration
    epochs: int = 4  # K passes over each batch
    minibatches: int = 4  # minibatches per epoch, split by trajectory
    clip_eps: float = 0.2  # ratio clip range (1 - eps, 1 + eps), unless clip_low/clip_high are set
    clip_low: float | None = None  # lower clip 1 - clip_low; null = clip_eps
    clip_high: float | None = None  # upper clip 1 + clip_high; null = clip_eps (DAPO: 0.28)
    dual_clip: float | None = None  # c > 1 bounds a negative advantage's objective below by c*A; null = off
    adv_eps: float = 1e-6  # added to the group std
    kl_beta: float = 0.0  # weight of KL(pi || pi_ref) to the initial policy; 0 keeps no reference
    kl_estimator: str = "k3"  # k1 | k2 | k3
    entropy_coef: float = 0.0
    dynamic_sampling: bool = False  # keep only groups whose success rate lies inside keep_range (DAPO)
    keep_range: list[float] = field(default_factory=lambda: [0.0, 1.0])  # open interval of group success rates
    max_sampling_rounds: int = 4  # draws of groups_per_iter groups per iteration before giving up on a full batch
    lr: float = 3e-4  # Adam learning rate
    lr_schedule: str = "constant"  # constant | linear (to 0 at the last iteration)
    max_grad_norm: float | None = 1.0  # null disables clipping
    # advantage=gae (PPO with a learned value function) only
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE's bias-variance trade-off
    vf_coef: float = 0.5  # weight of the value loss
    normalize_advantages: bool = False  # standardize advantages per minibatch (PPO's usual practice)
    # outcome: 1 on success, the only reward | shaped: also shaping_coef x (gamma * potential(next obs)
    # - potential(obs)) per step, from the built-in task's hand-made potential (a reference for PPO)
    reward: str = "outcome"
    shaping_coef: float = 10.0  # potential is in metres: 10 x 10 cm of progress weighs as much as success


@dataclass
class DemoConfig:
    """Scripted-expert demonstrations (grpo_robot/demos.py)."""

    episodes: int = 10  # successful episodes to keep
    noise: float = 0.0  # std of Gaussian noise on the executed actions; the labels stay the expert's
    seed: int = 0  # picks the demo seeds and the noise; in [0, 1000)
    max_attempts: int | None = None  # episodes to try at most; null = 10 x episodes + 64
    path: str | None = None  # train: an existing dataset to use instead of collecting


@dataclass
class BCConfig:
    """Behaviour cloning (grpo_robot/bc.py): maximum likelihood of the expert's actions."""

    max_steps: int = 5000  # gradient steps at most
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    val_fraction: float = 0.2  # episodes held out for early stopping (at least one)
    eval_every: int = 50  # gradient steps between validation checks
    patience: int = 20  # checks without a lower held-out action error before stopping
    learn_std: bool = False  # gaussian: also fit the std (else it stays at policy.init_std for exploration)
    token_sigma: float = 8.0  # tokenized: targets are a Gaussian this many bins wide around the action; 0 = one-hot
    labels: str = "expert"  # expert: the expert's clean actions | executed: the noisy actions taken
    seed: int = 0  # split, shuffling and initial weights


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    seed: int = 0  # seeds the training seed stream, the initial weights and the sampling
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N
    iterations: int = 100
    max_env_steps: int | None = None  # stop once this many env steps were simulated (fair budgets)
    time_limit_min: float | None = None  # stop training early after this many minutes
    eval_every: int = 25  # iterations between evaluations (and at the end)
    eval_seeds: int = 200  # held-out seeds per evaluation
    eval_deterministic: bool = True  # mean action in evaluation
    eval_at_start: bool = False  # also evaluate the initial policy (always done for init_from / pretrain)
    target_success: float | None = None  # stop at the first evaluation at or above this success rate (time-to-target)
    checkpoint_every: int = 10  # iterations between `last` checkpoints (and at every eval and the end)
    resume: str | None = None  # checkpoint file or run directory to continue
    init_from: str | None = None  # start from this policy checkpoint (e.g. behaviour cloning); it is the KL reference
    pretrain: bool = False  # collect `demos`, behaviour-clone (`bc`), then train from the clone, all in this run
    obs_norm_updates: bool | None = None  # null: on from scratch, off from a pretrained policy (keeps its inputs)
    demos: DemoConfig = field(default_factory=DemoConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    progress: bool = True  # console progress bar


@dataclass
class EvalConfig:
    checkpoint: str = MISSING  # checkpoint file or run directory
    n_seeds: int = 200  # held-out seeds
    deterministic: bool = True  # mean action; false samples
    seed: int = 0  # sampling seed when deterministic=false
    device: str = "auto"
    output: str | None = None  # per-seed JSON; null = next to the checkpoint


@dataclass
class CollectDemosConfig:
    task: str = "PushCube"
    demos: DemoConfig = field(default_factory=DemoConfig)
    output: str | None = None  # .npz path; null = demos/<task>_<episodes>.npz
    nthread: int | None = None


@dataclass
class PretrainConfig:
    dataset: str = MISSING  # a demo .npz from scripts/collect_demos.py
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    eval_seeds: int = 200  # held-out seeds to evaluate the clone on; 0 skips
    device: str = "auto"
    output: str | None = None  # checkpoint path; null = <dataset stem>_bc_<policy.type>.pt next to the dataset


class ConfigError(ValueError):
    """A config value out of range; the message is one line naming key, value and what is allowed."""


@dataclass
class TrainSchema(TrainConfig):
    """The schema Hydra composes against: `env` stays an untyped node, so that it may hold the key
    `import` (a Python keyword, no dataclass field); `env_config` types and checks it."""

    env: Any = None


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainSchema)
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(name="collect_demos_schema", node=CollectDemosConfig)
    cs.store(name="pretrain_schema", node=PretrainConfig)


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is invalid: {allowed}")


def validate(cfg: TrainConfig | DictConfig) -> None:
    """Raise `ConfigError` on the first out-of-range value."""
    pol, algo = cfg.policy, cfg.algo
    validate_env(cfg.env)
    validate_policy(pol)
    _check(algo.advantage in (*ADVANTAGE_ESTIMATORS, "gae"), "algo.advantage", algo.advantage,
           f"must be one of {', '.join(ADVANTAGE_ESTIMATORS)}, gae")  # fmt: skip
    if algo.advantage == "gae":
        _check(algo.group_size >= 1, "algo.group_size", algo.group_size, "must be >= 1")
    else:
        _check(algo.group_size >= 2, "algo.group_size", algo.group_size,
               "must be >= 2 (advantages are group-relative; only advantage=gae takes 1)")  # fmt: skip
    _check(not (algo.dynamic_sampling and algo.advantage == "gae"), "algo.dynamic_sampling", algo.dynamic_sampling,
           "is for group advantages; PPO (advantage=gae) learns from every trajectory")  # fmt: skip
    _check(algo.reward in ("outcome", "shaped"), "algo.reward", algo.reward, "must be outcome or shaped")
    if algo.reward == "shaped":
        _check(algo.advantage == "gae", "algo.reward", algo.reward,
               "shaped needs a critic (algo=ppo); GRPO's advantages come from the outcome alone")  # fmt: skip
        _check(bool(cfg.env.task), "algo.reward", algo.reward,
               "shaped needs a built-in env.task, whose potential it uses")  # fmt: skip
        _check(algo.shaping_coef > 0, "algo.shaping_coef", algo.shaping_coef, "must be > 0")
    _check(0 < algo.gamma <= 1, "algo.gamma", algo.gamma, "must be in (0, 1]")
    _check(0 <= algo.gae_lambda <= 1, "algo.gae_lambda", algo.gae_lambda, "must be in [0, 1]")
    _check(algo.vf_coef > 0, "algo.vf_coef", algo.vf_coef, "must be > 0")
    _check(algo.groups_per_iter >= 1, "algo.groups_per_iter", algo.groups_per_iter, "must be >= 1")
    _check(algo.epochs >= 1, "algo.epochs", algo.epochs, "must be >= 1")
    n_traj = algo.group_size * algo.groups_per_iter
    _check(1 <= algo.minibatches <= n_traj, "algo.minibatches", algo.minibatches,
           f"must be in [1, group_size * groups_per_iter = {n_traj}]")  # fmt: skip
    _check(algo.ratio in ("action", "token", "sequence"), "algo.ratio", algo.ratio, "must be action, token or sequence")
    _check(algo.aggregation in AGGREGATIONS, "algo.aggregation", algo.aggregation,
           f"must be one of {', '.join(AGGREGATIONS)}")  # fmt: skip
    _check(0 < algo.clip_eps < 1, "algo.clip_eps", algo.clip_eps, "must be in (0, 1)")
    _check(algo.clip_low is None or 0 < algo.clip_low < 1, "algo.clip_low", algo.clip_low, "must be in (0, 1) or null")
    _check(algo.clip_high is None or algo.clip_high > 0, "algo.clip_high", algo.clip_high, "must be > 0 or null")
    _check(algo.dual_clip is None or algo.dual_clip > 1, "algo.dual_clip", algo.dual_clip, "must be > 1 or null")
    _check(algo.kl_estimator in KL_ESTIMATORS, "algo.kl_estimator", algo.kl_estimator,
           f"must be one of {', '.join(KL_ESTIMATORS)}")  # fmt: skip
    _check(algo.adv_eps >= 0, "algo.adv_eps", algo.adv_eps, "must be >= 0")
    _check(algo.kl_beta >= 0, "algo.kl_beta", algo.kl_beta, "must be >= 0")
    _check(algo.entropy_coef >= 0, "algo.entropy_coef", algo.entropy_coef, "must be >= 0")
    lo_hi = list(algo.keep_range)
    _check(len(lo_hi) == 2 and 0 <= lo_hi[0] < lo_hi[1] <= 1, "algo.keep_range", lo_hi,
           "must be [low, high] with 0 <= low < high <= 1")  # fmt: skip
    _check(algo.max_sampling_rounds >= 1, "algo.max_sampling_rounds", algo.max_sampling_rounds, "must be >= 1")
    _check(algo.lr > 0, "algo.lr", algo.lr, "must be > 0")
    _check(algo.lr_schedule in ("constant", "linear"), "algo.lr_schedule", algo.lr_schedule,
           "must be constant or linear")  # fmt: skip
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
    _check(not cfg.pretrain or bool(cfg.env.task), "pretrain", cfg.pretrain,
           f"needs a built-in task (their scripted experts make the demos), not {env_source(cfg.env)}; "
           "start from a policy checkpoint with init_from= instead")  # fmt: skip
    validate_demos(cfg.demos)
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
    if env.task:
        _check(env.task in TASKS, "env.task", env.task, f"must be one of {', '.join(TASKS)}")
    if env.entry_point:
        _check(bool(_CALLABLE.match(env.entry_point)), "env.entry_point", env.entry_point,
               "must be module:Class, e.g. my_package.envs:MyEnv")  # fmt: skip
    if env.success_fn:
        _check(bool(_CALLABLE.match(env.success_fn)), "env.success_fn", env.success_fn,
               "must be module:function taking (obs, info) and returning a bool")  # fmt: skip
    _check(env.horizon is None or env.horizon > 0, "env.horizon", env.horizon, "must be a positive integer or null")
    _check(env.outcome in ("any_step", "final_step"), "env.outcome", env.outcome, "must be any_step or final_step")
    _check(env.nthread is None or env.nthread >= 1, "env.nthread", env.nthread, "must be >= 1 or null")
    _check(env.vector in ("sync", "async"), "env.vector", env.vector, "must be sync or async")
    _check(env.obs_keys is None or len(env.obs_keys) > 0, "env.obs_keys", env.obs_keys,
           "must be a non-empty list of observation keys or null (all keys)")  # fmt: skip


def validate_demos(demos: DemoConfig, prefix: str = "demos.") -> None:
    _check(demos.episodes >= 1, f"{prefix}episodes", demos.episodes, "must be >= 1")
    _check(demos.noise >= 0, f"{prefix}noise", demos.noise, "must be >= 0")
    _check(0 <= demos.seed < 1000, f"{prefix}seed", demos.seed, "must be in [0, 1000)")
    _check(demos.max_attempts is None or demos.max_attempts >= demos.episodes, f"{prefix}max_attempts",
           demos.max_attempts, f"must be >= {prefix}episodes ({demos.episodes}) or null")  # fmt: skip


def validate_bc(bc: BCConfig, prefix: str = "bc.") -> None:
    _check(bc.max_steps >= 1, f"{prefix}max_steps", bc.max_steps, "must be >= 1")
    _check(bc.eval_every >= 1, f"{prefix}eval_every", bc.eval_every, "must be >= 1")
    _check(bc.batch_size >= 1, f"{prefix}batch_size", bc.batch_size, "must be >= 1")
    _check(bc.lr > 0, f"{prefix}lr", bc.lr, "must be > 0")
    _check(bc.weight_decay >= 0, f"{prefix}weight_decay", bc.weight_decay, "must be >= 0")
    _check(0 <= bc.val_fraction < 1, f"{prefix}val_fraction", bc.val_fraction, "must be in [0, 1)")
    _check(bc.patience >= 1, f"{prefix}patience", bc.patience, "must be >= 1")
    _check(bc.token_sigma >= 0, f"{prefix}token_sigma", bc.token_sigma, "must be >= 0")
    _check(bc.labels in ("expert", "executed"), f"{prefix}labels", bc.labels, "must be expert or executed")


def validate_policy(pol: PolicyConfig) -> None:
    _check(pol.type in POLICIES, "policy.type", pol.type, f"must be one of {', '.join(POLICIES)}")
    _check(pol.bins >= 2, "policy.bins", pol.bins, "must be >= 2")
    _check(pol.head in ("factorized", "autoregressive"), "policy.head", pol.head,
           "must be factorized or autoregressive")  # fmt: skip
    _check(pol.temperature > 0, "policy.temperature", pol.temperature, "must be > 0")
    _check(pol.embed_dim >= 1, "policy.embed_dim", pol.embed_dim, "must be >= 1")
    _check(len(pol.hidden_sizes) > 0 and min(pol.hidden_sizes) > 0, "policy.hidden_sizes", list(pol.hidden_sizes),
           "must be a non-empty list of positive sizes")  # fmt: skip
    _check(
        pol.activation in ACTIVATIONS, "policy.activation", pol.activation, f"must be one of {', '.join(ACTIVATIONS)}"
    )
    _check(pol.init_std > 0, "policy.init_std", pol.init_std, "must be > 0")


def validate_device(device: str) -> None:
    import torch

    ok = device in ("auto", "cpu") or device == "cuda" or device.startswith("cuda:")
    _check(ok, "device", device, "must be auto, cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        _check(torch.cuda.is_available(), "device", device, "CUDA is not available on this machine; use auto or cpu")


def env_config(node: Any) -> EnvConfig:
    """An `EnvConfig` from a config node (dict, DictConfig or EnvConfig); `import` may name
    `imports`. An unknown key or a wrong type raises a one-line `ConfigError`."""
    if isinstance(node, EnvConfig):
        return node
    values = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})
    values = {ENV_KEY_ALIASES.get(k, k): v for k, v in values.items()}
    fields = [f.name for f in dataclasses.fields(EnvConfig)]
    for key in values:
        if key not in fields:
            spelled = ["import" if f == "imports" else f for f in fields]
            close = difflib.get_close_matches(key, spelled, n=1)
            hint = f" (did you mean env.{close[0]}?)" if close else ""
            raise ConfigError(f"env.{key} is not an env key{hint}; env keys: {', '.join(spelled)}")
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(EnvConfig), values))  # type: ignore[return-value]
    except Exception as err:  # omegaconf's ValidationError: a value of the wrong type
        key = getattr(err, "full_key", "") or "?"
        reason = str(err).splitlines()[0]
        raise ConfigError(f"env.{key}={values.get(key)!r} is invalid: {reason}") from None


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    """`cfg` as plain containers, keys spelled as in the YAML configs (`env.import`)."""
    record = OmegaConf.to_container(OmegaConf.structured(cfg))
    env = record["env"]  # type: ignore[index]
    record["env"] = {next((k for k, v in ENV_KEY_ALIASES.items() if v == key), key): v for key, v in env.items()}  # type: ignore[index]
    return record  # type: ignore[return-value]


def to_train_config(cfg: DictConfig | TrainConfig | dict) -> TrainConfig:
    """A plain `TrainConfig` object from a Hydra/OmegaConf config or a saved dict (or itself)."""
    if isinstance(cfg, TrainConfig):
        return cfg
    values = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    env = env_config(values.pop("env", None))
    merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), values)
    return dataclasses.replace(OmegaConf.to_object(merged), env=env)  # type: ignore[type-var]
