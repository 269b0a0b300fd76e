"""The configuration schema: one dataclass per group, one documented field per setting.

Hydra composes `conf/` over these (grpo_robot/config/store.py). A field whose allowed values are
a fixed set is declared with `choice(...)`, one whose values are a registry's names with
`registered(...)`: the allowed values are written there once, and `validate` checks every such
field generically.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from grpo_robot.envs import TASK_NAMES, make_task
from grpo_robot.registry import (
    ACTIVATIONS,
    ADVANTAGE_ESTIMATORS,
    AGGREGATIONS,
    BIN_LOGITS,
    DECODES,
    HEADS,
    KL_ESTIMATORS,
    POLICIES,
    POLICY_LOSSES,
    RATIO_LEVELS,
)


def choice(default: str, *others: str) -> Any:
    """A string field whose value must be `default` or one of `others`."""
    return field(default=default, metadata={"choices": (default, *others)})


def registered(table: Any, default: str | None) -> Any:
    """A string field whose value must be a name in `table` (a registry, read at validation time,
    so entries registered later are accepted too)."""
    return field(default=default, metadata={"registry": table})


@dataclass
class EnvConfig:
    """Either a built-in task (`task`) or any Gymnasium env (`id` or `entry_point`), exactly one.

    Gymnasium envs run as Gymnasium vector envs (grpo_robot/gym_vector.py); see docs/custom_envs.md.
    `imports` is written `import` in configs and on the command line (`env.import=[pkg]`).
    """

    # a built-in task: Reach, PushCube, LiftCube, PlaceCube (each its current version), or a version
    # by id (PushCube-v1: envs/__init__.py); null for a Gymnasium env
    task: str | None = registered(TASK_NAMES, "Reach")
    horizon: int | None = None  # control steps per episode; null = the task's own (the env's TimeLimit)
    # any_step: success at any step ends the episode; final_step: judged at the horizon
    outcome: str = choice("any_step", "final_step")
    nthread: int | None = None  # built-in tasks: physics threads; null = all cores
    # -- Gymnasium envs --
    id: str | None = None  # a registered id, e.g. FetchReach-v4
    entry_point: str | None = None  # or module:Class, constructed with `kwargs`
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to gymnasium.make / the entry point
    imports: list[str] = field(default_factory=list)  # modules imported first (so their envs register)
    success_key: str = "is_success"  # success is bool(info[success_key]) after each step...
    success_fn: str | None = None  # ...or module:func(obs, info) -> bool, when given
    obs_keys: list[str] | None = None  # Dict observations: keys concatenated in this order; null = all, space order
    vector: str = choice("sync", "async")  # sync: worlds stepped in this process | async: one process per world
    # how a group's members get equal starts: seed: each resets with the group's seed (the env must
    # repeat) | clone: the first member resets, the others become copies of it (grpo_robot/env_state.py)
    group_start: str = choice("seed", "clone")
    check_seeding: bool = True  # seed: refuse unequal starts from equal seeds | clone: check that copies are faithful
    # seconds one world's reset or step may take: a slower one is a hung world (async: its process is
    # killed and replaced, the world failed; sync: the run saves and stops, a hung call cannot be interrupted)
    step_timeout_s: float = 60.0
    # the env's mirror symmetries, in policy.mirror_axes's form (docs/custom_envs.md): declared
    # with the env, so that policy.mirror=true is all a run on it needs; policy.mirror_axes, when
    # given, replaces them. A built-in task declares its own (envs/task.py)
    mirror_axes: list[Any] | None = None
    # the env.obs_keys whose flat observation mirror_axes count their entries in: a run with
    # other obs_keys (another layout) is refused the env's axes. null: not checked
    mirror_obs_keys: list[str] | None = None


ENV_KEY_ALIASES = {"import": "imports"}  # config spelling -> field name (`import` is a Python keyword)


ROBOSUITE_ENTRY_POINT = "grpo_robot.envs.robosuite_env:RobosuiteEnv"


def env_name(env: EnvConfig | DictConfig | dict) -> str:
    """What the env is called: the built-in task, the Gymnasium id or the entry point; for the
    robosuite wrapper its task (`robosuite:Lift`), which tells Lift, Stack and Door apart."""
    get = env.get if isinstance(env, dict | DictConfig) else lambda k, d=None: getattr(env, k, d)
    if get("entry_point") == ROBOSUITE_ENTRY_POINT and not get("task") and not get("id"):
        return f"robosuite:{(get('kwargs') or {}).get('env_name') or 'Lift'}"
    return get("task") or get("id") or get("entry_point") or "?"


def file_stem(name: str) -> str:
    """`name` (an env's, say) as part of a file name: path separators, `:` and other characters
    that some file systems or shells take apart become `_`."""
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", name)


def env_source(env: EnvConfig) -> str:
    """`env.<key>=<value>` of the key that names the env, for messages."""
    key = "task" if env.task else "id" if env.id else "entry_point"
    return f"env.{key}={getattr(env, key)}"


@dataclass
class PolicyConfig:
    type: str = registered(POLICIES, "gaussian")  # gaussian | tokenized
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    # tanh (the faster form on this CPU kind) | sigmoid_tanh | torch_tanh | relu | elu | gelu (policies/base.py)
    activation: str = registered(ACTIVATIONS, "tanh")
    obs_norm: bool = True  # running mean/std observation normalization
    # gaussian, and tokenized with bin_logits=gaussian (the initial width of its bump, in action units)
    init_std: float = 0.5  # initial action std (pre-squash)
    # upper bound on the learned std (pre-squash), kept after every update; null: e (log-std 1).
    # Unsquashed actions are clipped to [-1, 1], so a std past ~1 mostly adds saturated actions,
    # while an entropy bonus, through Adam, raises the std at the learning rate's pace.
    max_std: float | None = None
    # lower bound on the learned std (pre-squash), kept the same way; null: e^-5. A floor keeps a
    # policy exploring after its first successes, when the policy gradient narrows it faster than an
    # entropy bonus widens it (time-correlated noise makes this happen within a few hundred k steps)
    min_std: float | None = None
    state_dependent_std: bool = False  # log-std from a head instead of a free vector
    squash: bool = False  # tanh-squash actions (log-prob corrected); else clip to [-1, 1]
    # tokenized only
    bins: int = 256  # K uniform bins over [-1, 1] per action dimension
    head: str = choice(*HEADS)  # (dimension d conditioned on tokens < d)
    temperature: float = 1.0  # divides the logits
    # a learned temperature per action dimension, starting at `temperature`: one knob per
    # dimension that sharpens or widens every state's categorical at once, as a Gaussian's log-std does
    learn_temperature: bool = False
    embed_dim: int = 16  # token embedding size of the autoregressive head
    # free: one logit per bin | ordinal: each bin's logit sums the "past bin j" and "not past bin j"
    # log-odds of the head's K scores, so raising one bin raises its neighbours (Tang & Agrawal 2020) |
    # gaussian: free logits plus a discretized Gaussian's around a learned mean, of a learned width
    # per dimension starting at init_std, so a step toward one bin moves the whole bump
    bin_logits: str = choice(*BIN_LOGITS)
    # the deterministic action (evaluation): each dimension's mode (argmax bin), median bin, or
    # mean over the bin centres (a continuous action, as a Gaussian's mean is)
    decode: str = choice(*DECODES)
    # bin_logits=gaussian: the free logits' learning rate as a fraction of algo.lr (the bump's
    # mean and width, and the trunk, train at algo.lr). Adam steps every bin's logit at the rate
    # whatever its gradient, so at a rate that suits the mean the free logits move the categorical
    # furthest (docs/results.md, the tokenized policy)
    free_logits_lr: float = 1.0
    # act in the env's canonical frame: observations reflected across the world's mirror planes so
    # that the env's key reads positive, actions reflected back (policies/base.py, Mirror). The
    # policy learns one quadrant of the starts and acts in all four. A built-in task declares its
    # symmetries (envs/task.py, Task.mirror_axes); another env takes them from mirror_axes. null:
    # off (what a preset's ${for_task:...} gives on another env)
    mirror: bool | None = False
    # the mirror symmetries of an env that is not a built-in task, for policy.mirror: a list of
    # axes, each {key: [i] or [i, j], obs: [...], action: [...]}: the flat observation entry (or
    # entry i minus entry j) whose sign picks the frame, and the observation and action entries
    # that reflecting the world across that axis negates; optionally swap / swap_action, the
    # pairs of entries it exchanges, and center, the mirror plane's coordinate for each obs
    # entry (docs/custom_envs.md)
    mirror_axes: list[Any] | None = None
    # the constructor arguments of a registered policy class of one's own that are not among the keys
    # above (policy.options={width: 2.0} or +policy.options.width=2.0); recorded with its weights, so
    # evaluate.py, resume= and Ray workers rebuild it alike. The built-in policies take none
    options: dict[str, Any] = field(default_factory=dict)


def policy_kwargs(cfg: PolicyConfig, env: EnvConfig | str | None = None) -> dict[str, Any]:
    """The constructor arguments of `cfg.type` taken from `cfg`; with `policy.mirror`, the mirror
    axes of `env` (its config, or a built-in task's name: `mirror_axes`). A policy registered by a
    plugin (`register_policy`) gets those of `policy.`'s keys that its constructor takes (through
    the constructors it hands `**kwargs` to)."""
    common = dict(hidden_sizes=list(cfg.hidden_sizes), activation=cfg.activation, obs_norm=cfg.obs_norm)
    if cfg.mirror:
        common["mirror"] = mirror_axes(cfg, env)
    gaussian = dict(common, init_std=cfg.init_std, state_dependent_std=cfg.state_dependent_std, squash=cfg.squash,
                    max_std=cfg.max_std, min_std=cfg.min_std)  # fmt: skip
    tokenized = dict(common, bins=cfg.bins, head=cfg.head, temperature=cfg.temperature, embed_dim=cfg.embed_dim,
                     bin_logits=cfg.bin_logits, learn_temperature=cfg.learn_temperature, decode=cfg.decode,
                     init_std=cfg.init_std, free_logits_lr=cfg.free_logits_lr)  # fmt: skip
    if cfg.type in ("gaussian", "tokenized"):
        return gaussian if cfg.type == "gaussian" else tokenized
    from grpo_robot.registry import POLICIES  # a plugin's class: filed when its module was imported

    takes = constructor_arguments(POLICIES[cfg.type])
    return {**{k: v for k, v in {**gaussian, **tokenized}.items() if k in takes}, **dict(plain(cfg.options))}


def mirror_axes(cfg: PolicyConfig, env: EnvConfig | str | None) -> list[dict[str, Any]]:
    """The mirror axes `policy.mirror=true` gives a policy: those a built-in task declares
    (envs/task.py; `env` its config or its name), else `policy.mirror_axes`, else the env config's
    own `env.mirror_axes`."""
    task = env if isinstance(env, str) else getattr(env, "task", None)
    if task:
        return make_task(task).mirror_axes()
    axes = given_axes(cfg, env)
    if not axes:
        raise ValueError("policy.mirror=true needs a built-in env.task, which declares its mirror symmetries, or "
                         "the env's own as env.mirror_axes or policy.mirror_axes")  # fmt: skip
    return [normal_axis(axis) for axis in plain(axes)]


def given_axes(cfg: PolicyConfig, env: EnvConfig | str | None) -> list[Any] | None:
    """The mirror axes given in the config for an env that is not a built-in task: the run's
    `policy.mirror_axes`, which replace the env config's own `env.mirror_axes`."""
    return cfg.mirror_axes if cfg.mirror_axes is not None else getattr(env, "mirror_axes", None)


def normal_axis(axis: dict[str, Any]) -> dict[str, Any]:
    """A mirror axis of `policy.mirror_axes` as the policy keeps it: entries as ints, pairs as
    lists, centers as floats, and the optional fields only where given."""
    out: dict[str, Any] = {name: [int(i) for i in axis[name]] for name in ("key", "obs", "action")}
    for name in ("swap", "swap_action"):
        if name in axis:
            out[name] = [[int(i), int(j)] for i, j in axis[name]]
    if "center" in axis:
        out["center"] = [float(c) for c in axis["center"]]
    return out


def plain(value: Any) -> Any:
    """A config value (an OmegaConf node, or already plain) as plain Python containers, as a
    checkpoint keeps them."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def unused_policy_settings(cfg: PolicyConfig) -> list[str]:
    """A line for each `policy.` key set away from its default that `cfg.type` does not use: a key
    its constructor does not take (`policy.max_std` on a tokenized policy), or `init_std` on a
    tokenized policy without the Gaussian bump. Presets carry such keys when `policy=` swaps the
    type under them, so they are reported, not refused."""
    from grpo_robot.registry import POLICIES

    takes = constructor_arguments(POLICIES[cfg.type]) if cfg.type in POLICIES else set()
    where = f"policy.type={cfg.type}"
    if cfg.type == "tokenized" and cfg.bin_logits != "gaussian":
        takes.discard("init_std")  # the width the Gaussian bump starts at
        where += f" with bin_logits={cfg.bin_logits}"
    default = PolicyConfig()
    fields = dataclasses.fields(PolicyConfig)
    lines = [f"policy.{f.name}={getattr(cfg, f.name)} has no effect on {where}" for f in fields
             if f.name not in ("type", "options", "mirror_axes") and f.name not in takes
             and getattr(cfg, f.name) != getattr(default, f.name)]  # fmt: skip
    if cfg.mirror_axes and not cfg.mirror:
        lines.append("policy.mirror_axes has no effect without policy.mirror=true")
    if cfg.type == "tokenized" and cfg.head == "factorized" and cfg.embed_dim != default.embed_dim:
        lines.append(f"policy.embed_dim={cfg.embed_dim} has no effect on policy.type=tokenized with head=factorized "
                     "(only the autoregressive head embeds its tokens)")  # fmt: skip
    return lines


def unused_settings(cfg: Any) -> list[str]:
    """`unused_policy_settings`, and the `demos.` keys that a dataset (`demos.path`) makes moot:
    the ones that say how to collect demonstrations, set away from their defaults."""
    from grpo_robot.registry import needs_critic

    lines = unused_policy_settings(cfg.policy)
    pol = cfg.policy
    env_axes = getattr(getattr(cfg, "env", None), "mirror_axes", None)
    if pol.mirror and None not in (pol.mirror_axes, env_axes) and plain(pol.mirror_axes) != plain(env_axes):
        lines.append("policy.mirror_axes replaces the env's own env.mirror_axes for this run")
    if (getattr(cfg, "pretrain", True) and cfg.bc.learn_std and pol.type == "tokenized" and not pol.learn_temperature
            and pol.bin_logits != "gaussian"):  # fmt: skip
        lines.append(f"bc.learn_std=true has no effect: policy.type=tokenized with learn_temperature=false and "
                     f"bin_logits={pol.bin_logits} has no temperature or width to learn")  # fmt: skip
    lines += _moved(cfg.algo.critic, CriticConfig(), "algo.critic.",
                    f"algo.advantage={cfg.algo.advantage} learns no critic (algo.advantage=gae does)",
                    not needs_critic(cfg.algo.advantage))  # fmt: skip
    lines += _moved(cfg.algo, AlgoConfig(), "algo.", f"only lr_schedule=adaptive reads it; algo.lr_schedule is "
                    f"{cfg.algo.lr_schedule}", cfg.algo.lr_schedule != "adaptive", ("desired_kl", "lr_range"))
    if cfg.rollout.backend != "ray":
        lines += _moved(cfg.rollout, RolloutConfig(), "rollout.", "only rollout.backend=ray reads it; the run "
                        "steps its worlds in this process", True, ("workers", "cpus_per_worker", "worker_timeout_s",
                                                                   "max_restarts"))  # fmt: skip
        if cfg.ray.address is not None:
            lines.append(f"ray.address={cfg.ray.address} has no effect: it is for rollout.backend=ray; the run "
                         "steps its worlds in this process")  # fmt: skip
    else:
        lines += _moved(cfg.rollout, RolloutConfig(), "rollout.", "under rollout.backend=ray each worker samples "
                        "with rollout.cpus_per_worker torch threads", True, ("policy_threads",))  # fmt: skip
    if cfg.pretrain and cfg.demos.path:
        default = DemoConfig()
        for key in ("expert", "episodes", "noise", "seed", "max_attempts"):
            value = getattr(cfg.demos, key)
            if value != getattr(default, key) and not (key == "seed" and value == cfg.seed):  # the presets' ${seed}
                lines.append(f"demos.{key}={value} has no effect with demos.path={cfg.demos.path} (every episode of "
                             "the dataset is cloned)")  # fmt: skip
    return lines


def _moved(section: Any, default: Any, prefix: str, why: str, unused: bool,
           keys: tuple[str, ...] | None = None) -> list[str]:  # fmt: skip
    """Lines for the keys of `section` (all its fields, or `keys`) set away from `default`'s values
    where `unused` says they do nothing."""
    import dataclasses

    if not unused:
        return []
    names = keys or tuple(f.name for f in dataclasses.fields(section))
    moved = [f"{prefix}{k}={getattr(section, k)}" for k in names if getattr(section, k) != getattr(default, k)]
    return [f"{', '.join(moved)} {'has' if len(moved) == 1 else 'have'} no effect: {why}"] if moved else []


def constructor_arguments(cls: type) -> set[str]:
    """The keyword arguments `cls(...)` takes: its `__init__`'s, and where that takes `**kwargs`,
    those of the `__init__` above it in the class hierarchy (which it is assumed to pass them to)."""
    import inspect

    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


@dataclass
class ClipConfig:
    """PPO's ratio clip: the ratio's term is clipped to (1 - low, 1 + high)."""

    eps: float = 0.2  # both bounds, unless low/high are set
    low: float | None = None  # null = eps
    high: float | None = None  # null = eps (DAPO's clip-higher: 0.28)
    dual: float | None = None  # c > 1: a negative advantage's objective is at least c*A (dual clip); null = off


@dataclass
class KLConfig:
    """A penalty toward the frozen initial policy. Its value estimates KL(pi || pi_ref) with every
    estimator; its gradient's direction depends on the estimator (k3's is KL(pi_ref || pi)'s, k2's
    KL(pi || pi_ref)'s, k1's is 0 in expectation; docs/algorithms.md)."""

    beta: float = 0.0  # its weight; 0 keeps no reference policy at all
    estimator: str = registered(KL_ESTIMATORS, "k3")  # k1 | k2 | k3 (grpo_robot/algo.py)


@dataclass
class DynamicSamplingConfig:
    """DAPO's dynamic sampling: train only on groups whose success rate is strictly inside
    `keep_range`, drawing more groups until the batch is full."""

    enabled: bool = False
    keep_range: list[float] = field(default_factory=lambda: [0.0, 1.0])  # open interval of group success rates
    max_rounds: int = 4  # draws of groups_per_iter groups per iteration before giving up on a full batch


@dataclass
class StartReplayConfig:
    """Replay of informative starts (grpo_robot/start_replay.py): a share of each iteration's
    groups start again from training seeds whose last group had both successes and failures."""

    fraction: float = 0.0  # share of groups_per_iter drawn from the replayed seeds (when it holds enough); 0 = off
    max_replays: int = 4  # times one seed is replayed at most


@dataclass
class StdAnnealConfig:
    """A falling cap on the Gaussian's exploration std (grpo_robot/hooks.py, `StdAnneal`): from
    policy.init_std it falls geometrically to `final` over `iterations` iterations, then stays; the
    learned std may sit below it. Only for a Gaussian policy with a state-independent std."""

    final: float | None = None  # the cap's last value; null = off (the std is only bounded by policy.max_std)
    iterations: int = 100  # iterations over which the cap falls from policy.init_std to `final`


@dataclass
class CurriculumConfig:
    """A start curriculum (grpo_robot/hooks.py, `StartCurriculum`): training starts are drawn at a
    difficulty below the task's own, raised by `step` after every iteration whose training success
    reaches `threshold`, up to 1 (the task as evaluated). For built-in tasks with easier starts
    (PushCube: the goal nearer the cube, at least 5 cm from it)."""

    start: float | None = None  # the first difficulty, in (0, 1); null = off (the task's own starts)
    step: float = 0.05  # added to the difficulty after each iteration at or above `threshold`
    threshold: float = 0.4  # an iteration's training success (of every group drawn) that makes the next one harder


@dataclass
class CriticConfig:
    """PPO's learned value function (advantage=gae) and the reward it learns; the GRPO family has no critic."""

    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE's bias-variance trade-off
    vf_coef: float = 0.5  # weight of the value loss
    # outcome: 1 on success, the only reward | shaped: also shaping_coef x (gamma * potential(next obs)
    # - potential(obs)) per step, from the built-in task's hand-made potential (a reference for PPO)
    reward: str = choice("outcome", "shaped")
    shaping_coef: float = 10.0  # potential is in metres: 10 x 10 cm of progress weighs as much as success


@dataclass
class AlgoConfig:
    """The objective and the update (grpo_robot/algo.py names every variant)."""

    # grpo | dr_grpo | rloo | gae (PPO: needs a critic, which the trainer then adds)
    advantage: str = registered(ADVANTAGE_ESTIMATORS, "grpo")
    adv_eps: float = 1e-6  # added to the group std (advantage=grpo)
    ratio: str = registered(RATIO_LEVELS, "action")  # action: per step | token: per token | sequence: GSPO
    # seq-mean-token-mean (GRPO) | token-mean (DAPO) | seq-mean-token-sum-norm (Dr. GRPO)
    aggregation: str = registered(AGGREGATIONS, "seq-mean-token-mean")
    policy_loss: str = registered(POLICY_LOSSES, "clipped")  # the loss on each minibatch
    # settings of a registered advantage estimator or policy loss of one's own (algo.options={temp: 2}
    # or +algo.options.temp=2): the estimator gets them as keyword arguments, a loss reads them as
    # cfg.options; the built-in entries take none
    options: dict[str, Any] = field(default_factory=dict)
    group_size: int = 16  # N rollouts per initial condition
    groups_per_iter: int = 32  # G initial conditions per iteration
    epochs: int = 4  # K passes over each batch
    minibatches: int = 4  # minibatches per epoch, split by trajectory
    lr: float = 3e-4  # Adam learning rate
    # linear: to 0 at the end of the budget, iterations or max_env_steps, whichever comes first.
    # adaptive: after each update, divided by 1.5 when the update's last epoch ran more than
    # 2 x desired_kl (approx. KL to the rollout policy), multiplied by 1.5 under half of it; within lr_range
    lr_schedule: str = choice("constant", "linear", "adaptive")
    desired_kl: float = 0.01  # lr_schedule=adaptive: the KL from the rollout policy that each update aims at
    lr_range: list[float] = field(default_factory=lambda: [1e-5, 1e-2])  # lr_schedule=adaptive: its bounds
    max_grad_norm: float | None = 1.0  # null disables clipping
    # the run stops with an error, its last good checkpoint kept, at this many non-finite optimizer steps
    # in a row (the loss, the gradient or the weights after the step; each is rolled back and skipped)
    max_skipped_steps: int = 20
    normalize_advantages: bool = False  # standardize advantages per minibatch (PPO's usual practice; gae only)
    entropy_coef: float = 0.0
    # true: every step of a minibatch goes through the policy's forward pass, as updates did before
    # a zero-advantage step's entropy bonus was scored without one (where the entropy depends on no
    # observation: a Gaussian with a free std, unsquashed). The same loss and gradient to float
    # rounding, slower; for reproducing earlier runs to the bit and for side-by-side timing
    forward_every_step: bool = False
    # correlation of each world's sampling noise from one control step to the next (AR(1), every
    # step's noise still the policy's own distribution): near 1 an exploring arm keeps a direction
    # for about 1 / (1 - rho) steps instead of jittering; 0 = independent draws at every step
    noise_correlation: float = 0.0
    # control steps per training rollout: a world still running then counts as a failure, so
    # failures cost this many steps instead of the env's horizon and success comes sooner; a success
    # needing more steps earns nothing (env.outcome=final_step: success is judged at this step, not
    # at the horizon). Evaluation always runs env.horizon. null = env.horizon
    train_horizon: int | None = None
    clip: ClipConfig = field(default_factory=ClipConfig)
    kl: KLConfig = field(default_factory=KLConfig)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    start_replay: StartReplayConfig = field(default_factory=StartReplayConfig)
    std_anneal: StdAnnealConfig = field(default_factory=StdAnnealConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)


@dataclass
class DemoConfig:
    """Demonstrations (grpo_robot/demos.py): from an expert, or an existing dataset (`path`)."""

    # Gymnasium envs: module:attr, a function (obs, info) -> action or an object with get_action(obs),
    # in the env's own units; null on a built-in task = its scripted expert
    expert: str | None = None
    episodes: int = 10  # successful episodes to keep
    noise: float = 0.0  # std of Gaussian noise on the executed actions; the labels stay the expert's
    # picks the demo seeds and the noise; in [0, 1000); null: the run's `seed` (scripts/train.py),
    # 0 (scripts/collect_demos.py)
    seed: int | None = None
    max_attempts: int | None = None  # episodes to try at most; null = 10 x episodes + 64
    # train: a dataset to clone instead of collecting: a .npz of this project, a Minari dataset
    # (its directory, or minari:<dataset id>) or a robomimic-layout .hdf5 (grpo_robot/datasets.py)
    path: str | None = None
    # a robomimic file's filter key: only the demos its mask/<key> lists (train, 20_percent, ...);
    # null = every demo
    filter_key: str | None = None


@dataclass
class BCConfig:
    """Behaviour cloning (grpo_robot/bc.py): maximum likelihood of the expert's actions."""

    max_steps: int = 5000  # gradient steps at most
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    val_fraction: float = 0.2  # episodes held out for early stopping (at least one)
    # fit again from the same initial weights on every episode, held-out ones included, for the
    # steps early stopping chose: no demonstration is left out of the clone
    refit: bool = False
    eval_every: int = 50  # gradient steps between validation checks
    patience: int = 20  # checks without a lower held-out action error before stopping
    # also fit the Gaussian's std (else it stays at policy.init_std for exploration): a free std ends
    # as the RMS of the clone's held-out error per dimension; or a tokenized policy's learned
    # temperature (else it stays at policy.temperature)
    learn_std: bool = False
    # tokenized: targets are a Gaussian this many bins wide around the action (an action at a bound:
    # the bins of clip(action + that Gaussian)); 0 = one-hot
    token_sigma: float = 8.0
    labels: str = choice("expert", "executed")  # expert: the expert's clean actions | executed: the noisy actions taken
    # split, shuffling and initial weights; null: the run's `seed` (train.py), 0 (pretrain_bc.py)
    seed: int | None = None


@dataclass
class RolloutConfig:
    """Where an iteration's rollouts run (docs/scaling.md). The result does not depend on it: each
    world's sampling noise comes from the run's stream for that world, whoever steps it."""

    # local: the training env, in this process | ray: `workers` Ray actors, each stepping a slice of
    # the iteration's groups with a CPU copy of the policy (the learner sends the weights once per draw)
    backend: str = choice("local", "ray")
    workers: int = 2  # Ray actors (at most one per group)
    cpus_per_worker: float = 1.0  # CPUs Ray reserves for each; also its physics and torch threads
    worker_timeout_s: float = 600.0  # a worker slower than this on one draw is hung: killed and restarted
    max_restarts: int = 3  # worker failures (died or hung) a run survives; then it stops, last iteration saved
    # built-in tasks: the worlds in this many parts, the policy sampling one part while the physics
    # steps another (the physics releases the GIL); at most env.nthread parts (one physics thread
    # each: with env.nthread=1, or a Ray worker of one CPU, the rollout stays on one core); the
    # batch is identical for any value
    split: int = 2
    # built-in tasks, split rollout: each part is a rollout of its own on a thread of its own, its
    # policy and its physics (with nthread // split physics threads), beside the others (true); or
    # one thread samples every part while their physics take turns on one pool of all the physics
    # threads (false). The batch is the same either way (docs/benchmarks.md)
    parallel_parts: bool = True
    # parts on threads of their own: each holds a lock but for its physics calls, so the parts run
    # their Python (policy, bookkeeping) one at a time instead of trading the GIL op by op (true);
    # the batch is the same either way
    take_turns: bool = True
    # torch CPU threads while the policy samples actions in a rollout (restored for the update):
    # the physics owns the cores then, and idle torch threads spin on them; null = leave torch's
    policy_threads: int | None = 1


@dataclass
class RayConfig:
    """The Ray cluster of `rollout.backend=ray`."""

    # null: start a local Ray on this machine's cores (shut down at the end) | auto: the cluster
    # `ray start --head` runs on this machine | ray://host:port (Ray Client) | host:port
    address: str | None = None


@dataclass
class WandbConfig:
    """Weights & Biases, when `loggers` lists wandb (the `wandb` extra)."""

    project: str = "grpo-robot"
    entity: str | None = None  # team or user; null = your default
    # online: sync as the run goes (needs `wandb login`) | offline: write under <run dir>/wandb, for `wandb sync`
    mode: str = choice("online", "offline")
    # the W&B group; null = a -m sweep's folder name for its jobs (every seed=N of one sweep together), none else
    group: str | None = None
    tags: list[str] = field(default_factory=list)  # W&B tags of the run


@dataclass
class RenderConfig:
    """How episodes are filmed (`video=N` in evaluation, `video_every` in training; grpo_robot/video.py)."""

    # a camera of the built-in tasks' scene: front (gripper, cube and goal) | top | wrist (moves with
    # the hand). Other envs film as their own render() does (e.g. env.kwargs.render_camera for robosuite)
    camera: str = choice("front", "top", "wrist")
    width: int = 320  # pixels, even (built-in tasks: at most 640)
    height: int = 240  # pixels, even (built-in tasks: at most 480)
    gif: bool = False  # also write each episode as a looping GIF


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    seed: int = 0  # seeds the training seed stream, the initial weights and the sampling
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N
    # modules imported before the config is checked, which register advantages, policy losses or
    # policies (grpo_robot/registry.py); recorded with the run, so evaluate.py, resume= and
    # init_from= import them again, and so do Ray workers
    plugins: list[str] = field(default_factory=list)
    # hooks added to the run (grpo_robot/hooks.py): module:Class (or a function), called with no
    # arguments, giving a Hook; they run after the evaluation and before the periodic checkpoint
    hooks: list[str] = field(default_factory=list)
    iterations: int = 100
    max_env_steps: int | None = None  # stop once this many env steps were simulated (fair budgets)
    time_limit_min: float | None = None  # stop training early after this many minutes (this process's: resumed, anew)
    eval_every: int = 25  # iterations between evaluations (and at the end)
    # skip a due evaluation while that iteration's training success (of every group drawn) is below this (the final one
    # always runs); training is the same either way, only evaluation time is saved; null = never skip
    eval_min_train_success: float | None = None
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
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    # where metrics go, the same names in each: tensorboard (<run dir>/tb) and/or wandb; [] logs nothing
    loggers: list[str] = field(default_factory=lambda: ["tensorboard"])
    wandb: WandbConfig = field(default_factory=WandbConfig)
    # every K-th evaluation also films `video_episodes` held-out episodes (successes and failures) to
    # <run dir>/videos and the loggers (TensorBoard: an animated image); 0 = never
    video_every: int = 0
    video_episodes: int = 4
    render: RenderConfig = field(default_factory=RenderConfig)
    progress: bool = True  # console progress bar


@dataclass
class EvalConfig:
    checkpoint: str = MISSING  # checkpoint file or run directory
    n_seeds: int = 200  # held-out seeds
    # which held-out seeds (grpo_robot/seed_ranges.py): test, which no choice of the run has seen,
    # or validation, those of the run's own evaluations (which chose best.pt and when to stop)
    seeds: str = choice("test", "validation")
    deterministic: bool = True  # mean action; false samples
    # tokenized policies: the deterministic action, mode | median | mean (see PolicyConfig.decode);
    # null = the checkpoint's
    decode: str | None = None
    seed: int = 0  # sampling seed when deterministic=false
    # what counts as a success: any_step (success at any step ends the episode) | final_step (judged
    # at the horizon, as published Fetch numbers are); null = the run's env.outcome
    outcome: str | None = None
    # a Gymnasium env's worlds, which run the seeds in chunks of this many (built-in tasks run one
    # world per seed); null = the run's training worlds, 16 for a clone of pretrain_bc.py
    worlds: int | None = None
    device: str = "auto"
    output: str | None = None  # per-seed JSON; null = next to the checkpoint
    # episodes to film as MP4 (half successes, half failures when both occur); 0 = none
    video: int = 0
    video_outcomes: str = choice("both", "successes", "failures")  # which evaluated episodes to film
    video_dir: str | None = None  # where the videos go; null = <checkpoint stem>_videos next to the checkpoint
    render: RenderConfig = field(default_factory=RenderConfig)  # the built-in tasks' camera and frame size
    # a Gymnasium env's own viewing arguments, added to its env.kwargs for the videos only (robosuite:
    # render_camera, render_width, render_height; Gymnasium's MuJoCo envs: width, height, camera_name)
    video_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class CollectDemosConfig:
    task: str = "PushCube"  # a built-in task, with its scripted expert; unused when env is set
    # any env as training takes it (env=fetch_push, env=gym env.id=...), with demos.expert for a
    # Gymnasium env; an untyped node (it may hold `import`), checked by config.env_config
    env: Any = None
    demos: DemoConfig = field(default_factory=DemoConfig)
    output: str | None = None  # .npz path; null = demos/<env name>_<episodes>.npz
    nthread: int | None = None


@dataclass
class PretrainConfig:
    # a demo .npz (scripts/collect_demos.py), a Minari dataset (directory or minari:<id>) or a robomimic .hdf5
    dataset: str = MISSING
    filter_key: str | None = None  # a robomimic file's mask/<key>: only the demos it lists; null = every demo
    # the env to clone for and evaluate on (env=fetch_push, env=gym env.id=...); null = the one a
    # .npz records (an outside dataset needs it set)
    env: Any = None
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    eval_seeds: int = 200  # held-out seeds to evaluate the clone on; 0 skips
    # a Gymnasium env's worlds for that evaluation, which runs the seeds in chunks of this many (each
    # world is an env instance; a process with env.vector=async); built-in tasks run one per seed
    eval_worlds: int = 16
    device: str = "auto"
    # checkpoint path; null = <dataset stem>_bc_<policy.type>.pt next to a dataset file (.npz, .hdf5), or in
    # the working directory for a dataset folder or id (Minari)
    output: str | None = None
