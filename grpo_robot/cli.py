"""Command-line entry points (`scripts/*.py` and the `grpo-train` / `grpo-evaluate` commands).

Hydra composes the config; a value out of range ends the program with exit code 2 and one line
on stderr naming the key and what is allowed, before any environment is built.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grpo_robot.config import ConfigError, register_configs, to_train_config, validate_device

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _train(cfg: DictConfig) -> float | None:
    from grpo_robot.trainer import Trainer

    try:
        trainer = Trainer(to_train_config(cfg), HydraConfig.get().runtime.output_dir)
    except (ConfigError, FileNotFoundError) as err:
        _fail(str(err))
    summary = trainer.run()
    result = trainer.last_eval
    print(
        f"trained {summary['iterations']} iterations, {summary['env_steps']:,} env steps in {summary['seconds']:.0f} s"
    )
    if result is not None:
        print(f"eval on {len(result.success)} held-out seeds: {result.summary()}")
    print(f"run directory: {summary['run_dir']}")
    return None if result is None else result.rate


def _evaluate(cfg: DictConfig) -> None:

    from grpo_robot import checkpoint
    from grpo_robot.batched import BatchedEnv
    from grpo_robot.config import TrainConfig
    from grpo_robot.evaluation import evaluate
    from grpo_robot.rollout import STREAM_EVAL, eval_seeds, iteration_generator
    from grpo_robot.trainer import resolve_device

    try:
        if cfg.n_seeds < 1:
            raise ConfigError(f"n_seeds={cfg.n_seeds!r} is invalid: must be >= 1")
        validate_device(cfg.device)
        path = checkpoint.resolve(cfg.checkpoint)
    except (ConfigError, FileNotFoundError) as err:
        _fail(str(err))
    device = resolve_device(cfg.device)
    ckpt = checkpoint.load(path, map_location=device)
    train_cfg: TrainConfig = to_train_config(ckpt["config"])
    policy = checkpoint.policy_from_record(ckpt["policy"], device)
    env = BatchedEnv(
        train_cfg.env.task,
        cfg.n_seeds,
        nthread=train_cfg.env.nthread,
        horizon=train_cfg.env.horizon,
        terminate_on_success=train_cfg.env.outcome == "any_step",
    )
    generator = iteration_generator(cfg.seed, 0, device, STREAM_EVAL)
    result = evaluate(
        env,
        policy,
        eval_seeds(cfg.n_seeds),
        device,
        cfg.deterministic,
        generator,
        train_cfg.env.outcome == "final_step",
    )
    mode = "deterministic" if cfg.deterministic else "stochastic"
    output = Path(cfg.output) if cfg.output else path.with_name(f"{path.stem}_eval_{cfg.n_seeds}_{mode}.json")
    record = {"checkpoint": str(path), "task": train_cfg.env.task, "mode": mode, **result.to_json()}
    output.write_text(json.dumps(record, indent=1))
    print(f"{train_cfg.env.task}, {mode}, {path}: {result.summary()}")
    print(f"per-seed outcomes: {output}")


def train_main() -> None:
    register_configs()
    hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")(_train)()


def evaluate_main() -> None:
    register_configs()
    hydra.main(config_path=CONF_DIR, config_name="evaluate", version_base="1.3")(_evaluate)()
