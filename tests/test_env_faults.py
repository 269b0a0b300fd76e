"""Envs that misbehave (tests/toy_envs.py) neither hang nor crash a run: a raising probe step is
retried, worlds that raise fail alone, hung worlds are killed and replaced (async) or end the run
with one line (sync), a batch in which every world failed is one `EnvFailure`, and an env that
ignores its seed is refused by the CLI in one line."""

import json
import logging
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import toy_envs
from cli_harness import run_main
from test_train import ROOT

from grpo_robot.config import AlgoConfig, EnvConfig, TrainConfig
from grpo_robot.gym_vector import EnvFailure, GymGroupEnv, start_method
from grpo_robot.hooks import Hook
from grpo_robot.trainer import Trainer

TINY = ["algo=grpo", "iterations=1", "eval_seeds=4", "algo.groups_per_iter=2", "algo.group_size=2", "progress=false"]


def toy(cls: str, **kw) -> EnvConfig:
    return EnvConfig(task=None, entry_point=f"toy_envs:{cls}", horizon=kw.pop("horizon", 10), **kw)


def run_episode(env: GymGroupEnv, seeds) -> np.ndarray:
    obs = env.reset(seeds)
    while not env.done.all():
        obs, *_ = env.step(np.zeros((env.num_worlds, 2)))
    return obs


def descendants() -> dict[int, str]:
    """This process's descendants -> their state (`Z`: a zombie), read from /proc. The async
    backend's workers are children of its fork server, itself a child of this process, which is
    started first, so that a count before a test and one after it both hold it."""
    if start_method() == "forkserver":  # (which also sets what the fork server preloads)
        multiprocessing.forkserver.ensure_running()
    stats = {int(entry): stat for entry in os.listdir("/proc") if entry.isdigit() and (stat := proc_stat(int(entry)))}
    found, frontier = {}, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        for child in [c for c, (_, parent) in stats.items() if parent == pid]:
            found[child] = stats[child][0]
            frontier.append(child)
    return found


def proc_stat(pid: int) -> tuple[str, int] | None:
    """`(state, parent pid)` of process `pid` from /proc (state `Z`: a zombie), or None if there
    is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def test_a_step_that_raises_on_a_fresh_env_passes_the_probe_and_fails_only_those_worlds(caplog):
    warmed = GymGroupEnv(toy("RaisesOnFirstStep"), 4)  # the seeding check's steps at build have warmed them up
    try:
        run_episode(warmed, [5, 6, 7, 8])
        assert not warmed.failed.any()
    finally:
        warmed.close()
    with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):  # no check: fresh worlds at the first step
        env = GymGroupEnv(toy("RaisesOnFirstStep", check_seeding=False), 4)  # the probe's first episode raises
    assert "its step raised in the probe episode from seed 0 (RuntimeError: not warmed up) but not from seed 1" in (
        caplog.text
    )
    try:
        env.reset([5, 6, 7, 8])
        _, _, _, _, info = env.step(np.zeros((4, 2)))
        # world 0 is the probed env, already warmed up; worlds 1-3 are fresh: their first step raised
        assert env.failed.tolist() == [False, True, True, True] and info["n_failed"] == 3
        assert env.steps.tolist() == [1, 1, 1, 1] and env.done.tolist() == [False, True, True, True]
        run_episode(env, [5, 6, 7, 8])  # the next episode: nothing raises
        assert not env.failed.any() and env.steps.tolist() == [10] * 4
    finally:
        env.close()


@pytest.mark.parametrize("call", ["step", "reset"])
def test_an_env_that_always_raises_is_refused_in_one_line(call):
    with pytest.raises(ValueError) as info:
        GymGroupEnv(toy("AlwaysRaises", kwargs={"call": call}), 2)
    assert str(info.value) == f"toy_envs:AlwaysRaises: {call} raised on each of 3 probe episodes: RuntimeError: boom"


def test_the_cli_refuses_an_env_that_always_raises_in_one_line(tmp_path):
    out = run_main("train", "env=gym", "env.entry_point=tests.toy_envs:AlwaysRaises", "env.horizon=10",
                   f"hydra.run.dir={tmp_path}", *TINY)  # fmt: skip
    assert out.code == 2
    assert out.error_lines == [
        "error: tests.toy_envs:AlwaysRaises: step raised on each of 3 probe episodes: RuntimeError: boom"
    ]


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_worlds_that_raise_at_random_steps_fail_alone_and_the_others_run_on(vector, caplog):
    p, horizon, seeds = 0.05, 20, list(range(100, 108))
    expected = [toy_envs.crash_step(s, p, horizon) for s in seeds]  # the same env, stepped here
    crashed = np.array([t is not None for t in expected])
    assert 0 < crashed.sum() < len(seeds)  # the seeds give a mixed batch
    env = GymGroupEnv(toy("RaisesAtRandom", horizon=horizon, vector=vector, kwargs={"p": p, "tolerance": 0.0}), 8)
    try:
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            run_episode(env, seeds)
        assert env.failed.tolist() == crashed.tolist()
        assert env.steps.tolist() == [horizon if t is None else t for t in expected]
        first = int(np.flatnonzero(crashed)[0])
        assert (f"world {first} (seed {seeds[first]}) failed and was ended at step {expected[first]}: RuntimeError: "
                f"random crash at step {expected[first]}") in caplog.text  # fmt: skip
        run_episode(env, seeds)  # the same seeds, the same worlds fail
        assert env.failed.tolist() == crashed.tolist()
    finally:
        env.close()


def test_training_runs_on_when_some_worlds_raise(tmp_path):
    class Failures(Hook):
        seen: list[float] = []

        def on_log(self, trainer, scalars, step):
            if "charts/failed_worlds" in scalars:
                self.seen.append(scalars["charts/failed_worlds"])

    algo = AlgoConfig(group_size=4, groups_per_iter=4, minibatches=1)
    env = toy("RaisesAtRandom", horizon=20, kwargs={"p": 0.05, "tolerance": 0.0})
    cfg = TrainConfig(env=env, iterations=2, eval_seeds=4, progress=False, algo=algo)
    trainer = Trainer(cfg, tmp_path, hooks=[Failures()])
    try:
        summary = trainer.run()
    finally:
        trainer.close()
    assert summary["iterations"] == 2
    assert len(Failures.seen) == 2 and all(0 < f < 1 for f in Failures.seen), Failures.seen
    # the evaluations count the episodes a crash ended (as failures), and say so: they were scored
    # as the policy's failures without a word
    from grpo_robot.seeding import eval_seeds

    record = json.loads((tmp_path / "eval.json").read_text())
    crashed = [toy_envs.crash_step(int(s), 0.05, 20) is not None for s in eval_seeds(4)]
    assert [e["env_failure"] for e in record["episodes"]] == crashed and record["env_failures"] == sum(crashed) > 0
    assert {k: record[k] for k in ("task", "seeds", "first_seed", "deterministic", "outcome", "horizon", "seeded",
                                   "iteration")} == {  # fmt: skip
        "task": "toy_envs:RaisesAtRandom", "seeds": "validation", "first_seed": int(eval_seeds(1)[0]),
        "deterministic": True, "outcome": "any_step", "horizon": 20, "seeded": True, "iteration": 2}
    out = run_main("evaluate", f"checkpoint={tmp_path}", "n_seeds=12")
    test_crashed = sum(toy_envs.crash_step(int(s), 0.05, 20) is not None for s in eval_seeds(12, "test"))
    assert out.code == 0 and f"success 0.0% [0.0%, 24.2%] (95% Wilson, n=12); {test_crashed} of the 12 episodes " \
        "ended by an env failure, counted as failures" in out.stdout and test_crashed > 0, out.stdout  # fmt: skip


def test_a_hung_step_in_async_fails_that_world_only_and_its_replacement_works(caplog):
    before = set(descendants())
    env = GymGroupEnv(toy("Hangs", vector="async", step_timeout_s=1.0, kwargs={"seed": 5, "at": 3}), 4)
    try:
        pids = env.worker_pids()
        assert set(pids) <= set(descendants()) - before
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            run_episode(env, [6, 5, 7, 8])  # world 1 hangs in its step 3
        assert 0.9 < time.monotonic() - start < 5.0
        assert env.failed.tolist() == [False, True, False, False]
        assert env.steps.tolist() == [10, 3, 10, 10]  # the others finished their episodes
        assert ("toy_envs:Hangs: world 1 (seed 5) failed and was ended at step 3: did not return within "
                "env.step_timeout_s=1 s; its process was killed and replaced") in caplog.text  # fmt: skip
        now = env.worker_pids()
        assert now[0] == pids[0] and now[2:] == pids[2:] and now[1] != pids[1]  # world 1's worker replaced
        assert pids[1] not in descendants()  # killed and reaped
        run_episode(env, [6, 9, 7, 8])  # the replacement runs world 1 at the next reset
        assert not env.failed.any() and env.steps.tolist() == [10] * 4
    finally:
        env.close()
    assert set(descendants()) <= before  # no worker left, no zombie


def test_a_replaced_worker_whose_env_cannot_be_built_again_fails_its_world_and_the_run_goes_on(caplog, tmp_path):
    """World 1's worker hangs and is replaced, and the replacement cannot build its env: the world
    fails at each later reset (its worker replaced again each time), the others run on, nothing
    raises (a crashing env never takes the run down)."""
    marker = str(tmp_path / "hung")
    cfg = toy("HangsThenCannotBeRebuilt", vector="async", step_timeout_s=1.0,
              kwargs={"seed": 5, "at": 3, "marker": marker})  # fmt: skip
    env = GymGroupEnv(cfg, 4)
    try:
        run_episode(env, [6, 5, 7, 8])  # world 1 hangs in its step 3
        assert env.failed.tolist() == [False, True, False, False]
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            for _ in range(2):
                run_episode(env, [6, 9, 7, 8])
                assert env.failed.tolist() == [False, True, False, False]
                assert env.steps.tolist() == [10, 0, 10, 10]
        assert caplog.text.count("world 1 (seed 9) failed and was ended at reset: its worker could not build its "
                                 "env (RuntimeError: the robot is gone) and was replaced") == 2  # fmt: skip
    finally:
        env.close()


def test_a_hung_reset_in_async_fails_that_world_only(caplog):
    before = set(descendants())
    env = GymGroupEnv(toy("Hangs", vector="async", step_timeout_s=1.0, kwargs={"seed": 5, "at": 0}), 4)
    try:
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            obs = run_episode(env, [6, 7, 8, 5])  # world 3 hangs in its reset
        assert 0.9 < time.monotonic() - start < 5.0
        assert env.failed.tolist() == [False, False, False, True]
        assert env.steps.tolist() == [10, 10, 10, 0] and (obs[3] == 0).all()
        assert "world 3 (seed 5) failed and was ended at reset: did not return within env.step_timeout_s=1 s" in (
            caplog.text
        )
        run_episode(env, [6, 7, 8, 9])
        assert not env.failed.any() and env.steps.tolist() == [10] * 4
    finally:
        env.close()
    assert set(descendants()) <= before


@pytest.mark.parametrize("cls, why", [
    ("HangsWhenBuilt", r"world 0's worker did not build its env within env.step_timeout_s=1 s"),
    ("RaisesWhenBuilt", r"world 0's worker could not build its env: RuntimeError: no licence server in this worker"),
])  # fmt: skip
def test_an_async_world_that_cannot_be_built_is_one_line_and_leaves_no_worker(cls, why):
    """A world whose constructor hangs or raises in its worker, after the probe built it in this
    process: the pool does not wait for ever for it (gymnasium's own check of the workers' spaces
    would), but ends every worker and says which world, within env.step_timeout_s."""
    before = set(descendants())
    start = time.monotonic()
    with pytest.raises(ValueError, match=rf"^toy_envs:{cls}: {why}$"):
        GymGroupEnv(toy(cls, vector="async", step_timeout_s=1.0), 3)
    assert time.monotonic() - start < 8.0
    assert set(descendants()) <= before


def test_the_cli_stops_in_one_line_before_any_work_when_an_async_world_cannot_be_built(tmp_path):
    out = run_main("train", "env=gym", "env.entry_point=tests.toy_envs:RaisesWhenBuilt", "env.horizon=10",
                   "env.vector=async", f"hydra.run.dir={tmp_path}", *TINY)  # fmt: skip
    assert out.code == 2, out.stderr
    assert out.error_lines == ["error: tests.toy_envs:RaisesWhenBuilt: world 0's worker could not build its env: "
                               "RuntimeError: no licence server in this worker"], out.stderr  # fmt: skip
    assert not (tmp_path / "checkpoints").exists()


def test_no_async_worker_outlives_a_killed_main_process_not_even_one_in_a_hung_call():
    """The main process is SIGKILLed while world 0's worker hangs in its reset (for an hour) and
    world 1's waits in its loop: both workers end within seconds (Linux: the kernel ends a worker
    whose parent, the fork server, ended with the main process)."""
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from grpo_robot.config import EnvConfig
        from grpo_robot.gym_vector import GymGroupEnv
        cfg = EnvConfig(task=None, entry_point="toy_envs:Hangs", horizon=10, vector="async", step_timeout_s=600,
                        check_seeding=False, kwargs={"seed": 5, "at": 0})
        env = GymGroupEnv(cfg, 2)
        print(*env.worker_pids(), flush=True)
        env.reset([5, 6])  # world 0 hangs in its reset
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests")], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)  # fmt: skip
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2, pids
        time.sleep(0.5)  # into the hung reset
        assert all(running(pid) for pid in pids)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10.0
    while (alive := [pid for pid in pids if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, f"workers {alive} outlived the killed main process"


def test_a_script_without_its_main_guard_gets_the_reason_not_a_broken_pipe(tmp_path):
    """Async workers start from the fork server, which imports the main script as spawn would: a
    script that builds an async env at import, outside `if __name__ == "__main__":`, starts it
    again in each worker, where multiprocessing refuses to start processes and says to add the
    guard. The main process then ends with its own line naming world 0, not a BrokenPipeError."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from grpo_robot.config import EnvConfig
        from grpo_robot.gym_vector import GymGroupEnv
        GymGroupEnv(EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=10, vector="async"), 2)
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == ("ValueError: toy_envs:PointReach: world 0's worker died (exit code "
                                                   "1) while building its env; its stderr says why")  # fmt: skip
    assert "if __name__ == '__main__':" in run.stderr and "BrokenPipeError" not in run.stderr


def test_async_workers_ignore_sigint_and_sigterm():
    before = set(descendants())
    env = GymGroupEnv(toy("PointReach", vector="async"), 2)
    try:
        for pid in env.worker_pids():
            os.kill(pid, signal.SIGINT)
            os.kill(pid, signal.SIGTERM)
        time.sleep(0.3)
        assert all(descendants().get(pid) not in (None, "Z") for pid in env.worker_pids())
        run_episode(env, [1, 2])
        assert not env.failed.any() and env.steps.tolist() == [10, 10]
    finally:
        env.close()  # ends them although they ignore SIGTERM
    assert set(descendants()) <= before


def test_an_async_step_interrupted_by_ctrl_c_leaves_the_worlds_usable():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    env = GymGroupEnv(toy("Hangs", vector="async", kwargs={"seed": -1, "delay": 0.6}), 2)  # a step takes 0.6 s
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        pids = env.worker_pids()
        env.reset([1, 2])
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            env.step(np.zeros((2, 2)))  # the answers come after the interrupt...
        start = time.monotonic()
        env.reset([3, 4])  # ...and are read and dropped before the next call
        assert 0.2 < time.monotonic() - start < 3.0
        assert env.worker_pids() == pids and not env.failed.any() and env.steps.tolist() == [0, 0]
        env.step(np.zeros((2, 2)))
        assert env.steps.tolist() == [1, 1] and not env.failed.any()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        env.close()


def test_a_hung_step_in_sync_ends_the_process_with_one_line(tmp_path):
    script = textwrap.dedent("""
        import dataclasses, sys, time
        import numpy as np
        from grpo_robot.config import EnvConfig
        from grpo_robot.gym_vector import GymGroupEnv

        # every call takes 0.4 s, a batch's 1.2 s: the 1 s limit holds for each world's call, not
        # for the batch (the limit was once armed per batch, and this ended in its first reset)
        cfg = EnvConfig(task=None, entry_point="toy_envs:Hangs", horizon=1, step_timeout_s=1.0,
                        kwargs={"seed": 5, "at": 3, "delay": 0.4, "reset_delay": 0.4})
        env = GymGroupEnv(cfg, 3)
        env.reset([6, 7, 8])
        env.step(np.zeros((3, 2)))
        env = GymGroupEnv(dataclasses.replace(cfg, horizon=10, kwargs={"seed": 5, "at": 3, "delay": 0.06}), 3)
        for seeds in ([6, 7, 8], [6, 5, 7]):  # 10 steps of 3 x 0.06 s, then world 1 hangs in step 3
            print("episode", time.monotonic(), flush=True)
            env.reset(seeds)
            while not env.done.all():
                env.step(np.zeros((3, 2)))
        print("not reached", flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    ended = time.monotonic()
    starts = [float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("episode")]
    assert out.returncode == 1, out.stderr
    assert len(starts) == 2 and "not reached" not in out.stdout  # the first episode, 1.8 s long, ran through
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: toy_envs:Hangs: world 1 (seed 5) did not return from step 3 within env.step_timeout_s=1 s; the world "
        "hangs (a hung call cannot be interrupted in this process; env.vector=async kills and replaces a hung world "
        "instead)"
    ]
    assert 1.0 + 0.36 < ended - starts[1] < 6.0  # two steps of 0.18 s, then the timeout (and the exit)


@pytest.mark.parametrize("in_array", [False, True])  # a nan inside a one-element array read as True too
def test_a_nan_success_flag_fails_its_world_instead_of_counting_as_a_success(in_array):
    env = GymGroupEnv(toy("NaNSuccess", kwargs={"at": 3, "tolerance": 0.0, "in_array": in_array}), 4)  # no success
    try:
        env.reset([2, 3, 4, 5])
        for _ in range(3):
            env.step(np.zeros((4, 2)))
        # bool(nan) is True: the even-seeded worlds' nan flags would have been successes
        np.testing.assert_array_equal(env.failed, [True, False, True, False])
        assert not env.terminated.any() and (env.steps == 3).all() and not env.done[[1, 3]].any()
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"^toy_envs:NaNSuccess: info\['is_success'\] \(env.success_key\) is not a "
                                         r"single truth value: ValueError: info\['is_success'\] is nan, not a success "
                                         r"flag$"):  # the probe's step, from seed 0
        GymGroupEnv(toy("NaNSuccess", kwargs={"at": 1}), 2)


def test_a_world_that_succeeds_as_it_breaks_has_failed_in_training_and_in_demos():
    """Success and a non-finite observation at one step: the world has failed, not succeeded,
    wherever it runs (a success read before the check would train on, or keep, a broken world)."""
    from grpo_robot.demos import collect_expert_demos

    env = GymGroupEnv(toy("SucceedsAsItBreaks"), 4)
    try:
        env.reset([10, 11, 12, 13])
        for _ in range(2):
            env.step(np.zeros((4, 2)))
        np.testing.assert_array_equal(env.failed, [True, False, True, False])
        np.testing.assert_array_equal(env.success, [False, True, False, True])
        np.testing.assert_array_equal(env.terminated, [False, True, False, True])
    finally:
        env.close()
    data, stats = collect_expert_demos(toy("SucceedsAsItBreaks"), "toy_envs:point_expert", 3, max_attempts=20)
    assert (data.seeds % 2 == 1).all() and stats.failed_physics == stats.attempted - 3 > 0, (data.seeds, stats)
    assert np.isfinite(data.obs).all() and (data.lengths == 2).all()


def test_every_world_failing_is_one_env_failure():
    env = GymGroupEnv(toy("NaNFrom", kwargs={"at": 1}), 4)
    try:
        env.reset([3, 4, 5, 6])
        with pytest.raises(EnvFailure) as info:
            env.step(np.zeros((4, 2)))
    finally:
        env.close()
    assert str(info.value) == ("toy_envs:NaNFrom: every one of the 4 worlds failed; first error: world 0 (seed 3) "
                               "step 1: non-finite observation")  # fmt: skip
    unchecked = GymGroupEnv(toy("NaNFrom", kwargs={"at": 0}, check_seeding=False), 2)  # nothing reset when built
    with pytest.raises(EnvFailure, match=r"^toy_envs:NaNFrom: every one of the 2 worlds failed to reset; first "
                                         r"error: world 0 \(seed 7\) reset: non-finite observation$"):  # fmt: skip
        unchecked.reset([7, 8])
    unchecked.close()
    with pytest.raises(ValueError, match=r"^toy_envs:NaNFrom: every one of the 2 worlds failed to reset;"):
        GymGroupEnv(toy("NaNFrom", kwargs={"at": 0}), 2)  # the seeding check resets them when the env is built


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_the_cli_refuses_an_env_that_ignores_its_seed_in_one_line(tmp_path, vector):
    before = set(descendants())
    out = run_main("train", "env=gym", "env.entry_point=tests.toy_envs:GlobalRandomReach", "env.horizon=10",
                   f"env.vector={vector}", f"hydra.run.dir={tmp_path}", *TINY)  # fmt: skip
    assert out.code == 2, out.stderr
    assert len(out.error_lines) == 1, out.stderr
    assert out.error_lines[0].startswith("error: tests.toy_envs:GlobalRandomReach ignores its reset seed: world")
    assert "env.group_start=clone" in out.error_lines[0]
    assert set(descendants()) <= before  # the async workers were ended


def test_a_hung_env_while_an_expert_records_demos_ends_in_one_line():
    """`env.step_timeout_s` bounds the expert's episodes too (it was ignored there: a hung env hung
    `collect_demos` and `pretrain=true` for good)."""
    script = textwrap.dedent("""
        from grpo_robot.config import EnvConfig
        from grpo_robot.demos import collect_expert_demos
        from grpo_robot.seeding import demo_seeds

        second = int(demo_seeds(0, 1, 1)[0])  # its episode runs 4 steps (the first ends after 1)
        cfg = EnvConfig(task=None, entry_point="toy_envs:Hangs", horizon=10, step_timeout_s=1.0,
                        kwargs={"seed": second, "at": 2})
        collect_expert_demos(cfg, "toy_envs:point_expert", 2)
        print("not reached", flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and "not reached" not in out.stdout, out.stderr[-2000:]
    assert time.monotonic() - start < 30
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: toy_envs:Hangs: world 0 (seed "), errors
    assert "did not return from step 2 within env.step_timeout_s=1 s" in errors[0], errors[0]


def test_a_hang_in_the_probe_says_the_probe_runs_in_this_process_whatever_env_vector_is():
    """Under env.vector=async the message said "env.vector=async kills and replaces a hung world
    instead": the probe's calls are made in the main process before any worker starts."""
    from grpo_robot.gym_vector import Watchdog

    assert Watchdog("toy", 2.0).message("step 1 in a probe episode", "world 0 (seed 0)") == (
        "toy: world 0 (seed 0) did not return from step 1 in a probe episode within env.step_timeout_s=2 s; the env "
        "hangs in the probe episode, which runs in this process before any world starts (with env.vector=async too), "
        "where a hung call cannot be interrupted")  # fmt: skip
