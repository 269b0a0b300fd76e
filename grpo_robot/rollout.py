"""Run a policy in groups of worlds and record what the update needs: `collect` runs one batch
of worlds to the end; `GroupSampler` draws one iteration's groups from the training seed stream,
with DAPO's dynamic sampling when configured."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from grpo_robot.environment import GroupEnv
from grpo_robot.policies import Policy
from grpo_robot.seeding import group_seeds, iteration_generator, iteration_seeds


class RolloutError(RuntimeError):
    """Rollout workers kept failing (`rollout.max_restarts`); the message is one line."""


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
    def valid_steps(self) -> int:
        """Steps the batch holds (`simulated_steps` also counts discarded groups)."""
        return int(self.mask.sum())

    @property
    def num_trajectories(self) -> int:
        return self.mask.shape[1]

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
    env: GroupEnv,
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


class GroupSampler:
    """One iteration's groups: `n_groups` seeds from the run's training stream, each the start of
    `group_size` worlds. With `keep_range = (low, high)` (dynamic sampling), groups whose success
    rate lies outside the open interval are dropped and more are drawn, up to `max_rounds` draws;
    the batch then holds at most `n_groups` kept groups (all of the last draw if none was kept,
    so the iteration still counts its steps)."""

    def __init__(
        self,
        env: GroupEnv,
        run_seed: int,
        n_groups: int,
        group_size: int,
        device: torch.device,
        final_step_outcome: bool = False,
        keep_range: tuple[float, float] | None = None,
        max_rounds: int = 1,
    ) -> None:
        self.env, self.run_seed, self.device = env, run_seed, device
        self.n_groups, self.group_size = n_groups, group_size
        self.final_step_outcome = final_step_outcome
        self.keep_range, self.max_rounds = keep_range, max_rounds

    def draw(self, policy: Policy, it: int, round_: int = 0) -> Batch:
        """All `n_groups` groups of iteration `it` (and sampling round), kept or not."""
        seeds = group_seeds(iteration_seeds(self.run_seed, it, self.n_groups, round_), self.group_size)
        generator = iteration_generator(self.run_seed, it, self.device, round_=round_)
        return collect(self.env, policy, seeds, self.device, generator, False, self.final_step_outcome)

    def close(self) -> None:
        """Release what the sampler holds beyond the env (the Ray backend's workers)."""

    def sample(self, policy: Policy, it: int) -> tuple[Batch, dict[str, float]]:
        """-> (batch, dynamic-sampling metrics: groups drawn and kept, success before filtering)."""
        if self.keep_range is None:
            return self.draw(policy, it), {}
        low, high = self.keep_range
        n, kept = self.group_size, []
        n_kept, successes = 0, 0.0
        for round_ in range(self.max_rounds):
            batch = self.draw(policy, it, round_)
            successes += batch.success.sum().item()
            rate = batch.success.view(-1, n).mean(1)
            keep = ((rate > low) & (rate < high)).nonzero()[:, 0][: self.n_groups - n_kept]
            traj = (keep[:, None] * n + torch.arange(n, device=keep.device)).flatten()
            kept.append(batch.select(traj))
            n_kept += len(keep)
            if n_kept == self.n_groups:
                break
        drawn = (round_ + 1) * self.n_groups
        metrics = {"groups_drawn": drawn, "groups_kept": n_kept, "drawn_success": successes / (drawn * n)}
        if n_kept == 0:
            batch.simulated_steps = sum(k.simulated_steps for k in kept)
            return batch, metrics
        return Batch.concat(kept), metrics
