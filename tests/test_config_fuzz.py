"""Bad config values, on every command: each ends with exit code 2 and one line on stderr,
`error: ...`, naming the key, before any work (no env built, no file read, nothing trained).

Every case in the table runs the real entry point in this process (tests/cli_harness.py): what
the command line decides (parsing, types, unknown keys, groups, presets, memory) and a value of
each group. More values whose check is `validate`'s alone go to it directly, without a
composition each (0.2 s). Values that pass validation are checked on the validators directly (a
passing training case would train)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
from cli_harness import run_main
from omegaconf import OmegaConf

from grpo_robot.cli import CONF_DIR, SCHEMAS, compose_config, compose_train_config
from grpo_robot.config import (
    AlgoConfig,
    ConfigError,
    TrainConfig,
    register_configs,
    to_train_config,
    validate,
    validate_collect,
    validate_eval,
    validate_pretrain,
    whole_number_overrides,
)
from grpo_robot.config.validate import check_memory, estimate_memory
from grpo_robot.machine import available_memory, usable_cores

HUGE = "100000000"  # a size no machine holds in any of its roles below (terabytes)

# Training runs that pass validation by mistake stay short: these come first, so that a case's
# own overrides (later on the command line) win.
SAFE = ("iterations=1", "eval_seeds=8", "progress=false")


def case(command: str, *overrides: str, key: str | None = None):
    """One bad value: `key` is what the error line must name (by default the first override's key)."""
    key = key or overrides[0].split("=", 1)[0].lstrip("+~")
    return pytest.param(command, overrides, key, id=f"{command}:{' '.join(overrides)}")


# -- training: every group -----------------------------------------------------------------------
TRAIN_ENV = [
    case("train", f"env.horizon={HUGE}"),  # memory: 512 worlds x 1e8 steps
    case("train", "env.horizon=abc"),
    case("train", "env.step_timeout_s=5", key="env.step_timeout_s"),  # not in a built-in preset: needs +
    case("train", "env=gym", key="env.id"),  # no env named
    case("train", "env=gym", "env.id=FetchReach-v4", "env.entry_point=a.b:C", key="env.entry_point"),
    case("train", "env=gym", "env.entry_point=not_callable", key="env.entry_point"),
    case("train", "algo.normalize_advantages=true", key="algo.normalize_advantages"),  # group advantages: no
    case("train", "env=gym", "env.id=gymnasium_robotics:FetchReach-v4", key="env.id"),  # gym.make's module:id
    case("train", "env=gym", "env.id=FetchReach-v4", "env.success_fn=bad", key="env.success_fn"),
    case("train", "env=gym", "env.id=FetchReach-v4", "env.success_key=''", key="env.success_key"),
    case("train", "env=gym", "env.id=FetchReach-v4", "env.success_fn=toy_envs:goal_reached", "env.success_key=done",
         key="env.success_key"),  # the function decides: the key would be ignored
    case("train", "algo=ppo", "algo.start_replay.fraction=0.5", key="algo.start_replay.fraction"),  # groups of 1
    # 32 groups: a share under 1/32 rounded down to no group, while the buffer and its chart grew
    case("train", "algo.start_replay.fraction=0.02", key="algo.start_replay.fraction"),
    case("train", "obs_norm_updates=0"),  # a bool field: true, false (or null), not an integer
    case("train", "-m", "pretrain=true,7", key="pretrain"),
    case("train", "env=gym", "env.entry_point=toy_envs:PointReach", "env.horizon=20", "env.group_start=clone",
         "algo.start_replay.fraction=0.5", key="algo.start_replay.fraction"),  # a seed-ignoring env's seeds
    case("train", "env=gym", "env.id=FetchReach-v4", "env.obs_keys=[]", key="env.obs_keys"),
    case("train", "env=gym", "env.id=FetchReach-v4", "env.vector=threads", key="env.vector"),
    case("train", "env=gym", "env.id=FetchReach-v4", "env.group_start=copy", key="env.group_start"),
    case("train", "env=gym", "env.id=FetchReach-v4", "env.horizon=0", key="env.horizon"),
    case("train", "env=fetch_push", "algo.groups_per_iter=1000", key="algo.groups_per_iter"),  # 16,000 worlds
    case("train", "env=gym", "env.id=FetchReach-v4", "+env.foo=1", key="env.foo"),
    case("train", "env.hor=3"),
    case("train", "env=push_cub", key="env=push_cub"),
]
TRAIN_POLICY = [
    case("train", "policy.max_std=0.1", key="policy.max_std"),  # below init_std, where the std starts
    case("train", "policy.min_std=0.9", key="policy.min_std"),  # above init_std
    case("train", "policy.init_std=4", "policy.max_std=null", key="policy.init_std"),  # above the policy's e
    case("train", "policy=tokenized_factorized", "policy.learn_temperature=true", "policy.temperature=0.01",
         key="policy.temperature"),  # below the learned temperature's bound
    case("train", "policy=tokenized_factorized", "policy.temperature=inf", key="policy.temperature"),
    case("train", "policy=tokenized_factorized", "policy.free_logits_lr=0.1", key="policy.free_logits_lr"),  # free
    case("train", "policy=tokenized_factorized", "policy.bin_logits=gaussian", "policy.free_logits_lr=-0.1",
         key="policy.free_logits_lr"),  # fmt: skip
    case("train", "policy.hidden_sizes=[1000000,1000000]"),  # memory: 1e12 parameters
    case("train", "policy.hidden_sizes=5"),
    case("train", "policy=gaus", key="policy=gaus"),
    case("train", "+policy.foo=1"),
]
TRAIN_ALGO = [
    case("train", "algo.lr=inf"),
    case("train", "algo.lr=abc"),
    case("train", "algo.lr=null"),
    case("train", "algo.lrr=1"),
    case("train", "+algo.lrr=1"),
    case("train", "+algo.lr=0.1"),
    case("train", "~algo.lr"),
    case("train", f"algo.epochs={HUGE}"),
    case("train", f"algo.groups_per_iter={HUGE}"),  # memory
    case("train", f"algo.group_size={HUGE}"),  # memory
    case("train", "algo.desired_kl=nan"),
    case("train", "algo.lr_schedule=adaptive", "algo.lr=0.5", key="algo.lr"),
    case("train", "algo=ppx", key="algo=ppx"),
    case("train", "algo.clip_eps=0.2"),  # renamed
    # clip
    case("train", "algo.clip.eps=0"),
    case("train", "algo.clip=3"),
    # kl
    case("train", "algo.kl.estimator=k4"),
    case("train", "algo="),  # no option: the group's options are listed (the list was empty)
    case("train", "experiment=lift_cube_bc", "seed=1000", key="seed=1000"),  # demos.seed is ${seed} there
    # a Gymnasium env's keys on a built-in task (it used to run without them, silently)
    case("train", "+env.vector=async"),
    case("train", "+env.kwargs.foo=1", key="env.kwargs"),
    case("train", "+env.success_fn=nonexistent_mod:fn"),
    case("train", "env.vector=async", key="env.vector"),
    # settings that would have no effect (they used to be ignored without a word)
    case("train", "demos.path=tests/data/demos.npz", key="demos.path"),  # pretrain=false: nothing clones them
    case("train", "experiment=fetch_push_minari", "pretrain=false", key="demos.path"),
    case("train", "experiment=fetch_push_bc", "pretrain=false", key="demos.expert"),
    case("train", "obs_norm_updates=true", "policy.obs_norm=false", key="obs_norm_updates"),
    # dynamic sampling
    case("train", "algo.dynamic_sampling.keep_range=[0.8,0.2]"),
    case("train", "algo=ppo", "algo.dynamic_sampling.enabled=true", key="algo.dynamic_sampling.enabled"),
    case("train", "algo.dynamic_sampling=true"),  # renamed
    # critic
    case(
        "train", "algo=ppo", "algo.critic.reward=shaped", "algo.critic.shaping_coef=inf", key="algo.critic.shaping_coef"
    ),  # fmt: skip
    case("train", "algo.critic.reward=shaped"),  # GRPO has no critic
    case("train", "algo.critic.reward=dense"),
]
TRAIN_DEMOS_BC = [
    case("train", f"demos.episodes={HUGE}"),
    case("train", f"demos.max_attempts={HUGE}"),
    case("train", "demos.path=''"),
    case("train", "demos.expert=''"),
    case("train", "demos.expert=not_callable"),
    case("train", "demos.noisy=3"),
    case("train", f"bc.max_steps={HUGE}"),
]
TRAIN_TOP = [
    case("train", "init_from=''"),
    case("train", "resume=''"),
    case("train", "iterations=abc"),
    case("train", f"eval_seeds={HUGE}"),  # memory: 1e8 worlds
    case("train", "seed=99999999999999999999999"),
    case("train", "seed=1.5"),
    case("train", "pretrain=true", "init_from=x.pt", key="init_from"),
    case("train", "progress=maybe"),
    case("train", "+foo=1"),
    case("train", "experiment=nope", key="experiment=nope"),
    case("train", "algo.lr=[1", key="algo.lr=[1"),  # unparsable
    case("train", "algo..lr=3", key="algo..lr"),  # unparsable
    case("train", "experiment=null"),
    case("train", "algo.lr=${nope}", key="algo.lr"),
    case("train", "algo.lr=0.1,0.2", key="algo.lr"),
]  # fmt: skip

# -- the other commands; `missing`: a file that does not exist, read only after validation ------
EVALUATE = [
    case("evaluate", "n_seeds=0"),
    case("evaluate", "n_seeds=-5"),
    case("evaluate", "n_seeds=abc"),
    case("evaluate", "n_seeds=inf"),
    case("evaluate", "n_seeds=3000000000"),
    case("evaluate", "n_seeds=500000001"),  # more than a half of the held-out range holds
    case("evaluate", "seeds=train"),
    case("evaluate", "seed=-1"),
    case("evaluate", "device=tpu"),
    case("evaluate", "device=cuda:x"),
    case("evaluate", "deterministic=maybe"),
    case("evaluate", "deterministic=5"),  # OmegaConf read any integer as a bool
    case("evaluate", "n_seedz=3"),
    case("evaluate", "output=''"),
    case("evaluate", "output=/tmp"),  # a directory: the JSON would be lost after the evaluation
    case("evaluate", "checkpoint=''", key="checkpoint="),
    case("evaluate", "+foo=1"),
    case("evaluate", "checkpoint=???", key="checkpoint is missing"),  # none given
]
COLLECT = [
    case("collect_demos", "demos.noise=inf"),
    case("collect_demos", "demos.noise=-1"),
    case("collect_demos", "demos.episodes=0"),
    case("collect_demos", f"demos.episodes={HUGE}"),
    case("collect_demos", "demos.seed=1000"),
    case("collect_demos", "demos.max_attempts=3"),
    case("collect_demos", "demos.expert=''"),
    case("collect_demos", "demos.expert=grpo_robot.experts.fetch:push"),  # a built-in task has its own
    case("collect_demos", "demos.path=x.npz"),
    case("collect_demos", "demos.noisy=3"),
    case("collect_demos", "task=Pushcube", key="env.task"),
    case("collect_demos", "env=push_cube", "env.nthread=100000", key="env.nthread"),
    case("collect_demos", "env=push_cube", "env.horizon=0", key="env.horizon"),
    case("collect_demos", "env=push_cube", "+env.step_timeout_s=inf", key="env.step_timeout_s"),
    case("collect_demos", "env=gym", "env.id=FetchReach-v4", key="demos.expert"),  # no expert for it
    case("collect_demos", "nthread=100000", "demos.path=poison.npz"),
    case("collect_demos", "output=''", "demos.path=poison.npz", key="output=''"),
    case("collect_demos", "+foo=1", "demos.path=poison.npz"),
]
PRETRAIN = [
    case("pretrain_bc", "policy.init_std=inf"),
    case("pretrain_bc", "policy=tokenized_factorized", "policy.temperature=0", key="policy.temperature"),
    case("pretrain_bc", "policy.hidden_sizes=[]"),
    case("pretrain_bc", "bc.lr=inf"),
    case("pretrain_bc", "bc.max_steps=0"),
    case("pretrain_bc", f"bc.max_steps={HUGE}"),
    case("pretrain_bc", "bc.val_fraction=1.5"),
    case("pretrain_bc", "bc.seed=-1"),
    case("pretrain_bc", "bc.lrr=1"),
    case("pretrain_bc", "device=tpu"),
    case("pretrain_bc", "eval_seeds=-1"),
    case("pretrain_bc", "env.nthread=100000"),
    case("pretrain_bc", "eval_seeds=3000000000"),
    case("pretrain_bc", "policy.hidden_sizes=[1000000,1000000]"),
    case("pretrain_bc", "output=''"),
    case("pretrain_bc", "+foo=1"),
    case("pretrain_bc", "dataset=???", key="dataset is missing"),  # none given
]
CASES = TRAIN_ENV + TRAIN_POLICY + TRAIN_ALGO + TRAIN_DEMOS_BC + TRAIN_TOP + EVALUATE + COLLECT + PRETRAIN


def command_line(command: str, overrides: tuple[str, ...], tmp: str) -> list[str]:
    """The arguments of one case: the files a command reads do not exist (validation comes first),
    and a training run that would pass validation by mistake is one short iteration."""
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    before: list[str] = []
    if command == "train":
        before = list(SAFE)
    elif command == "evaluate" and "checkpoint" not in given:
        before = [f"checkpoint={tmp}/missing.pt"]
    elif command == "pretrain_bc":
        before = [f"dataset={tmp}/missing.npz", "env=push_cube"]
    return [*before, *(o.replace("poison.npz", f"{tmp}/poison.npz") for o in overrides), f"hydra.run.dir={tmp}/run"]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("fuzz"))


def test_the_table_covers_every_group_and_command():
    assert len(CASES) >= 110
    keys = {p.values[2] for p in CASES}
    for group in ("env.", "policy.", "algo.clip.", "algo.kl.", "algo.dynamic_sampling.", "algo.critic.", "demos.",
                  "bc.", "algo."):  # fmt: skip
        assert any(k.startswith(group) for k in keys), group
    assert {p.values[0] for p in CASES} == {"train", "evaluate", "collect_demos", "pretrain_bc"}


@pytest.mark.parametrize("command, overrides, key", CASES)
def test_a_bad_value_is_one_line_and_exit_code_2(command, overrides, key, tmp):
    out = run_main(command, *command_line(command, overrides, tmp))
    lines = out.error_lines
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-2000:]
    assert key in lines[0], lines[0]
    assert not out.stdout.strip(), out.stdout[-500:]  # nothing ran


# -- more bad values of the same kinds, on `validate` directly (no composition per value) --------
MORE_TRAIN = [
    ("env.horizon", -5), ("env.nthread", 0), ("env.step_timeout_s", math.inf), ("env.step_timeout_s", -1.0),
    ("policy.init_std", math.nan), ("policy.init_std", 0.0), ("policy.init_std", -1.0), ("policy.temperature", 1000.0),
    ("policy.max_std", 0.0), ("policy.max_std", math.inf), ("policy.max_std", 10.5),
    ("policy.min_std", 0.0), ("policy.min_std", -0.1), ("policy.min_std", math.nan),
    ("policy.temperature", -1.0), ("policy.embed_dim", 0), ("algo.lr", math.nan), ("algo.lr", 0.0), ("algo.lr", -1e-3),
    ("algo.entropy_coef", -0.1), ("algo.entropy_coef", 1e5), ("algo.adv_eps", -1.0), ("algo.adv_eps", 2.0),
    ("algo.max_grad_norm", 0.0), ("algo.max_grad_norm", -1.0), ("algo.minibatches", 0), ("algo.group_size", 0),
    ("algo.groups_per_iter", 0), ("algo.epochs", -1), ("algo.clip.eps", 1.0), ("algo.clip.eps", -0.2),
    ("algo.clip.low", 0.0), ("algo.clip.low", math.inf), ("algo.clip.high", 0.0), ("algo.clip.high", -math.inf),
    ("algo.clip.dual", math.inf), ("algo.clip.dual", 0.5), ("algo.kl.beta", -1.0), ("algo.kl.beta", math.nan),
    ("algo.dynamic_sampling.max_rounds", 0), ("algo.dynamic_sampling.keep_range", [math.nan, 1.0]),
    ("algo.start_replay.fraction", 1.01), ("algo.start_replay.fraction", -0.5), ("algo.start_replay.max_replays", 0),
    ("algo.max_skipped_steps", 0),
    ("algo.std_anneal.final", 0.0), ("algo.std_anneal.final", math.inf), ("algo.std_anneal.iterations", 0),
    ("algo.curriculum.start", 1.0), ("algo.curriculum.start", -0.2), ("algo.curriculum.step", math.inf),
    ("algo.curriculum.threshold", 0.0),
    ("algo.critic.gamma", 1.5), ("algo.critic.gamma", math.nan), ("algo.critic.gae_lambda", -0.1),
    ("algo.critic.gae_lambda", 1.5), ("algo.critic.vf_coef", math.inf), ("algo.critic.vf_coef", 1e4),
    ("algo.critic.shaping_coef", 0.0), ("algo.critic.shaping_coef", 1e4), ("demos.noise", -1.0),
    ("demos.noise", math.nan), ("demos.episodes", 0), ("demos.seed", -1), ("demos.max_attempts", 0),
    ("bc.lr", 0.0), ("bc.lr", math.nan), ("bc.weight_decay", math.inf), ("bc.weight_decay", 1e4),
    ("bc.val_fraction", -0.1), ("bc.batch_size", 0), ("bc.eval_every", 0), ("bc.patience", 0),
    ("bc.token_sigma", math.inf), ("bc.token_sigma", -1.0), ("policy.temperature", 1e-50),
    ("time_limit_min", 0.0), ("time_limit_min", -5.0),
    ("target_success", 0.0), ("target_success", 1.5), ("target_success", math.nan), ("checkpoint_every", 0),
    ("eval_every", 0), ("eval_seeds", -1), ("eval_seeds", 2 * 10**9), ("max_env_steps", -1), ("iterations", -1),
    ("seed", 2**32), ("demos.path", " "), ("demos.expert", ""), ("init_from", " "), ("env.success_key", ""),
]  # fmt: skip


# the CLI's cases above whose check is validate's alone, moved here (a composition costs 0.2 s each)
MOVED = [
    ("env.horizon", 0), ("env.nthread", 100000), ("env.outcome", "sometimes"), ("env.task", "Pushcube"),
    ("env.step_timeout_s", 0.0), ("env.step_timeout_s", 1e6),
    ("env.step_timeout_s", 1e-300), ("policy.init_std", 11.0), ("policy.temperature", 0.0),
    ("policy.bins", 1), ("policy.bins", 1000000), ("policy.free_logits_lr", 0.1), ("policy.hidden_sizes", []),
    ("policy.hidden_sizes", [0]), ("policy.activation", "sigmoidx"), ("policy.type", "transformer"),
    ("policy.head", "tree"), ("algo.lr", 2.0), ("algo.epochs", 0), ("algo.minibatches", 100000),
    ("algo.group_size", 1), ("algo.advantage", "vtrace"), ("algo.ratio", "word"), ("algo.aggregation", "max"),
    ("algo.policy_loss", "hinge"), ("algo.lr_schedule", "cosine"), ("algo.desired_kl", 0.0),
    ("algo.lr_range", [1e-3, 1e-4]), ("algo.lr_range", [0.0, 1e-2]), ("algo.lr_range", [1e-5]),
    ("algo.clip.low", 1.5), ("algo.clip.high", 50.0), ("algo.clip.dual", 1.0),
    ("algo.kl.beta", 1e6), ("algo.dynamic_sampling.keep_range", [0.5]),
    ("algo.dynamic_sampling.keep_range", [0.0, math.inf]),
    ("algo.dynamic_sampling.max_rounds", 1000000), ("algo.critic.gamma", 0.0), ("algo.critic.vf_coef", 0.0),
    ("demos.noise", 100.0), ("demos.seed", 1000), ("demos.max_attempts", 5), ("bc.lr", 10.0), ("bc.max_steps", 0),
    ("bc.weight_decay", -1.0), ("bc.val_fraction", 1.0), ("bc.labels", "noisy"), ("bc.seed", -1),
    ("time_limit_min", 1e9), ("iterations", 0), ("eval_seeds", 0), ("max_env_steps", 0), ("seed", -1),
    ("device", "tpu"), ("device", "cuda:x"), ("device", ""),
    # one past each edge of the default job (256 trajectories, a 100-step horizon): the far values
    # above let a check that is off by one at its edge pass
    ("algo.minibatches", 257), ("algo.train_horizon", 101), ("algo.dynamic_sampling.keep_range", [0.5, 0.5]),
    ("loggers", ["tensorboard", "tensorboard"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def base() -> TrainConfig:
    return compose_train_config()


@pytest.mark.parametrize("path, value", MORE_TRAIN + MOVED, ids=[f"{p}={v!r}" for p, v in MORE_TRAIN + MOVED])
def test_validate_refuses(base, path, value):
    with pytest.raises(ConfigError) as err:
        validate(replaced(base, path, value))
    message = str(err.value)
    assert message.startswith(f"{path}=") and "\n" not in message, message


# -- the validators the other commands can call, on what the CLI does not check yet ------------


def compose(config_name: str, *overrides: str):
    """`conf/<config_name>.yaml` composed as the command composes it (no Hydra run)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return hydra_compose(config_name, overrides=whole_number_overrides(list(overrides), SCHEMAS[config_name]))


@pytest.mark.parametrize(
    "config_name, overrides, key",
    [
        ("evaluate", ["checkpoint=x.pt", "n_seeds=3000000000"], "n_seeds=3000000000"),
        ("evaluate", ["checkpoint=x.pt", "seed=-1"], "seed=-1"),
        ("evaluate", ["checkpoint=x.pt", "output=''"], "output=''"),
        ("evaluate", ["checkpoint=''"], "checkpoint=''"),
        ("evaluate", ["checkpoint=x.pt", "decode=argmax"], "decode='argmax' is invalid: must be null or one of mode"),
        ("evaluate", ["checkpoint=x.pt", "decode=median", "deterministic=false"],
         "decode='median' is invalid: applies to the deterministic action only"),  # it was ignored
        ("evaluate", [], "checkpoint is missing"),
        ("evaluate", ["checkpoint=x.pt", "+foo=1"], "foo is not a top-level key"),
        ("evaluate", ["checkpoint=x.pt", "+n_seedz=1"], "did you mean n_seeds?"),
        ("collect_demos", ["nthread=100000"], "nthread=100000"),
        ("collect_demos", ["nthread=0"], "nthread=0"),
        ("collect_demos", ["output=''"], "output=''"),
        ("collect_demos", ["+foo=1"], "foo is not a top-level key"),
        ("collect_demos", ["+demos.noisy=1"], "demos.noisy is not a key of demos (did you mean demos.noise?)"),
        ("collect_demos", ["demos.path=x.npz"], "demos.path='x.npz'"),
        ("pretrain_bc", ["dataset=x.npz", "eval_seeds=3000000000"], "eval_seeds=3000000000"),
        ("pretrain_bc", ["dataset=x.npz", "env=push_cube", "policy.hidden_sizes=[1000000,1000000]"],
         "policy.hidden_sizes=[1000000, 1000000] is too large for this machine"),
        ("pretrain_bc", ["dataset=x.npz", "output=''"], "output=''"),
        ("pretrain_bc", ["dataset=''"], "dataset=''"),
        ("pretrain_bc", [], "dataset is missing"),
        ("pretrain_bc", ["dataset=x.npz", "+foo=1"], "foo is not a top-level key"),
        ("pretrain_bc", ["dataset=x.npz", "+policy.bin=1"], "policy.bin is not a key of policy (did you mean"),
    ],
)  # fmt: skip
def test_validator_refuses(config_name, overrides, key):
    validator = {"evaluate": validate_eval, "collect_demos": validate_collect, "pretrain_bc": validate_pretrain}
    with pytest.raises(ConfigError) as err:
        validator[config_name](compose(config_name, *overrides))
    assert key in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_evaluate_refuses_more_seeds_than_the_checkpoints_env_can_hold():
    train_cfg = compose_train_config()
    validate_eval(compose("evaluate", "checkpoint=x.pt", "n_seeds=200"), train_cfg)
    with pytest.raises(ConfigError, match=r"^n_seeds=100000000 is too large for this machine: the evaluation needs"):
        validate_eval(compose("evaluate", "checkpoint=x.pt", f"n_seeds={HUGE}"), train_cfg)


# -- good edge values pass -------------------------------------------------------------------------

# (the default job bounds the std at 0.5 and cuts training rollouts at 80 steps: an edge value
# beyond those lifts the bound or the cut alongside, as a user would)
GOOD_TRAIN = [
    "algo.lr=1", "algo.lr=1e-8", "policy.init_std=2.718 policy.max_std=null", "policy.init_std=0.0068",
    "policy.max_std=2.718", "env.nthread=1",
    f"env.nthread={usable_cores()}", "policy.temperature=100", "algo.kl.beta=1000", "algo.kl.beta=0",
    "algo.entropy_coef=1000", "algo.clip.high=10", "algo.clip.low=0.99", "algo.clip.dual=100", "algo.adv_eps=0",
    "algo.adv_eps=1", "algo.epochs=1000", "algo.minibatches=256", "algo.max_grad_norm=null", "algo.max_grad_norm=1e6",
    "algo.critic.gamma=1", "algo.critic.gae_lambda=0", "demos.noise=10", "demos.episodes=10000",
    "demos.max_attempts=1000000", "bc.lr=1", "bc.max_steps=1000000", "bc.val_fraction=0", "time_limit_min=525600",
    "env=gym env.id=grpo_robot/Reach-v1 env.horizon=50 algo.train_horizon=null env.step_timeout_s=86400",
    "env.horizon=1 algo.train_horizon=null", "env.horizon=1000", "iterations=1000000000",
    "max_env_steps=1000000000000", "eval_every=1000000", "target_success=1", "seed=0", "seed=4294967295",
    "algo.dynamic_sampling.max_rounds=100", "policy.bins=2",
    # each at its edge in the default job: 256 trajectories, a 100-step horizon, 32 groups, 10 demos
    "algo.train_horizon=100", "algo.lr_schedule=adaptive algo.lr=1e-3 algo.lr_range=[1e-3,1e-3]",
    "demos.max_attempts=10", "policy.init_std=0.5 policy.max_std=0.5", "algo.start_replay.fraction=0.03125",
    "pretrain=true seed=999",
]  # fmt: skip


@pytest.mark.parametrize("override", GOOD_TRAIN)
def test_a_good_edge_value_passes(override):
    validate(compose_train_config(*override.split()))


@pytest.mark.parametrize("overrides, message", [
    (["policy.init_std=0.5", "policy.max_std=null", "algo.std_anneal.final=0.5"],
     "algo.std_anneal.final=0.5 is invalid: must be below policy.init_std=0.5"),
    (["pretrain=true", "seed=1000"], "seed=1000 is invalid with pretrain=true and demos.seed=null"),
    # 4,096 Gymnasium worlds at most (4,096 themselves need more memory than this machine's check allows)
    (["env=gym", "env.id=grpo_robot/Reach-v1", "algo.train_horizon=null", "algo.groups_per_iter=2049",
      "algo.group_size=2"], "= 4,098 Gymnasium worlds"),
])  # fmt: skip
def test_one_past_an_edge_is_refused(overrides, message):
    """The edges the far values above never reach: each check refuses the first value past it."""
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        validate(compose_train_config(*overrides))
    assert "\n" not in str(err.value)


def test_a_gymnasium_env_takes_no_mujoco_thread_count():
    gym = compose_train_config("env=gym", "env.id=grpo_robot/Reach-v1", "algo.train_horizon=null")
    with pytest.raises(ConfigError, match=r"^env\.nthread=2 is invalid: is for built-in tasks"):
        validate(replaced(gym, "env.nthread", 2))


EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


@pytest.mark.parametrize(
    "overrides",
    [["policy=tokenized_autoregressive", "policy.temperature=100", "policy.bins=2"], ["algo=ppo"], ["algo=dapo"],
     *([f"experiment={name}"] for name in EXPERIMENTS),
     ["env=fetch_push", "algo.groups_per_iter=16"]],
)  # fmt: skip
def test_presets_pass(overrides):
    """Every preset of conf/experiment validates as it is (the list is read from the folder)."""
    assert len(EXPERIMENTS) >= 15
    validate(compose_train_config(*overrides))


@pytest.mark.parametrize(
    "overrides, unused",
    [([], []), (["experiment=push_cube_bc_tokenized"], []),  # its bump starts at init_std
     (["policy=tokenized_factorized", "policy.squash=true"],  # and the default job's Gaussian keys
      ["policy.init_std=0.3583192724453277 has no effect on policy.type=tokenized with bin_logits=free",
       "policy.max_std=0.5 has no effect on policy.type=tokenized with bin_logits=free",
       "policy.squash=True has no effect on policy.type=tokenized with bin_logits=free"]),
     (["policy=tokenized_factorized", "policy.embed_dim=64", "policy.init_std=0.5", "policy.max_std=null"],
      ["policy.embed_dim=64 has no effect on policy.type=tokenized with head=factorized (only the autoregressive "
       "head embeds its tokens)"]),
     (["policy.bins=64", "policy.decode=mean"],
      ["policy.bins=64 has no effect on policy.type=gaussian",
       "policy.decode=mean has no effect on policy.type=gaussian"])],
)  # fmt: skip
def test_policy_keys_the_policy_does_not_use_are_named(overrides, unused):
    """Reported as warnings by `scripts/train.py`, not refused: presets carry them when `policy=`
    swaps the policy type under them."""
    from grpo_robot.config import unused_policy_settings

    cfg = compose_train_config(*overrides)
    validate(cfg)
    assert unused_policy_settings(cfg.policy) == unused


def test_a_clone_that_can_learn_no_temperature_is_named():
    from grpo_robot.config import unused_settings

    line = ("bc.learn_std=true has no effect: policy.type=tokenized with learn_temperature=false and bin_logits=free "
            "has no temperature or width to learn")  # fmt: skip
    base = ("policy=tokenized_factorized", "pretrain=true", "bc.learn_std=true", "policy.init_std=0.5",
            "policy.max_std=null")  # fmt: skip
    assert unused_settings(compose_train_config(*base)) == [line]
    assert unused_settings(compose_train_config(*base, "policy.learn_temperature=true")) == []
    assert unused_settings(compose_train_config(*base, "policy.bin_logits=gaussian")) == []


def test_collection_keys_a_dataset_makes_moot_are_named():
    from grpo_robot.config import unused_settings

    minari = "experiment=fetch_push_minari"
    assert unused_settings(compose_train_config(minari, "seed=3")) == []  # demos.seed: ${seed}
    assert unused_settings(compose_train_config(minari, "demos.episodes=5", "demos.noise=0.1")) == [
        f"demos.{k} has no effect with demos.path=tests/data/minari/grpo-robot/fetch-push-expert-v0 (every "
        "episode of the dataset is cloned)" for k in ("episodes=5", "noise=0.1")]  # fmt: skip


def test_settings_for_another_backend_schedule_or_advantage_are_named():
    """They were accepted without a word: the run stayed local with rollout.workers=8, desired_kl
    steered nothing without lr_schedule=adaptive, a critic's keys did nothing under GRPO."""
    from grpo_robot.config import unused_settings

    assert unused_settings(compose_train_config("algo=ppo", "algo.critic.gamma=0.5")) == []
    assert unused_settings(compose_train_config("rollout.backend=ray", "rollout.workers=8")) == []
    assert unused_settings(compose_train_config("rollout.backend=ray", "rollout.policy_threads=4")) == [
        "rollout.policy_threads=4 has no effect: under rollout.backend=ray each worker samples with "
        "rollout.cpus_per_worker torch threads"]  # fmt: skip
    assert unused_settings(compose_train_config("algo.lr_schedule=adaptive", "algo.desired_kl=0.05")) == []
    assert unused_settings(compose_train_config("algo.critic.gamma=0.5", "algo.critic.vf_coef=1", "rollout.workers=8",
                                                "ray.address=auto", "algo.desired_kl=0.05")) == [
        "algo.critic.gamma=0.5, algo.critic.vf_coef=1.0 have no effect: algo.advantage=grpo learns no critic "
        "(algo.advantage=gae does)",
        "algo.desired_kl=0.05 has no effect: only lr_schedule=adaptive reads it; algo.lr_schedule is constant",
        "rollout.workers=8 has no effect: only rollout.backend=ray reads it; the run steps its worlds in this process",
        "ray.address=auto has no effect: it is for rollout.backend=ray; the run steps its worlds in this process"]


def test_a_preset_built_on_another_keeps_the_base_and_yields_to_the_command_line():
    """`experiment=push_cube_bc_tokenized` is push_cube_bc with its own policy (64 bins on a bump,
    the free logits at a tenth of the rate, the mean decode), and the base's env, budget, demos,
    GRPO settings, learning rate, exploration width and training horizon; the command line still
    wins, and a resumed run counts the base preset's keys as set by the experiment."""
    from grpo_robot.cli import _precompose, _touched_keys

    base = compose_train_config("experiment=push_cube_bc")
    tokenized = compose_train_config("experiment=push_cube_bc_tokenized")
    assert (base.policy.type, base.algo.lr, base.algo.train_horizon) == ("gaussian", 0.0009907994985685889, 60)
    assert (base.algo.group_size, base.algo.minibatches, base.demos.episodes) == (8, 1, 10)
    assert (tokenized.policy.type, tokenized.policy.bins, tokenized.policy.bin_logits) == ("tokenized", 64, "gaussian")
    assert (tokenized.policy.free_logits_lr, tokenized.policy.decode) == (0.1, "mean")  # its own
    # the base's env, budget, horizon, demos, GRPO settings and exploration width
    assert (tokenized.env.task, tokenized.iterations, tokenized.algo.train_horizon) == ("PushCube-v1", 500, 60)
    assert (tokenized.demos.episodes, tokenized.algo.group_size, tokenized.algo.minibatches) == (10, 8, 1)
    assert (tokenized.algo.lr, tokenized.policy.init_std) == (base.algo.lr, base.policy.init_std)
    assert (tokenized.pretrain, tokenized.bc.seed, tokenized.env.horizon) == (True, 0, None)
    mine = compose_train_config("experiment=push_cube_bc_tokenized", "algo.lr=1e-4", "policy=gaussian")
    assert (mine.algo.lr, mine.policy.type) == (1e-4, "gaussian")
    overrides = ["experiment=push_cube_bc_tokenized"]
    touched = _touched_keys(overrides, _precompose("config", overrides)[0])
    assert {"algo.lr", "policy.bins", "policy.bin_logits", "policy.init_std", "policy.type", "env.task", "iterations",
            "demos.episodes"} <= touched  # fmt: skip
    assert "algo.kl.beta" in touched  # the base chooses the whole algo group (algo=grpo_from_clone_push)
    assert "rollout.backend" not in touched and "device" not in touched and "eval_seeds" not in touched


def test_a_whole_number_in_float_notation_sets_an_integer_key():
    """`max_env_steps=6e6` is 6000000 (Hydra reads it as a float, which an int field refused);
    a fraction is still refused, in one line naming the key; a float key keeps its float."""
    cfg = compose_train_config("max_env_steps=6e6", "algo.groups_per_iter=1.6e1", "env.horizon=100.0", "algo.lr=1e-3")
    assert (cfg.max_env_steps, cfg.algo.groups_per_iter, cfg.env.horizon, cfg.algo.lr) == (6_000_000, 16, 100, 1e-3)
    assert type(cfg.max_env_steps) is int and type(cfg.env.horizon) is int
    out = run_main("train", "max_env_steps=2.5e0")
    assert (out.code, out.error_lines) == (2, ["error: max_env_steps='2.5e0' is invalid: must be a whole number, "
                                               "e.g. 2048 or 6e6"])  # fmt: skip
    out = run_main("train", "env.horizon=x")
    assert out.error_lines == ["error: env.horizon='x' is invalid: must be a whole number, e.g. 2048 or 6e6"]
    assert compose("evaluate", "checkpoint=x.pt", "n_seeds=1e3").n_seeds == 1000
    assert whole_number_overrides(["max_env_steps=1e6,2.5e6", "seed=1,2", "algo.lr=1e-3,2e-3"]) == [
        "max_env_steps=1000000,2500000", "seed=1,2", "algo.lr=1e-3,2e-3"]  # a sweep's values (-m)
    assert compose("pretrain_bc", "dataset=x.npz", "bc.max_steps=2e3").bc.max_steps == 2000


def test_the_other_commands_accept_their_edge_values(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"")  # read once the config passes
    validate_eval(compose("evaluate", f"checkpoint={tmp_path / 'x.pt'}", "n_seeds=1", "seed=0"))
    validate_eval(compose("evaluate", f"checkpoint={tmp_path / 'x.pt'}", "n_seeds=500000000"))  # half the range
    validate_eval(compose("evaluate", f"checkpoint={tmp_path / 'x.pt'}", "n_seeds=4", "video=4"))  # films each seed
    with pytest.raises(ConfigError, match=r"^video=5 is invalid: must be at most n_seeds=4"):
        validate_eval(compose("evaluate", f"checkpoint={tmp_path / 'x.pt'}", "n_seeds=4", "video=5"))
    # a sweep's missing checkpoint is refused before its first job (it stopped the sweep at its own job)
    with pytest.raises(ConfigError, match=f"checkpoint='{tmp_path}' is invalid: no checkpoint at {tmp_path}/check"):
        validate_eval(compose("evaluate", f"checkpoint={tmp_path}"))
    assert validate_collect(compose("collect_demos", "demos.noise=10", "nthread=1")).task == "PushCube"
    assert validate_collect(compose("collect_demos", "env=fetch_push", "demos.expert=a.b:c")).id == "FetchPush-v4"
    (tmp_path / "x.npz").write_bytes(b"")
    data = f"dataset={tmp_path / 'x.npz'}"
    assert validate_pretrain(compose("pretrain_bc", data, "eval_seeds=0")) is None
    assert validate_pretrain(compose("pretrain_bc", data, "env=push_cube", "bc.lr=1")).task == "PushCube"
    with pytest.raises(ConfigError, match="dataset='x.npz' is invalid: no demo dataset at x.npz"):
        validate_pretrain(compose("pretrain_bc", "dataset=x.npz"))


# -- the generic checks cover every field ------------------------------------------------------


def float_fields(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted attribute path, key as spelled in configs) of every float field, nested ones included."""
    found = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            found += float_fields(type(default), f"{prefix}{f.name}.")
        elif "float" in str(f.type) and "list" not in str(f.type):
            found.append((f"{prefix}{f.name}", f"{prefix}{f.name}"))
    return found


def replaced(cfg: Any, path: str, value: Any) -> Any:
    head, _, rest = path.partition(".")
    return dataclasses.replace(cfg, **{head: replaced(getattr(cfg, head), rest, value) if rest else value})


TRAIN_FLOATS = float_fields(TrainConfig)


def test_every_float_field_is_found():
    assert {"algo.lr", "algo.clip.high", "algo.kl.beta", "policy.init_std", "env.step_timeout_s", "bc.lr",
            "demos.noise", "time_limit_min", "algo.critic.shaping_coef"} <= {k for _, k in TRAIN_FLOATS}  # fmt: skip


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_every_float_field_must_be_finite(value):
    base = compose_train_config()
    for path, key in TRAIN_FLOATS:
        with pytest.raises(ConfigError, match=rf"^{key}={value!r} is invalid: must be a finite number"):
            validate(replaced(base, path, value))


def test_async_worlds_are_bounded_by_the_open_file_limit(monkeypatch):
    import resource

    limits = {resource.RLIMIT_NOFILE: (1024, 1024), resource.RLIMIT_NPROC: (100, 100)}
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits.get(which, (-1, -1)))
    async16 = ("env=fetch_push", "env.vector=async", "algo.group_size=16")
    with pytest.raises(ConfigError, match=r"^env.vector='async' with 512 worlds .* may open 1,024 \(ulimit -n\)"):
        validate(compose_train_config(*async16))
    with pytest.raises(ConfigError, match=r"^env.vector='async' with 128 worlds .* may run 100 \(ulimit -u\)"):
        validate(compose_train_config(*async16, "algo.groups_per_iter=8"))
    validate(compose_train_config(*async16, "algo.groups_per_iter=4"))
    validate(compose_train_config("env=fetch_push", "algo.groups_per_iter=64"))  # sync: no process per world


def test_memory_is_estimated_before_anything_is_allocated():
    cfg = compose_train_config("algo.group_size=16")
    est = estimate_memory(cfg)
    assert est.worlds == 512 and est.steps == 100 and 0 < est.total < 1e9  # PushCube: tens of MB
    huge = replaced(cfg, "env.horizon", 10**8)
    if available_memory() is not None:
        with pytest.raises(
            ConfigError,
            match=r"^env.horizon=100000000 is too large for this machine: one iteration "
            r"needs about [\d.]+ TB \(512 worlds x 100,000,000 steps x \d+ floats",
        ):
            check_memory(huge)  # fmt: skip


def test_memory_is_refused_just_past_its_share_of_what_is_available(monkeypatch):
    """At most MEMORY_FRACTION (80%) of the memory available now: an iteration that needs 1% less
    than that share passes, 1% more is refused (far values alone let a wrong fraction pass)."""
    from grpo_robot import machine
    from grpo_robot.config.validate import MEMORY_FRACTION

    cfg = compose_train_config("eval_seeds=0")
    need = estimate_memory(cfg).total
    for margin, refused in ((1.01, False), (0.99, True)):
        monkeypatch.setattr(machine, "available_memory", lambda m=margin: need / MEMORY_FRACTION * m)
        if refused:
            with pytest.raises(ConfigError, match="is too large for this machine: one iteration needs"):
                check_memory(cfg)
        else:
            check_memory(cfg)


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(CONF_DIR) / "algo").glob("*.yaml")))
def test_an_algo_on_the_command_line_replaces_the_default_jobs(name):
    """The default job's tuned values live in its algo preset, so `algo=<name>` gets exactly that
    preset over the schema's defaults, none of the default job's values (ppo with groups of 8 and
    an entropy bonus would be neither PPO nor the search's GRPO)."""
    import yaml

    def own(preset: str) -> dict:  # a preset's keys over those of the presets it extends
        raw = yaml.safe_load((Path(CONF_DIR) / "algo" / f"{preset}.yaml").read_text()) or {}
        out: dict = {}
        for parent in raw.pop("defaults", []):
            if parent != "_self_":
                out.update(own(parent))
        return {**out, **raw}

    algo = dataclasses.asdict(compose_train_config(f"algo={name}").algo)
    expected = dataclasses.asdict(AlgoConfig())
    for key, value in own(name).items():
        expected[key] = {**expected[key], **value} if isinstance(value, dict) else value
    # a value written for the default job's task (`${for_task:PushCube,${env.task},V}`), resolved there
    expected = OmegaConf.to_container(OmegaConf.create({"env": {"task": "PushCube"}, "algo": expected}),
                                      resolve=True)["algo"]  # fmt: skip
    assert algo == expected
    default = dataclasses.asdict(compose_train_config().algo)
    assert (default == algo) == (name == "grpo_from_scratch")


@pytest.mark.parametrize(
    "overrides",
    [[], ["experiment=push_cube_bc_tokenized"], ["experiment=fetch_push_bc"], ["algo=ppo", "seed=3"],
     ["policy=tokenized_autoregressive", "algo.lr_range=[1e-4,1e-3]"], ["env=gym", "env.id=FetchReach-v4",
     "+env.kwargs.reward_type=dense"]],
)  # fmt: skip
def test_a_typed_composition_builds_the_config_a_merge_into_the_schema_builds(overrides):
    """`to_train_config` builds a composition's dataclasses as they are; the same values as plain
    containers go through the schema's merge (saved configs take that path): the configs are equal,
    containers as plain lists and dicts. A key the schema lacks still fails by name."""
    composed = compose_config(*overrides)
    built = to_train_config(composed)
    merged = to_train_config(OmegaConf.create(OmegaConf.to_container(composed, resolve=True)))
    assert built == merged
    assert type(built.policy.hidden_sizes) is list and type(built.env.kwargs) is dict and type(built.loggers) is list
    with pytest.raises(Exception, match=r"Key 'foo' not in 'PolicyConfig'"):  # the CLI's line: the fuzz case above
        to_train_config(compose_config(*overrides, "+policy.foo=1"))


def test_the_std_and_temperature_bounds_are_the_policies():
    from grpo_robot.config.validate import STD_BOUNDS, TEMPERATURE_BOUNDS
    from grpo_robot.policies.gaussian import LOG_STD_MAX, LOG_STD_MIN
    from grpo_robot.policies.tokenized import LOG_TEMPERATURE_MAX, LOG_TEMPERATURE_MIN

    assert STD_BOUNDS == pytest.approx((math.exp(LOG_STD_MIN), math.exp(LOG_STD_MAX)), rel=1e-12)
    assert TEMPERATURE_BOUNDS == pytest.approx((math.exp(LOG_TEMPERATURE_MIN), math.exp(LOG_TEMPERATURE_MAX)))


def _read_only(folder: Path) -> None:
    """Make `folder` unwritable: a read-only tmpfs when this process may mount (root), else its mode."""
    import os
    import subprocess

    folder.mkdir()
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                                 capture_output=True)  # fmt: skip
        assert mounted.returncode == 0, mounted.stderr
    else:
        folder.chmod(0o555)


def test_an_output_over_a_runs_records_a_checkpoint_or_an_unwritable_place_is_refused_before_the_work(tmp_path):
    """evaluate.py output=<its checkpoint> replaced the checkpoint with JSON (the run could not be
    resumed); plot.py --output <run>/summary.png replaced the run's summary.json; an unwritable
    output was found only after the work."""
    import os
    import subprocess

    from grpo_robot.demos import collect_demos
    from grpo_robot.plots import plot_runs

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("checkpoints/last.pt", "summary.json", "eval.json"):
        (run / name).write_text("{}")
    (tmp_path / "elsewhere.pt").write_text("x")
    dataset, _ = collect_demos("Reach", 1)
    dataset = dataset.save(tmp_path / "d.npz")
    for output, what in [(run / "checkpoints" / "last.pt", "it is a checkpoint"),
                         (tmp_path / "elsewhere.pt", "it is a checkpoint"),
                         (run / "summary.json", f"it is the summary.json of the run in {run}")]:  # fmt: skip
        with pytest.raises(ConfigError, match=f"output='{output}' is invalid: {what}, which this would replace"):
            validate_eval(compose("evaluate", f"checkpoint={run}", f"output={output}"))
    validate_eval(compose("evaluate", f"checkpoint={run}", f"output={run / 'checkpoints' / 'mine.json'}"))  # new: fine
    with pytest.raises(ConfigError, match="output='.*last.pt' is invalid: it is a checkpoint"):  # a run's, for pretrain
        validate_pretrain(compose("pretrain_bc", f"dataset={dataset}", f"output={run / 'checkpoints' / 'last.pt'}"))
    for png in ("summary.png", "eval.png"):
        with pytest.raises(ValueError, match=f"is the {png[:-4]}.json of the run in {run}, which this would replace"):
            plot_runs([run], run / png)
    assert (run / "summary.json").read_text() == "{}" and (run / "eval.json").read_text() == "{}"
    locked = tmp_path / "locked"
    _read_only(locked)
    try:
        for config_name, overrides in [("evaluate", [f"checkpoint={run}", f"output={locked / 'e.json'}"]),
                                       ("collect_demos", [f"output={locked / 'sub' / 'd.npz'}"]),
                                       ("pretrain_bc", [f"dataset={dataset}", f"output={locked / 'bc.pt'}"]),
                                       ("evaluate", [f"checkpoint={run}", "video=1", f"video_dir={locked / 'v'}"])]:
            validator = {"evaluate": validate_eval, "collect_demos": validate_collect, "pretrain_bc": validate_pretrain}
            with pytest.raises(ConfigError, match=f"{locked} cannot be written"):
                validator[config_name](compose(config_name, *overrides))
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(locked)], check=True)
