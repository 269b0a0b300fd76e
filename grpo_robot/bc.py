"""Behaviour cloning: maximum likelihood of demonstrated actions, for every policy type.

The loss is the negative log-likelihood `-sum_d log pi(a_d | s)` through the policy's own
`log_probs`: for a Gaussian policy a (std-weighted) squared error on the mean, for a tokenized
policy the cross-entropy over each dimension's bins. Episodes, not steps, are split into
training and validation sets (steps of one episode are near-duplicates). Training counts gradient
steps, not epochs, so a handful of demonstrations still gets enough updates; the held-out error
of the deterministic action (its MSE to the demonstrated one) is checked every `eval_every`
steps, and training stops once it has not improved for `patience` checks; the best weights are
kept. The action error, not the held-out likelihood, decides: a categorical over fine bins keeps
getting sharper, so its held-out likelihood worsens long before its chosen actions do.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_robot import checkpoint
from grpo_robot.config import BCConfig, DemoConfig, EnvConfig, PolicyConfig, TrainConfig, config_dict, policy_kwargs
from grpo_robot.demos import DemoDataset
from grpo_robot.policies import GaussianPolicy, Policy, TokenizedPolicy, build_policy
from grpo_robot.update import TrainingDiverged

log = logging.getLogger(__name__)


@dataclass
class BCResult:
    best_step: int  # gradient step of the kept weights
    steps: int  # gradient steps run
    best_val_score: float  # validation action MSE; the training loss when there is no validation split
    train_episodes: int
    val_episodes: int
    seconds: float
    train_loss: list[float] = field(default_factory=list)  # every eval_every steps, mean over those steps
    val_loss: list[float] = field(default_factory=list)  # validation NLL, every eval_every steps
    val_action_mse: list[float] = field(default_factory=list)  # of the deterministic action: the stopping score
    out_of_time: bool = False  # stopped at the run's time limit (`time_limit_min`), not by patience or max_steps
    # bc.refit: steps of the fit on every episode that replaced the kept weights (0: none); the scores above
    # are the fit on the split's, which chose them
    refit_steps: int = 0

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


class BCDiverged(TrainingDiverged):
    """Behaviour cloning's loss went non-finite before any finite evaluation; the message is one line."""


def behaviour_clone(policy: Policy, data: DemoDataset, cfg: BCConfig, device: torch.device | str = "cpu",
                    deadline: float | None = None) -> BCResult:  # fmt: skip
    """Fit `policy` (in place) to `data`; returns the learning curve and the early-stopping point.

    The policy's observation normalizer is set to the training split's statistics first. A dataset
    with non-finite or inconsistent arrays is refused before any step (`demos.DatasetError`). A
    non-finite training loss ends the fit: the policy keeps the best evaluated weights, and when
    no evaluation had come out finite yet, `BCDiverged` says so (rather than a "clone" that is its
    initial weights). Past `deadline` (a `time.perf_counter()` value: the run's time limit) the
    step it reached is checked, and the fit ends with the best weights so far.
    """
    start = time.perf_counter()
    data.check(data.source or "the demonstrations")  # finite and consistent, before any step (DatasetError)
    if (data.obs_dim, data.action_dim) != (policy.obs_dim, policy.action_dim):
        raise ValueError(
            f"the dataset has obs_dim={data.obs_dim}, action_dim={data.action_dim}; "
            f"the policy has obs_dim={policy.obs_dim}, action_dim={policy.action_dim}"
        )
    device = torch.device(device)
    policy.to(device).train()
    seed = 0 if cfg.seed is None else cfg.seed  # a BCConfig of its own (pretrain_bc.py, the API): 0
    train_ep, val_ep = split_episodes(data.n_episodes, cfg.val_fraction, seed)
    episode = data.episode_index()
    labels = data.expert_actions if cfg.labels == "expert" else data.actions
    smooth = isinstance(policy, TokenizedPolicy) and cfg.token_sigma > 0  # a registered subclass too

    def rows(episodes: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        sel = np.isin(episode, episodes)
        obs, action = torch.as_tensor(data.obs[sel], device=device), torch.as_tensor(labels[sel], device=device)
        return obs, action, action if smooth else policy.raw_from_action(action)

    train_obs, _, train_raw = rows(train_ep)
    val_obs, val_action, val_raw = rows(val_ep)
    initial = copy.deepcopy(policy.state_dict()) if cfg.refit and len(val_obs) else None
    _normalize_on(policy, train_obs)

    def nll(obs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if smooth:
            return policy.soft_cross_entropy(obs, target, cfg.token_sigma).mean()
        return -policy.log_probs(obs, target)[0].sum(-1).mean()

    result = BCResult(-1, 0, math.inf, len(train_ep), len(val_ep), 0.0)
    best_state = copy.deepcopy(policy.state_dict())
    window: list[float] = []
    diverged = None
    for step, loss in enumerate(_fit_steps(policy, train_obs, train_raw, nll, cfg, seed, cfg.max_steps), start=1):
        if not math.isfinite(loss):
            diverged = f"the training loss was {loss} at step {step}"
            break
        window.append(loss)
        result.out_of_time = deadline is not None and time.perf_counter() > deadline
        if step % cfg.eval_every and step != cfg.max_steps and not result.out_of_time:
            continue
        result.train_loss.append(float(np.mean(window)))
        window.clear()
        with torch.no_grad():
            if len(val_obs):
                result.val_loss.append(nll(val_obs, val_raw).item())
                val = (policy.sample(val_obs, deterministic=True)[1] - val_action).square().mean().item()
            else:
                val = result.train_loss[-1]
        result.val_action_mse.append(val)
        result.steps = step
        if not math.isfinite(val) and result.best_step < 0:
            diverged = f"the {'validation action MSE' if len(val_obs) else 'training loss'} was {val} at step {step}"
            break
        if val < result.best_val_score:
            result.best_val_score, result.best_step = val, step
            best_state = copy.deepcopy(policy.state_dict())
        elif step - result.best_step >= cfg.patience * cfg.eval_every:
            break
        if result.out_of_time:
            break
    if diverged is not None and result.best_step < 0:
        raise BCDiverged(f"behaviour cloning diverged: {diverged}, before any finite evaluation; lower bc.lr "
                         f"(now {cfg.lr:g})")  # fmt: skip
    policy.load_state_dict(best_state)
    if cfg.learn_std:  # the fit stopped on the mean's error, wherever Adam had taken the std by then
        fit_free_std(policy, *((val_obs, val_raw) if len(val_obs) else (train_obs, train_raw)))
    if initial is not None and result.out_of_time:
        log.warning("bc.refit: the run's time limit came during the fit on the split; the clone keeps its weights, "
                    "fitted without the held-out episodes")
    elif initial is not None and result.best_step > 0:
        all_obs, _, all_raw = rows(np.arange(data.n_episodes))
        result.refit_steps = _refit(policy, initial, all_obs, all_raw, nll, cfg, seed, result.best_step, deadline)
    result.seconds = time.perf_counter() - start
    return result


def _normalize_on(policy: Policy, obs: torch.Tensor) -> None:
    """The policy's observation normalizer set to the statistics of `obs` (the rows it is fitted on)."""
    norm = policy.obs_norm
    norm.mean.zero_(), norm.var.fill_(1.0), norm.count.zero_()
    policy.update_inputs(obs)


def _fit_steps(policy: Policy, obs: torch.Tensor, raw: torch.Tensor, nll, cfg: BCConfig, seed: int, steps: int):
    """Fit `policy` to (obs, raw) from its current weights (its normalizer set for them already,
    `_normalize_on`): a fresh Adam, minibatches from shuffled passes over the rows (the same for
    the same `seed`); yields each step's training loss (a float; a non-finite one is not stepped
    on, and the caller stops)."""
    frozen = set() if cfg.learn_std else {id(p) for p in policy.std_parameters()}
    params = [p for p in policy.parameters() if id(p) not in frozen]
    optimizer = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    shuffle = torch.Generator().manual_seed(int(np.random.default_rng([seed, 12]).integers(2**62)))
    n = len(obs)
    order = torch.empty(0, dtype=torch.long, device=obs.device)
    for _ in range(steps):
        if len(order) < min(cfg.batch_size, n):  # walk through shuffled passes over the data
            order = torch.cat([order, torch.randperm(n, generator=shuffle).to(obs.device)])
        idx, order = order[: cfg.batch_size], order[cfg.batch_size :]
        loss = nll(obs[idx], raw[idx])
        if not torch.isfinite(loss):
            yield loss.item()
            return
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        policy.after_step()  # the std's or temperature's bounds, when BC fits them
        yield loss.item()


def _refit(policy: Policy, initial: dict, obs: torch.Tensor, raw: torch.Tensor, nll, cfg: BCConfig, seed: int,
           steps: int, deadline: float | None = None) -> int:  # fmt: skip
    """`bc.refit`: the fit again from the `initial` weights on every episode, for the `steps` that
    early stopping chose on the split; the policy's weights then. Its std or temperature
    (`bc.learn_std`) stays the split fit's, which the held-out episodes set. A non-finite loss, or
    the run's time limit (`deadline`) before the last step, keeps the split fit's weights (a
    warning says so) -> the steps of the refit, 0 then."""
    split = copy.deepcopy(policy.state_dict())
    held_out = [p.detach().clone() for p in policy.std_parameters()]
    policy.load_state_dict(initial)
    _normalize_on(policy, obs)
    for step, loss in enumerate(_fit_steps(policy, obs, raw, nll, cfg, seed, steps), start=1):
        late = deadline is not None and step < steps and time.perf_counter() > deadline
        if not math.isfinite(loss) or late:
            why = "the run's time limit came" if late else f"the training loss was {loss}"
            log.warning("bc.refit: %s at step %d of %d; the clone keeps the weights of the fit on the split", why,
                        step, steps)  # fmt: skip
            policy.load_state_dict(split)
            return 0
    if cfg.learn_std:
        with torch.no_grad():
            for p, q in zip(policy.std_parameters(), held_out, strict=True):
                p.copy_(q)
    return steps


@torch.no_grad()
def fit_free_std(policy: Policy, obs: torch.Tensor, raw: torch.Tensor) -> None:
    """A Gaussian's free std set to the maximum-likelihood one for its mean: per dimension, the
    root mean square of the clone's residual `raw - mean` on `obs` (the held-out episodes), within
    the policy's std bounds. Early stopping chose the mean by its action error; the std the NLL
    had reached by that step is wherever Adam had taken it (near its start after 50 steps; at its
    floor, 0.007, after thousands on the training data alone). Other policies are left as fitted."""
    if not isinstance(policy, GaussianPolicy) or policy.state_dependent_std or not len(obs):
        return
    mean, _ = policy.distribution(obs)
    rms = (raw - mean).square().mean(0).sqrt().clamp_min(1e-12)
    policy.log_std.copy_(rms.log())
    policy.after_step()  # within [min_std, max_std]


def clone(
    data: DemoDataset, policy_cfg: PolicyConfig, cfg: BCConfig, device: torch.device | str = "cpu",
    deadline: float | None = None, env: EnvConfig | str | None = None,
) -> tuple[Policy, BCResult]:
    """A new policy of `policy_cfg` (under `policy.mirror`, mirrored as `env`, its config or a
    built-in task's name, declares), initialized from `cfg.seed` (null: 0), behaviour-cloned on
    `data`."""
    torch.manual_seed(0 if cfg.seed is None else cfg.seed)
    kwargs = policy_kwargs(policy_cfg, env)
    policy = build_policy(policy_cfg.type, data.obs_dim, data.action_dim, **kwargs)
    return policy, behaviour_clone(policy.to(device), data, cfg, device, deadline)


def checkpoint_from_bc(policy: Policy, cfg: TrainConfig, dataset: str, result: BCResult, evaluation=None,
                       env_identity: dict | None = None) -> dict:  # fmt: skip
    """A checkpoint of a cloned policy, in the training checkpoints' format: `init_from` starts
    GRPO from it and `scripts/evaluate.py` evaluates it."""
    return {
        "format_version": checkpoint.FORMAT_VERSION,
        "kind": "bc",
        "iteration": 0,
        "env_steps": 0,
        "config": config_dict(cfg),
        "policy": checkpoint.policy_record(policy),
        "bc": {"dataset": dataset, **result.to_json()},
        "eval": None if evaluation is None else evaluation.to_json(),
        "env_identity": env_identity,  # the dataset's env as it was observed (the observation keys used)
    }


def run_seeded(cfg: TrainConfig) -> tuple[DemoConfig, BCConfig]:
    """`cfg.demos` and `cfg.bc` with a null seed taken from the run's `seed`: each training seed
    draws its own demos, split and initial weights unless they are pinned."""
    demos = cfg.demos if cfg.demos.seed is not None else dataclasses.replace(cfg.demos, seed=cfg.seed)
    bc = cfg.bc if cfg.bc.seed is not None else dataclasses.replace(cfg.bc, seed=cfg.seed)
    return demos, bc


def pretrain_stage(cfg: TrainConfig, run_dir: Path, demos: DemoDataset | None, device: torch.device,
                   adopt: Callable[[Policy], Any], deadline: float | None = None) -> dict[str, Any]:  # fmt: skip
    """The `pretrain=true` stage: collect demonstrations (a built-in task's scripted expert, or
    `demos.expert` on a Gymnasium env) or use `demos` (a loaded `demos.path`), behaviour-clone a
    policy of `cfg.policy`, hand it to `adopt` (which trains it from now on and returns its
    evaluation), and write `demos.npz`, `demos.json`, `bc.pt` and `bc.json` in `run_dir`. -> the
    record of how the initial policy was made. Cloning ends at `deadline` (the run's time limit,
    a `time.perf_counter()` value) with the best weights it has."""
    from grpo_robot.demos import collect_demos, collect_expert_demos

    run_dir.mkdir(parents=True, exist_ok=True)
    d, bc_cfg = run_seeded(cfg)
    if demos is not None:
        data, demos_path, collect_stats = demos, Path(str(d.path)), None
    else:
        if cfg.env.task:
            data, stats = collect_demos(cfg.env.task, d.episodes, d.noise, d.seed, d.max_attempts,
                                        nthread=cfg.env.nthread, horizon=cfg.env.horizon,
                                        outcome=cfg.env.outcome)  # fmt: skip
        else:
            data, stats = collect_expert_demos(cfg.env, d.expert, d.episodes, d.noise, d.seed, d.max_attempts)
        demos_path, collect_stats = data.save(run_dir / "demos.npz"), stats.to_json()
        checkpoint.write_text_atomic(run_dir / "demos.json", json.dumps(collect_stats, indent=1))
    policy, result = clone(data, cfg.policy, bc_cfg, device, deadline, cfg.env)
    bc_eval = adopt(policy)
    record = checkpoint_from_bc(policy, cfg, str(demos_path), result, bc_eval, data.identity)
    checkpoint.save_atomic(record, run_dir / "bc.pt")
    info = {"demos": str(demos_path), "collect": collect_stats, "bc": result.to_json(), "eval": bc_eval.to_json()}
    checkpoint.write_text_atomic(run_dir / "bc.json", json.dumps(info, indent=1))
    return {"source": str(run_dir / "bc.pt"), "demo_episodes": data.n_episodes}
