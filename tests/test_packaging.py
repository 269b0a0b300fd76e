"""The built-in tasks must ship in the installed package, not only work from the source tree."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_tasks_and_imports_outside_source_tree(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("grpo_robot-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("__init__", "task", "scene", "reach", "push_cube", "lift_cube", "place_cube", "gym_env"):
        assert f"grpo_robot/envs/{module}.py" in names
    for module in ("__init__", "base", "gaussian", "tokenized"):
        assert f"grpo_robot/policies/{module}.py" in names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True
    )
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gymnasium, grpo_robot.envs as e, grpo_robot.trainer;"
        "assert e.__file__.startswith(sys.argv[1]), e.__file__;"
        "env = gymnasium.make('grpo_robot/PlaceCube-v0'); print(env.reset(seed=0)[0].shape)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(target)], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(22,)"
