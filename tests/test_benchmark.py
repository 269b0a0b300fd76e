"""The environment benchmark still runs against the current API (slow: `pytest -m slow`)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_benchmark_quick_prints_a_row_per_task():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark_envs.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    rows = re.findall(r"^\| (\w+) \| (\d+) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \|", out, re.M)
    assert {r[0] for r in rows} == {"Reach", "PushCube", "LiftCube", "PlaceCube"}
    for _, _, batched, limit, ratio in rows:
        assert int(batched.replace(",", "")) > 0 and int(limit.replace(",", "")) > 0
        assert 0.1 < float(ratio) < 1.5


def run_benchmark(*args: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark.py"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout


@pytest.mark.slow
def test_training_rollout_reaches_0_8_of_the_physical_limit():
    """Issue 18's target: inside the default job, on 2 cores, the rollout runs at >= 0.8 of the
    physics alone (the same episodes, one open-loop call each), and not slower than before the split.
    At 512 worlds (groups of 16), where it was set; the preset's 256 worlds reach 0.76-0.78
    (docs/benchmarks.md, "Profile"): fewer worlds per physics call, the same per-call overhead."""
    out = run_benchmark("profile", "--iterations", "3", "algo.group_size=16")
    ratio = float(re.search(r"^rollout / limit: ([\d.]+) \(after\)", out, re.M).group(1))
    assert ratio >= 0.8, out
    speedup = float(re.search(r"iteration speed-up ([\d.]+)x", out).group(1))
    assert speedup >= 0.95, out
    physics, total = (re.search(rf"^\| {row}[^|]*\| [\d.]+ \| ([\d.]+) \|", out, re.M).group(1)
                      for row in ("rollout: physics", "total"))  # fmt: skip
    assert float(physics) > 0.5 * float(total)  # physics dominates the default job's iteration


@pytest.mark.slow
def test_update_and_train_subcommands_report_numbers(tmp_path):
    out = run_benchmark("update", "--policies", "gaussian", "--minibatch", "1024", "--repeats", "1")
    rate = re.search(r"^\| gaussian \| cpu \| ([\d,]+) \|", out, re.M).group(1)
    assert int(rate.replace(",", "")) > 1000
    out = run_benchmark("train", "--task", "Reach", "--algos", "grpo", "ppo", "grpo_k2=grpo:algo.epochs=2",
                        "--starts", "scratch", "--seeds", "0", "--iterations", "2", "--eval-every", "1",
                        "--eval-seeds", "20", "--out", str(tmp_path))  # fmt: skip
    assert re.search(r"^machine: .+, \d+ cores, .*; Python .*, torch .*, mujoco .*", out, re.M)  # it printed none
    rows = re.findall(r"^\| scratch \| (grpo|ppo|grpo_k2) \| (\d)/1 \|", out, re.M)
    assert sorted(r[0] for r in rows) == ["grpo", "grpo_k2", "ppo"]
    assert (tmp_path / "Reach_success.png").stat().st_size > 10_000
    assert (tmp_path / "results.json").is_file()


def test_a_bad_algorithm_variant_fails_before_any_run(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "train", "--task", "Reach", "--starts", "scratch",
         "--algos", "grpo", "bad=grpo:algo.epochs=0", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    expected = "--algos 'bad=grpo:algo.epochs=0': algo.epochs=0 is invalid: must be >= 1"
    assert result.stderr.strip().splitlines() == [expected]  # one line, no traceback
    assert not list(tmp_path.glob("scratch_*"))  # no run was started
