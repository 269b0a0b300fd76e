"""Fault injection on real training processes: signals, kills, concurrent runs, a full disk and
non-finite updates. Every fault ends with the last completed iteration saved (or the previous
checkpoint intact), one line on stderr, and a resume that is bit-identical to an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from cli_harness import run_main
from test_train import small_config

from grpo_robot import cli, rundir
from grpo_robot.cli import compose_train_config
from grpo_robot.hooks import Hook
from grpo_robot.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
# a small, fast job (about 30 iterations/s on 2 cores); eval and periodic checkpoints out of the way
TINY = ["env=reach", "algo.groups_per_iter=4", "algo.group_size=4", "algo.epochs=1", "algo.minibatches=2",
        "policy.hidden_sizes=[32,32]", "eval_seeds=8", "eval_every=100000", "progress=false"]  # fmt: skip


def start_training(run_dir: Path, *extra: str, **popen) -> subprocess.Popen:
    args = [sys.executable, str(ROOT / "scripts" / "train.py"), *TINY, "iterations=100000",
            f"hydra.run.dir={rundir.override_value(run_dir)}", *extra]  # fmt: skip
    return subprocess.Popen(args, cwd=run_dir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)  # fmt: skip


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    """Until `path` exists (the run is training), or fail with what the process said. The deadline
    is generous: several runs may start at once on a pinned worker's one core of a slow machine."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{path} never appeared; exit {proc.returncode}: {err[-2000:]}")
        time.sleep(0.05)


def training_started(runs: dict[Path, subprocess.Popen]) -> None:
    """Until each run (checkpointing every iteration) has saved its first iteration."""
    for run_dir, proc in runs.items():
        wait_for(run_dir / "checkpoints" / "last.pt", proc)


def state(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def assert_same_training_state(a: dict, b: dict) -> None:
    assert a["iteration"] == b["iteration"] and a["env_steps"] == b["env_steps"]
    for key, value in a["policy"]["state_dict"].items():
        assert torch.equal(value, b["policy"]["state_dict"][key]), key
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        assert torch.equal(sa[i]["exp_avg"], sb[i]["exp_avg"]) and torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"])


def uninterrupted(tmp_path: Path, iterations: int) -> dict:
    """The state of the same job run straight to `iterations`, in this process."""
    cfg = compose_train_config(*TINY, f"iterations={iterations}")
    Trainer(cfg, tmp_path / f"straight_{iterations}").run()
    return state(tmp_path / f"straight_{iterations}" / "checkpoints" / "last.pt")


def resume_to(run_dir: Path, iterations: int, command: list[str] | None = None) -> dict:
    out = run_main("train", *(command or [f"resume={run_dir}"]), f"iterations={iterations}")
    assert out.code == 0, out.stderr
    return state(run_dir / "checkpoints" / "last.pt")


def test_signals_save_the_iteration_and_the_resume_is_bit_identical(tmp_path):
    """SIGINT, SIGTERM and a second Ctrl-C, each to its own training process; the three run side
    by side (one process start-up and warm-up for all three instead of one each). SIGTERM's run
    is in a folder named as a multirun's job (`seed=1`): the command printed to continue it must
    quote the `=`, which Hydra would parse."""
    import shlex

    cases = {"int": [signal.SIGINT], "term": [signal.SIGTERM], "twice": [signal.SIGINT, signal.SIGINT]}
    dirs = {case: tmp_path / case / "seed=1" if case == "term" else tmp_path / case for case in cases}
    for run_dir in dirs.values():
        run_dir.parent.mkdir(exist_ok=True)
    procs = {case: start_training(dirs[case], "checkpoint_every=1") for case in cases}
    training_started({dirs[case]: proc for case, proc in procs.items()})
    for case, signals in cases.items():
        for i, signum in enumerate(signals):
            if i:
                time.sleep(0.005)  # the second Ctrl-C while the first one's save is under way
            procs[case].send_signal(signum)
    errs = {}
    for case, proc in procs.items():
        _, errs[case] = proc.communicate(timeout=60)
        assert proc.returncode == {"int": 130, "term": 143, "twice": 130}[case], (case, errs[case])
    for case in ("int", "term"):
        run_dir, err, name = dirs[case], errs[case], cases[case][0].name
        lines = [line for line in err.splitlines() if line.strip()]
        summary = json.loads((run_dir / "summary.json").read_text())
        k = summary["iterations"]
        resume = f"resume={run_dir}" if case == "int" else f"\"resume='{run_dir}'\""
        assert lines == [f"stopped by {name}: saved iteration {k} to {run_dir}/checkpoints/last.pt; continue with: "
                         f"python scripts/train.py {resume}"]  # fmt: skip
        assert summary["stopped"] == "signal" and summary["signal"] == name and k >= 1
        saved = state(run_dir / "checkpoints" / "last.pt")
        assert saved["iteration"] == k
        assert list((run_dir / "tb").iterdir())  # TensorBoard flushed its events
        assert not list(run_dir.rglob("*.tmp"))
        printed = shlex.split(lines[0].split("continue with: ")[1])[2:]  # the command as a shell passes it on
        assert_same_training_state(resume_to(run_dir, k + 2, printed), uninterrupted(tmp_path, k + 2))
        assert (run_dir / ".hydra" / "resume-1" / "overrides.yaml").exists()  # the first run's .hydra kept
    # a second Ctrl-C exits at once, with the last completed iteration
    run_dir = tmp_path / "twice"
    summary = json.loads((run_dir / "summary.json").read_text())
    saved = state(run_dir / "checkpoints" / "last.pt")
    assert saved["iteration"] == summary["iterations"] >= 1 and summary["stopped"] == "signal"
    assert len([line for line in errs["twice"].splitlines() if line.strip()]) == 1
    assert not list(run_dir.rglob("*.tmp"))


def test_sigkill_at_random_moments_then_resume_is_bit_identical(tmp_path):
    rng = random.Random(15)
    run_dir = tmp_path / "run"
    reached = 0
    for kill in range(2):  # two kills of one run, the second of a resumed run
        where = [f"hydra.run.dir={run_dir}", *TINY, "iterations=100000", "checkpoint_every=1"] if kill == 0 \
            else [f"resume={run_dir}"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "train.py"), *where], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 180
        while state_iteration(run_dir) <= reached and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        if state_iteration(run_dir) <= reached and proc.poll() is None:
            proc.kill()
            err = proc.communicate()[1]
            pytest.fail(f"kill {kill}: no iteration past {reached} was saved within 180 s: {err[-2000:]}")
        time.sleep(rng.uniform(0.0, 0.6))
        proc.kill()
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        reached = state_iteration(run_dir)
    assert reached >= 2
    final = resume_to(run_dir, reached + 2)
    assert not list(run_dir.rglob("*.tmp"))  # a write cut short by the kill is cleaned up by the resume
    assert_same_training_state(final, uninterrupted(tmp_path, reached + 2))


def state_iteration(run_dir: Path) -> int:
    try:
        return int(state(run_dir / "checkpoints" / "last.pt")["iteration"])
    except (FileNotFoundError, RuntimeError, EOFError):
        return 0


def test_two_runs_started_together_get_two_directories(tmp_path):
    procs = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "train.py"), *TINY, "iterations=2",
                               f"seed={seed}"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for seed in (1, 2)]  # fmt: skip
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    runs = sorted((tmp_path / "runs" / "train").iterdir())
    assert len(runs) == 2
    seeds = sorted(json.loads((r / "summary.json").read_text())["run_dir"] == str(r) and
                   state(r / "checkpoints" / "last.pt")["config"]["seed"] for r in runs)  # fmt: skip
    assert seeds == [1, 2]


def test_the_same_default_directory_is_claimed_once():
    import tempfile

    base = Path(tempfile.mkdtemp()) / "runs" / "2026-11-23_10-00-00"
    claimed = [rundir.claim(base, unique=True) for _ in range(3)]
    assert [p.name for p in claimed] == ["2026-11-23_10-00-00", "2026-11-23_10-00-00-2", "2026-11-23_10-00-00-3"]


@pytest.mark.parametrize("path", ["/runs/plain", "/runs/seed=0", "/runs/it's", "/runs/a\\b", "C:\\runs\\seed=0",
                                  "/runs/ends\\", "/runs/a\\'b", "/runs/two\\\\'", "/runs/x y", "/runs/a${x}b",
                                  "/runs/a\\${x}", "/runs/$HOME", "/runs/a${", "/runs/\\\\${x}'\\"])
def test_a_path_reads_back_from_its_override_value(path):
    """A backslash in a quoted path was doubled: Hydra keeps a backslash as it is unless backslashes
    precede a quote, so `hydra.run.dir=C:\\runs\\seed=0` named a folder with two backslashes each;
    and `${` began an interpolation."""
    from grpo_robot.cli import _precompose

    composed = _precompose("config", [f"hydra.run.dir={rundir.override_value(path)}",
                                      f"init_from={rundir.override_value(path)}"])[0]  # fmt: skip
    assert composed.hydra.run.dir == composed.init_from == path  # OmegaConf's `${` read as text, not interpolated


def test_a_run_directory_with_a_backslash_is_the_folder_named(tmp_path):
    run_dir = tmp_path / "a\\b=1"
    assert run_main("train", *TINY, "iterations=1", f"hydra.run.dir={rundir.override_value(run_dir)}").code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a\\b=1"]
    assert (run_dir / "checkpoints" / "last.pt").is_file()


def test_a_directory_in_use_finished_or_empty_is_refused_in_one_line(tmp_path):
    busy = tmp_path / "busy"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from grpo_robot import rundir; "
                               f"rundir.lock({str(busy)!r}); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        out = run_main("train", *TINY, "iterations=1", f"hydra.run.dir={busy}")
        assert out.code == 2 and out.error_lines == [
            f"error: hydra.run.dir={str(busy)!r} is in use by another run (process {holder.pid}); two runs never "
            "share a directory: wait for it, or choose another directory"]  # fmt: skip
        assert sorted(p.name for p in busy.iterdir()) == [".lock"]  # nothing written into it
    finally:
        holder.kill()
        holder.wait()
    done = tmp_path / "done"
    assert run_main("train", *TINY, "iterations=1", f"hydra.run.dir={done}").code == 0
    again = run_main("train", *TINY, "iterations=1", f"hydra.run.dir={done}")
    assert again.code == 2 and len(again.error_lines) == 1 and f"resume={done}" in again.error_lines[0]
    empty = run_main("train", *TINY, "iterations=1", "hydra.run.dir=''")
    assert empty.code == 2 and empty.error_lines == [
        "error: hydra.run.dir='' is invalid: must name a directory for the run's files"]  # fmt: skip
    (tmp_path / "a_file").write_text("")
    a_file = run_main("train", *TINY, "iterations=1", f"hydra.run.dir={tmp_path / 'a_file'}")
    assert a_file.code == 2 and a_file.error_lines == [
        f"error: {str(tmp_path / 'a_file')!r} cannot be a run directory: File exists"]  # fmt: skip


def test_a_resume_checkpoint_is_checked_before_any_directory_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.pt").write_text("junk")
    (tmp_path / "empty_run").mkdir()
    for resume, message in [(tmp_path / "junk.pt", "is not a PyTorch checkpoint"),
                            (tmp_path / "empty_run", "no checkpoint at")]:  # fmt: skip
        out = run_main("train", f"resume={resume}")
        assert out.code == 2 and len(out.error_lines) == 1 and message in out.error_lines[0], out.stderr
    # no run directory was claimed for them: none made under runs/, nothing written into the run's own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty_run", "junk.pt"]
    assert list((tmp_path / "empty_run").iterdir()) == []


def test_resume_keeps_the_run_and_refuses_changes_to_what_is_trained(tmp_path):
    run_dir = tmp_path / "run"
    assert run_main("train", *TINY, "iterations=2", f"hydra.run.dir={run_dir}").code == 0
    finished = run_main("train", f"resume={run_dir}")  # no overrides repeated
    assert finished.code == 0 and "finished already: 2 iterations" in finished.stdout
    changed = run_main("train", f"resume={run_dir}", "env=place_cube", "iterations=4")
    assert changed.code == 2 and len(changed.error_lines) == 1
    assert "env.task='PlaceCube-v2' differs from the run's env.task='Reach-v1'" in changed.error_lines[0]
    longer = run_main("train", f"resume={run_dir}", "iterations=3", "eval_min_train_success=0.5")  # a schedule
    assert longer.code == 0, longer.stderr
    assert state(run_dir / "checkpoints" / "last.pt")["iteration"] == 3
    assert json.loads((run_dir / "summary.json").read_text())["iterations"] == 3
    ckpt = state(run_dir / "checkpoints" / "last.pt")  # as if iteration 3 had reached a target of 0.5
    ckpt["target"] = {"target": 0.5, "reached": True, "iteration": 3, "env_steps": 1, "success": 0.625}
    torch.save(ckpt, run_dir / "checkpoints" / "last.pt")
    reached = run_main("train", f"resume={run_dir}", "iterations=5", "target_success=0.5")
    assert reached.code == 0 and ("finished already: it reached target_success=0.5 at iteration 3 (62.5% on "
                                  "held-out seeds); nothing to do") in reached.stdout, reached.stdout  # fmt: skip
    assert state(run_dir / "checkpoints" / "last.pt")["iteration"] == 3
    assert [p.name for p in (run_dir / ".hydra").glob("resume-*")] == ["resume-1", "resume-2", "resume-3"] or \
        len(list((run_dir / ".hydra").glob("resume-*"))) >= 1  # fmt: skip
    # another directory for a run that continues in its own: refused (it was ignored, the run's files overwritten)
    elsewhere = run_main("train", f"resume={run_dir}", f"hydra.run.dir={tmp_path / 'elsewhere'}", "iterations=5")
    assert elsewhere.code == 2 and elsewhere.error_lines[0].startswith(f"error: hydra.run.dir={tmp_path / 'elsewhere'} "
                                                                       "cannot be combined with resume=")  # fmt: skip
    assert not (tmp_path / "elsewhere").exists() and state(run_dir / "checkpoints" / "last.pt")["iteration"] == 3
    # a checkpoint of the run other than last.pt continues in a new directory (it wrote over the newer last.pt)
    older = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    older["iteration"] = 2
    torch.save(older, run_dir / "checkpoints" / "best.pt")
    branch = run_main("train", f"resume={run_dir / 'checkpoints' / 'best.pt'}", f"hydra.run.dir={tmp_path / 'branch'}",
                      "iterations=4")  # fmt: skip
    assert branch.code == 0, branch.stderr
    assert state(run_dir / "checkpoints" / "last.pt")["iteration"] == 3
    assert state(tmp_path / "branch" / "checkpoints" / "last.pt")["iteration"] == 4


def test_a_resume_may_change_the_safe_keys_alone_and_counts_a_key_the_command_line_added():
    from grpo_robot.config import config_dict
    from grpo_robot.resume import check_same_run, flatten, touched_keys

    saved = config_dict(compose_train_config(*TINY))
    for safe in ("env.nthread=2", "device=cpu", "iterations=7", "eval_seeds=16", "checkpoint_every=3", "progress=true"):
        check_same_run(saved, compose_train_config(*TINY, safe), "resume=run")
    with pytest.raises(ValueError, match=r"^resume=run: seed=1 differs from the run's seed=0; a resumed run keeps"):
        check_same_run(saved, compose_train_config(*TINY, "seed=1"), "resume=run")
    # lists are leaves; a key the command line added as null differs from one that is not there
    assert flatten({"b": {"c": 1, "d": [1, {"e": 2}]}, "f": None}) == {"b.c": 1, "b.d": [1, {"e": 2}], "f": None}
    # an empty mapping (env.kwargs: {}) is a leaf: filled on one side only, it differs from the other's
    assert flatten({"a": {}, "b": {"c": {}}}) == {"a": {}, "b.c": {}} and flatten({}) == {}
    assert touched_keys({"kwargs": {"x": 1}}, {"kwargs": {}}) == {"kwargs", "kwargs.x"}
    assert touched_keys({"a": {"x": None, "y": 2}, "b": 1}, {"a": {"y": 2}, "b": 1}) == {"a.x"}
    assert touched_keys({"a": {"y": 2}}, {"a": {"x": None, "y": 2}}) == {"a.x"}


def test_a_resume_of_a_run_that_spent_exactly_its_env_steps_has_nothing_to_do(tmp_path):
    run_dir = tmp_path / "run"
    assert run_main("train", *TINY, "iterations=1", f"hydra.run.dir={run_dir}").code == 0
    spent = int(state(run_dir / "checkpoints" / "last.pt")["env_steps"])
    out = run_main("train", f"resume={run_dir}", "iterations=5", f"max_env_steps={spent}")
    assert out.code == 0 and f"finished already: 1 iterations, {spent:,} env steps (max_env_steps={spent})" in \
        out.stdout, out.stdout + out.stderr  # fmt: skip
    assert state(run_dir / "checkpoints" / "last.pt")["iteration"] == 1


def test_the_last_lines_stop_reason_names_the_budget_the_target_or_the_hook():
    cfg = compose_train_config(*TINY, "max_env_steps=5000", "time_limit_min=2.5", "target_success=0.9")
    assert cli._stop_reason("max_env_steps", cfg) == " (stopped at its budget, max_env_steps=5000)"
    assert cli._stop_reason("time_limit_min", cfg) == " (stopped at its budget, time_limit_min=2.5)"
    assert cli._stop_reason("target_success", cfg) == " (stopped at target_success=0.9)"
    assert cli._stop_reason("Plateau", cfg) == " (stopped by the Plateau hook)"
    assert [cli._stop_reason(s, cfg) for s in (None, "iterations", "signal", "error")] == [""] * 4


# in a process of its own: emergency_exit ends it
EMERGENCY = """
from grpo_robot import lifecycle

def interrupted(reason):
    raise KeyboardInterrupt

lifecycle.on_emergency(lambda reason: None)
lifecycle.on_emergency(lambda reason: f"saved after {reason}")
lifecycle.on_emergency(interrupted)
remove = lifecycle.on_emergency(lambda reason: "never run")
remove()
remove()
print("before", end="")
lifecycle.emergency_exit("stuck", 3)
print("after")
"""


def test_an_emergency_exit_runs_every_handler_even_past_an_interrupt_and_exits_with_its_code():
    out = subprocess.run([sys.executable, "-c", EMERGENCY], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (3, "before"), out.stderr
    assert out.stderr == "error: stuck saved after stuck (could not save: KeyboardInterrupt: )\n"


def test_a_linear_schedule_keeps_its_budget_on_resume(tmp_path):
    """The rate decays over the run's budget: a resume with another budget trained neither run."""
    run_dir = tmp_path / "run"
    assert run_main("train", *TINY, "algo.lr_schedule=linear", "iterations=2", f"hydra.run.dir={run_dir}").code == 0
    for budget in ("iterations=4", "max_env_steps=100000"):
        out = run_main("train", f"resume={run_dir}", budget)
        assert out.code == 2 and len(out.error_lines) == 1, out.stderr[-2000:]
        assert (f"{budget.split('=')[0]}={budget.split('=')[1]!s}" in out.error_lines[0]
                and "with algo.lr_schedule=linear the learning rate decays to 0 over the run's budget"
                in out.error_lines[0]), out.error_lines[0]  # fmt: skip


def test_a_resumed_run_needs_not_the_files_it_started_from(tmp_path):
    # its weights come from its checkpoint: the clone it was initialized from may be gone (it was read again)
    clone, run_dir = tmp_path / "clone", tmp_path / "run"
    assert run_main("train", *TINY, "iterations=1", f"hydra.run.dir={clone}").code == 0
    assert run_main("train", *TINY, "iterations=1", f"init_from={clone}", f"hydra.run.dir={run_dir}").code == 0
    (clone / "checkpoints" / "last.pt").rename(tmp_path / "moved.pt")
    resumed = run_main("train", f"resume={run_dir}", "iterations=2")
    assert resumed.code == 0, resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["iterations"] == 2 and summary["initial_policy"]["source"] == str(clone / "checkpoints" / "last.pt")


def test_a_resume_reads_its_checkpoint_once(tmp_path, monkeypatch):
    """The checks before the run, the run's config and the trainer's state come from one read of
    `last.pt` (it was read three times, each time its CRC checked over the whole file, and the
    state could come from a file replaced after the checks); a file replaced between two reads is
    read again."""
    from grpo_robot import checkpoint

    run_dir = tmp_path / "run"
    assert run_main("train", *TINY, "iterations=1", f"hydra.run.dir={run_dir}").code == 0
    reads: list[Path] = []
    read = checkpoint._read
    monkeypatch.setattr(checkpoint, "_read", lambda path, where: reads.append(path) or read(path, where))
    resumed = run_main("train", f"resume={run_dir}", "iterations=2")
    assert resumed.code == 0, resumed.stderr
    last = run_dir / "checkpoints" / "last.pt"
    assert reads == [last] and state(last)["iteration"] == 2
    first = cli._resume_checkpoint(str(run_dir))
    assert cli._resume_checkpoint(str(run_dir)) is first and len(reads) == 2  # the run let its copy go
    shutil.copy(last, tmp_path / "copy.pt")
    os.replace(tmp_path / "copy.pt", last)  # the same bytes, another file
    second = cli._resume_checkpoint(str(run_dir))
    assert second is not first and len(reads) == 3
    last.write_bytes(last.read_bytes())  # rewritten in place: the same inode and size (a freed inode comes back)
    stat = last.stat()
    os.utime(last, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert cli._resume_checkpoint(str(run_dir)) is not second and len(reads) == 4
    cli._resumed.clear()


class InfiniteLearningRate(Hook):
    """Makes every optimizer step of iterations `first`..`last` (1-based) non-finite."""

    def __init__(self, first: int, last: int) -> None:
        self.first, self.last, self.weights = first, last, {}

    def after_iteration(self, trainer, record):
        # the parameters (the observation normalizer's statistics still follow the data)
        self.weights[record.iteration] = {k: v.detach().clone() for k, v in trainer.policy.named_parameters()}
        lr = float("inf") if self.first - 1 <= record.iteration < self.last else 3e-4
        trainer.learner.cfg.lr = lr


class TwoSignalsLate(Hook):
    """Two SIGINTs in this process at iteration `at`, in a hook after the one that saves `last.pt`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_iteration(self, trainer, record):
        if record.iteration == self.at:
            signal.raise_signal(signal.SIGINT)  # the first: stop at the end of the iteration
            signal.raise_signal(signal.SIGINT)  # the second: abandon at once


def test_a_second_signal_after_the_checkpoint_keeps_that_checkpoint_and_the_resume_is_exact(tmp_path):
    cfg = small_config(iterations=3, checkpoint_every=1)
    trainer = Trainer(cfg, tmp_path / "stopped")
    trainer.hooks.append(TwoSignalsLate(2))  # after the loggers, as late as a hook can run (user hooks run earlier)
    summary = trainer.run()
    saved = state(tmp_path / "stopped" / "checkpoints" / "last.pt")
    # iteration 2's checkpoint was written before the signals came; the stop kept it (it wrote 1 over it)
    assert (summary["stopped"], summary["iterations"], saved["iteration"]) == ("signal", 2, 2)
    Trainer(replace(cfg, resume=str(tmp_path / "stopped")), tmp_path / "stopped").run()
    Trainer(cfg, tmp_path / "whole").run()
    resumed, whole = (state(tmp_path / r / "checkpoints" / "last.pt") for r in ("stopped", "whole"))
    assert resumed["iteration"] == whole["iteration"] == 3
    assert all(torch.equal(resumed["policy"]["state_dict"][k], v) for k, v in whole["policy"]["state_dict"].items())


def test_a_non_finite_step_is_rolled_back_and_training_goes_on(tmp_path):
    cfg = small_config(iterations=4)
    cfg = replace(cfg, algo=replace(cfg.algo, max_skipped_steps=1000))
    hook = InfiniteLearningRate(2, 2)
    trainer = Trainer(cfg, tmp_path, hooks=[hook])
    summary = trainer.run()
    assert summary["stopped"] == "iterations" and summary["iterations"] == 4
    w = hook.weights
    assert all(torch.equal(w[1][k], w[2][k]) for k in w[1])  # iteration 2: every step rolled back
    assert not all(torch.equal(w[2][k], w[3][k]) for k in w[2])  # iteration 3 trained again
    assert all(torch.isfinite(v).all() for v in state(tmp_path / "checkpoints" / "last.pt")["policy"]["state_dict"]
               .values())  # fmt: skip


def test_a_resumed_run_goes_on_counting_the_non_finite_steps_in_a_row(tmp_path):
    # the count that stops a diverged run was not saved: a resume started it again from 0
    cfg = small_config(iterations=2, checkpoint_every=1)
    cfg = replace(cfg, algo=replace(cfg.algo, max_skipped_steps=1000))
    Trainer(cfg, tmp_path / "run", hooks=[InfiniteLearningRate(2, 2)]).run()  # every step of iteration 2 undone
    steps = cfg.algo.epochs * cfg.algo.minibatches
    assert state(tmp_path / "run" / "checkpoints" / "last.pt")["skipped_in_a_row"] == steps
    resumed = Trainer(replace(cfg, iterations=3, resume=str(tmp_path / "run")), tmp_path / "resumed")
    assert resumed.learner.skipped_in_a_row == steps
    resumed.close()


def test_non_finite_steps_in_a_row_stop_the_run_with_the_last_good_checkpoint(tmp_path):
    cfg = small_config(iterations=6, checkpoint_every=1)
    cfg = replace(cfg, algo=replace(cfg.algo, max_skipped_steps=3))
    hook = InfiniteLearningRate(3, 6)
    summary = Trainer(cfg, tmp_path, hooks=[hook]).run()
    assert summary["stopped"] == "error" and summary["iterations"] == 2
    assert summary["error"].startswith("3 optimizer steps in a row were non-finite") and "\n" not in summary["error"]
    # rolled back to iteration 2, not to the time it was reached: the run's time was counted twice
    assert summary["seconds_total"] == summary["seconds"]
    saved = state(tmp_path / "checkpoints" / "last.pt")
    assert saved["iteration"] == 2
    assert all(torch.equal(saved["policy"]["state_dict"][k], hook.weights[2][k]) for k in hook.weights[2])


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0 or os.environ.get("FAULTS_NO_TMPFS"):
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0  # fmt: skip


def test_a_full_disk_stops_the_run_in_one_line_with_the_checkpoint_before_intact(tmp_path):
    disk = tmp_path / "disk"
    if _tmpfs(disk, "4m"):
        try:
            run_dir = disk / "run"
            proc = start_training(run_dir, "checkpoint_every=1")
            wait_for(run_dir / "checkpoints" / "last.pt", proc)
            # the disk fills up while the run trains; unbuffered, so that closing the file has nothing
            # left to write (a buffered file's close raised ENOSPC here now and then)
            with open(disk / "filler", "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                except OSError:
                    pass
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 1, err
            lines = [line for line in err.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: cannot write ") and "errno ENOSPC" in lines[0]
            saved = state(run_dir / "checkpoints" / "last.pt")  # the one before, whole
            assert saved["iteration"] >= 1
            assert not list(run_dir.rglob("*.tmp"))
        finally:
            subprocess.run(["umount", "--lazy", str(disk)], check=False)  # also while a file there is open
    else:  # no tmpfs here: a file-size limit; the first checkpoint is larger than it
        import resource

        run_dir = tmp_path / "run"

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

        proc = start_training(run_dir, "iterations=3", "checkpoint_every=1", "policy.hidden_sizes=[256,256]",
                              preexec_fn=limit)  # fmt: skip
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "errno EFBIG" in lines[0]
        assert not (run_dir / "checkpoints" / "last.pt").exists() and not list(run_dir.rglob("*.tmp"))


GYM_TINY = ["env=gym", "env.horizon=10", "algo.groups_per_iter=2", "algo.group_size=2", "algo.epochs=1",
            "algo.minibatches=1", "policy.hidden_sizes=[16]", "eval_seeds=4", "eval_every=100000",
            "progress=false", "checkpoint_every=100000"]  # fmt: skip


def test_a_hung_sync_env_saves_the_last_iteration_and_stops_in_one_line(tmp_path):
    run_dir = tmp_path / "run"
    args = [sys.executable, str(ROOT / "scripts" / "train.py"), *GYM_TINY, "env.entry_point=toy_envs:Breaks",
            "+env.kwargs.after=150", "env.step_timeout_s=1", "iterations=1000", f"hydra.run.dir={run_dir}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    start = time.monotonic()
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert len(lines) == 1 and lines[0].startswith("error: toy_envs:Breaks: world "), out.stderr
    assert "within env.step_timeout_s=1" in lines[0] and "saved the last completed iteration (" in lines[0]
    summary = json.loads((run_dir / "summary.json").read_text())
    saved = state(run_dir / "checkpoints" / "last.pt")
    assert summary["stopped"] == "error" and saved["iteration"] == summary["iterations"] >= 1
    assert f"resume={run_dir}" in lines[0] and time.monotonic() - start < 60


def test_an_env_whose_every_world_fails_stops_the_run_with_its_last_iteration(tmp_path):
    import toy_envs

    toy_envs.Breaks.calls = 0
    cfg = compose_train_config(*GYM_TINY, "env.entry_point=toy_envs:Breaks", "+env.kwargs.after=150",
                               "+env.kwargs.how=non_finite", "iterations=100")  # fmt: skip
    summary = Trainer(cfg, tmp_path).run()
    assert summary["stopped"] == "error" and "every one of the 4 worlds failed" in summary["error"]
    assert "non-finite observation" in summary["error"] and "\n" not in summary["error"]
    assert state(tmp_path / "checkpoints" / "last.pt")["iteration"] == summary["iterations"] >= 1


def test_a_run_in_this_process_gives_its_directory_back_when_it_ends(tmp_path):
    Trainer(small_config(iterations=1), tmp_path).run()
    assert rundir.holder(tmp_path) is None  # a notebook that trained here does not block the next run


def test_a_signal_that_lands_in_a_c_extensions_wait_still_stops_the_run_with_its_checkpoint(tmp_path):
    """Ray's `ray.wait` runs Python's signal handlers inside its own check: the handler's
    `Interrupted` came out as `SystemError: ... returned a result with an exception set`, which
    the run took for a crash (a traceback, no last.pt, no summary.json). Played here in-process:
    the third draw is interrupted the way Ray reports it."""
    trainer = Trainer(small_config(iterations=5, checkpoint_every=100), tmp_path)
    sample, calls = trainer.sampler.sample, []

    def interrupted_in_c(policy, iteration):
        calls.append(iteration)
        if len(calls) == 3:
            try:
                signal.raise_signal(signal.SIGINT)  # the guard's handler raises Interrupted in the draw
            except BaseException as err:
                raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set") from err
        return sample(policy, iteration)

    trainer.sampler.sample = interrupted_in_c
    summary = trainer.run()
    assert (summary["stopped"], summary["signal"], summary["iterations"]) == ("signal", "SIGINT", 2)
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["iteration"] == 2
    assert json.loads((tmp_path / "summary.json").read_text())["stopped"] == "signal"


def test_a_trainer_that_fails_while_it_is_built_closes_what_it_started(tmp_path, monkeypatch):
    """An error after the envs (or the Ray sampler) were made left them running: a missing
    init_from here; a resume of another run with a local Ray, whose Ray lived on in the process."""
    from grpo_robot import BatchedEnv

    closed, close = [], BatchedEnv.close

    def counted(env):
        closed.append(env)
        close(env)

    monkeypatch.setattr(BatchedEnv, "close", counted)
    with pytest.raises(FileNotFoundError, match="none.pt"):
        Trainer(replace(small_config(), init_from=str(tmp_path / "none.pt")), tmp_path / "run")
    assert len({id(env) for env in closed}) == 2  # the training env and the evaluation env


class FailsAt(Hook):
    """A user's hook with a bug: its `after_iteration` raises at iteration `at`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_iteration(self, trainer, record):
        if record.iteration == self.at:
            raise RuntimeError("metrics server unreachable")


def test_an_unexpected_error_in_a_hook_saves_the_last_iteration_and_says_what_it_was(tmp_path, caplog):
    """Not only the errors the trainer knows (a broken env, a full disk): any exception inside the
    loop rolls back to the last completed iteration, saves it and writes the summary."""
    cfg = small_config(iterations=20, checkpoint_every=1000)
    with caplog.at_level("ERROR", logger="grpo_robot.trainer"):
        summary = Trainer(cfg, tmp_path, hooks=[FailsAt(5)]).run()
    assert summary["stopped"] == "error" and summary["iterations"] == 4
    assert summary["error"] == "RuntimeError: metrics server unreachable"
    assert json.loads((tmp_path / "summary.json").read_text())["iterations"] == 4
    assert state(tmp_path / "checkpoints" / "last.pt")["iteration"] == 4
    assert "metrics server unreachable" in caplog.text and "Traceback" in caplog.text  # the traceback, in the log


def raising_hook() -> Hook:
    """A `hooks=[module:factory]` whose factory fails (its service is down)."""
    raise RuntimeError("no metrics server")


def test_a_hook_whose_factory_raises_is_refused_in_one_line_with_no_directory_left(tmp_path):
    run_dir = tmp_path / "run"
    out = run_main("train", *TINY, "iterations=2", "hooks=[test_faults:raising_hook]",
                   f"hydra.run.dir={rundir.override_value(run_dir)}")  # fmt: skip
    assert out.code == 2 and out.error_lines == [
        "error: hooks=['test_faults:raising_hook']: test_faults:raising_hook() raised RuntimeError: no metrics server"
    ], out.stderr
    assert not run_dir.exists()


def test_a_signal_during_collection_or_evaluation_ends_it_in_one_line(tmp_path):
    """collect_demos.py and evaluate.py ended on Ctrl-C with a 50-line traceback out of the physics
    (and SIGTERM without a word); each now says what stopped it, as training does."""
    cfg = compose_train_config(*GYM_TINY, "env.entry_point=toy_envs:MarksItsWork", "iterations=1")
    Trainer(cfg, tmp_path / "run").run()
    toy = ["env=gym", "env.entry_point=toy_envs:MarksItsWork", "env.horizon=10"]
    commands = {
        "collect_demos": [*toy, "demos.expert=toy_envs:point_expert", "demos.episodes=10000",
                          f"output={tmp_path / 'd.npz'}"],
        "evaluate": [f"checkpoint={tmp_path / 'run'}", "n_seeds=1000000", f"output={tmp_path / 'e.json'}"],
    }  # fmt: skip
    procs = {}
    for (name, args), signum in zip(commands.items(), (signal.SIGINT, signal.SIGTERM), strict=True):
        env = {**os.environ, "TOY_WORKING": str(tmp_path / f"{name}.working"),
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}  # fmt: skip
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *args], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        procs[name] = proc, signum
    for name, (proc, signum) in procs.items():
        wait_for(tmp_path / f"{name}.working", proc)
        proc.send_signal(signum)
    for name, (proc, signum) in procs.items():
        _, err = proc.communicate(timeout=60)
        lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line]
        doing = "while collecting" if name == "collect_demos" else "during the evaluation"
        assert proc.returncode == 128 + signum and lines == [
            f"error: stopped by {signum.name} {doing}; nothing written"
        ], (name, proc.returncode, err[-2000:])
    assert not (tmp_path / "d.npz").exists() and not (tmp_path / "e.json").exists()


def test_a_signal_while_a_command_builds_its_env_ends_it_in_one_line_with_nothing_left(tmp_path):
    """train.py, evaluate.py and pretrain_bc.py ended on a Ctrl-C that came while they loaded a
    checkpoint or built their env, before their signal guards, with a 50-line KeyboardInterrupt
    traceback (train.py also left its new run directory behind), and on a SIGTERM there without a
    word. Each now says what stopped it and that nothing was written, and leaves nothing."""
    slow = "env.entry_point=toy_envs:SlowToBuild"
    toy = ["env=gym", slow, "env.horizon=10"]
    cfg = compose_train_config(*GYM_TINY, slow, "iterations=1")
    Trainer(cfg, tmp_path / "run").run()  # $TOY_BUILDING unset here: it builds at once
    assert run_main("collect_demos", *toy, "demos.expert=toy_envs:point_expert", "demos.episodes=3",
                    f"output={tmp_path / 'd.npz'}").code == 0  # fmt: skip
    run_dir = tmp_path / "runs" / "new"
    commands = {  # -> its arguments, the signal, the words after "stopped by <signal>"
        "train": ([*GYM_TINY, slow, f"hydra.run.dir={rundir.override_value(run_dir)}"],
                  signal.SIGINT, "before training started; nothing written"),
        "evaluate": ([f"checkpoint={tmp_path / 'run'}", "n_seeds=10", f"output={tmp_path / 'e.json'}"],
                     signal.SIGTERM, "before the evaluation started; nothing written"),
        "pretrain_bc": ([f"dataset={tmp_path / 'd.npz'}", f"output={tmp_path / 'bc.pt'}"],
                        signal.SIGINT, "before behaviour cloning started; nothing saved"),
        "collect_demos": ([*toy, "demos.expert=toy_envs:point_expert", f"output={tmp_path / 'd2.npz'}"],
                          signal.SIGTERM, "while collecting; nothing written"),  # it builds its env in its guard
    }  # fmt: skip
    procs = {}
    for name, (args, _, _) in commands.items():
        env = {**os.environ, "TOY_BUILDING": str(tmp_path / f"{name}.building"),
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}  # fmt: skip
        procs[name] = subprocess.Popen([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *args], cwd=tmp_path,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    for name, proc in procs.items():
        wait_for(tmp_path / f"{name}.building", proc)  # created as the env's build starts; the build takes a minute
        proc.send_signal(commands[name][1])
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=50)  # before the build's minute is out: the signal ended it
        _, signum, words = commands[name]
        lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line]
        assert proc.returncode == 128 + signum and lines == [f"error: stopped by {signum.name} {words}"], (
            name, proc.returncode, err[-2000:])  # fmt: skip
    assert not run_dir.exists() and not (tmp_path / "runs").exists()
    assert not any((tmp_path / f).exists() for f in ("e.json", "bc.pt", "d2.npz"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_command_composes_its_config_is_one_line_and_the_handlers_come_back(monkeypatch, signum):
    """Outside the stretches that name their own words, a signal ends a command in one line that
    says its files are whole; the process's own handlers are back afterwards (SIGTERM's default
    would otherwise end this test process)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    prepared = cli.prepared_overrides

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signum)  # the handler raises here, on the main thread
        return prepared(*args, **kwargs)

    monkeypatch.setattr(cli, "prepared_overrides", signalled)
    out = run_main("evaluate", "checkpoint=nowhere.pt")
    assert out.code == 128 + signum and out.error_lines == [f"error: stopped by {signum.name} {cli.WHOLE_FILES}"], (
        out.code, out.stderr)  # fmt: skip
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_that_comes_out_of_a_c_extension_as_its_cause_is_one_line_too(capsys):
    """Ray's `ray.get` (a Ray run's workers starting, before the trainer's guard) runs the signal
    handler in its own signal check and reports a SystemError whose cause is the handler's
    `Interrupted`: that escaped as a traceback. Any other SystemError still raises."""
    from grpo_robot.signals import Interrupted

    with pytest.raises(SystemExit) as stop, cli._on_signal("before training started; nothing written"):
        raise SystemError("<cyfunction get> returned a result with an exception set") from Interrupted(signal.SIGTERM)
    assert stop.value.code == 143
    assert capsys.readouterr().err == "error: stopped by SIGTERM before training started; nothing written\n"
    with pytest.raises(SystemError, match="^other$"), cli._on_signal("anything"):
        raise SystemError("other")


def test_a_signal_in_a_multiruns_later_job_names_the_job_and_keeps_the_jobs_before_it(tmp_path, monkeypatch):
    """Ctrl-C while the second job of `-m seed=0,1,2` builds its env: the line said "nothing
    written" though the first job's run was whole on disk, and nothing of the third job."""
    import grpo_robot.trainer as trainer_module

    built, make_env = [], trainer_module.make_env

    def signalled(*args, **kwargs):
        built.append(1)
        if len(built) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the second job's env, as it is built
        return make_env(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "make_env", signalled)
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "sweep"
    out = run_main("train", "-m", *GYM_TINY, "env.entry_point=toy_envs:PointReach", "iterations=1", "seed=0,1,2",
                   f"hydra.sweep.dir={sweep}")  # fmt: skip
    assert out.code == 130 and out.error_lines == [
        f"error: stopped by SIGINT before training started; nothing written (the sweep stopped at its job 1, "
        f"{sweep / 'seed=1'}: the jobs before it are whole, the ones after it did not run)"], out.stderr
    assert (sweep / "seed=0" / "summary.json").exists() and len(built) == 2
    assert not (sweep / "seed=1").exists() and not (sweep / "seed=2").exists()


def test_a_resumed_runs_last_line_gives_the_runs_seconds_beside_the_runs_counts(tmp_path):
    """It printed the whole run's iterations and env steps beside this process's seconds: a rate
    about twice the real one after a resume at half-way."""
    run_dir = tmp_path / "run"
    assert run_main("train", *TINY, "iterations=2", f"hydra.run.dir={rundir.override_value(run_dir)}").code == 0
    out = run_main("train", f"resume={run_dir}", "iterations=3")
    summary = json.loads((run_dir / "summary.json").read_text())
    line = next(line for line in out.stdout.splitlines() if line.startswith("trained "))
    assert line == (f"trained 3 iterations, {summary['env_steps']:,} env steps in {summary['seconds_total']:.0f} s "
                    f"({summary['seconds']:.0f} s in this process)"), line  # fmt: skip


def test_the_signal_guards_rules_in_this_process():
    """`SignalGuard`'s rules, one signal at a time in this process (the tests above see only where
    whole runs end): a first signal outside an abandonable stretch is recorded and raises nothing;
    one inside it, or the second anywhere, raises `Interrupted`; a stretch entered after a signal
    is abandoned at once; a stretch that ended takes a first signal as recorded only; once the run
    is stopping, nothing raises and the handlers go back to the default."""
    from grpo_robot.signals import Interrupted, SignalGuard

    with SignalGuard() as guard:
        signal.raise_signal(signal.SIGTERM)  # outside a stretch: recorded
        assert (guard.received, guard.count, guard.name) == (signal.SIGTERM, 1, "SIGTERM")
        with pytest.raises(Interrupted), guard.abandonable():  # entered after a signal: at once
            raise AssertionError("the stretch ran")
        with pytest.raises(Interrupted) as second:
            signal.raise_signal(signal.SIGINT)
        assert second.value.signum == signal.SIGINT and guard.count == 2
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL  # a third ends the process
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back on exit
    with SignalGuard() as guard:
        with guard.abandonable():
            pass
        signal.raise_signal(signal.SIGINT)  # after the stretch ended: recorded only
        assert guard.received == signal.SIGINT
        with pytest.raises(Interrupted), guard.abandonable():
            pass
    with SignalGuard() as guard, pytest.raises(Interrupted) as inside, guard.abandonable():
        signal.raise_signal(signal.SIGTERM)  # inside a stretch: the first one abandons it
        raise AssertionError("the signal did not abandon the stretch")
    assert inside.value.signum == signal.SIGTERM
    with SignalGuard() as guard:
        guard.stopping()
        signal.raise_signal(signal.SIGTERM)  # saving: not interrupted, and the next one is not caught
        assert guard.received == signal.SIGTERM and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sweep_directory_holds_runs_where_its_jobs_left_them_not_in_hidden_folders(tmp_path):
    """`rundir.runs_under`, which refuses a multirun into a sweep directory that holds runs: a job's
    summary or checkpoint, at any depth (a swept value with a `/` nests its folder), counts; one
    under a hidden folder (a `.trash`, Hydra's `.hydra`) does not."""
    sweep = tmp_path / "sweep"
    (sweep / ".trash" / "x").mkdir(parents=True)
    (sweep / ".trash" / "x" / "summary.json").write_text("{}")
    assert rundir.runs_under(sweep) is None
    (sweep / "init_from=a" / "b" / "checkpoints").mkdir(parents=True)
    (sweep / "init_from=a" / "b" / "checkpoints" / "last.pt").write_bytes(b"")
    assert rundir.runs_under(sweep) == str(Path("init_from=a") / "b" / "checkpoints" / "last.pt")
