"""Run a policy in groups of worlds and record what the update needs: `collect` runs one batch
of worlds to the end; `GroupSampler` draws one iteration's groups from the training seed stream,
with DAPO's dynamic sampling when configured."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from grpo_robot.environment import GroupEnv
from grpo_robot.policies import Policy
from grpo_robot.seeding import PaddedRows, SharedDraws, exploration, group_seeds, iteration_generator, iteration_seeds
from grpo_robot.start_replay import StartReplay


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
    split: int = 1,
    max_steps: int | None = None,
) -> Batch:
    """Reset `env` from `seeds [B]` and run `policy` until every world is done, or for
    `max_steps` control steps (a training horizon shorter than the env's: a world still running
    then has not succeeded).

    The outcome is success at any step (the env ends the episode there) unless
    `final_step_outcome`, where it is the success predicate at the last step. With `split > 1`
    and an env that can step asynchronously (`BatchedEnv.step_async`), the worlds are split into
    that many parts whose physics and policy calls overlap (`collect_split`); the result is the
    same, bit for bit.
    """
    if split > 1 and hasattr(env, "step_async") and (generator is not None or deterministic):
        return collect_split(env, policy, seeds, device, generator, deterministic, final_step_outcome, split,
                             max_steps)  # fmt: skip
    obs_np = env.reset(seeds)
    obs_steps, raw_steps, logp_steps, mask_steps = [], [], [], []
    limit = math.inf if max_steps is None else max_steps
    while not env.done.all() and len(obs_steps) < limit:
        obs = torch.as_tensor(obs_np, device=device)
        raw, action, logp = policy.sample(obs, generator, deterministic)
        mask_steps.append(torch.as_tensor(~env.done, device=device))
        obs_steps.append(obs)
        raw_steps.append(raw)
        logp_steps.append(logp)
        obs_np, *_ = env.step(action.cpu().numpy())
    return _batch(env, obs_steps, raw_steps, logp_steps, mask_steps, device, final_step_outcome)


def _batch(env, obs_steps, raw_steps, logp_steps, mask_steps, device, final_step_outcome: bool) -> Batch:
    success = env.success if final_step_outcome else env.terminated
    return Batch(
        obs=torch.stack(obs_steps),
        raw=torch.stack(raw_steps),
        logp=torch.stack(logp_steps),
        mask=torch.stack(mask_steps),
        success=torch.as_tensor(success & ~env.failed, dtype=torch.float32, device=device),
        failed=torch.as_tensor(env.failed.copy(), device=device),
    )


def split_bounds(num_worlds: int, parts: int) -> list[slice]:
    """`parts` contiguous slices of `num_worlds` worlds, sizes differing by at most one."""
    edges = np.linspace(0, num_worlds, min(parts, num_worlds) + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


@torch.no_grad()
def collect_split(
    env,
    policy: Policy,
    seeds: np.ndarray,
    device: torch.device,
    generator: torch.Generator | None,
    deterministic: bool,
    final_step_outcome: bool,
    split: int,
    max_steps: int | None = None,
) -> Batch:
    """`collect` with the worlds in `split` contiguous parts whose policy and physics overlap.

    By default one thread samples every part in turn, and while part p's physics runs on the
    env's physics thread (`step_async`, which releases the GIL), it samples part p + 1's actions.
    With `env.parallel_parts` (`BatchedEnv.use_parts`), each part is a rollout of its own on a
    thread of its own, its policy and its physics (`_run_part`), with `nthread // split` physics
    threads each: no part waits at another's end-of-call barrier or for the policy of another.

    Every part is sampled at every control step until the last world of the batch has ended,
    finished or not, with its rows of the step's draw for all worlds (`SharedDraws`), as `collect`
    samples all worlds; the policy is row-wise. The batch therefore equals `collect`'s bit for bit
    (tests/test_rollout_split.py)."""
    env.reset(seeds)
    parts = split_bounds(env.num_worlds, split)
    draws = SharedDraws(generator, env.num_worlds) if generator is not None else None
    rows = [draws.rows(p.start, p.stop) if draws is not None else None for p in parts]
    limit = math.inf if max_steps is None else max_steps
    if getattr(env, "parallel_parts", False):
        steps = _parts_on_threads(env, policy, parts, rows, device, deterministic, limit)
    else:
        steps = _parts_in_turn(env, policy, parts, rows, device, deterministic, limit)
    obs_steps, raw_steps, logp_steps, mask_steps = (
        [torch.cat([part[i] for part in step]) for step in steps] for i in range(4)
    )
    return _batch(env, obs_steps, raw_steps, logp_steps, mask_steps, device, final_step_outcome)


def _parts_on_threads(env, policy: Policy, parts: list[slice], rows: list, device: torch.device,
                      deterministic: bool, limit: float) -> list[list[tuple]]:  # fmt: skip
    """`collect_split`'s parts, each on a thread of its own (`_run_part`) -> per control step,
    per part, `(obs, raw, logp, mask)`."""
    env.use_parts(parts)
    # the parts' threads take turns at Python (`BatchedEnv.step_part`)
    turn = threading.Lock() if getattr(env, "take_turns", True) else None
    stop = threading.Event()  # the rollout was abandoned (a signal): the parts stop at their next step
    pool = ThreadPoolExecutor(len(parts), thread_name_prefix="rollout-part")
    futures = []
    try:
        for p, r in zip(parts, rows, strict=True):
            job = pool.submit(_run_part, env, policy, p, r, device, deterministic, limit, turn=turn, stop=stop)
            futures.append(job)
        wait(futures)
    except BaseException:
        stop.set()
        raise
    finally:
        _join(pool)  # no part's thread outlives the rollout, whatever interrupts it
    records = [future.result() for future in futures]
    length = max(map(len, records))
    for part, r, record in zip(parts, rows, records, strict=True):  # ended sooner: sampled on, as `collect` does
        _run_part(env, policy, part, r, device, deterministic, length, record)
    return [list(step) for step in zip(*records, strict=True)]


def _join(pool: ThreadPoolExecutor) -> None:
    """Wait for `pool`'s threads to end, through any exception raised meanwhile in this thread (a
    second signal: `Interrupted`); the last one is raised once they have."""
    caught: BaseException | None = None
    while True:
        try:
            pool.shutdown(wait=True)
            break
        except BaseException as err:  # noqa: BLE001  (raised below, once the threads are done)
            caught = err
    if caught is not None:
        raise caught


def _parts_in_turn(env, policy: Policy, parts: list[slice], rows: list, device: torch.device,
                   deterministic: bool, limit: float) -> list[list[tuple]]:  # fmt: skip
    """`collect_split`'s parts sampled in turn by this thread while the env's physics thread steps
    the part sampled before (`step_async`) -> per control step, per part, `(obs, raw, logp, mask)`."""
    steps: list[list[tuple]] = []
    pending = [None] * len(parts)
    try:
        while True:
            if len(steps) >= limit:  # the training horizon: finish the steps under way, then stop
                for future in pending:
                    if future is not None:
                        future.result()
                break
            step, any_live = [], False
            for k, part in enumerate(parts):
                if pending[k] is not None:
                    pending[k].result()
                    pending[k] = None
                live = ~env.done[part]
                any_live |= bool(live.any())
                obs = torch.as_tensor(env.sensordata[part].astype(np.float32), device=device)
                raw, action, logp = policy.sample(obs, rows[k], deterministic)
                step.append((obs, raw, logp, torch.as_tensor(live, device=device)))
                if live.any():
                    pending[k] = env.step_async(action.cpu().numpy(), part)
            if not any_live:  # every world had ended before this step: it is not part of the batch
                break
            steps.append(step)
    except BaseException:
        _settle(pending)
        raise
    return steps


def _settle(futures: list) -> None:
    """Wait for the physics steps still under way when a rollout is abandoned (a signal, a policy
    that raised), so that none steps the env after the exception has left (and the env is reset,
    evaluated on or closed). Their own errors are not raised: the rollout's exception is; a
    second signal while waiting is raised once they are done."""
    caught: BaseException | None = None
    for future in futures:
        while future is not None:
            try:
                future.exception()  # waits
                break
            except BaseException as err:  # noqa: BLE001  (raised below, once the steps are done)
                caught = err
    if caught is not None:
        raise caught


def _run_part(env, policy: Policy, part: slice, rows, device: torch.device, deterministic: bool,
              limit: float, record: list[tuple] | None = None, turn: threading.Lock | None = None,
              stop: threading.Event | None = None) -> list[tuple]:  # fmt: skip
    """Part `part` of a `collect_split` on its own: sample its actions and step its physics
    (`env.step_part`) until its worlds have all ended or `limit` steps are recorded; returns
    `(obs, raw, logp, mask)` per control step. Given the `record` of such a run, only samples
    on to `limit` steps (the worlds have ended: nothing is stepped), as `collect` samples every
    world until the last one of the batch has ended. `turn`: held but for the physics calls, so
    that parts on threads of their own run their Python one at a time. `stop`, once set: no
    further step (the rollout was abandoned)."""
    sampling_on = record is not None
    record = [] if record is None else record
    try:
        with turn if turn is not None else nullcontext(), torch.no_grad():
            while len(record) < limit and not (stop is not None and stop.is_set()):
                live = ~env.done[part]
                if not (live.any() or sampling_on):
                    break
                obs = torch.as_tensor(env.sensordata[part].astype(np.float32), device=device)
                raw, action, logp = policy.sample(obs, rows, deterministic)
                record.append((obs, raw, logp, torch.as_tensor(live, device=device)))
                if live.any():
                    env.step_part(action.cpu().numpy(), part, turn)
    finally:
        env.end_part(part)  # the last part running steps on all the physics threads
    return record


def usable_split(env, split: int) -> int:
    """The parts a rollout of `env` may run in: `split` (rollout.split) for a built-in task with
    as many physics threads (`env.nthread`), fewer with fewer threads, 1 for any other env. A
    split rollout runs a part's policy beside another part's physics, so it keeps at least two
    threads busy: with `env.nthread=1` (a Ray worker of one CPU, or a run asked for one core)
    it would use a second core it was not given. The batch is the same for any split."""
    if not hasattr(env, "step_async"):
        return 1
    return max(1, min(split, int(getattr(env, "nthread", split) or 1)))


@torch.no_grad()
def exact_settings(policy: Policy, num_worlds: int, split: int, threads: int | None,
                   device: torch.device) -> tuple[int, int | None]:  # fmt: skip
    """`(split, threads)` to use so that sampling gives what one call on all worlds with torch's
    own threads gives, bit for bit; settings that would not are dropped.

    A matrix product's rows can round differently with the number of rows (BLAS picks kernels by
    shape: measured here, for parts under 6-15 rows of a 128-512 wide MLP, and up to 300 of 512
    rows for a 1024 wide one) or with the number of threads. Kernels depend on shapes, not values,
    so one probe batch of random observations at the rollout's own shapes tells; every layer's
    output is compared, since a rounding apart can vanish by the outputs (`exact_rows`)."""
    threads = threads if device.type == "cpu" else None
    if split <= 1 and threads is None:
        return split, threads
    probe = torch.randn((num_worlds, policy.obs_dim), generator=torch.Generator().manual_seed(0)).to(device)
    module = policy if isinstance(policy, torch.nn.Module) else None  # every layer's output compared (exact_rows)
    reference = _traced(module, policy, probe)
    with torch_threads(threads):
        if threads is not None and not _equal(_traced(module, policy, probe), reference):
            threads = None
    bounds = split_bounds(num_worlds, split)
    with torch_threads(threads):
        parts = [_traced(module, policy, probe[part]) for part in bounds]
    pairs = zip(parts, bounds, strict=True)
    if split > 1 and not all(_equal(trace, _rows(reference, num_worlds, part)) for trace, part in pairs):
        split = 1
    return split, threads


@torch.no_grad()
def exact_rows(policy: Policy, total: int, start: int, stop: int, threads: int | None) -> int | None:
    """The rows to pad a policy call on worlds `start:stop` of `total` to (`RowPadded`), with torch
    on `threads` threads, so that its rows are those of one call on all `total` worlds with torch's
    own threads, bit for bit: None where the call is exact unpadded, or where no padding is (a
    rollout worker's slice of the batch). Tries the slice's own size, then 16, 32, ... rows, then
    `total`. BLAS picks its kernels by shape (`exact_settings`), but whether two kernels round a
    row apart depends on its values, and a rounding apart in a layer often vanishes by the outputs
    (a tokenized policy's log-probs of one row agreed for 7 of 8 probes whose logits did not):
    every layer's output is compared, for 4 probe batches."""
    n = stop - start
    generator = torch.Generator().manual_seed(0)
    probes = [torch.randn((total, policy.obs_dim), generator=generator) for _ in range(4)]
    references = [_rows(_traced(policy, policy, probe), total, slice(start, stop)) for probe in probes]
    candidates = [n, *(2**k for k in range(4, max(total - 1, 1).bit_length()) if n < 2**k < total), total]
    for rows in dict.fromkeys(candidates):
        with torch_threads(threads):
            traces = [_traced(policy, RowPadded(policy, rows), probe[start:stop]) for probe in probes]
        padded = [_rows(trace, rows, slice(0, n)) for trace in traces]
        if all(_equal(trace, ref) for trace, ref in zip(padded, references, strict=True)):
            return None if rows == n else rows
    return None


def _rows(trace: list[torch.Tensor], total: int, part: slice) -> list[torch.Tensor]:
    """Rows `part` of each tensor of `trace` that holds one row per world of a call on `total`
    worlds; any other tensor (a parameter's output) as it is."""
    return [t[part] if t.dim() and t.shape[0] == total else t for t in trace]


def _equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _traced(policy: Policy | None, sampler, obs: torch.Tensor) -> list[torch.Tensor]:
    """`sampler.sample(obs, None, True)`'s outputs, then the output of every module of `policy`
    (None: none) that ran, in order."""
    seen: list[torch.Tensor] = []
    modules = [] if policy is None else policy.modules()
    handles = [m.register_forward_hook(lambda _m, _a, out: seen.append(out) if torch.is_tensor(out) else None)
               for m in modules]  # fmt: skip
    try:
        outputs = list(sampler.sample(obs, None, True))
    finally:
        for handle in handles:
            handle.remove()
    return outputs + seen


class RowPadded:
    """`policy` whose `sample` runs on at least `rows` rows: a call on fewer observations is
    padded with zero rows (their noise zeros too, `seeding.PaddedRows`) and gives back its own
    rows. Each row of a policy call is computed on its own, so padding changes only which kernel
    computes them (`exact_rows`)."""

    def __init__(self, policy: Policy, rows: int) -> None:
        self.policy, self.rows = policy, rows
        self.obs_dim = policy.obs_dim

    def sample(self, obs: torch.Tensor, generator=None, deterministic: bool = False):
        n = obs.shape[0]
        if n >= self.rows:
            return self.policy.sample(obs, generator, deterministic)
        padded = torch.cat([obs, obs.new_zeros((self.rows - n, *obs.shape[1:]))])
        source = None if generator is None else PaddedRows(generator, n, self.rows)
        return tuple(out[:n] for out in self.policy.sample(padded, source, deterministic))


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to `n` inside the block (None: unchanged), restored after."""
    before = torch.get_num_threads()
    if n is not None and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


class GroupSampler:
    """One iteration's groups: `n_groups` seeds from the run's training stream, each the start of
    `group_size` worlds. With `keep_range = (low, high)` (dynamic sampling), groups whose success
    rate lies outside the open interval are dropped and more are drawn, up to `max_rounds` draws;
    the batch then holds at most `n_groups` kept groups (all of the last draw if none was kept,
    so the iteration still counts its steps). With `noise_correlation > 0` each world's sampling
    noise is correlated from one control step to the next (`seeding.CorrelatedDraws`)."""

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
        split: int = 1,
        policy_threads: int | None = None,
        noise_correlation: float = 0.0,
        max_steps: int | None = None,
        replay: StartReplay | None = None,
    ) -> None:
        self.env, self.run_seed, self.device = env, run_seed, device
        self.replay = replay  # algo.start_replay (start_replay.py): None = fresh seeds only
        self.max_steps = max_steps  # algo.train_horizon: control steps per rollout, null = the env's horizon
        self.noise_correlation = noise_correlation  # algo.noise_correlation (seeding.CorrelatedDraws)
        self.n_groups, self.group_size = n_groups, group_size
        self.final_step_outcome = final_step_outcome
        self.keep_range, self.max_rounds = keep_range, max_rounds
        self.split, self.policy_threads = split, policy_threads
        self._settings: tuple[int, int | None] | None = None  # exact_settings, from the first draw
        self.last_groups: np.ndarray | None = None  # [n_groups] seeds of the last draw
        # of the starts each draw resets to (algo.curriculum, set by its hook): below 1 the env's easier
        # starts (`BatchedEnv.difficulty`); 1 = the task's own
        self.difficulty = 1.0

    def draw(self, policy: Policy, it: int, round_: int = 0) -> Batch:
        """All `n_groups` groups of iteration `it` (and sampling round), kept or not."""
        groups = self.group_starts(it, round_)
        seeds = group_seeds(groups, self.group_size)
        generator = exploration(iteration_generator(self.run_seed, it, self.device, round_=round_),
                                self.noise_correlation)  # fmt: skip
        if self._settings is None:
            self._settings = exact_settings(policy, len(seeds), usable_split(self.env, self.split),
                                            self.policy_threads, self.device)  # fmt: skip
        split, threads = self._settings
        if hasattr(self.env, "difficulty"):
            self.env.difficulty = self.difficulty
        with torch_threads(threads):
            batch = collect(self.env, policy, seeds, self.device, generator, False, self.final_step_outcome, split,
                            self.max_steps)  # fmt: skip
        return self.recorded(groups, batch)

    def group_starts(self, it: int, round_: int = 0) -> np.ndarray:
        """`[n_groups]` seeds of one draw: the iteration's fresh seeds, some replaced by replayed ones."""
        fresh = iteration_seeds(self.run_seed, it, self.n_groups, round_)
        return fresh if self.replay is None else self.replay.mix(fresh, self.run_seed, it, round_)

    def replay_metrics(self) -> dict[str, float]:
        """The replay's share of the last draw's groups and its buffer's size; {} without replay."""
        return {} if self.replay is None else self.replay.metrics(self.n_groups)

    def recorded(self, groups: np.ndarray, batch: Batch) -> Batch:
        """`batch`, after handing its groups' outcomes to the replay buffer (`groups`: its seeds,
        kept as `last_groups`)."""
        self.last_groups = groups
        if self.replay is not None:
            self.replay.record(groups, batch.success.view(-1, self.group_size).mean(1).cpu().numpy())
        return batch

    def close(self) -> None:
        """Release what the sampler holds beyond the env (the Ray backend's workers)."""

    def sample(self, policy: Policy, it: int) -> tuple[Batch, dict[str, float]]:
        """-> (batch, dynamic-sampling metrics: groups drawn and kept, success before filtering)."""
        if self.keep_range is None:
            return self.draw(policy, it), self.replay_metrics()
        low, high = self.keep_range
        n, kept = self.group_size, []
        n_kept, successes, replayed, mixed = 0, 0.0, 0, 0
        for round_ in range(self.max_rounds):
            batch = self.draw(policy, it, round_)
            successes += batch.success.sum().item()
            replayed += 0 if self.replay is None else self.replay.replayed
            rate = batch.success.view(-1, n).mean(1)
            mixed += int(((rate > 0) & (rate < 1)).sum())
            keep = ((rate > low) & (rate < high)).nonzero()[:, 0][: self.n_groups - n_kept]
            traj = (keep[:, None] * n + torch.arange(n, device=keep.device)).flatten()
            kept.append(batch.select(traj))
            n_kept += len(keep)
            if n_kept == self.n_groups:
                break
        drawn = (round_ + 1) * self.n_groups
        metrics = {"groups_drawn": drawn, "groups_kept": n_kept, "drawn_success": successes / (drawn * n),
                   "mixed_groups": mixed / drawn, **self.replay_metrics()}  # fmt: skip
        if self.replay is not None:  # the share of every round's draws, not the last round's alone
            metrics["charts/replayed_groups"] = replayed / drawn
        if n_kept == 0:
            batch.simulated_steps = sum(k.simulated_steps for k in kept)
            return batch, metrics
        return Batch.concat(kept), metrics
