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
