"""`rollout.backend=ray`: an iteration's groups stepped by Ray actors (docs/scaling.md).

`RaySampler` is a `GroupSampler` whose `draw` splits the iteration's groups into `rollout.workers`
contiguous slices, one per `RolloutWorker` actor. Each worker owns an env of its slice's worlds
(the same group-env backends as the local one) and a CPU copy of the policy; per draw the learner
puts the policy's weights in the object store once and every worker loads them. A world's sampling
noise is drawn for the whole batch from the run's stream for (seed, iteration, round) and the
worker keeps its rows (`seeding.WorldRows`); a worker whose slice is too few rows for BLAS to
compute them as it does in the whole batch pads its policy calls (`rollout.exact_rows`); the
learner joins the slices in worker order. So on CPU every step the batch's mask holds, and the
training run, are bit-identical to the local backend's for any number of workers. (Past a
world's end the rows differ: locally an ended world is sampled on until the whole batch ends, a
worker stops at its slice's end and pads with zeros; nothing reads them.)

What travels: the config (env, policy sizes) when a worker starts, the weights per draw, the
seeds of its slice; the batch comes back. Env objects never travel: each worker builds its own.

Faults: a worker whose process dies (or whose node, or the slice's result, is lost) is restarted
by Ray (the actor's `max_restarts`) and its slice is collected again from the same seeds and
streams, so the result is unchanged; one that
takes longer than `rollout.worker_timeout_s` is killed and restarted the same way. After
`rollout.max_restarts` such failures in a run, `RolloutError` (one line) ends the run, its last
completed iteration saved. A worker that runs another grpo_robot version than the learner is
refused when it starts; other library versions (MuJoCo, torch, numpy, Python) are a warning.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from typing import Any

import numpy as np
import torch

from grpo_robot.config import ConfigError, TrainConfig, env_config_dict
from grpo_robot.policies import Policy
from grpo_robot.rollout import (
    Batch,
    GroupSampler,
    RolloutError,
    RowPadded,
    collect,
    exact_rows,
    exact_settings,
    usable_split,
)
from grpo_robot.seeding import WorldRows, exploration, group_seeds, iteration_generator
from grpo_robot.start_replay import start_replay

log = logging.getLogger(__name__)

START_UP_S = 300.0  # the longest a worker may take to start (or restart), whatever rollout.worker_timeout_s is


class RolloutWorker:
    """One Ray actor: the env of a slice of `n_worlds` worlds and a CPU copy of the policy."""

    def __init__(self, env: dict[str, Any], n_worlds: int, policy: dict[str, Any], threads: int,
                 final_step_outcome: bool, paths: list[str], split: int = 1,
                 parts: tuple[bool, bool] = (True, True), rows: int | None = None) -> None:  # fmt: skip
        import sys

        from grpo_robot.config import env_config

        for path in reversed(paths):  # the driver's import path: a user's env module next to their script
            if path not in sys.path and os.path.isdir(path):
                sys.path.insert(0, path)
        from grpo_robot.environment import make_env
        from grpo_robot.policies import build_policy

        torch.set_num_threads(threads)
        env_cfg = env_config(env)
        if env_cfg.task:  # physics threads: the worker's CPUs (results are identical for any count)
            env_cfg.nthread = threads
        self.env = make_env(env_cfg, n_worlds)
        if hasattr(self.env, "parallel_parts"):  # rollout.parallel_parts and take_turns, as the local env has them
            self.env.parallel_parts, self.env.take_turns = parts
        from grpo_robot.registry import import_plugins

        import_plugins(policy.get("modules", []))  # a policy registered by the user's module is known here too
        self.policy = build_policy(policy["type"], policy["obs_dim"], policy["action_dim"], **policy["kwargs"])
        self.policy.eval()
        # the learner's choice (exact_rows): policy calls padded to as many rows as make them exact
        self.sampler = self.policy if rows is None else RowPadded(self.policy, rows)
        self.final_step_outcome, self.split = final_step_outcome, split
        self.exact_split: int | None = None

    def pid(self) -> int:
        return os.getpid()

    def versions(self) -> dict[str, str]:
        return versions()

    def node(self) -> str:
        """The id of the Ray node this worker runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def collect(self, weights: dict[str, torch.Tensor], run_seed: int, it: int, round_: int, seeds: np.ndarray,
                start: int, total: int, noise_correlation: float = 0.0, max_steps: int | None = None,
                difficulty: float = 1.0) -> tuple[Batch, float]:  # fmt: skip
        """Worlds `start:start + len(seeds)` of the draw -> (their batch, seconds it took)."""
        t0 = time.perf_counter()
        self.policy.load_state_dict(weights)
        if hasattr(self.env, "difficulty"):  # the learner's start curriculum (algo.curriculum)
            self.env.difficulty = difficulty
        source = exploration(iteration_generator(run_seed, it, "cpu", round_=round_), noise_correlation)
        rows = WorldRows(source, start, start + len(seeds), total)
        if self.exact_split is None:  # the first draw: keep the split only where it is exact
            self.exact_split = exact_settings(self.sampler, len(seeds), usable_split(self.env, self.split), None,
                                              torch.device("cpu"))[0]  # fmt: skip
        batch = collect(self.env, self.sampler, seeds, torch.device("cpu"), rows, False, self.final_step_outcome,
                        self.exact_split, max_steps)  # fmt: skip
        return batch, time.perf_counter() - t0

    def close(self) -> None:
        self.env.close()


# an HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, a
# Ray client server) answers with a SETTINGS frame of its own (frame type 4, the header's 4th byte)
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _reachable(address: str, timeout: float = 3.0) -> str | None:
    """None when `host:port` (after an optional `ray://`) answers as a gRPC server does, else why
    not: ray.init on a port that takes TCP but is not Ray's (the dashboard's 8265) waited on and
    on, printing GCS time-outs. With TLS (RAY_USE_TLS) only the connection is checked."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return None
            conn.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError:
        head = b""
    except OSError as err:
        return f"{type(err).__name__}: {err.strerror or err}"
    if len(head) == 9 and head[3] == 4:
        return None
    return ("the port takes connections but does not answer as Ray does (gRPC); the head's GCS port is "
            "the one `ray start --head` prints, 6379 by default, not the dashboard's 8265")


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """Connect this process to Ray (a running session is used as it is) -> whether this call
    started a local Ray, which `shutdown` then ends. A cluster that cannot be reached is a
    one-line `ConfigError` within seconds, before any work."""
    import ray

    if address is not None and address != "auto":
        problem = _reachable(address)
        if problem:
            raise ConfigError(f"ray.address={address!r}: no Ray cluster answers there ({problem}); start one with "
                              "`ray start --head`, or set ray.address=null for a local Ray")  # fmt: skip
    if ray.is_initialized():
        return False
    quiet = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if address is None:  # a Ray of this run's own, even where `ray start` runs a cluster on this machine
        ray.init(address="local", num_cpus=num_cpus, **quiet)
        return True
    try:
        ray.init(address=address, **({} if address.startswith("ray://") else quiet))
    except Exception as err:  # noqa: BLE001  (ConnectionError, RuntimeError: reported in one line)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"ray.address={address!r}: cannot join the Ray cluster: {first}") from None
    return False


class RaySampler(GroupSampler):
    """`GroupSampler` whose draws run on Ray actors (module docstring)."""

    def __init__(self, cfg: TrainConfig, policy: Policy, device: torch.device) -> None:
        import ray

        algo, rollout = cfg.algo, cfg.rollout
        sampling = algo.dynamic_sampling
        super().__init__(None, cfg.seed, algo.groups_per_iter, algo.group_size, device,  # type: ignore[arg-type]
                         cfg.env.outcome == "final_step", tuple(sampling.keep_range) if sampling.enabled else None,
                         sampling.max_rounds, rollout.split, None, algo.noise_correlation,
                         algo.train_horizon, start_replay(algo))  # fmt: skip
        self.cfg = cfg
        self.started_ray = connect(cfg.ray.address)
        self._check_cpus(rollout.workers, rollout.cpus_per_worker, algo.groups_per_iter)
        # contiguous slices of whole groups (a group's members share one env: clone starts need it)
        groups = np.array_split(np.arange(self.n_groups), min(rollout.workers, self.n_groups))
        self.slices = [(int(g[0]) * self.group_size, (int(g[-1]) + 1) * self.group_size) for g in groups]
        self.total = self.n_groups * self.group_size
        spec = {"type": policy.type, "obs_dim": policy.obs_dim, "action_dim": policy.action_dim,
                "kwargs": policy.init_kwargs(), "modules": [type(policy).__module__, *cfg.plugins]}  # fmt: skip
        threads = max(1, int(rollout.cpus_per_worker))
        # a slice of a few rows takes other BLAS kernels than the whole batch: pad its policy calls
        # to as many rows as give the local backend's rows (on CPU; a GPU learner differs anyway)
        self.rows = [exact_rows(policy, self.total, a, b, threads) if device.type == "cpu" else None
                     for a, b in self.slices]  # fmt: skip
        actor = ray.remote(RolloutWorker).options(num_cpus=rollout.cpus_per_worker,
                                                  max_restarts=rollout.max_restarts, max_task_retries=0)  # fmt: skip
        env, paths = env_config_dict(cfg.env), [os.getcwd(), *(p for p in sys.path if p)]
        parts = (rollout.parallel_parts, rollout.take_turns)
        self.workers = [actor.remote(env, b - a, spec, threads, self.final_step_outcome, paths, rollout.split, parts,
                                     rows) for (a, b), rows in zip(self.slices, self.rows, strict=True)]  # fmt: skip
        self.failures = 0
        self.timing: dict[str, float] = {}
        start_up = max(rollout.worker_timeout_s, START_UP_S)  # imports and the env's construction
        try:
            self.pids = ray.get([w.pid.remote() for w in self.workers], timeout=start_up)
            self.nodes = ray.get([w.node.remote() for w in self.workers], timeout=start_up)
            theirs = ray.get([w.versions.remote() for w in self.workers], timeout=start_up)
        except Exception as err:  # noqa: BLE001  (a worker that cannot build its env)
            self.close()
            raise ValueError(f"rollout.backend=ray: a worker could not start: {_one_line(err)}") from None
        for k, other in enumerate(theirs):
            error, warning = version_difference(versions(), other, f"rollout worker {k} (node {self.nodes[k][:8]})")
            if error:
                self.close()
                raise ValueError(f"rollout.backend=ray: {error}")
            if warning:
                log.warning("%s", warning)

    def _check_cpus(self, workers: int, cpus_per_worker: float, groups: int) -> None:
        """Workers that this Ray's CPUs cannot all hold would wait for them until the start-up
        timeout, then fail as workers that could not start: a one-line `ConfigError` at once for a
        local Ray (`ray.address=null`); a cluster may grow (an autoscaler), so there it is a warning."""
        import ray

        workers = min(workers, groups)
        have = float(ray.cluster_resources().get("CPU", 0.0))
        if workers * cpus_per_worker <= have + 1e-9:
            return
        local = self.cfg.ray.address is None
        message = (f"rollout.workers={workers} x rollout.cpus_per_worker={cpus_per_worker:g} needs "
                   f"{workers * cpus_per_worker:g} CPUs, and {'the local Ray' if local else 'the cluster'} has "
                   f"{have:g}; fewer workers or fewer CPUs each (a fraction shares a core)")  # fmt: skip
        if local:
            self.close()
            raise ConfigError(message)
        log.warning("%s: the workers wait until the cluster has them", message)

    def worker_pids(self) -> list[int]:
        """The process id of each worker (as of the last draw)."""
        return list(self.pids)

    def draw(self, policy: Policy, it: int, round_: int = 0) -> Batch:
        import ray

        # a worker's slice lost with its process or its node: restart it, collect the slice again
        lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError,
                ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError)  # fmt: skip

        groups = self.group_starts(it, round_)
        seeds = group_seeds(groups, self.group_size)
        weights = ray.put({k: v.detach().cpu() for k, v in policy.state_dict().items()})  # once per draw

        def submit(k: int):
            a, b = self.slices[k]
            return self.workers[k].collect.remote(weights, self.run_seed, it, round_, seeds[a:b], a, self.total,
                                                  self.noise_correlation, self.max_steps, self.difficulty)

        t0 = time.perf_counter()
        pending = {submit(k): (k, time.perf_counter()) for k in range(len(self.workers))}
        results: dict[int, tuple[Batch, float]] = {}
        timeout = self.cfg.rollout.worker_timeout_s
        while pending:
            deadline = min(started for _, started in pending.values()) + timeout
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, deadline - time.perf_counter()))
            if not ready:  # the oldest pending slice is past its time: that worker hangs
                ref = min(pending, key=lambda r: pending[r][1])
                k, _ = pending.pop(ref)
                ray.kill(self.workers[k], no_restart=False)  # Ray restarts it
                self._failed(k, it, f"no answer within rollout.worker_timeout_s={timeout:g} s")
                pending[submit(k)] = (k, time.perf_counter())
                continue
            ref = ready[0]
            k, _ = pending.pop(ref)
            try:
                results[k] = ray.get(ref)
            except lost as err:
                self._failed(k, it, _one_line(err))
                pending[submit(k)] = (k, time.perf_counter())  # the same seeds and streams again
            except ray.exceptions.RayTaskError as err:  # the rollout raised there (every world failed, say): as it
                cause = getattr(err, "cause", None)  # raises here, its own one line, not Ray's remote traceback
                if isinstance(cause, Exception):
                    raise cause from None
                raise RolloutError(f"rollout worker {k} failed at iteration {it}: {_one_line(err)}") from None
        wall = time.perf_counter() - t0
        parts = [results[k][0] for k in range(len(self.workers))]
        seconds = [results[k][1] for k in range(len(self.workers))]
        self.timing = {f"charts/worker{k}_env_steps_per_s": p.simulated_steps / max(s, 1e-9)
                       for k, (p, s) in enumerate(zip(parts, seconds, strict=True))}  # fmt: skip
        self.timing["time/worker_wait_s"] = wall - min(seconds)  # waiting beyond the fastest worker
        return self.recorded(groups, _to(Batch.concat(parts), self.device))

    def sample(self, policy: Policy, it: int) -> tuple[Batch, dict[str, float]]:
        batch, metrics = super().sample(policy, it)
        return batch, {**metrics, **self.timing}

    def _failed(self, k: int, it: int, why: str) -> None:
        import ray

        self.failures += 1
        limit = self.cfg.rollout.max_restarts
        if self.failures > limit:
            raise RolloutError(f"rollout worker {k} failed at iteration {it} ({why}); that is {self.failures} worker "
                               f"failures in this run, more than rollout.max_restarts={limit}")  # fmt: skip
        wait = max(self.cfg.rollout.worker_timeout_s, START_UP_S)  # a restart builds the env again
        deadline = time.perf_counter() + wait
        while True:  # until the restarted process answers (Ray rebuilds the actor, env included)
            try:
                self.pids[k] = ray.get(self.workers[k].pid.remote(), timeout=max(0.1, deadline - time.perf_counter()))
                return
            except ray.exceptions.ActorUnavailableError:
                if time.perf_counter() > deadline:
                    break
                time.sleep(0.1)  # still restarting
            except Exception as err:  # noqa: BLE001
                raise RolloutError(f"rollout worker {k} failed at iteration {it} ({why}) and did not come back: "
                                   f"{_one_line(err)}") from None  # fmt: skip
        raise RolloutError(f"rollout worker {k} failed at iteration {it} ({why}) and was not back within "
                           f"{wait:g} s")  # fmt: skip

    def close(self) -> None:
        """End the workers, and the local Ray this sampler started."""
        import ray

        for worker in getattr(self, "workers", []):
            try:
                ray.kill(worker, no_restart=True)
            except Exception:  # noqa: BLE001  (already gone)
                pass
        self.workers = []
        if self.started_ray and ray.is_initialized():
            ray.shutdown()
        self.started_ray = False


def versions() -> dict[str, str]:
    """What a rollout depends on, by version: this package, Python and the libraries that compute
    the batch (physics, sampling)."""
    import mujoco

    import grpo_robot

    return {"grpo_robot": grpo_robot.__version__, "python": ".".join(map(str, sys.version_info[:2])),
            "torch": torch.__version__, "numpy": np.__version__, "mujoco": mujoco.__version__}  # fmt: skip


def version_difference(mine: dict[str, str], theirs: dict[str, str], who: str) -> tuple[str | None, str | None]:
    """(an error, a warning) for a worker whose versions differ from the learner's: another
    grpo_robot is an error (its rollout may not be this one's); another Python, torch, numpy or
    MuJoCo a warning, since the batches then differ from the local backend's (physics, sampling)."""
    if theirs.get("grpo_robot") != mine["grpo_robot"]:
        return (f"{who} runs grpo_robot {theirs.get('grpo_robot')}, this process {mine['grpo_robot']}; install "
                f"the same version on every node"), None  # fmt: skip
    differ = [f"{name} {theirs.get(name)} (here {mine[name]})" for name in mine if theirs.get(name) != mine[name]]
    if not differ:
        return None, None
    return None, (f"{who} runs {', '.join(differ)}: its batches may differ from what the local backend would "
                  f"collect")  # fmt: skip


def _to(batch: Batch, device: torch.device) -> Batch:
    if device.type == "cpu":
        return batch
    return Batch(batch.obs.to(device), batch.raw.to(device), batch.logp.to(device), batch.mask.to(device),
                 batch.success.to(device), batch.failed.to(device), batch.simulated_steps)  # fmt: skip


def _one_line(err: BaseException) -> str:
    """A Ray error (a remote traceback inside) as one line: the remote exception's own line when
    there is one."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    causes = [line.strip() for line in text.splitlines() if re.match(r"^\s*[\w.]+(Error|Exception|Exit): ", line)]
    if causes:
        return causes[-1][:300]
    return f"{type(err).__name__}: {' '.join(text.split())[:300]}"
