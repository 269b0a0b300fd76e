"""Config in and out: Hydra registration of the schemas, `TrainConfig` from a composed or saved
config (older saved key names are renamed on the way in), and back to plain containers."""

from __future__ import annotations

import dataclasses
import decimal
import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from grpo_robot.config.errors import value_reason
from grpo_robot.config.schema import (
    ENV_KEY_ALIASES,
    CollectDemosConfig,
    EnvConfig,
    EvalConfig,
    PretrainConfig,
    TrainConfig,
)
from grpo_robot.config.validate import ConfigError

# keys renamed when the algo group was nested: old dotted key -> new one (None: removed)
RENAMED_KEYS: dict[str, str | None] = {
    "algo.name": None,
    "algo.clip_eps": "algo.clip.eps",
    "algo.clip_low": "algo.clip.low",
    "algo.clip_high": "algo.clip.high",
    "algo.dual_clip": "algo.clip.dual",
    "algo.kl_beta": "algo.kl.beta",
    "algo.kl_estimator": "algo.kl.estimator",
    "algo.keep_range": "algo.dynamic_sampling.keep_range",
    "algo.max_sampling_rounds": "algo.dynamic_sampling.max_rounds",
    "algo.gamma": "algo.critic.gamma",
    "algo.gae_lambda": "algo.critic.gae_lambda",
    "algo.vf_coef": "algo.critic.vf_coef",
    "algo.reward": "algo.critic.reward",
    "algo.shaping_coef": "algo.critic.shaping_coef",
}


def renamed_key_error(overrides: list[str]) -> str | None:
    """A one-line message for the first command-line override that uses a renamed key, else None."""
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key == "algo.dynamic_sampling" and "=" in override and override.split("=", 1)[1] in ("true", "false"):
            return f"{override} is now algo.dynamic_sampling.enabled={override.split('=', 1)[1]}"
        if key in RENAMED_KEYS:
            new = RENAMED_KEYS[key]
            return f"{key} was removed" if new is None else f"{key} is now {new} (e.g. {new}=...)"
    return None


def schema_field(path: str, root: type = TrainConfig) -> dataclasses.Field | None:
    """The schema's field at dotted `path` below the config class `root`, or None where there is
    none (an unknown key, or one below an untyped node such as a Gymnasium env's kwargs)."""
    from grpo_robot.config import schema

    node: Any = root
    field = None
    for part in path.split("."):
        if not dataclasses.is_dataclass(node):
            return None
        field = next((f for f in dataclasses.fields(node) if f.name == part), None)
        if field is None:
            return None
        node = getattr(schema, str(field.type), None)
    return field


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def whole_number_overrides(overrides: list[str], root: type = TrainConfig) -> list[str]:
    """`overrides` with a whole number written as a float (`max_env_steps=6e6`, `=2048.0`) given
    as an integer where the schema's field is an int: Hydra reads `6e6` as a float, which an int
    field refuses. Any other override is left as it is (`algo.groups_per_iter=2.5` is then
    refused as not an integer)."""
    out = []
    for override in overrides:
        key, eq, value = override.partition("=")
        values = [v.strip() for v in value.split(",")]  # a sweep's values (-m max_env_steps=1e6,2e6) too
        if eq and all(_NUMBER.fullmatch(v) for v in values):
            field = schema_field(key.lstrip("+"), root)
            if field is not None and str(field.type).split(" |")[0] == "int":
                override = f"{key}={','.join(_whole(v) for v in values)}"
        out.append(override)
    return out


def bool_override_error(overrides: list[str], root: type = TrainConfig) -> str | None:
    """The first override that gives a bool field of the schema anything but true or false (or
    null, where the field takes it), as one line; None if there is none. OmegaConf reads any
    integer as a bool (`deterministic=5` evaluated deterministically, `obs_norm_updates=0` turned
    them off), where every other type is refused."""
    for override in overrides:
        key, eq, value = override.partition("=")
        if not eq or key.startswith("~"):
            continue
        field = schema_field(key.lstrip("+"), root)
        kind = "" if field is None else str(field.type).replace(" ", "")
        if kind not in ("bool", "bool|None"):
            continue
        allowed = ("true", "false", "null") if kind == "bool|None" else ("true", "false")
        for v in (v.strip() for v in value.split(",")):  # a sweep's values too
            if v.lower() not in allowed:
                return f"{key.lstrip('+')}={v} is invalid: must be {', '.join(allowed[:-1])} or {allowed[-1]}"
    return None


# keys whose value is a free dict (constructor arguments), into which an override may add keys
FREE_DICTS = ("env.kwargs", "algo.options", "policy.options", "video_kwargs")


def free_dict_overrides(overrides: list[str]) -> list[str]:
    """`overrides` with `env.kwargs={...}` and `env.kwargs.k=v` as `++...` (`algo.options` and `policy.options` too):
    Hydra refuses a key that the preset's dict lacks unless the override adds it, and a user sets constructor
    arguments that no preset names. A dict is merged into the preset's (a key given replaces the
    preset's value, the others stay)."""
    out = []
    for override in overrides:
        key = override.partition("=")[0]
        if "=" in override and key[:1] not in "+~" and any(key == d or key.startswith(d + ".") for d in FREE_DICTS):
            override = "++" + override
        out.append(override)
    return out


def _whole(value: str) -> str:
    """`6e6` -> `6000000`; a fraction, or an integer already, as it is."""
    number = decimal.Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else value


def migrate(values: dict[str, Any]) -> dict[str, Any]:
    """A saved training config (checkpoints, resolved_config.yaml) with older key names renamed."""
    algo = dict(values.get("algo") or {})
    if isinstance(algo.get("dynamic_sampling"), bool):
        algo["dynamic_sampling"] = {"enabled": algo["dynamic_sampling"]}
    for old, new in RENAMED_KEYS.items():
        name = old.split(".", 1)[1]
        if name not in algo:
            continue
        value = algo.pop(name)
        if new is not None:
            group, field = new.split(".")[1:]
            algo.setdefault(group, {})[field] = value
    return {**values, "algo": algo} if "algo" in values else values


@dataclass
class TrainSchema(TrainConfig):
    """The schema Hydra composes against: `env` stays an untyped node, so that it may hold the key
    `import` (a Python keyword, no dataclass field); `env_config` types and checks it."""

    env: Any = None


@functools.cache
def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore, once per process (storing converts each dataclass,
    about 70 ms, which every composition used to pay)."""
    if not OmegaConf.has_resolver("for_task"):
        OmegaConf.register_new_resolver("for_task", for_task)
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainSchema)
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(name="collect_demos_schema", node=CollectDemosConfig)
    cs.store(name="pretrain_schema", node=PretrainConfig)


def for_task(name: str, task: str | None, value: Any) -> Any:
    """`${for_task:PushCube,${env.task},V}` in a preset: V when env.task is `name` (any of its
    versions: PushCube, PushCube-v1 ...), else null. A preset can then keep values meant for its
    own task (a start curriculum, a target to stop at) from following the command line to another
    env (`env=lift_cube`, `env=gym ...`)."""
    from grpo_robot.envs import TASK_NAMES

    family = TASK_NAMES[task].name if isinstance(task, str) and task in TASK_NAMES else task
    return value if family == name else None


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
        return OmegaConf.to_object(OmegaConf.merge(_schema(EnvConfig), values))  # type: ignore[return-value]
    except Exception as err:  # omegaconf's ValidationError: a value of the wrong type
        key = getattr(err, "full_key", "") or "?"
        reason = value_reason(str(err).splitlines()[0])
        raise ConfigError(f"env.{key}={values.get(key)!r} is invalid: {reason}") from None


@functools.cache
def _schema(cls: type) -> DictConfig:
    """`cls` as a structured config with its defaults, built once (16 ms for `TrainConfig`); merging
    into it copies it, so it is never changed."""
    return OmegaConf.structured(cls)


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    """`cfg` as plain containers, keys spelled as in the YAML configs (`env.import`), a built-in
    task by the id of the version it runs (`env.task=PushCube` -> `PushCube-v2`): checkpoints and
    resolved_config.yaml keep naming that version after a newer one becomes current."""
    record = OmegaConf.to_container(OmegaConf.structured(cfg))
    record["env"] = _saved_env(record["env"])  # type: ignore[index]
    return record  # type: ignore[return-value]


def env_config_dict(env: EnvConfig) -> dict[str, Any]:
    """`env` as a plain dict, keys spelled as in the YAML configs (`import`), a built-in task by
    its version's id (as `config_dict`)."""
    return _saved_env(OmegaConf.to_container(OmegaConf.structured(env)))  # type: ignore[arg-type]


def _saved_env(env: dict[str, Any]) -> dict[str, Any]:
    """An env config as saved: YAML key spellings, a built-in task pinned to its version's id."""
    from grpo_robot.envs import pinned_id

    if env.get("task"):
        env = {**env, "task": pinned_id(env["task"])}
    return {next((k for k, v in ENV_KEY_ALIASES.items() if v == key), key): v for key, v in env.items()}


def _added_keys(node: DictConfig) -> bool:
    """Whether a typed node (or one below it) holds a key its dataclass lacks (a `+key=` override):
    building the dataclass would drop it, merging into the schema names it in an error."""
    names = {f.name for f in dataclasses.fields(OmegaConf.get_type(node))}
    for key, value in node.items_ex(resolve=False):
        if key not in names:
            return True
        if isinstance(value, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(value)) and _added_keys(value):
            return True
    return False


def to_train_config(cfg: DictConfig | TrainConfig | dict) -> TrainConfig:
    """A plain `TrainConfig` object from a Hydra/OmegaConf config or a saved dict (or itself); a saved
    dict may use older key names (`migrate`)."""
    if isinstance(cfg, TrainConfig):
        return cfg
    if isinstance(cfg, DictConfig) and OmegaConf.get_type(cfg) is TrainSchema and not _added_keys(cfg):
        # a composition against the schema: every value but env's is typed and checked already,
        # so its dataclasses are built as they are (5x as fast as merging into the schema again)
        built = OmegaConf.to_object(cfg)
        fields = {f.name: getattr(built, f.name) for f in dataclasses.fields(TrainConfig) if f.name != "env"}
        return TrainConfig(**fields, env=env_config(cfg.env))
    values = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else migrate(dict(cfg))
    env = env_config(values.pop("env", None))
    merged = OmegaConf.merge(_schema(TrainConfig), values)
    return dataclasses.replace(OmegaConf.to_object(merged), env=env)  # type: ignore[type-var]
