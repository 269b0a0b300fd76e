"""The Ray cluster path end to end on one host: `ray start --head` and `ray start --address`
(two raylets), a training run that joins them, one rollout worker on each node. It stops every
Ray on this host at the end (`ray stop`), so it is `slow` and lives apart from the tests that
share a local Ray: `pytest -m slow tests/test_ray_cluster.py` (about a minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.slow
def test_two_ray_nodes_on_one_host_train_as_one_cluster(tmp_path):
    """The cluster path end to end: a head and a second node started with `ray start` (two
    raylets on this host), a run that joins them with ray.address, a worker on each node, and
    the local backend's parameters. `pytest -m slow -k two_ray_nodes` (about a minute)."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    env = {**os.environ, "RAY_ADDRESS": "", "RAY_AUTH_MODE": "disabled"}  # a throwaway cluster on this host
    port = 6391
    head = subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                           "--disable-usage-stats"], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert head.returncode == 0, head.stderr[-2000:]
    try:
        join = [ray_cli, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--disable-usage-stats"]
        node = subprocess.run(join, capture_output=True, text=True, env=env, timeout=120)
        assert node.returncode == 0, node.stderr[-2000:]
        code = f"""
import json, sys, torch
sys.path.insert(0, {str(ROOT / "tests")!r})
from dataclasses import replace
from test_train import small_config
from grpo_robot.config import RayConfig, RolloutConfig
from grpo_robot.trainer import Trainer
cfg = small_config(iterations=2)
out = {{}}
for backend in ("local", "ray"):
    c = replace(cfg, rollout=RolloutConfig(backend=backend, workers=2), ray=RayConfig(address="127.0.0.1:{port}"))
    t = Trainer(c, {str(tmp_path)!r} + "/" + backend)
    t.run()
    out[backend] = t.policy.state_dict()
    if backend == "ray":
        nodes = t.sampler.nodes
    t.close()
print(json.dumps({{"nodes": nodes, "same": all(torch.equal(out["local"][k], out["ray"][k]) for k in out["local"])}}))
"""
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert len(set(result["nodes"])) == 2 and result["same"]
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, env=env, timeout=120)
