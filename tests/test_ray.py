"""`rollout.backend=ray`: the same parameters as the local backend for any worker count, workers
that die or hang are replaced without changing the result, and Ray is shut down after a run.
The in-process tests share one local Ray (started once for this module)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_harness import run_main
from test_train import small_config

from grpo_robot.config import ConfigError, CurriculumConfig, EnvConfig, RolloutConfig, StartReplayConfig
from grpo_robot.hooks import Hook
from grpo_robot.seeding import WorldRows, iteration_generator
from grpo_robot.trainer import Trainer

ray = pytest.importorskip("ray")  # the `ray` extra, which the README's test install includes
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    if started:
        ray.shutdown()


def train(cfg, run_dir: Path, hooks=()) -> tuple[dict[str, torch.Tensor], dict, Trainer]:
    trainer = Trainer(cfg, run_dir, hooks=hooks)
    try:
        summary = trainer.run()
    finally:
        trainer.close()
    return {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}, summary, trainer


def on(cfg, backend: str, workers: int = 1, **rollout):
    return replace(cfg, rollout=RolloutConfig(backend=backend, workers=workers, **rollout))


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_world_rows_draw_what_the_whole_batch_draws():
    whole = torch.randn((10, 3), generator=iteration_generator(0, 5, "cpu"))
    parts = [WorldRows(iteration_generator(0, 5, "cpu"), a, b, 10).randn((b - a, 3)) for a, b in ((0, 4), (4, 10))]
    assert torch.equal(torch.cat(parts), whole)
    with pytest.raises(ValueError, match="rows 4:11 of 10 worlds"):
        WorldRows(iteration_generator(0, 5, "cpu"), 4, 11, 10)


class Scalars(Hook):
    def __init__(self) -> None:
        self.logged: dict[str, float] = {}

    def on_log(self, trainer, scalars, step):
        self.logged.update(scalars)


# one worker (its slice the whole batch) is the resume test's first run too: with -m slow only (the 10-minute budget)
@pytest.mark.parametrize("workers, train_horizon, replay, groups",
                         [pytest.param(1, None, 0.0, (16, 8), marks=pytest.mark.slow), (2, None, 0.5, (16, 8)),
                          (3, 12, 0.0, (2, 2))])  # fmt: skip
def test_ray_gives_the_local_parameters_on_a_built_in_task(local_ray, tmp_path, workers, train_horizon, replay,
                                                          groups):  # fmt: skip
    """With a training horizon too (algo.train_horizon): each worker cuts its rollouts where the
    local sampler does; and with replayed starts (algo.start_replay), drawn where the local run draws them.
    2 groups of 2 give each worker 2 rows, which BLAS computes with other kernels than the whole
    batch's 4 on the CPUs measured here: the workers pad their policy calls (rollout.exact_rows).
    3 workers asked for 2 groups: one per group, the third never started."""
    cfg = small_config(iterations=3 if replay else 2)
    cfg = replace(cfg, algo=replace(cfg.algo, train_horizon=train_horizon, groups_per_iter=groups[0],
                                    group_size=groups[1], start_replay=StartReplayConfig(fraction=replay)))  # fmt: skip
    local, summary, local_trainer = train(on(cfg, "local"), tmp_path / "local")
    if train_horizon is not None:  # the cut took effect: no training world ran past it
        assert summary["env_steps"] <= cfg.iterations * cfg.algo.group_size * cfg.algo.groups_per_iter * train_horizon
    seen = Scalars()
    remote, remote_summary, trainer = train(on(cfg, "ray", workers), tmp_path / "ray", hooks=[seen])
    assert same(local, remote) and summary["env_steps"] == remote_summary["env_steps"]
    workers = min(workers, groups[0])
    assert len(trainer.sampler.slices) == workers
    if replay:  # the last iteration started groups from the buffer, the same seeds on both backends
        assert seen.logged["charts/replayed_groups"] > 0
        assert np.array_equal(trainer.sampler.last_groups, local_trainer.sampler.last_groups)
    rates = [seen.logged[f"charts/worker{k}_env_steps_per_s"] for k in range(workers)]  # TensorBoard's scalars
    assert all(rate > 100 for rate in rates) and 0 <= seen.logged["time/worker_wait_s"] < 60


def test_a_plugin_policy_with_an_argument_of_its_own_gives_the_local_parameters_on_ray(local_ray, tmp_path, plugin):
    """Each worker imports the run's plugins and builds the class from the arguments its record
    holds (`policy.options`: width=2 doubles the hidden layers)."""
    cfg = small_config(iterations=2, plugins=[plugin], eval_seeds=4)
    cfg = replace(cfg, policy=replace(cfg.policy, type="wide_gaussian", hidden_sizes=[16], options={"width": 2}),
                  algo=replace(cfg.algo, groups_per_iter=2, group_size=2, train_horizon=12))  # fmt: skip
    local, *_ = train(on(cfg, "local"), tmp_path / "local")
    remote, *_ = train(on(cfg, "ray", 2), tmp_path / "ray")
    assert local["trunk.0.weight"].shape[0] == 32 and same(local, remote)


def test_ray_workers_act_in_the_mirror_frame(local_ray, tmp_path):
    """policy.mirror: each worker rebuilds the policy from its record, axes included, so its
    rollouts (and the learner's statistics of them) are the local run's; without the mirror they
    are not."""
    cfg = small_config(iterations=2, eval_seeds=4)
    cfg = replace(cfg, policy=replace(cfg.policy, hidden_sizes=[16], mirror=True),
                  algo=replace(cfg.algo, groups_per_iter=2, group_size=2, train_horizon=12))  # fmt: skip
    local, *_ = train(on(cfg, "local"), tmp_path / "local")
    remote, _, trainer = train(on(cfg, "ray", 2), tmp_path / "ray")
    assert same(local, remote) and trainer.policy.mirror is not None
    plain, *_ = train(on(replace(cfg, policy=replace(cfg.policy, mirror=False)), "local"), tmp_path / "plain")
    assert not same(plain, remote)


def test_ray_workers_reset_at_the_curriculum_difficulty(local_ray, tmp_path):
    """algo.curriculum: the workers draw the learner's easier starts (the goal's distance is in every
    observation, so starts drawn at another difficulty would give other parameters)."""
    cfg = small_config(iterations=1, env=EnvConfig(task="PushCube"))
    cfg = replace(cfg, algo=replace(cfg.algo, curriculum=CurriculumConfig(start=0.3)))
    local, *_ = train(on(cfg, "local"), tmp_path / "local")
    remote, _, trainer = train(on(cfg, "ray", 2), tmp_path / "ray")
    assert same(local, remote) and trainer.sampler.difficulty == 0.3
    task_own = replace(cfg, algo=replace(cfg.algo, curriculum=CurriculumConfig()))
    full, *_ = train(on(task_own, "local"), tmp_path / "full")
    assert not same(full, remote)


def test_ray_gives_the_local_parameters_on_a_gymnasium_env_and_the_tokenized_policy(local_ray, tmp_path):
    """With time-correlated noise too (algo.noise_correlation): each worker's rows of the whole draw."""
    import toy_envs  # noqa: F401  (PointReach)

    cfg = small_config(iterations=2, env=EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=20))
    cfg = replace(cfg, policy=replace(cfg.policy, type="tokenized", bins=16), eval_seeds=8,
                  algo=replace(cfg.algo, groups_per_iter=4, group_size=4, noise_correlation=0.8))  # fmt: skip
    local, *_ = train(on(cfg, "local"), tmp_path / "local")
    remote, *_ = train(on(cfg, "ray", 2), tmp_path / "ray")  # one worker: the resume test's first run
    assert same(local, remote)


class KillWorker(Hook):
    """SIGKILLs rollout worker 0's process `delay` s into the rollout after iteration `at`."""

    def __init__(self, at: int, delay: float) -> None:
        self.at, self.delay, self.killed = at, delay, None

    def after_iteration(self, trainer, record):
        if record.iteration == self.at:
            self.killed = trainer.sampler.worker_pids()[0]
            threading.Timer(self.delay, os.kill, (self.killed, signal.SIGKILL)).start()


class LoseResult(Hook):
    """After iteration `at`, the next slice result fetched raises `error` (a node lost with it)."""

    def __init__(self, at: int, error: Exception, monkeypatch) -> None:
        import ray

        self.at, self.error, self.armed, self.lost = at, error, False, 0
        real = ray.get

        def get(refs, *args, **kwargs):
            if self.armed and not isinstance(refs, list):  # the draw's fetch of one slice's batch
                self.armed, self.lost = False, self.lost + 1
                raise self.error
            return real(refs, *args, **kwargs)

        monkeypatch.setattr(ray, "get", get)

    def after_iteration(self, trainer, record):
        self.armed = self.armed or record.iteration == self.at


def test_a_killed_worker_or_a_lost_result_is_replaced_and_the_result_is_unchanged(local_ray, tmp_path, monkeypatch):
    import ray

    cfg = small_config(iterations=4)
    undisturbed, *_ = train(on(cfg, "local"), tmp_path / "undisturbed")  # what Ray gives undisturbed (above)
    kill = KillWorker(at=1, delay=0.05)
    lose = LoseResult(2, ray.exceptions.ObjectLostError("00" * 28, None, "draw"), monkeypatch)
    disturbed, summary, trainer = train(on(cfg, "ray", 2), tmp_path / "disturbed", hooks=[kill, lose])
    assert (trainer.sampler.failures, lose.lost, summary["stopped"]) == (2, 1, "iterations")
    assert same(undisturbed, disturbed)


def test_a_worker_on_another_version_is_refused_and_other_libraries_warned_of():
    from grpo_robot.ray_rollout import version_difference, versions

    mine = versions()
    assert set(mine) == {"grpo_robot", "python", "torch", "numpy", "mujoco"} and all(mine.values())
    assert version_difference(mine, dict(mine), "worker 0") == (None, None)
    error, warning = version_difference(mine, {**mine, "grpo_robot": "0.0.9"}, "rollout worker 1 (node ab12cd34)")
    assert warning is None and error == (f"rollout worker 1 (node ab12cd34) runs grpo_robot 0.0.9, this process "
                                         f"{mine['grpo_robot']}; install the same version on every node")  # fmt: skip
    error, warning = version_difference(mine, {**mine, "mujoco": "3.3.7"}, "worker 0")
    assert error is None and warning == (f"worker 0 runs mujoco 3.3.7 (here {mine['mujoco']}): its batches may "
                                         f"differ from what the local backend would collect")  # fmt: skip


def test_a_worker_that_keeps_hanging_stops_the_run_with_its_last_iteration(local_ray, tmp_path):
    import toy_envs

    toy_envs.Breaks.calls = 0  # this process's count (other tests step Breaks here too): its eval env must not hang
    # 4 worlds x 10 steps per iteration; each worker process hangs at its 100th step call
    env = EnvConfig(task=None, entry_point="toy_envs:Breaks", horizon=10, kwargs={"after": 100})
    cfg = small_config(iterations=50, env=env, checkpoint_every=100, eval_seeds=4)
    cfg = replace(cfg, algo=replace(cfg.algo, groups_per_iter=2, group_size=2, minibatches=1))
    cfg = on(cfg, "ray", 1, worker_timeout_s=1.0, max_restarts=1)
    _, summary, trainer = train(cfg, tmp_path)
    assert summary["stopped"] == "error" and trainer.sampler.failures == 2, summary["error"]
    assert summary["error"].startswith("rollout worker 0 failed at iteration ")
    assert "more than rollout.max_restarts=1" in summary["error"]
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert saved["iteration"] == summary["iterations"] >= 1


def test_an_error_raised_in_a_worker_ends_the_run_in_its_own_one_line(local_ray, tmp_path):
    # every world of the worker fails from its 61st step call (the probe and the seeding check at build make 13,
    # an iteration 40): EnvFailure in iteration 2, which used to reach the
    # run wrapped in Ray's RayTaskError, its remote traceback as the "one-line" error
    env = EnvConfig(task=None, entry_point="toy_envs:Breaks", horizon=10, kwargs={"after": 60, "how": "non_finite"})
    cfg = small_config(iterations=5, env=env, eval_seeds=4)
    cfg = on(replace(cfg, algo=replace(cfg.algo, groups_per_iter=2, group_size=2, minibatches=1)), "ray", 1)
    _, summary, trainer = train(cfg, tmp_path)
    assert summary["stopped"] == "error" and "\n" not in summary["error"], summary["error"]
    assert re.match(r"toy_envs:Breaks: every one of the 4 worlds failed( to reset)?; first error: world \d "
                    r"\(seed \d+\) (reset|step \d+): non-finite observation$", summary["error"]), summary["error"]
    assert summary["iterations"] >= 1 and trainer.sampler.failures == 0


def test_more_workers_than_a_local_rays_cpus_is_one_line_at_once(local_ray, tmp_path):
    # they used to wait for CPUs until the start-up timeout (300 s), then fail as workers that could not start
    cfg = on(small_config(iterations=1), "ray", 2, cpus_per_worker=1.5)  # 3 CPUs of the 2 this Ray has
    with pytest.raises(ConfigError, match=r"^rollout.workers=2 x rollout.cpus_per_worker=1.5 needs 3 CPUs, and the "
                                          r"local Ray has 2; fewer workers or fewer CPUs each"):  # fmt: skip
        Trainer(cfg, tmp_path)


def test_a_bad_ray_address_is_one_line_before_any_work(tmp_path):
    out = run_main("train", "rollout.backend=ray", "ray.address=127.0.0.1:1", "iterations=1", "progress=false",
                   f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert out.code == 2 and len(out.error_lines) == 1
    assert out.error_lines[0].startswith("error: ray.address='127.0.0.1:1': no Ray cluster answers there")
    assert not (tmp_path / "run" / "checkpoints").exists()
    bad = run_main("train", "rollout.backend=ray", "ray.address=nowhere", f"hydra.run.dir={tmp_path / 'run2'}")
    assert bad.code == 2 and bad.error_lines[0].startswith("error: ray.address='nowhere' is invalid")
    # a port that takes connections but is not Ray's (an HTTP server, as the dashboard's 8265 is): ray.init waited
    # on it, printing GCS time-outs, for minutes
    import http.server
    import threading
    import time

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        start = time.perf_counter()
        port = server.server_address[1]
        web = run_main("train", "rollout.backend=ray", f"ray.address=127.0.0.1:{port}", "iterations=1",
                       f"hydra.run.dir={tmp_path / 'run3'}")  # fmt: skip
        assert time.perf_counter() - start < 15 and web.code == 2 and len(web.error_lines) == 1, web.stderr
        assert web.error_lines[0].startswith(f"error: ray.address='127.0.0.1:{port}': no Ray cluster answers there "
                                             "(the port takes connections but does not answer as Ray does (gRPC)")
    finally:
        server.shutdown()
        server.server_close()


def ray_processes() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "raylet|gcs_server"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}


def test_ray_is_shut_down_after_a_run_and_after_an_error(tmp_path):
    """Two training processes side by side, each starting its own local Ray: one ends normally,
    one when its only worker keeps failing. Neither leaves a Ray process behind."""
    before = ray_processes()
    procs = {}
    for fails in (False, True):
        extra = ["env=gym", "env.entry_point=toy_envs:Breaks", "env.horizon=10", "+env.kwargs.after=100",
                 "rollout.worker_timeout_s=1", "rollout.max_restarts=0"] if fails else []  # fmt: skip
        run_dir = tmp_path / str(fails)
        procs[fails] = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "train.py"), "rollout.backend=ray",
                                         "rollout.workers=1", "rollout.cpus_per_worker=0.5",
                                         f"iterations={5 if fails else 2}", "algo.groups_per_iter=4",
                                         "algo.group_size=2", "eval_seeds=4", "progress=false",
                                         f"hydra.run.dir={run_dir}", *extra],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})  # fmt: skip
    try:
        for fails, proc in procs.items():
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == (1 if fails else 0), (fails, err[-3000:])
            summary = json.loads((tmp_path / str(fails) / "summary.json").read_text())
            assert summary["stopped"] == ("error" if fails else "iterations"), fails
    finally:  # a failed check or a timeout leaves no training process behind
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert ray_processes() <= before  # the local Rays the runs started are gone


def test_a_ray_run_resumes_exactly_on_either_backend(local_ray, tmp_path):
    cfg = small_config(iterations=3)
    straight, *_ = train(on(cfg, "local"), tmp_path / "straight")
    train(on(replace(cfg, iterations=1), "ray", 1), tmp_path / "first")  # resumed on two workers, or none
    for backend in ("local", "ray"):
        resumed, summary, _ = train(replace(on(cfg, backend, 2), resume=str(tmp_path / "first")), tmp_path / backend)
        assert same(straight, resumed) and summary["iterations"] == 3, backend


def test_workers_step_their_parts_as_the_local_env_does():
    """rollout.parallel_parts and take_turns reach the workers' envs (they kept the env's defaults)."""
    from grpo_robot.config import env_config_dict
    from grpo_robot.ray_rollout import RolloutWorker

    spec = {"type": "gaussian", "obs_dim": 10, "action_dim": 4, "kwargs": {"hidden_sizes": [8]}}
    for parts in [(False, False), (True, True)]:
        worker = RolloutWorker(env_config_dict(EnvConfig(task="Reach")), 8, spec, 1, False, [], 2, parts)
        assert (worker.env.parallel_parts, worker.env.take_turns) == parts
        worker.env.close()


def test_the_ray_backend_without_ray_installed_is_one_line_before_any_work(monkeypatch):
    import importlib.util

    from grpo_robot.config import validate

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ConfigError, match=r"^rollout.backend='ray' is invalid: ray needs the ray package: pip install"):
        validate(on(small_config(), "ray", workers=2))  # it was a ModuleNotFoundError traceback, after the envs
