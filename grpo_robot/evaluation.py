"""Success rate of a policy on held-out seeds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from grpo_robot.environment import GroupEnv
from grpo_robot.policies import Policy
from grpo_robot.rollout import collect
from grpo_robot.stats import wilson_interval


@dataclass
class EvalResult:
    seeds: np.ndarray  # [n]
    success: np.ndarray  # [n] bool
    steps: np.ndarray  # [n] episode lengths
    # a sampled evaluation's noise seed (seeding.SeedStreams), so that any of its episodes can be
    # played again exactly (video.film_evaluated)
    noise_seed: int | None = None
    # [n] bool: episodes an env failure ended (an exception in a Gymnasium env's step, a physics
    # blow-up), counted as failures; None: none recorded
    failed: np.ndarray | None = None
    # what was evaluated and how (task, seeds, outcome, ...), written first by `to_json`
    labels: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return float(self.success.mean())

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(int(self.success.sum()), len(self.success))

    @property
    def env_failures(self) -> int:
        return 0 if self.failed is None else int(self.failed.sum())

    def summary(self) -> str:
        low, high = self.interval
        line = f"success {self.rate:.1%} [{low:.1%}, {high:.1%}] (95% Wilson, n={len(self.success)})"
        if self.env_failures:
            line += f"; {self.env_failures} of the {len(self.success)} episodes ended by an env failure, counted as " \
                    "failures"  # fmt: skip
        return line

    def to_json(self, episodes: bool = True) -> dict:
        low, high = self.interval
        record = {**self.labels, "n": len(self.success), "success_rate": self.rate, "wilson95": [low, high],
                  "env_failures": self.env_failures}  # fmt: skip
        if episodes:
            failed = np.zeros(len(self.success), bool) if self.failed is None else self.failed
            record["episodes"] = [
                {"seed": int(s), "success": bool(ok), "steps": int(t), "env_failure": bool(f)}
                for s, ok, t, f in zip(self.seeds, self.success, self.steps, failed, strict=True)
            ]
        return record


def eval_labels(env: GroupEnv, env_cfg: Any, seeds: str, deterministic: bool, **more: Any) -> dict[str, Any]:
    """What an evaluation measured, for its JSON: the task (a built-in task's version, PushCube-v3;
    a Gymnasium id as it is), the seed range and its first seed, the action mode, what counts as a
    success (`env.outcome`: at any step or at the final step) within how many steps, and whether
    the seeds decide the episodes (not for an env that ignores its seed, `env.group_start=clone`)."""
    from grpo_robot.seeding import eval_seeds

    return {"task": getattr(env, "task_id", env.name), "seeds": seeds, "first_seed": int(eval_seeds(1, seeds)[0]),
            "deterministic": bool(deterministic), "outcome": env_cfg.outcome, "horizon": int(env.horizon),
            "seeded": env_cfg.group_start != "clone", **more}  # fmt: skip


def evaluate(
    env: GroupEnv,
    policy: Policy,
    seeds: np.ndarray,
    device: torch.device,
    deterministic: bool = True,
    noise_seed: int | None = None,
    final_step_outcome: bool = False,
) -> EvalResult:
    """One episode per seed, `env.num_worlds` at a time (a short last chunk is padded with
    repeats of its last seed, whose outcomes are dropped). A sampled evaluation draws each
    episode's noise from the stream of its seed under `noise_seed` (`seeding.SeedStreams`; torch's
    global generator where None), so that an episode does not depend on `n_seeds` or the worlds."""
    from grpo_robot.seeding import SeedStreams

    seeds = np.asarray(seeds)
    n_worlds = env.num_worlds
    was_training = policy.training
    policy.eval()
    success, steps, failed = [], [], []
    sampled = noise_seed is not None and not deterministic
    try:
        for start in range(0, len(seeds), n_worlds):
            chunk = seeds[start : start + n_worlds]
            padded = np.concatenate([chunk, np.repeat(chunk[-1:], n_worlds - len(chunk))])
            noise = SeedStreams(noise_seed, padded, device) if sampled else None
            batch = collect(env, policy, padded, device, noise, deterministic, final_step_outcome)
            success.append(batch.success.bool().cpu().numpy()[: len(chunk)])
            steps.append(batch.mask.sum(0).cpu().numpy()[: len(chunk)])
            failed.append(batch.failed.bool().cpu().numpy()[: len(chunk)])
    finally:  # an env failure or a signal mid-evaluation leaves the policy as it found it
        policy.train(was_training)
    return EvalResult(seeds, np.concatenate(success), np.concatenate(steps), noise_seed if sampled else None,
                      np.concatenate(failed))  # fmt: skip
