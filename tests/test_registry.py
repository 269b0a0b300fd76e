"""grpo_robot/registry.py: the config's names are declared apart from their implementations, so
a bad config is refused before torch loads; each implementation module files exactly the names
declared for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_robot import registry
from grpo_robot.registry import ADVANTAGE_ESTIMATORS, Registry, needs_critic

TESTS = Path(__file__).resolve().parent
REGISTRIES = ("ADVANTAGE_ESTIMATORS", "KL_ESTIMATORS", "AGGREGATIONS", "RATIO_LEVELS", "POLICY_LOSSES", "POLICIES",
              "ACTIVATIONS")  # fmt: skip
BAD = [  # one bad value per command, each a field the registries or the ranges decide
    ("train", "algo.lr=-1"),
    ("train", "algo.advantage=grpx"),
    ("train", "policy.activation=tanx"),
    ("train", "policy.type=tokenised"),
    ("evaluate", "checkpoint=x.pt", "n_seeds=0"),
    ("collect_demos", "demos.episodes=0"),
    ("pretrain_bc", "dataset=x.npz", "bc.lr=-1"),
]
# in a fresh process: the bad configs first, whether torch was loaded by then, then every
# registry's entries once its module has loaded
SCRIPT = """
import json, sys
from cli_harness import run_main
out = {"bad": [[o.code, o.error_lines] for o in (run_main(*case) for case in %r)], "torch": "torch" in sys.modules}
from grpo_robot import registry
out["entries"] = {name: list(getattr(registry, name)) for name in %r}
out["declared"] = {name: list(getattr(registry, name).builtin) for name in %r}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fresh() -> dict:
    script = SCRIPT % (BAD, REGISTRIES, REGISTRIES)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=TESTS,
                         env={**os.environ, "PYTHONPATH": str(TESTS)})  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_a_bad_config_is_refused_before_torch_loads(fresh):
    expected = [
        "error: algo.lr=-1.0 is invalid: must be in (0, 1]",
        "error: algo.advantage='grpx' is invalid: must be one of grpo, dr_grpo, rloo, gae",
        "error: policy.activation='tanx' is invalid: must be one of tanh, sigmoid_tanh, torch_tanh, relu, elu, gelu",
        "error: policy.type='tokenised' is invalid: must be one of gaussian, tokenized",
        "error: n_seeds=0 is invalid: must be >= 1",
        "error: demos.episodes=0 is invalid: must be >= 1",
        "error: bc.lr=-1.0 is invalid: must be in (0, 1]",
    ]
    assert [code for code, _ in fresh["bad"]] == [2] * len(BAD)
    assert [lines for _, lines in fresh["bad"]] == [[line] for line in expected]
    assert fresh["torch"] is False


def test_each_module_files_exactly_the_names_declared_for_it(fresh):
    assert fresh["entries"] == fresh["declared"]


def test_the_declared_critic_estimators_are_those_that_need_a_critic():
    for name in ADVANTAGE_ESTIMATORS.builtin:
        assert needs_critic(name) == ADVANTAGE_ESTIMATORS[name].needs_critic, name
    assert needs_critic("gae") and not needs_critic("grpo") and not needs_critic("no_such_estimator")


def test_names_load_nothing_and_entries_load_their_module():
    table = Registry("grpo_robot.no_such_module", ("a", "b"))
    assert "a" in table and "c" not in table and table.names() == ("a", "b")
    table.file("c", 3)
    assert "c" in table and table["c"] == 3 and table.names() == ("a", "b", "c")
    with pytest.raises(ValueError, match="'c' is already registered"):
        table.file("c", 4)
    with pytest.raises(ModuleNotFoundError, match="grpo_robot.no_such_module"):
        table["a"]  # a built-in name not filed yet: its module loads first
    with pytest.raises(ModuleNotFoundError):
        list(table)
    assert all(isinstance(getattr(registry, name), Registry) for name in REGISTRIES)


def test_a_policy_registered_by_a_plugin_trains_with_the_keys_its_constructor_takes(tmp_path):
    """A plugin's policy (`register_policy`) gets the `policy.` keys its constructor takes, through
    the `**kwargs` it hands to GaussianPolicy; it got the tokenized policy's (bins, head, ...)."""
    from test_train import small_config

    from grpo_robot import checkpoint
    from grpo_robot.config import PolicyConfig
    from grpo_robot.config.schema import policy_kwargs
    from grpo_robot.policies import GaussianPolicy
    from grpo_robot.policies.base import register_policy
    from grpo_robot.trainer import Trainer

    class Plug(GaussianPolicy):
        type = "plug_gaussian"

        def __init__(self, obs_dim, action_dim, *, gain: float = 1.0, **kwargs):
            super().__init__(obs_dim, action_dim, **kwargs)
            self.gain = gain

    register_policy(Plug)
    try:
        cfg = small_config(policy=PolicyConfig(type="plug_gaussian", hidden_sizes=[16], init_std=0.3), iterations=1)
        assert set(policy_kwargs(cfg.policy)) == {"hidden_sizes", "activation", "obs_norm", "init_std",
                                                  "state_dependent_std", "squash", "max_std", "min_std"}  # fmt: skip
        summary = Trainer(cfg, tmp_path).run()
        assert summary["iterations"] == 1
        record = checkpoint.load(tmp_path / "checkpoints" / "last.pt")["policy"]
        assert record["type"] == "plug_gaussian" and record["kwargs"]["init_std"] == 0.3
    finally:
        del registry.POLICIES["plug_gaussian"]
