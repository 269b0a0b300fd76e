"""Behaviour cloning: maximum likelihood of demonstrated actions, for every policy type.

The loss is the negative log-likelihood `-sum_d log pi(a_d | s)` through the policy's own
`log_probs`: for a Gaussian policy a (std-weighted) squared error on the mean, for a tokenized
policy the cross-entropy over each dimension's bins. Episodes, not steps, are split into
training and validation sets (steps of one episode are near-duplicates), and training stops once
the validation loss has not improved for `patience` epochs; the best weights are kept.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from omegaconf import OmegaConf

from grpo_robot import checkpoint
from grpo_robot.config import BCConfig, TrainConfig
from grpo_robot.demos import DemoDataset
from grpo_robot.policies import Policy


@dataclass
class BCResult:
    best_epoch: int
    epochs: int  # epochs run
    best_val_loss: float  # per step; the training loss when there is no validation split
    train_episodes: int
    val_episodes: int
    seconds: float
    train_loss: list[float] = field(default_factory=list)  # per epoch, per step
    val_loss: list[float] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def split_episodes(n_episodes: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) episode indices. Validation gets round(fraction * E) episodes, at least one
    when the fraction is positive and there are two or more episodes; training keeps at least one."""
    order = np.random.default_rng([seed, 11]).permutation(n_episodes)
    n_val = 0
    if val_fraction > 0 and n_episodes >= 2:
        n_val = min(max(1, round(val_fraction * n_episodes)), n_episodes - 1)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def behaviour_clone(policy: Policy, data: DemoDataset, cfg: BCConfig, device: torch.device | str = "cpu") -> BCResult:
    """Fit `policy` (in place) to `data`; returns the learning curve and the early-stopping point.

    The policy's observation normalizer is set to the training split's statistics first.
    """
    start = time.perf_counter()
    if (data.obs_dim, data.action_dim) != (policy.obs_dim, policy.action_dim):
        raise ValueError(
            f"the dataset has obs_dim={data.obs_dim}, action_dim={data.action_dim}; "
            f"the policy has obs_dim={policy.obs_dim}, action_dim={policy.action_dim}"
        )
    device = torch.device(device)
    policy.to(device).train()
    train_ep, val_ep = split_episodes(data.n_episodes, cfg.val_fraction, cfg.seed)
    episode = data.episode_index()
    labels = data.expert_actions if cfg.labels == "expert" else data.actions

    def rows(episodes: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        sel = np.isin(episode, episodes)
        obs = torch.as_tensor(data.obs[sel], device=device)
        return obs, policy.raw_from_action(torch.as_tensor(labels[sel], device=device))

    train_obs, train_raw = rows(train_ep)
    val_obs, val_raw = rows(val_ep)
    norm = policy.obs_norm
    norm.mean.zero_(), norm.var.fill_(1.0), norm.count.zero_()
    norm.update(train_obs)

    frozen = set() if cfg.learn_std else {id(p) for p in policy.std_parameters()}
    params = [p for p in policy.parameters() if id(p) not in frozen]
    optimizer = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    shuffle = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, 12]).integers(2**62)))

    def nll(obs: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return -policy.log_probs(obs, raw)[0].sum(-1).mean()

    result = BCResult(-1, 0, float("inf"), len(train_ep), len(val_ep), 0.0)
    best_state = copy.deepcopy(policy.state_dict())
    n = len(train_obs)
    for epoch in range(cfg.max_epochs):
        total = 0.0
        for idx in torch.randperm(n, generator=shuffle).to(device).split(cfg.batch_size):
            loss = nll(train_obs[idx], train_raw[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        result.train_loss.append(total / n)
        with torch.no_grad():
            val = nll(val_obs, val_raw).item() if len(val_obs) else result.train_loss[-1]
        result.val_loss.append(val)
        result.epochs = epoch + 1
        if val < result.best_val_loss:
            result.best_val_loss, result.best_epoch = val, epoch + 1
            best_state = copy.deepcopy(policy.state_dict())
        elif epoch + 1 - result.best_epoch >= cfg.patience:
            break
    policy.load_state_dict(best_state)
    result.seconds = time.perf_counter() - start
    return result


def checkpoint_from_bc(policy: Policy, cfg: TrainConfig, dataset: str, result: BCResult, evaluation=None) -> dict:
    """A checkpoint of a cloned policy, in the training checkpoints' format: `init_from` starts
    GRPO from it and `scripts/evaluate.py` evaluates it."""
    return {
        "format_version": checkpoint.FORMAT_VERSION,
        "kind": "bc",
        "iteration": 0,
        "env_steps": 0,
        "config": OmegaConf.to_container(OmegaConf.structured(cfg)),
        "policy": checkpoint.policy_record(policy),
        "bc": {"dataset": dataset, **result.to_json()},
        "eval": None if evaluation is None else evaluation.to_json(),
    }
