"""Typed configuration (Hydra structured configs): the schema (`schema`), its checks
(`validate`), and Hydra registration and (de)serialization (`store`).

`conf/config.yaml` composes the groups `env/`, `policy/`, `algo/` and `experiment/` over the
`TrainConfig` schema, so a misspelled key or a wrong type fails at composition; `validate` then
checks ranges and choices, before any environment is built.
"""

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
    RayConfig,
    RenderConfig,
    RolloutConfig,
    StartReplayConfig,
    StdAnnealConfig,
    TrainConfig,
    WandbConfig,
    env_name,
    env_source,
    file_stem,
    policy_kwargs,
    unused_policy_settings,
    unused_settings,
)
from grpo_robot.config.store import (
    RENAMED_KEYS,
    bool_override_error,
    config_dict,
    env_config,
    env_config_dict,
    free_dict_overrides,
    migrate,
    register_configs,
    renamed_key_error,
    to_train_config,
    whole_number_overrides,
)
from grpo_robot.config.validate import (
    ConfigError,
    check_values,
    validate,
    validate_bc,
    validate_collect,
    validate_demos,
    validate_device,
    validate_env,
    validate_eval,
    validate_policy,
    validate_pretrain,
)

__all__ = [
    "AlgoConfig", "BCConfig", "ClipConfig", "CollectDemosConfig", "ConfigError", "CriticConfig", "CurriculumConfig",
    "DemoConfig",
    "DynamicSamplingConfig", "EnvConfig", "EvalConfig", "KLConfig", "PolicyConfig", "PretrainConfig", "RayConfig",
    "RenderConfig", "RolloutConfig", "StartReplayConfig", "StdAnnealConfig", "WandbConfig",
    "RENAMED_KEYS", "TrainConfig", "check_values", "config_dict", "env_config", "env_config_dict", "env_name",
    "file_stem", "env_source", "migrate", "policy_kwargs", "register_configs", "renamed_key_error",
    "to_train_config", "validate", "free_dict_overrides", "unused_policy_settings", "unused_settings",
    "whole_number_overrides", "bool_override_error",
    "validate_bc", "validate_collect", "validate_demos", "validate_device", "validate_env", "validate_eval",
    "validate_policy", "validate_pretrain",
]  # fmt: skip
