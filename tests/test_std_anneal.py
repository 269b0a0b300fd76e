"""The exploration std's falling cap (`algo.std_anneal`): the schedule's values, that training keeps
the Gaussian's std under it (and logs it), that a resumed run goes on with the same schedule, and
that settings it cannot apply to are refused before any work."""

import math

import pytest
import torch
from test_train import resume_matches_straight_run, small_config

from grpo_robot.config import AlgoConfig, ConfigError, PolicyConfig, StdAnnealConfig, validate
from grpo_robot.hooks import Hook, StdAnneal
from grpo_robot.policies.gaussian import GaussianPolicy
from grpo_robot.trainer import Trainer


def test_the_cap_falls_geometrically_from_the_initial_std_then_stays():
    anneal = StdAnneal(start=0.4, final=0.1, iterations=4)
    caps = [anneal.cap(i) for i in range(7)]
    assert caps == pytest.approx([0.4, 0.4 * 0.25**0.25, 0.2, 0.4 * 0.25**0.75, 0.1, 0.1, 0.1], rel=1e-12)


def test_cap_std_moves_the_free_std_under_the_cap_and_never_lifts_the_built_bound():
    policy = GaussianPolicy(3, 2, hidden_sizes=[8], init_std=0.5, max_std=0.6)
    policy.cap_std(0.25)
    assert torch.allclose(policy.log_std.exp(), torch.full((2,), 0.25))
    with torch.no_grad():
        policy.log_std.fill_(math.log(0.5))  # as an optimizer step would move it
    policy.after_step()  # the bound holds after every optimizer step
    assert torch.allclose(policy.log_std.exp(), torch.full((2,), 0.25))
    policy.cap_std(5.0)  # a cap above max_std leaves max_std the bound
    assert policy.log_std_max == pytest.approx(math.log(0.6))
    with pytest.raises(ValueError, match="state_dependent_std"):
        GaussianPolicy(3, 2, hidden_sizes=[8], state_dependent_std=True).cap_std(0.1)


def anneal_config(**overrides):
    algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2,
                      std_anneal=StdAnnealConfig(final=0.1, iterations=2))  # fmt: skip
    return small_config(policy=PolicyConfig(hidden_sizes=[64, 64], init_std=0.4), algo=algo, **overrides)


def test_training_keeps_the_std_at_most_the_cap_and_logs_it(tmp_path):
    trainer = Trainer(anneal_config(iterations=4), tmp_path)
    seen = []

    class Watch(Hook):  # runs after the default hooks: the cap for the next iteration is set
        def after_iteration(self, trainer, record):
            seen.append((record.scalars["charts/std_cap"], trainer.policy.log_std.exp().max().item()))

    trainer.hooks.append(Watch())
    trainer.run()
    logged = [cap for cap, _ in seen]
    assert logged == pytest.approx([0.4, 0.2, 0.1, 0.1])  # the cap each iteration ran under
    # the std the next iteration samples with: at most its cap (0.2, 0.1, ...); a few updates from
    # 0.4 leave the learned std above those caps, so it sits at them
    assert [std for _, std in seen] == pytest.approx([0.2, 0.1, 0.1, 0.1], rel=1e-6)


def test_a_resumed_run_goes_on_with_the_same_schedule(tmp_path):
    resume_matches_straight_run(anneal_config(iterations=4, checkpoint_every=1), tmp_path, 1)


CAPS = r"final=0\.1 is invalid: caps a Gaussian's free std; "


@pytest.mark.parametrize("policy, anneal, message", [
    (PolicyConfig(init_std=0.3), StdAnnealConfig(final=0.3), r"final=0\.3 is invalid: must be below policy\.init_std"),
    (PolicyConfig(init_std=0.3, min_std=0.2), StdAnnealConfig(final=0.1),
     r"final=0\.1 is invalid: must be at least policy\.min_std=0\.2"),
    (PolicyConfig(type="tokenized"), StdAnnealConfig(final=0.1), CAPS + r"policy\.type=tokenized has none"),
    (PolicyConfig(state_dependent_std=True), StdAnnealConfig(final=0.1),
     CAPS + r"policy\.type=gaussian with state_dependent_std=true has none"),
    (PolicyConfig(), StdAnnealConfig(final=-0.1), r"final=-0\.1 is invalid: must be in \(0, 10\]"),
    (PolicyConfig(), StdAnnealConfig(final=math.nan), r"final=nan is invalid"),
    (PolicyConfig(), StdAnnealConfig(final=0.1, iterations=0), r"iterations=0 is invalid: must be >= 1"),
])  # fmt: skip
def test_a_setting_it_cannot_apply_is_refused_before_any_work(policy, anneal, message):
    with pytest.raises(ConfigError, match=rf"algo\.std_anneal\.{message}"):
        validate(small_config(policy=policy, algo=AlgoConfig(std_anneal=anneal)))
