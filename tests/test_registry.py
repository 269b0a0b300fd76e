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


def test_a_built_in_name_filed_by_its_module_is_named_once():
    table = Registry("grpo_robot.no_such_module", ("a", "b"))
    table.file("b", 2)
    table.file("z", 26)
    assert table.names() == ("a", "b", "z")
    assert "grpo" in list(ADVANTAGE_ESTIMATORS)  # loaded: its module filed the built-in names
    assert ADVANTAGE_ESTIMATORS.names()[:4] == ("grpo", "dr_grpo", "rloo", "gae")
    assert len(set(ADVANTAGE_ESTIMATORS.names())) == len(ADVANTAGE_ESTIMATORS.names())


def test_a_plugins_estimator_needs_a_critic_as_its_entry_says():
    from grpo_robot.algo import register_advantage

    try:
        register_advantage("test_plugin_group")(lambda rewards, eps=0.0: rewards)
        register_advantage("test_plugin_critic", needs_critic=True)(lambda *args: args)
        assert not needs_critic("test_plugin_group") and needs_critic("test_plugin_critic")
    finally:
        for name in ("test_plugin_group", "test_plugin_critic"):
            ADVANTAGE_ESTIMATORS.pop(name, None)
    assert "test_plugin_group" not in ADVANTAGE_ESTIMATORS


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


def test_a_users_plugins_and_hooks_run_from_the_command_line_and_come_back_with_the_checkpoint(tmp_path, plugin):
    """An advantage, a policy loss and a policy class registered by the user's module, and a hook
    with state, named in the config (`plugins=`, `hooks=`): they were usable through the API
    only, `evaluate.py` and `resume=` could not load the policy, a policy class with its own
    constructor argument could not be resumed, a loss reporting no entropy crashed, and a hook's
    state in last.pt was one iteration behind (the checkpoint was written before user hooks ran)."""
    from cli_harness import run_main

    from grpo_robot import checkpoint
    from grpo_robot.trainer import Trainer

    run = tmp_path / "run"
    tiny = ["env=reach", "algo.group_size=4", "algo.groups_per_iter=4", "algo.minibatches=1", "eval_seeds=4",
            "progress=false", "policy.hidden_sizes=[16]", "algo.entropy_coef=0.01"]  # fmt: skip
    out = run_main("train", *tiny, f"plugins=[{plugin}]", "algo.advantage=rank", "algo.policy_loss=plain_pg",
                   "policy.type=wide_gaussian", "policy.options.width=2", f"hooks=[{plugin}:EMASuccess]",
                   "iterations=2", "checkpoint_every=1",
                   "algo.std_anneal.final=0.2", "algo.std_anneal.iterations=2",  # a Gaussian's: refused by type name
                   f"hydra.run.dir={run}")  # fmt: skip
    assert out.code == 0, out.stderr[-2000:]
    saved = checkpoint.load(run, purpose="resume")
    assert saved["iteration"] == 2 and saved["hooks"]["EMASuccess"]["n"] == 2, saved["hooks"]  # after iteration 2
    record = saved["policy"]  # its own argument, and the sizes it was given, not the ones it derived
    assert (record["kwargs"]["width"], record["kwargs"]["hidden_sizes"]) == (2, [16]), record["kwargs"]
    assert record["state_dict"]["trunk.0.weight"].shape[0] == 32
    for table, name in __import__(plugin).NAMES.items():  # a new process: nothing registered yet
        getattr(registry, table).pop(name)
    sys.modules.pop(plugin)
    out = run_main("evaluate", f"checkpoint={run}", "n_seeds=4")  # the checkpoint's plugins are imported again
    assert out.code == 0 and "success" in out.stdout, out.stderr[-2000:]
    out = run_main("train", f"resume={run}", "iterations=3")
    assert out.code == 0, out.stderr[-2000:]
    assert checkpoint.load(run, purpose="resume")["hooks"]["EMASuccess"]["n"] == 3
    out = run_main("train", *tiny, f"plugins=[{plugin}_typo]", "iterations=1", f"hydra.run.dir={tmp_path / 'typo'}")
    assert out.code == 2 and out.error_lines == [f"error: plugins=['{plugin}_typo']: importing '{plugin}_typo' "
                                                 f"failed: ModuleNotFoundError: No module named '{plugin}_typo'"]
    import plugin_example

    cfg = checkpoint.load(run)["config"]  # the API: two hooks of one class keep two states
    from grpo_robot.config import to_train_config

    base = to_train_config({**cfg, "hooks": [], "iterations": 1, "checkpoint_every": 1, "resume": None})
    first, second = plugin_example.EMASuccess(), plugin_example.EMASuccess()
    second.n = 100  # told apart: they shared one entry, the second's
    Trainer(base, tmp_path / "two", hooks=[first, second]).run()
    states = checkpoint.load(tmp_path / "two", purpose="resume")["hooks"]
    assert (states["EMASuccess"]["n"], states["EMASuccess#2"]["n"]) == (1, 101), states
    import logging

    warned: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warned.append(record.getMessage())
    logger = logging.getLogger("grpo_robot.trainer")  # its own handler: run_main's Hydra set-up took caplog's
    logger.disabled = False
    logger.addHandler(handler)
    try:  # resumed without them: said, not silently dropped
        Trainer(replace_cfg(base, resume=str(tmp_path / "two"), iterations=2), tmp_path / "two").run()
    finally:
        logger.removeHandler(handler)
    assert any("hooks this run does not have (EMASuccess, EMASuccess#2)" in w for w in warned), warned
    summary = Trainer(base, tmp_path / "np", hooks=[plugin_example.NumpyState()]).run()
    assert summary["stopped"] == "error" and summary["error"].startswith(
        "the NumpyState hook's state_dict()['ema'] is a numpy.float64; a checkpoint keeps tensors"), summary["error"]


def test_policy_options_are_refused_in_one_line_where_no_constructor_takes_them(plugin):
    """`policy.options` sets a registered policy class's own constructor arguments: refused on a
    built-in policy, for a key the class does not take, and for a key another `policy.` key sets."""
    from cli_harness import run_main

    cases = [
        (["policy.options.width=2"], "error: policy.options={'width': 2} is invalid: is for a registered policy "
                                     "class of one's own (plugins=[...]); policy.type=gaussian takes none"),
        ([f"plugins=[{plugin}]", "policy.type=wide_gaussian", "policy.options.widht=2"],
         "error: policy.options.widht=2 is invalid: is not an argument of policy.type=wide_gaussian's constructor; "
         "its own are: width"),
        ([f"plugins=[{plugin}]", "policy.type=wide_gaussian", "+policy.options.init_std=0.3"],
         "error: policy.options.init_std=0.3 is invalid: is set by policy.init_std, not in policy.options"),
    ]
    for overrides, line in cases:
        out = run_main("train", *overrides)
        assert out.code == 2 and out.error_lines == [line], (overrides, out.error_lines, out.stderr[-1500:])


def replace_cfg(cfg, **changes):
    from dataclasses import replace

    return replace(cfg, **changes)


def test_a_subclass_of_the_tokenized_policy_clones_against_the_smoothed_targets():
    """Cloning tested the policy's type name: a registered subclass of TokenizedPolicy ignored
    `bc.token_sigma` (the same weights with 8 and 0)."""
    import torch

    from grpo_robot.bc import behaviour_clone
    from grpo_robot.config import BCConfig
    from grpo_robot.demos import collect_demos
    from grpo_robot.policies import TokenizedPolicy

    class MyTokens(TokenizedPolicy):
        type = "my_tokens"

    data, _ = collect_demos("Reach", 3, nthread=1)
    weights = []
    for sigma in (8.0, 0.0):
        torch.manual_seed(0)
        policy = MyTokens(data.obs_dim, data.action_dim, hidden_sizes=[16], bins=21)
        cfg = BCConfig(max_steps=20, eval_every=10, val_fraction=0.0, token_sigma=sigma, seed=0)
        behaviour_clone(policy, data, cfg)
        weights.append({k: v.clone() for k, v in policy.state_dict().items()})
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_registered_advantage_and_loss_take_their_own_settings_from_algo_options(tmp_path, plugin):
    """A registered entry could get no settings of its own (`+algo.rank_temp=2`: not a key of
    algo): `algo.options` gives the estimator the keyword arguments it takes and the loss
    `cfg.options`; with the built-in entries, which take none, it is one line."""
    from cli_harness import run_main

    from grpo_robot import checkpoint

    tiny = ["env=reach", "algo.group_size=4", "algo.groups_per_iter=4", "algo.minibatches=1", "eval_seeds=4",
            "progress=false", "policy.hidden_sizes=[16]", "iterations=1"]  # fmt: skip
    out = run_main("train", *tiny, f"plugins=[{plugin}]", "algo.advantage=rank", "algo.policy_loss=plain_pg",
                   "algo.options.scale=0.5", "algo.options.gain=2", f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert out.code == 0, out.stderr[-2000:]
    import plugin_example

    assert plugin_example.CALLS and all(call == {"scale": 0.5} for call in plugin_example.CALLS)  # gain: the loss's
    assert checkpoint.load(tmp_path / "run")["config"]["algo"]["options"] == {"scale": 0.5, "gain": 2}
    out = run_main("train", *tiny, "algo.options.scale=0.5", f"hydra.run.dir={tmp_path / 'builtin'}")
    assert out.code == 2 and out.error_lines == [
        "error: algo.options={'scale': 0.5} is invalid: is for a registered advantage or policy loss of one's own "
        "(plugins=[...]); algo.advantage=grpo and algo.policy_loss=clipped take none"], out.stderr  # fmt: skip
