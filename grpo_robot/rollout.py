"""Run a policy in groups of worlds and record what the update needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from grpo_robot.batched import BatchedEnv
from grpo_robot.gym_vector import GymGroupEnv
from grpo_robot.policies import Policy

# Training group seeds are drawn below TRAIN_SEED_END; evaluation uses EVAL_SEED_START onwards,
# so evaluation never starts from a state seen in training.
TRAIN_SEED_END = 1_000_000_000
EVAL_SEED_START = 1_000_000_000


def eval_seeds(n: int) -> np.ndarray:
    """The held-out evaluation seeds: the first `n` of the evaluation range."""
    return EVAL_SEED_START + np.arange(n, dtype=np.int64)


def iteration_seeds(run_seed: int, iteration: int, n_groups: int, round_: int = 0) -> np.ndarray:
    """`[G]` group seeds of one training iteration (and sampling round): a function of its
    arguments only, so a resumed run draws exactly what an uninterrupted one would."""
    key = [run_seed, iteration] if round_ == 0 else [run_seed, iteration, 0, round_]
    return np.random.default_rng(key).integers(0, TRAIN_SEED_END, n_groups)


STREAM_ROLLOUT, STREAM_SHUFFLE, STREAM_EVAL = 1, 2, 3


def stream_seed(run_seed: int, iteration: int, stream: int, round_: int = 0) -> int:
    """A 62-bit seed for one random stream of one iteration, a function of its arguments only."""
    key = [run_seed, iteration, stream] if round_ == 0 else [run_seed, iteration, stream, round_]
    return int(np.random.default_rng(key).integers(2**62))


def iteration_generator(
    run_seed: int, iteration: int, device: torch.device, stream: int = STREAM_ROLLOUT, round_: int = 0
) -> torch.Generator:
    """Sampling noise of one iteration, on `device`, derived like `iteration_seeds`."""
    seed = stream_seed(run_seed, iteration, stream, round_)
    return torch.Generator(device=device).manual_seed(seed)


@dataclass
class Batch:
    """One iteration's experience, time-major and padded. `T` is the longest episode."""

    obs: torch.Tensor  # [T, B, obs_dim] observation each action was taken from
    raw: torch.Tensor  # [T, B, raw_dim] raw action sampled (what log_prob scores)
    logp: torch.Tensor  # [T, B, n_tokens] per-token log-probs of `raw` under the rollout policy
    mask: torch.Tensor  # [T, B] bool, True on valid steps
    success: torch.Tensor  # [B] float 0/1, the trajectory's outcome
    failed: torch.Tensor  # [B] bool, physics failure (counted as no success)
    simulated_steps: int = -1  # env steps simulated to get this batch, discarded groups included

    def __post_init__(self) -> None:
        if self.simulated_steps < 0:
            self.simulated_steps = int(self.mask.sum())

    @property
    def env_steps(self) -> int:
        """Valid steps in the batch."""
        return int(self.mask.sum())

    def select(self, traj: torch.Tensor) -> Batch:
        """The trajectories `traj [M]`, in that order, trimmed to their longest episode."""
        steps = int(self.mask[:, traj].sum(0).max()) if len(traj) else 0
        return Batch(
            self.obs[:steps, traj],
            self.raw[:steps, traj],
            self.logp[:steps, traj],
            self.mask[:steps, traj],
            self.success[traj],
            self.failed[traj],
            self.simulated_steps,
        )

    @staticmethod
    def concat(parts: list[Batch]) -> Batch:
        """Trajectories of all `parts` side by side, padded to the longest; steps add up."""
        steps = max(p.mask.shape[0] for p in parts)

        def pad(x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.pad(x, [0, 0] * (x.dim() - 1) + [0, steps - x.shape[0]])

        return Batch(
            torch.cat([pad(p.obs) for p in parts], 1),
            torch.cat([pad(p.raw) for p in parts], 1),
            torch.cat([pad(p.logp) for p in parts], 1),
            torch.cat([pad(p.mask) for p in parts], 1),
            torch.cat([p.success for p in parts]),
            torch.cat([p.failed for p in parts]),
            sum(p.simulated_steps for p in parts),
        )

    def packed(self):
        """Valid steps only, t-major: (obs [S, D], raw [S, R], logp [S, n_tokens], traj [S], lengths [B])."""
        t_idx, traj = self.mask.nonzero(as_tuple=True)
        return self.obs[t_idx, traj], self.raw[t_idx, traj], self.logp[t_idx, traj], traj, self.mask.sum(0)


@torch.no_grad()
def collect(
    env: BatchedEnv | GymGroupEnv,
    policy: Policy,
    seeds: np.ndarray,
    device: torch.device,
    generator: torch.Generator | None = None,
    deterministic: bool = False,
    final_step_outcome: bool = False,
) -> Batch:
    """Reset `env` from `seeds [B]` and run `policy` until every world is done.

    The outcome is success at any step (the env ends the episode there) unless
    `final_step_outcome`, where it is the success predicate at the last step.
    """
    obs_np = env.reset(seeds)
    obs_steps, raw_steps, logp_steps, mask_steps = [], [], [], []
    while not env.done.all():
        obs = torch.as_tensor(obs_np, device=device)
        raw, action, logp = policy.sample(obs, generator, deterministic)
        mask_steps.append(torch.as_tensor(~env.done, device=device))
        obs_steps.append(obs)
        raw_steps.append(raw)
        logp_steps.append(logp)
        obs_np, *_ = env.step(action.cpu().numpy())
    success = env.success if final_step_outcome else env.terminated
    return Batch(
        obs=torch.stack(obs_steps),
        raw=torch.stack(raw_steps),
        logp=torch.stack(logp_steps),
        mask=torch.stack(mask_steps),
        success=torch.as_tensor(success & ~env.failed, dtype=torch.float32, device=device),
        failed=torch.as_tensor(env.failed.copy(), device=device),
    )
