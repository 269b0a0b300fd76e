"""GRPO's pure functions against numbers worked by hand."""

import math

import numpy as np
import pytest
import torch

from grpo_robot.algo import (
    ADVANTAGE_ESTIMATORS,
    AGGREGATIONS,
    KL_ESTIMATORS,
    RATIO_LEVELS,
    Layout,
    clipped_policy_loss,
    clipped_surrogate,
    gae,
    grpo_advantages,
    kl_k3,
    mixed_fraction,
    seq_mean_token_mean,
)
from grpo_robot.config import AlgoConfig, ClipConfig, KLConfig
from grpo_robot.evaluation import EvalResult
from grpo_robot.policies import GaussianPolicy
from grpo_robot.policies.base import SigmoidTanh, Tanh, _SigmoidTanh, sigmoid_form_is_faster
from grpo_robot.rollout import Batch
from grpo_robot.seeding import iteration_seeds
from grpo_robot.stats import mean_rate_interval, t975, wilson_interval
from grpo_robot.update import GroupAdvantages


def test_worked_advantage_example():
    rewards = torch.tensor([[1.0, 1, 1, 0, 0, 0, 0, 0]])
    assert rewards.mean().item() == pytest.approx(0.375)
    raw = rewards - rewards.mean()
    assert raw[0, 0].item() == pytest.approx(0.625) and raw[0, -1].item() == pytest.approx(-0.375)
    adv = grpo_advantages(rewards, eps=0.0)
    # population std = sqrt(0.375 * 0.625) = 0.48412
    assert adv[0, :3].tolist() == pytest.approx([1.2910] * 3, abs=1e-4)
    assert adv[0, 3:].tolist() == pytest.approx([-0.7746] * 5, abs=1e-4)
    assert adv.sum().item() == pytest.approx(0.0, abs=1e-12)
    # eps enters the denominator beside the std: (1 - 0.5) / (0.5 + 0.5)
    assert grpo_advantages(torch.tensor([[1.0, 0.0]]), eps=0.5).tolist() == [[0.5, -0.5]]


@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_uniform_groups_get_zero_advantage(eps):
    rewards = torch.tensor([[1.0, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0]])
    adv = grpo_advantages(rewards, eps=eps)
    assert (adv[:2] == 0).all() and torch.isfinite(adv).all()
    assert (adv[2] != 0).all()
    assert mixed_fraction(rewards) == pytest.approx(1 / 3)


def test_group_advantages_cover_exactly_valid_steps():
    mask = torch.tensor([[1, 1, 1], [1, 0, 1], [0, 0, 1]], dtype=torch.bool)  # [T=3, B=3], one group of 3
    success = torch.tensor([1.0, 0.0, 1.0])
    batch = Batch(torch.zeros(3, 3, 2), torch.zeros(3, 3, 1), torch.zeros(3, 3, 1), mask, success, success < 0)
    per_step, metrics = GroupAdvantages(AlgoConfig(group_size=3)).advantages(batch, policy=None)
    a, b = 0.5**0.5, -(2**0.5)  # (1 - 2/3) / std and (0 - 2/3) / std, population std = sqrt(2) / 3
    # packed steps are t-major: (t0: 0, 1, 2), (t1: 0, 2), (t2: 2)
    assert per_step.tolist() == pytest.approx([a, b, a, a, a, a], rel=1e-5)
    assert len(per_step) == batch.valid_steps == 6
    assert metrics["mean_abs_advantage"] == pytest.approx((2 * a - b) / 3, rel=1e-5)
    # two groups of 3, members adjacent: [1, 0, 0] and [1, 1, 0] (grouped the other way round,
    # [1, 1], [0, 1], [0, 0], they give other values)
    success = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    batch = Batch(torch.zeros(1, 6, 2), torch.zeros(1, 6, 1), torch.zeros(1, 6, 1), torch.ones(1, 6, dtype=torch.bool),
                  success, success < 0)  # fmt: skip
    per_step, _ = GroupAdvantages(AlgoConfig(group_size=3)).advantages(batch, policy=None)
    r2 = 2**0.5
    assert per_step.tolist() == pytest.approx([r2, -r2 / 2, -r2 / 2, r2 / 2, r2 / 2, -r2], rel=1e-5)


def test_ratio_levels_by_hand():
    # 3 steps of 2 tokens: trajectory 0 has steps 0-1, trajectory 1 has step 2; horizon 5
    logp = torch.tensor([[0.1, 0.2], [0.3, -0.1], [0.4, 0.0]])
    zeros, adv = torch.zeros(3, 2), torch.tensor([1.0, 1.0, -2.0])
    layout = Layout(torch.tensor([0, 0, 1]), torch.tensor([2, 1]), torch.arange(2), horizon=5)
    kl = KL_ESTIMATORS["k1"]
    action = RATIO_LEVELS["action"](logp, zeros, None, zeros, adv, layout, kl)
    assert action.log_ratio.tolist() == pytest.approx([0.3, 0.2, 0.4]) and action.norm == 5.0
    assert action.kl_ref.tolist() == [0.0, 0.0, 0.0]  # no reference policy
    token = RATIO_LEVELS["token"](logp, zeros, zeros, zeros, adv, layout, kl)
    assert token.log_ratio.tolist() == pytest.approx([0.1, 0.2, 0.3, -0.1, 0.4, 0.0]) and token.norm == 10.0
    assert token.traj.tolist() == [0, 0, 0, 0, 1, 1] and token.lengths.tolist() == [4, 2]
    assert token.kl_ref.tolist() == pytest.approx(logp.flatten().tolist())  # k1 = logp - logp_ref
    assert token.advantages.tolist() == [1.0, 1.0, 1.0, 1.0, -2.0, -2.0]  # each step's advantage on its tokens
    seq = RATIO_LEVELS["sequence"](logp, zeros, None, zeros, adv, layout, kl)
    # GSPO: the mean token log-ratio of each trajectory, its mean advantage, one element each
    assert seq.log_ratio.tolist() == pytest.approx([0.5 / 4, 0.4 / 2]) and seq.norm == 1.0
    assert seq.advantages.tolist() == pytest.approx([1.0, -2.0]) and seq.lengths.tolist() == [1, 1]


def test_policy_loss_by_hand():
    # two one-step trajectories with ratios 1.5 (A = 2) and 0.5 (A = -2), clip 0.2: objectives 2.4 and -1.6
    logp = torch.log(torch.tensor([[1.5], [0.5]])).requires_grad_()
    layout = Layout(torch.tensor([0, 1]), torch.tensor([1, 1]), torch.arange(2), horizon=4)
    cfg = AlgoConfig(clip=ClipConfig(eps=0.2))
    loss, metrics = clipped_policy_loss(logp, torch.zeros(2, 1), torch.tensor([2.0, -2.0]), layout, cfg)
    assert loss.item() == pytest.approx(-(2.4 - 1.6) / 2)
    assert metrics["clip_fraction"].item() == 1.0 and metrics["policy_loss"].item() == pytest.approx(loss.item())
    loss.backward()
    assert logp.grad.abs().sum().item() == 0.0  # both terms are clipped
    # a KL term to a reference enters the loss, not the policy_loss metric
    cfg = AlgoConfig(kl=KLConfig(beta=0.5, estimator="k1"))
    ref = torch.zeros(2, 1)
    loss_kl, metrics = clipped_policy_loss(logp, torch.zeros(2, 1), torch.tensor([2.0, -2.0]), layout, cfg, ref)
    kl = (math.log(1.5) + math.log(0.5)) / 2
    assert loss_kl.item() == pytest.approx(loss.item() + 0.5 * kl) and metrics["kl_ref"].item() == pytest.approx(kl)


def test_an_unset_clip_bound_is_eps_whichever_bound_is_set():
    # ratios 1.15 and 0.85 of two one-step trajectories with A = 1 and A = -1
    logp = torch.log(torch.tensor([[1.15], [0.85]]))
    layout = Layout(torch.tensor([0, 1]), torch.tensor([1, 1]), torch.arange(2), horizon=4)
    adv = torch.tensor([1.0, -1.0])
    for clip, objectives in [(ClipConfig(eps=0.2, low=0.1), (1.15, -0.9)),  # 1 - 0.1 clips 0.85; 1.15 < 1.2
                             (ClipConfig(eps=0.2, high=0.1), (1.1, -0.85)),  # 1 + 0.1 clips 1.15; 0.85 > 0.8
                             (ClipConfig(eps=0.1), (1.1, -0.9))]:  # fmt: skip
        loss, metrics = clipped_policy_loss(logp, torch.zeros(2, 1), adv, layout, AlgoConfig(clip=clip))
        assert loss.item() == pytest.approx(-sum(objectives) / 2), clip
        assert metrics["clip_fraction"].item() == sum(o not in (1.15, -0.85) for o in objectives) / 2


def test_the_entropy_metric_is_per_action_step_summed_over_its_tokens():
    layout = Layout(torch.tensor([0, 0, 1]), torch.tensor([2, 1]), torch.arange(2), horizon=4)
    entropy = torch.tensor([[0.5, 1.0, 1.5], [2.0, 0.0, 1.0], [0.0, 0.3, 0.0]])  # 3 steps of 3 tokens
    logp = torch.zeros(3, 3)
    _, metrics = clipped_policy_loss(logp, logp, torch.ones(3), layout, AlgoConfig(), entropy=entropy)
    assert metrics["entropy"].item() == pytest.approx((3.0 + 3.0 + 0.3) / 3)


def test_a_zero_advantage_step_whose_ratio_overflows_leaves_the_loss_finite():
    """A log-ratio of 89 overflows float32's exp to inf: 0 * inf made the zero-advantage term NaN,
    and with a KL term (which brings such rows into the loss) the minibatch's step was thrown away."""
    logp = torch.tensor([89.0, 0.1, 0.1], requires_grad=True)
    adv = torch.tensor([0.0, 1.0, -1.0])
    objective, ratio, active = clipped_surrogate(logp, torch.zeros(3), adv, 0.2)
    assert objective[0].item() == 0.0 and torch.isfinite(objective).all() and not active[0]
    cfg = AlgoConfig(kl=KLConfig(beta=0.01))
    layout = Layout(torch.arange(3), torch.ones(3, dtype=torch.long), torch.arange(3), horizon=1)
    loss, _ = clipped_policy_loss(logp[:, None], torch.zeros(3, 1), adv, layout, cfg, torch.zeros(3, 1))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all(), (loss, logp.grad)


def test_registering_a_name_twice_raises():
    from grpo_robot.algo import register_advantage

    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_advantage("grpo")(lambda rewards, eps: rewards)
    assert ADVANTAGE_ESTIMATORS["gae"].needs_critic and not ADVANTAGE_ESTIMATORS["grpo"].needs_critic


def test_clipped_surrogate_value_and_gradients():
    eps = 0.2
    logp_old = torch.zeros(6)
    # ratios: 1, 1.5 (above clip), 0.5 (below clip), with A > 0 and A < 0
    logp = torch.log(torch.tensor([1.0, 1.5, 0.5, 1.0, 1.5, 0.5])).requires_grad_()
    adv = torch.tensor([2.0, 2.0, 2.0, -2.0, -2.0, -2.0])
    objective, ratio, clipped = clipped_surrogate(logp, logp_old, adv, eps)
    assert objective.tolist() == pytest.approx([2.0, 2.4, 1.0, -2.0, -3.0, -1.6])
    assert clipped.tolist() == [False, True, False, False, False, True]
    objective.sum().backward()
    grad = logp.grad.tolist()
    # d(rho*A)/dlogp = rho*A where the unclipped term is active; zero where the clip is active
    assert grad == pytest.approx([2.0, 0.0, 1.0, -2.0, -3.0, 0.0])


def test_surrogate_equals_unclipped_at_ratio_one():
    logp = torch.randn(10, requires_grad=True)
    adv = torch.randn(10)
    objective, ratio, _ = clipped_surrogate(logp, logp.detach(), adv, 0.2)
    assert torch.allclose(ratio, torch.ones(10))
    assert torch.allclose(objective, adv)
    objective.sum().backward()
    assert torch.allclose(logp.grad, adv)


def test_k3_nonnegative_and_zero_for_equal_policies():
    g = torch.Generator().manual_seed(0)
    logp, logp_ref = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    assert (kl_k3(logp, logp_ref) >= 0).all()
    assert (kl_k3(logp, logp) == 0).all()
    # r - log r - 1 at r = e: e - 2
    assert kl_k3(torch.tensor([0.0]), torch.tensor([1.0])).item() == pytest.approx(math.e - 2)


def test_seq_mean_token_mean_by_hand():
    values = torch.tensor([1.0, 3.0, 10.0, 4.0, 4.0, 4.0])
    traj = torch.tensor([0, 0, 1, 2, 2, 2])
    lengths = torch.tensor([2, 1, 3])
    # trajectory means 2, 10, 4 -> mean over 3 trajectories = 16/3
    assert seq_mean_token_mean(values, traj, lengths, torch.arange(3)).item() == pytest.approx(16 / 3)


def test_tanh_log_prob_matches_change_of_variables():
    torch.manual_seed(0)
    policy = GaussianPolicy(5, 3, hidden_sizes=[16], init_std=0.8, squash=True, obs_norm=False)
    obs = torch.randn(64, 5)
    raw, action, logp = policy.sample(obs)
    logp = logp.sum(-1)
    mean, log_std = policy.distribution(obs)
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform()]
    )
    expected = reference.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    ok = action.abs().amax(-1) < 0.999  # atanh in the reference loses precision at the bounds
    assert torch.allclose(logp[ok], expected[ok], atol=1e-3)
    assert torch.allclose(policy.log_probs(obs, raw)[0].sum(-1), logp)
    assert (action.abs() < 1).all()


def test_squashed_entropy_estimate_is_unbiased_and_its_gradient_sees_the_squash():
    """The squashed policy's entropy estimate averages to H(tanh(u)) (quadrature), and its
    gradient pulls a saturated mean back toward 0, where the squashed distribution is widest."""
    torch.manual_seed(0)
    policy = GaussianPolicy(2, 1, hidden_sizes=[4], init_std=0.7, squash=True, obs_norm=False)
    with torch.no_grad():
        policy.mean_head[-1].weight.zero_()
        policy.mean_head[-1].bias.fill_(2.0)
    obs = torch.zeros(20000, 2)
    with torch.no_grad():  # as a stored batch holds it
        raw, _, _ = policy.sample(obs)
    _, entropy = policy.log_probs(obs, raw)
    u = torch.linspace(2.0 - 7 * 0.7, 2.0 + 7 * 0.7, 20001, dtype=torch.float64)
    density = torch.exp(-0.5 * ((u - 2.0) / 0.7) ** 2) / (0.7 * math.sqrt(2 * math.pi))
    log_det = torch.log1p(-torch.tanh(u) ** 2)
    exact = 0.5 * math.log(2 * math.pi * math.e * 0.7**2) + torch.trapezoid(density * log_det, u).item()
    assert entropy.mean().item() == pytest.approx(exact, abs=0.02)
    entropy.mean().backward()
    assert policy.mean_head[-1].bias.grad.item() < -0.5  # d H / d mean: about -1.8 at mean 2, std 0.7


def test_gaussian_log_prob_is_of_the_sampled_action_and_env_gets_it_clipped():
    torch.manual_seed(0)
    policy = GaussianPolicy(4, 2, hidden_sizes=[8], init_std=2.0, obs_norm=False)
    obs = torch.randn(256, 4)
    raw, action, logp = policy.sample(obs)
    logp = logp.sum(-1)
    mean, log_std = policy.distribution(obs)
    expected = torch.distributions.Normal(mean, log_std.exp()).log_prob(raw).sum(-1)
    assert torch.allclose(logp, expected, atol=1e-5)
    assert (raw.abs() > 1).any() and (action == raw.clamp(-1, 1)).all()


def test_sigmoid_tanh_matches_torch_tanh_in_value_and_gradient():
    # the sigmoid form, for float32 on the CPU (policies/base.py)
    x = torch.cat([torch.linspace(-30, 30, 200_001), torch.tensor([0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e4])])
    x.requires_grad_(True)
    y = SigmoidTanh()(x)
    y.backward(torch.ones_like(x))
    exact = torch.tanh(x.detach().double())
    assert (y.detach().double() - exact).abs().max().item() < 2e-7
    assert y.detach().abs().max().item() == 1.0  # saturates at +-1, never past
    assert (x.grad.double() - (1 - exact**2)).abs().max().item() < 5e-7
    special = SigmoidTanh()(torch.tensor([float("inf"), -float("inf"), float("nan")]))
    assert special[:2].tolist() == [1.0, -1.0] and special[2].isnan()
    x64 = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.equal(SigmoidTanh()(x64), torch.tanh(x64))  # other dtypes (and devices) take torch.tanh
    assert torch.autograd.gradcheck(_SigmoidTanh.apply, (x64,))  # the form's own backward, in float64


def test_hidden_tanh_without_autograd_is_the_same_computation():
    """Where no gradient is wanted (rollouts, evaluation), the sigmoid form skips autograd's
    bookkeeping: the same values, bit for bit."""
    x = torch.randn(4096) * 5
    with_graph = SigmoidTanh()(x.clone().requires_grad_(True))
    with torch.no_grad():
        assert torch.equal(SigmoidTanh()(x.clone().requires_grad_(True)), with_graph.detach())
    assert torch.equal(SigmoidTanh()(x), with_graph.detach()) and with_graph.requires_grad


def test_the_default_tanh_takes_the_sigmoid_form_on_amd_cpus_only(monkeypatch):
    """policy.activation=tanh: the sigmoid form where it is the faster (AMD's CPUs), torch.tanh on
    any other; the choice is the CPU's vendor, so that a machine's runs repeat."""
    assert sigmoid_form_is_faster("AuthenticAMD") and not sigmoid_form_is_faster("GenuineIntel")
    assert not sigmoid_form_is_faster("unknown")
    assert Tanh.sigmoid_form == sigmoid_form_is_faster()  # this machine's
    x = (torch.randn(4096) * 5).requires_grad_(True)
    for form, expected in ((True, SigmoidTanh()(x)), (False, torch.tanh(x))):
        monkeypatch.setattr(Tanh, "sigmoid_form", form)
        y = Tanh()(x)
        assert torch.equal(y, expected) and y.requires_grad, form
        with torch.no_grad():
            assert torch.equal(Tanh()(x), expected.detach()), form
    assert not torch.equal(SigmoidTanh()(x), torch.tanh(x))  # two computations, which the choice tells apart


def test_obs_normalizer_follows_every_change_of_its_statistics():
    """The normalizer casts its float64 statistics once and reuses them until they change: after
    `update`, `load_state_dict`, a cast or a move of the buffers, and for another input dtype, it
    normalizes exactly as computing from the buffers afresh does."""
    from grpo_robot.policies.base import ObsNormalizer

    def afresh(norm, obs):
        return ((obs - norm.mean.to(obs.dtype)) / torch.sqrt(norm.var.to(obs.dtype) + 1e-8)).clamp(-10, 10)

    torch.manual_seed(0)
    norm, other = ObsNormalizer(5), ObsNormalizer(5)
    obs = torch.randn(64, 5) * 4 + 2
    outputs = []
    for change in ("none", "update", "again", "load_state_dict", "cast", "dtype"):
        if change == "update":
            norm.update(obs)
        elif change == "again":
            norm.update(obs * 3 - 1)
        elif change == "load_state_dict":
            other.update(torch.randn(32, 5) * 0.1 + 7)
            norm.load_state_dict(other.state_dict())
        elif change == "cast":  # new float32 buffers, then changed in place
            norm.float()
            norm.update(obs + 5)
        x = obs.double() if change == "dtype" else obs
        out = norm(x)
        assert torch.equal(out, afresh(norm, x)), change
        assert torch.equal(norm(x), out)  # the reuse
        outputs.append(out.float())
    assert all(not torch.equal(a, b) for a, b in zip(outputs[:5], outputs[1:], strict=True))


def test_activation_torch_tanh_gives_the_same_policy_to_float_rounding():
    torch.manual_seed(0)
    fast = GaussianPolicy(22, 4, hidden_sizes=[128, 128], init_std=0.5, activation="sigmoid_tanh")
    torch.manual_seed(0)
    ref = GaussianPolicy(22, 4, hidden_sizes=[128, 128], init_std=0.5, activation="torch_tanh")
    assert any(isinstance(m, SigmoidTanh) for m in fast.modules())
    assert not any(isinstance(m, SigmoidTanh) for m in ref.modules())
    assert any(isinstance(m, Tanh) for m in GaussianPolicy(22, 4, hidden_sizes=[8]).modules())  # the default
    obs = torch.randn(512, 22) * 3
    mean_fast, mean_ref = fast.distribution(obs)[0], ref.distribution(obs)[0]
    assert not torch.equal(mean_fast, mean_ref)  # two computations ...
    assert torch.allclose(mean_fast, mean_ref, rtol=0, atol=1e-5)  # ... of one function


def test_wilson_interval_known_values():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(3.8415 / 13.8415, abs=1e-4)  # z^2 / (n + z^2)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(10 / 13.8415, abs=1e-4) and high == pytest.approx(1.0)
    low, high = wilson_interval(180, 200)
    assert (low, high) == pytest.approx((0.8506, 0.9343), abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_an_evaluation_reports_the_interval_of_its_own_episodes():
    result = EvalResult(np.arange(10), np.array([True] * 7 + [False] * 3), np.full(10, 5))
    assert result.rate == pytest.approx(0.7)
    assert result.interval == pytest.approx((0.3968, 0.8922), abs=1e-4)  # Wilson, 7 of 10
    record = result.to_json()
    assert record["n"] == 10 and record["wilson95"] == pytest.approx([0.3968, 0.8922], abs=1e-4)
    assert "success 70.0% [39.7%, 89.2%] (95% Wilson, n=10)" in result.summary()


def test_training_group_seeds_differ_by_iteration_and_sampling_round():
    """Dynamic sampling's second draw of an iteration takes other starts than its first; the first
    is the iteration's plain draw."""
    first = iteration_seeds(0, 3, 8)
    assert np.array_equal(iteration_seeds(0, 3, 8, 0), first)
    assert len(np.intersect1d(iteration_seeds(0, 3, 8, 1), first)) == 0
    assert len(np.intersect1d(iteration_seeds(0, 4, 8), first)) == 0
    assert len(np.intersect1d(iteration_seeds(1, 3, 8), first)) == 0


def test_the_interval_across_checkpoints_covers_its_95_percent_with_few_of_them():
    """`evaluate.py -m` over 2-5 checkpoints gave a percentile-bootstrap interval over their rates,
    which covers the mean 50-85% of the time there (measured below: 3 checkpoints, 0.74)."""
    from grpo_robot.plots import bootstrap

    assert t975(1) == 12.706 and t975(30) == 2.042
    assert t975(60) == pytest.approx(2.0003, abs=2e-4) and t975(1000) == pytest.approx(1.9623, abs=2e-4)
    assert mean_rate_interval([0.5, 0.7], 120, 200) == (0.0, 1.0)  # two rates tell little
    low, high = mean_rate_interval([0.0, 0.0, 0.0], 0, 300)  # equal rates: the episodes' own noise remains
    assert low == 0.0 and high == pytest.approx(wilson_interval(0, 300)[1]) and high > 0.01
    # equal rates inside (0, 1): the Wilson interval of the pooled episodes on both sides
    assert mean_rate_interval([0.5, 0.5, 0.5], 150, 300) == pytest.approx((0.44378, 0.55622), abs=1e-5)
    low, high = mean_rate_interval([0.2, 0.3, 0.4, 0.5, 0.6], 400, 1000)
    assert (low, high) == pytest.approx((0.4 - 2.776 * 0.158114 / 5**0.5, 0.4 + 2.776 * 0.158114 / 5**0.5), abs=1e-5)
    rng = np.random.default_rng(0)
    hits, boot_hits, trials, k, n = 0, 0, 400, 3, 50
    for _ in range(trials):  # each checkpoint's true rate from Beta(2, 2) (mean 0.5), measured on n episodes
        wins = rng.binomial(n, rng.beta(2, 2, k))
        low, high = mean_rate_interval(wins / n, int(wins.sum()), n * k)
        hits += low <= 0.5 <= high
        b_low, b_high = bootstrap(wins / n, np.mean, n=200)
        boot_hits += b_low <= 0.5 <= b_high
    assert hits / trials >= 0.92 and boot_hits / trials < 0.85, (hits / trials, boot_hits / trials)


def test_wilson_interval_is_exactly_closed_at_no_and_all_successes():
    # the formula's bound at 0 (or n) successes rounds to 1e-17 (or 1 - 1e-16) for some n: n = 200
    # gave an upper bound of 0.9999999999999999 for 200 of 200, and the JSON kept it
    for n in range(1, 2001):
        assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0, n
        low, high = wilson_interval(n, n)
        assert 0.0 < low < 1.0 and wilson_interval(0, n)[1] == pytest.approx(1.0 - low, abs=1e-12)  # symmetric


def test_dr_grpo_and_rloo_advantages_by_hand():
    rewards = torch.tensor([[1.0, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    dr = ADVANTAGE_ESTIMATORS["dr_grpo"](rewards, 0.0)
    assert dr[0].tolist() == pytest.approx([0.625] * 3 + [-0.375] * 5)
    rloo = ADVANTAGE_ESTIMATORS["rloo"](rewards, 0.0)
    # a success's baseline is the other 7 members' mean 2/7, a failure's 3/7
    assert rloo[0].tolist() == pytest.approx([1 - 2 / 7] * 3 + [-3 / 7] * 5)
    assert torch.allclose(rloo[0], 8 / 7 * dr[0])
    for name in ("grpo", "dr_grpo", "rloo"):
        assert (ADVANTAGE_ESTIMATORS[name](rewards, 1e-6)[1] == 0).all()
    with pytest.raises(ValueError, match="rloo needs groups of at least 2, got 1"):
        ADVANTAGE_ESTIMATORS["rloo"](torch.ones(3, 1), 0.0)  # no other member to be the baseline


def test_clip_higher_and_dual_clip_by_hand():
    logp_old = torch.zeros(5)
    ratios = torch.tensor([1.25, 1.3, 0.75, 5.0, 5.0])
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0])
    logp = torch.log(ratios).requires_grad_()
    objective, _, active = clipped_surrogate(logp, logp_old, adv, 0.2, 0.28)
    # 1.25 < 1.28 stays; 1.3 clips to 1.28; 0.75 clips to 0.8 for A < 0; 5 * -1 is unclipped
    assert objective.tolist() == pytest.approx([1.25, 1.28, -0.8, -5.0, 1.28])
    assert active.tolist() == [False, True, True, False, True]
    objective, _, active = clipped_surrogate(logp, logp_old, adv, 0.2, 0.28, dual_clip=3.0)
    assert objective.tolist() == pytest.approx([1.25, 1.28, -0.8, -3.0, 1.28])  # -5 floored at 3 * A
    objective.sum().backward()
    assert logp.grad.tolist() == pytest.approx([1.25, 0.0, 0.0, 0.0, 0.0])


def test_k3_stays_finite_for_a_sample_far_in_the_references_tail():
    # a narrow policy (std 0.01) and a reference 0.5 away: log pi_ref - log pi is about -1250 or
    # +1250 per dimension; exp of it was inf, and the guarded step undid every such update
    logp = torch.tensor([5.0, -1000.0], requires_grad=True)
    logp_ref = torch.tensor([-1245.0, 300.0])
    kl = kl_k3(logp, logp_ref)
    kl.sum().backward()
    assert torch.isfinite(kl).all() and torch.isfinite(logp.grad).all()
    assert kl[1].item() == pytest.approx(math.exp(20.0) * 1281.0 - 1301.0, rel=1e-5)  # exp's tangent at 20
    assert logp.grad[1].item() == pytest.approx(-(math.exp(20.0) - 1.0), rel=1e-5)  # still pulls toward pi_ref
    assert logp.grad[0].item() == pytest.approx(1.0)  # exp(-1250) is 0: the log-ratio's own gradient
    assert kl_k3(torch.tensor([0.0]), torch.tensor([1.0])).item() == pytest.approx(math.e - 2)  # unclamped inside


def test_kl_estimators_by_hand():
    logp, logp_ref = torch.tensor([0.0, 0.3]), torch.tensor([1.0, 0.3])
    assert KL_ESTIMATORS["k1"](logp, logp_ref).tolist() == pytest.approx([-1.0, 0.0])
    assert KL_ESTIMATORS["k2"](logp, logp_ref).tolist() == pytest.approx([0.5, 0.0])
    assert KL_ESTIMATORS["k3"](logp, logp_ref).tolist() == pytest.approx([math.e - 2, 0.0])


def test_what_each_kl_estimator_pulls_the_policy_toward_as_a_loss():
    """As the penalty's loss on samples of pi (the rollout policy, no importance weight), the exact
    expected gradient on a 6-way categorical: k2's is that of KL(pi || pi_ref), k3's that of
    KL(pi_ref || pi) (as in DeepSeekMath's GRPO), k1's is zero (docs/algorithms.md)."""
    torch.manual_seed(1)
    theta, log_ref = torch.randn(6, requires_grad=True), torch.log_softmax(torch.randn(6), 0)

    def grad(loss) -> torch.Tensor:
        theta.grad = None
        loss().backward()
        return theta.grad.clone()

    def logp() -> torch.Tensor:
        return torch.log_softmax(theta, 0)

    def expected(name: str) -> torch.Tensor:  # E over pi's samples, pi's weights held fixed
        return grad(lambda: (logp().exp().detach() * KL_ESTIMATORS[name](logp(), log_ref)).sum())

    forward = grad(lambda: (logp().exp() * (logp() - log_ref)).sum())  # d KL(pi || pi_ref)
    reverse = grad(lambda: (log_ref.exp() * (log_ref - logp())).sum())  # d KL(pi_ref || pi)
    assert forward.abs().max() > 0.1 and (forward - reverse).abs().max() > 0.05
    assert torch.allclose(expected("k2"), forward, atol=1e-6)
    assert torch.allclose(expected("k3"), reverse, atol=1e-6)
    assert expected("k1").abs().max() < 1e-6


def test_aggregations_by_hand():
    values = torch.tensor([1.0, 3.0, 10.0, 4.0, 4.0, 4.0])
    traj = torch.tensor([0, 0, 1, 2, 2, 2])
    lengths = torch.tensor([2, 1, 3])
    members = torch.arange(3)
    agg = {name: fn(values, traj, lengths, members, 4.0).item() for name, fn in AGGREGATIONS.items()}
    assert agg["seq-mean-token-mean"] == pytest.approx((2 + 10 + 4) / 3)
    assert agg["token-mean"] == pytest.approx(26 / 6)
    assert agg["seq-mean-token-sum-norm"] == pytest.approx(26 / (4 * 3))
    # elements left out (zero advantage) still count in token-mean's denominator
    keep = traj != 1
    assert AGGREGATIONS["token-mean"](values[keep], traj[keep], lengths, members, 4.0).item() == pytest.approx(16 / 6)
    # a minibatch of trajectories 0 and 2 alone: its denominators count its own trajectories and elements
    some = torch.tensor([0, 2])
    assert AGGREGATIONS["seq-mean-token-mean"](values[keep], traj[keep], lengths, some).item() == pytest.approx(3.0)
    assert AGGREGATIONS["token-mean"](values[keep], traj[keep], lengths, some).item() == pytest.approx(16 / 5)
    assert AGGREGATIONS["seq-mean-token-sum-norm"](values[keep], traj[keep], lengths, some, 4.0).item() == \
        pytest.approx(16 / (4 * 2))


def test_gae_by_hand():
    """Two trajectories, time-major: a 3-step success and a 1-step failure padded to 3."""
    rewards = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    values = torch.tensor([[0.5, 0.2], [0.6, 9.0], [0.7, 9.0]])  # padding values must not leak
    mask = torch.tensor([[True, True], [True, False], [True, False]])
    adv, returns = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t=2: 1 - 0.7 = 0.3; t=1: (0.9*0.7 - 0.6) + 0.72*0.3 = 0.246; t=0: (0.9*0.6 - 0.5) + 0.72*0.246
    expected = torch.tensor([[0.04 + 0.72 * 0.246, -0.2], [0.246, 0.0], [0.3, 0.0]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(returns, (expected + values) * mask)
    # gamma = lambda = 1: the Monte Carlo return minus the value
    adv, returns = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv[:, 0], 1.0 - values[:, 0])
    torch.testing.assert_close(returns[:, 0], torch.ones(3))


def test_approx_kl_is_per_action_step_at_every_ratio_level():
    """It is what algo.lr_schedule=adaptive steers by. Computed on the clipped elements, a token's
    ratio gave about a quarter of it with 4 action dimensions and GSPO's geometric-mean ratio almost
    nothing, so the adaptive rate rose at every update while the policy moved further each time."""
    gen = torch.Generator().manual_seed(0)
    logp_old = torch.randn(12, 4, generator=gen)
    logp = logp_old + 0.2 * torch.randn(12, 4, generator=gen)
    layout = Layout(torch.arange(12) // 4, torch.tensor([4, 4, 4]), torch.arange(3), horizon=10)
    step = (logp - logp_old).sum(-1)
    expected = (step.exp() - 1 - step).mean().item()
    assert expected > 0.05  # a real move: about 0.08 per step
    for ratio in ("action", "token", "sequence"):
        _, metrics = clipped_policy_loss(logp, logp_old, torch.ones(12), layout, AlgoConfig(ratio=ratio))
        assert metrics["approx_kl"].item() == pytest.approx(expected, rel=1e-5), ratio


@pytest.mark.parametrize("past", [-10.0, 4.0])
def test_a_state_dependent_std_past_its_bound_can_come_back(past):
    """The head's log-std was clamped with no gradient past a bound: a std pushed to its floor (or
    cap) for every state stayed there for good, whatever the objective wanted next. Its values are
    the clamp's still, and a step that would push it further out gets no gradient."""
    torch.manual_seed(0)
    policy = GaussianPolicy(5, 2, hidden_sizes=[16], state_dependent_std=True, obs_norm=False)
    with torch.no_grad():
        policy.log_std_head[0].weight.zero_()
        policy.log_std_head[0].bias.fill_(past)
    obs, raw = torch.randn(64, 5), torch.zeros(64, 2)
    bound = policy.log_std_min if past < 0 else policy.log_std_max
    assert torch.equal(policy.distribution(obs)[1], torch.full((64, 2), bound))
    inward = 1.0 if past < 0 else -1.0  # the entropy's sign that asks for the way back in
    for sign, moves in ((inward, True), (-inward, False)):
        policy.zero_grad()
        (-sign * policy.log_probs(obs, raw)[1].sum(-1).mean()).backward()
        bias_grad = policy.log_std_head[0].bias.grad
        assert (bias_grad.abs().sum().item() > 0) == moves, (sign, bias_grad)
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.05)
    for _ in range(100):  # the way back in: the std leaves its bound
        optimizer.zero_grad()
        (-inward * policy.log_probs(obs, raw)[1].sum(-1).mean()).backward()
        optimizer.step()
    assert (policy.distribution(obs)[1] - bound).abs().min().item() > 0.5
