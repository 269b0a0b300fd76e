"""Success rate of a policy on held-out seeds."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def rate(self) -> float:
        return float(self.success.mean())

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(int(self.success.sum()), len(self.success))

    def summary(self) -> str:
        low, high = self.interval
        return f"success {self.rate:.1%} [{low:.1%}, {high:.1%}] (95% Wilson, n={len(self.success)})"

    def to_json(self, episodes: bool = True) -> dict:
        low, high = self.interval
        record = {"n": len(self.success), "success_rate": self.rate, "wilson95": [low, high]}
        if episodes:
            record["episodes"] = [
                {"seed": int(s), "success": bool(ok), "steps": int(t)}
                for s, ok, t in zip(self.seeds, self.success, self.steps, strict=True)
            ]
        return record


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
    success, steps = [], []
    sampled = noise_seed is not None and not deterministic
    try:
        for start in range(0, len(seeds), n_worlds):
            chunk = seeds[start : start + n_worlds]
            padded = np.concatenate([chunk, np.repeat(chunk[-1:], n_worlds - len(chunk))])
            noise = SeedStreams(noise_seed, padded, device) if sampled else None
            batch = collect(env, policy, padded, device, noise, deterministic, final_step_outcome)
            success.append(batch.success.bool().cpu().numpy()[: len(chunk)])
            steps.append(batch.mask.sum(0).cpu().numpy()[: len(chunk)])
    finally:  # an env failure or a signal mid-evaluation leaves the policy as it found it
        policy.train(was_training)
    return EvalResult(seeds, np.concatenate(success), np.concatenate(steps), noise_seed if sampled else None)
