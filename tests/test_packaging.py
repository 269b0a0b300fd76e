"""The built-in tasks and the Hydra configs must ship in the installed package, not only work from
the source tree."""

import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _clean_env() -> dict[str, str]:
    """os.environ without what could put the source tree on another interpreter's path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], check=True, timeout=300
    )
    (path,) = dist.glob("grpo_robot-*.whl")
    return path


def test_wheel_ships_tasks_and_imports_outside_source_tree(wheel, tmp_path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("__init__", "task", "scene", "reach", "push_cube", "lift_cube", "place_cube", "gym_env"):
        assert f"grpo_robot/envs/{module}.py" in names
    for module in ("__init__", "base", "gaussian", "tokenized"):
        assert f"grpo_robot/policies/{module}.py" in names
    configs = {p.relative_to(ROOT / "conf").as_posix() for p in (ROOT / "conf").rglob("*.yaml")}
    assert {"config.yaml", "evaluate.yaml", "algo/grpo.yaml", "env/push_cube.yaml", "policy/gaussian.yaml"} <= configs
    assert {name for name in names if name.startswith("grpo_robot/conf/") and name.endswith(".yaml")} == {
        f"grpo_robot/conf/{name}" for name in configs
    }
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gymnasium, grpo_robot.envs as e, grpo_robot.trainer;"
        "assert e.__file__.startswith(sys.argv[1]), e.__file__;"
        "env = gymnasium.make('grpo_robot/PlaceCube-v2'); print(env.reset(seed=0)[0].shape)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(target)], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(22,)"


def test_wheel_in_fresh_venv_trains_from_any_directory(wheel, tmp_path):
    """`pip install <wheel>` (not editable) into a new virtual environment gives a `grpo-train` that
    composes the default job from the installed configs and trains, run from outside the source tree."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # Install first, into the still-empty venv, so pip sees no other grpo-robot to replace.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        check=True,
        timeout=300,
        env=_clean_env(),
    )
    # Then let the venv see this environment's dependencies (torch, mujoco, hydra, ...) after its own
    # site-packages. The .pth files of those folders (an editable install's finder) are not run.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    (Path(purelib) / "outer_site_packages.pth").write_text("".join(f"{path}\n" for path in outer))

    work = tmp_path / "elsewhere"
    work.mkdir()
    probe = "import grpo_robot, grpo_robot.cli as c; print(grpo_robot.__file__); print(c.CONF_DIR)"
    out = subprocess.run([str(python), "-c", probe], cwd=work, capture_output=True, text=True, env=_clean_env())
    assert out.returncode == 0, out.stderr
    module_file, conf_dir = out.stdout.split()
    for path in (module_file, conf_dir):
        assert Path(path).is_relative_to(Path(purelib)), path
        assert not Path(path).is_relative_to(ROOT), path

    run_dir = tmp_path / "run"
    overrides = [
        "experiment=reach_from_scratch",
        "iterations=1",
        "algo.group_size=2",
        "algo.groups_per_iter=2",
        "algo.epochs=1",
        "algo.minibatches=1",
        "eval_seeds=2",
        "policy.hidden_sizes=[8]",
        "progress=false",
        "device=cpu",
        f"hydra.run.dir={run_dir}",
    ]
    out = subprocess.run(
        [str(venv / "bin" / "grpo-train"), *overrides],
        cwd=work,
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "trained 1 iterations" in out.stdout
    assert (run_dir / "checkpoints" / "last.pt").is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["iterations"] == 1
    assert summary["env_steps"] > 0
