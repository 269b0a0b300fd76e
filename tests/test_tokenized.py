"""The tokenized-action policy: bins, per-token log-probs, causal masking, and training."""

import math
from dataclasses import replace

import pytest
import torch
from test_train import small_config

from grpo_robot.config import AlgoConfig, ClipConfig, DynamicSamplingConfig, KLConfig, PolicyConfig
from grpo_robot.policies import TokenizedPolicy, bin_centres, to_tokens
from grpo_robot.policies.tokenized import smoothed_targets
from grpo_robot.trainer import Trainer


@pytest.mark.parametrize("bins", [2, 7, 256])
def test_bins_round_trip_within_half_a_bin(bins):
    action = torch.linspace(-1, 1, 2001)
    centre = bin_centres(bins)[to_tokens(action, bins)]
    assert (centre - action).abs().max() <= 1.0 / bins + 1e-6  # half of a bin of width 2/K
    assert torch.equal(to_tokens(bin_centres(bins), bins), torch.arange(bins))
    assert bin_centres(256)[0].item() == pytest.approx(-1 + 1 / 256)


@pytest.mark.parametrize("head", ["factorized", "autoregressive"])
def test_token_log_probs_sum_to_action_log_prob(head):
    torch.manual_seed(0)
    policy = TokenizedPolicy(6, 4, bins=32, head=head, hidden_sizes=[32], obs_norm=False, temperature=0.7)
    obs = torch.randn(50, 6)
    tokens, action, logp = policy.sample(obs)
    assert logp.shape == (50, 4) and tokens.dtype == torch.long
    assert torch.equal(action, bin_centres(32)[tokens])
    rescored, entropy = policy.log_probs(obs, tokens)
    assert torch.allclose(rescored, logp, atol=1e-5)
    # the action's log-prob is the sum over tokens: check it against the joint probability
    probs = torch.softmax(policy.logits(obs, tokens), -1)  # [50, 4, K]
    joint = probs.gather(-1, tokens[..., None])[..., 0].prod(-1)
    assert torch.allclose(logp.sum(-1).exp(), joint, rtol=1e-4)
    assert ((entropy >= 0) & (entropy <= torch.log(torch.tensor(32.0)) + 1e-5)).all()
    greedy, _, _ = policy.sample(obs, deterministic=True)
    if head == "factorized":
        assert torch.equal(greedy, policy.logits(obs).argmax(-1))


def test_autoregressive_token_ignores_later_tokens():
    torch.manual_seed(0)
    policy = TokenizedPolicy(5, 4, bins=16, head="autoregressive", hidden_sizes=[32], obs_norm=False)
    with torch.no_grad():  # make the embeddings matter
        policy.cond_head[-1].weight.mul_(100)
    obs = torch.randn(8, 5)
    tokens = torch.randint(0, 16, (8, 4))
    base = policy.logits(obs, tokens)
    for t in range(4):
        changed = tokens.clone()
        changed[:, t] = (changed[:, t] + 5) % 16
        logits = policy.logits(obs, changed)
        assert torch.equal(logits[:, : t + 1], base[:, : t + 1])  # dims <= t never see token t
        if t < 3:
            assert not torch.allclose(logits[:, t + 1 :], base[:, t + 1 :])  # later dims do


# training to a threshold (10 s on 2 cores for the factorized head, 22 s for the autoregressive one):
# with -m slow; the heads' decoding and causal masking are checked above, and their updates' math
# is pinned by tests/test_regression.py's tokenized hashes, in the default run
@pytest.mark.slow
@pytest.mark.parametrize("head", ["factorized", "autoregressive"])
def test_tokenized_policy_learns_reach(tmp_path, head):
    cfg = small_config(
        iterations=30,  # seeds 0-2 of both heads reach 99-100% here; at 20 iterations, 20-91% by seed
        eval_seeds=100,
        policy=PolicyConfig(type="tokenized", head=head, bins=64, hidden_sizes=[64, 64]),
        algo=AlgoConfig(group_size=8, groups_per_iter=32, lr=1e-3, ratio="token"),
    )
    trainer = Trainer(cfg, tmp_path)
    before = trainer.evaluate().rate
    trainer.run()
    after = trainer.last_eval.rate
    assert after >= before + 0.6, f"{head}: success {before:.2f} -> {after:.2f}"


@pytest.mark.parametrize(
    "algo",
    [
        dict(ratio="sequence"),
        dict(ratio="token", aggregation="token-mean", clip=ClipConfig(low=0.2, high=0.28, dual=3.0)),
        dict(advantage="dr_grpo", aggregation="seq-mean-token-sum-norm", kl=KLConfig(beta=0.1, estimator="k2")),
        dict(advantage="rloo", kl=KLConfig(beta=0.1, estimator="k1"), entropy_coef=0.01),
    ],
)
def test_objective_variants_update_and_stay_finite(tmp_path, algo):
    cfg = small_config(
        iterations=2, algo=replace(AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2), **algo)
    )
    trainer = Trainer(cfg, tmp_path)
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    batch, _ = trainer.sampler.sample(trainer.policy, 0)
    # advantages drawn at random: whether an untrained policy's groups mix depends on the device's stream
    adv = torch.randn(batch.num_trajectories, generator=torch.Generator().manual_seed(0)).to(trainer.device)
    per_step = adv[batch.packed()[3]]
    stats = trainer.learner.update(batch, per_step, 0)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert stats["approx_kl"] > 0 and stats["skipped_fraction"] == 0
    assert not torch.equal(before["trunk.0.weight"], trainer.policy.state_dict()["trunk.0.weight"])


def test_dynamic_sampling_keeps_only_mixed_groups(tmp_path):
    sampling = DynamicSamplingConfig(enabled=True)
    algo = AlgoConfig(group_size=8, groups_per_iter=8, epochs=2, minibatches=1, dynamic_sampling=sampling)
    policy = PolicyConfig(hidden_sizes=[32], init_std=1.0)
    trainer = Trainer(small_config(algo=algo, policy=policy, iterations=5, max_env_steps=1), tmp_path)
    batch, metrics = trainer.sampler.sample(trainer.policy, 0)
    rate = batch.success.view(-1, 8).mean(1)
    assert ((rate > 0) & (rate < 1)).all()  # every kept group teaches
    drawn, kept = metrics["groups_drawn"], metrics["groups_kept"]
    assert len(rate) == kept <= 8 and drawn % 8 == 0 and drawn <= 8 * sampling.max_rounds
    # discarded groups still cost their steps: the same draws again, counted one by one
    rounds = [trainer.sampler.draw(trainer.policy, 0, r) for r in range(drawn // 8)]
    assert batch.simulated_steps == sum(r.valid_steps for r in rounds) >= batch.valid_steps
    # the share of mixed groups is over every group drawn (it read 1.0, the kept groups', as the bar's success did)
    drawn_rates = torch.cat([r.success.view(-1, 8).mean(1) for r in rounds])
    assert metrics["mixed_groups"] == ((drawn_rates > 0) & (drawn_rates < 1)).float().mean().item() < 1.0
    advantages, _ = trainer.advantage_source.advantages(batch, trainer.policy)
    stats = trainer.learner.update(batch, advantages, 0)
    assert stats["skipped_fraction"] == 0 and stats["approx_kl"] > 0
    # the budget counts every simulated step, kept or not
    fresh = Trainer(trainer.cfg, tmp_path / "fresh")
    fresh.run()
    assert fresh.iteration == 1 and fresh.env_steps == batch.simulated_steps


def test_inverse_cdf_sampler_draws_the_categorical():
    from grpo_robot.policies.tokenized import sample_categorical

    probs = torch.tensor([0.5, 0.0, 0.2, 0.3, 0.0])
    logits = torch.log(probs).expand(40_000, 5)  # -inf for the empty bins
    draws = sample_categorical(logits, torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=5).double() / len(draws)
    assert freq[1] == 0 and freq[4] == 0  # a bin of probability 0 is never drawn
    torch.testing.assert_close(freq, probs.double(), atol=0.01, rtol=0)  # 0.01 is > 4 standard errors
    again = sample_categorical(logits, torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)


@pytest.mark.parametrize("deterministic", [False, True])
def test_autoregressive_decoding_computes_the_trunk_once_and_samples_as_before(deterministic):
    """`sample` runs the trunk once and only the conditional head per dimension; tokens and
    log-probs are bit for bit those of scoring every pass from the observation."""
    torch.manual_seed(0)
    policy = TokenizedPolicy(9, 4, bins=32, head="autoregressive", hidden_sizes=[64, 64])
    obs = torch.randn(257, 9)
    calls = []
    hook = policy.trunk.register_forward_hook(lambda *_: calls.append(1))
    tokens, action, logp = policy.sample(obs, torch.Generator().manual_seed(3), deterministic)
    hook.remove()
    assert len(calls) == 1  # one trunk pass for four dimensions

    generator = torch.Generator().manual_seed(3)  # the reference: every pass from the observation
    expected = torch.zeros(257, 4, dtype=torch.long)
    for d in range(4):
        logits = policy.logits(obs, expected)
        expected[:, d] = policy._choose(logits[:, d : d + 1], generator, deterministic)[0][:, 0]
    expected_logp = torch.log_softmax(logits, -1).gather(-1, expected[..., None])[..., 0]
    assert torch.equal(tokens, expected) and torch.equal(logp, expected_logp)
    assert torch.equal(action, policy.centres[expected])


@pytest.mark.parametrize("head", ["factorized", "autoregressive"])
def test_noise_correlated_in_time_keeps_each_dimension_and_leaves_the_dimensions_of_a_step_apart(head):
    """`algo.noise_correlation`: token d of a step continues token d of the step before, and the
    tokens of one step stay as independent as the policy makes them. The autoregressive head's
    D draws of one shape per step once chained its dimensions to each other (corr 0.89 between
    dimensions 0 and 1 at rho 0.9), and each dimension over time only by rho^D."""
    import numpy as np

    from grpo_robot.seeding import CorrelatedDraws, WorldRows

    torch.manual_seed(0)
    policy = TokenizedPolicy(6, 3, bins=32, head=head, hidden_sizes=[16], obs_norm=False)
    obs = torch.zeros(4000, 6)  # one state: the policy's own tokens are independent across dimensions
    for source in (CorrelatedDraws(torch.Generator().manual_seed(1), 0.9),
                   WorldRows(CorrelatedDraws(torch.Generator().manual_seed(1), 0.9), 0, 4000, 4000)):  # fmt: skip
        steps = [policy.sample(obs, source)[0].double().numpy() for _ in range(3)]
        within = abs(np.corrcoef(steps[0][:, 0], steps[0][:, 1])[0, 1])
        over_time = [np.corrcoef(steps[0][:, d], steps[1][:, d])[0, 1] for d in range(3)]
        assert within < 0.05, within
        assert min(over_time) > 0.85, over_time  # rho 0.9 through the inverse CDF


def test_ordinal_logits_are_the_cumulative_log_odds_and_move_neighbouring_bins_together():
    from grpo_robot.policies.tokenized import ordinal_logits

    scores = torch.randn(3, 12, dtype=torch.float64)
    logsig = torch.nn.functional.logsigmoid
    direct = torch.stack([torch.stack([logsig(s[: k + 1]).sum() + logsig(-s[k + 1 :]).sum() for k in range(12)])
                          for s in scores])  # fmt: skip
    assert torch.allclose(ordinal_logits(scores), direct)
    assert torch.allclose(torch.softmax(ordinal_logits(torch.zeros(12)), -1), torch.full((12,), 1 / 12))
    # one gradient step up on bin 6's log-prob, from the uniform distribution: with free logits
    # every other bin loses alike; with ordinal ones the neighbours gain and the far bins lose most
    for kind, to_logits in (("free", lambda s: s), ("ordinal", ordinal_logits)):
        s = torch.zeros(12, requires_grad=True)
        torch.log_softmax(to_logits(s), -1)[6].backward()
        p = torch.softmax(to_logits(s.detach() + 0.5 * s.grad), -1)
        if kind == "free":
            assert p[5] == pytest.approx(p[0]) and p[5] < 1 / 12
        else:
            assert p[5] > 1 / 12 and p[7] > 1 / 12 and p[0] < p[3] < p[5] and p[11] < p[9] < p[7]


def test_ordinal_tokenized_policy_scores_its_own_samples():
    torch.manual_seed(0)
    policy = TokenizedPolicy(6, 4, bins=32, hidden_sizes=[32], obs_norm=False, bin_logits="ordinal")
    obs = torch.randn(50, 6)
    tokens, action, logp = policy.sample(obs)
    rescored, entropy = policy.log_probs(obs, tokens)
    assert torch.allclose(rescored, logp, atol=1e-5)
    assert entropy.mean().item() == pytest.approx(math.log(32), rel=1e-3)  # near uniform at init
    assert TokenizedPolicy(6, 4, **policy.init_kwargs()).init_kwargs()["bin_logits"] == "ordinal"
    with pytest.raises(ValueError, match="bin_logits must be one of free, ordinal, gaussian, got 'cumulative'"):
        TokenizedPolicy(6, 4, bin_logits="cumulative")


def test_a_learned_temperature_starts_at_the_setting_sharpens_where_modes_win_and_stays_in_bounds():
    from grpo_robot.policies.tokenized import LOG_TEMPERATURE_MAX, LOG_TEMPERATURE_MIN

    torch.manual_seed(0)
    fixed = TokenizedPolicy(6, 4, bins=16, hidden_sizes=[32], obs_norm=False, temperature=0.7)
    learned = TokenizedPolicy(6, 4, bins=16, hidden_sizes=[32], obs_norm=False, temperature=0.7, learn_temperature=True)
    learned.load_state_dict({**fixed.state_dict(), "log_temperature": learned.log_temperature.detach()}, strict=True)
    obs = torch.randn(64, 6)
    torch.testing.assert_close(learned.logits(obs), fixed.logits(obs))  # starts at policy.temperature
    assert learned.std_parameters() == [learned.log_temperature] and fixed.std_parameters() == []
    tokens, _, logp = learned.sample(obs)
    torch.testing.assert_close(learned.log_probs(obs, tokens)[0], logp)
    # raising the likelihood of each state's most likely bins only (the successes sit at the modes)
    # sharpens every dimension at once through the temperature
    opt = torch.optim.SGD([learned.log_temperature], lr=0.5)
    modes = learned.sample(obs, deterministic=True)[0]
    for _ in range(20):
        opt.zero_grad()
        (-learned.log_probs(obs, modes)[0].sum(-1).mean()).backward()
        opt.step()
        learned.after_step()
    temperature = learned.log_temperature.detach().exp()
    assert (temperature < 0.7).all(), temperature
    with torch.no_grad():
        learned.log_temperature.fill_(10.0)
    learned.after_step()
    assert learned.log_temperature.max().item() == pytest.approx(LOG_TEMPERATURE_MAX)
    with torch.no_grad():
        learned.log_temperature.fill_(-10.0)
    learned.after_step()
    assert learned.log_temperature.min().item() == pytest.approx(LOG_TEMPERATURE_MIN)
    rebuilt = TokenizedPolicy(6, 4, **learned.init_kwargs())
    rebuilt.load_state_dict(learned.state_dict())  # the kwargs rebuild the same parameters


def test_decode_picks_the_mode_the_median_or_the_mean_of_each_categorical():
    probs = torch.tensor([0.4, 0.0, 0.35, 0.25])  # centres -0.75, -0.25, 0.25, 0.75
    logits = torch.log(probs.clamp_min(1e-12)).expand(3, 4)
    expected = {"mode": (0, -0.75), "median": (2, 0.25), "mean": (1, -0.3 + 0.0875 + 0.1875)}
    for decode, (token, value) in expected.items():
        policy = TokenizedPolicy(6, 1, bins=4, hidden_sizes=[8], obs_norm=False, decode=decode)
        tokens, action = policy._choose(logits, None, deterministic=True)
        assert tokens.tolist() == [token] * 3, decode
        assert action.tolist() == pytest.approx([value] * 3, abs=1e-6), decode
    with pytest.raises(ValueError, match="decode must be one of mode, median, mean, got 'argmax'"):
        TokenizedPolicy(6, 4, decode="argmax")


@pytest.mark.parametrize("head", ["factorized", "autoregressive"])
def test_decoded_actions_are_deterministic_and_sampling_ignores_decode(head):
    torch.manual_seed(0)
    obs = torch.randn(20, 6)
    base = TokenizedPolicy(6, 3, bins=16, hidden_sizes=[32], obs_norm=False, head=head)
    actions = {}
    for decode in ("mode", "median", "mean"):
        policy = TokenizedPolicy(6, 3, **{**base.init_kwargs(), "decode": decode})
        policy.load_state_dict(base.state_dict())
        tokens, action, logp = policy.sample(obs, deterministic=True)
        again = policy.sample(obs, deterministic=True)
        assert torch.equal(action, again[1]) and torch.equal(tokens, again[0])
        assert torch.allclose(policy.log_probs(obs, tokens)[0], logp, atol=1e-5)  # logp is of the tokens taken
        actions[decode] = action
        drawn = policy.sample(obs, torch.Generator().manual_seed(3))
        assert torch.equal(drawn[0], base.sample(obs, torch.Generator().manual_seed(3))[0])
    centres = bin_centres(16)
    assert torch.isin(actions["mode"], centres).all() and torch.isin(actions["median"], centres).all()
    assert not torch.isin(actions["mean"], centres).all()  # the mean falls between centres
    assert (actions["mean"] - actions["mode"]).abs().max() > 0.01  # a near-uniform categorical at init


def test_gaussian_bin_logits_start_as_a_discretized_gaussian_and_move_the_whole_bump():
    torch.manual_seed(0)
    policy = TokenizedPolicy(6, 4, bins=32, hidden_sizes=[32], obs_norm=False, bin_logits="gaussian", init_std=0.3)
    obs = torch.randn(50, 6)
    probs = torch.softmax(policy.logits(obs), -1)
    bump = torch.softmax(-0.5 * (bin_centres(32) / 0.3) ** 2, -1)
    assert (probs - bump).abs().max().item() < 0.01  # the mean head and free logits start near zero
    tokens, _, logp = policy.sample(obs)
    assert torch.allclose(policy.log_probs(obs, tokens)[0], logp, atol=1e-5)
    assert policy.std_parameters() == [policy.log_width]  # BC keeps the width unless bc.learn_std
    # one small step up on bin 24's log-prob (action 0.53): the whole bump moves toward it, its
    # neighbours gain with it and the far side loses; free logits move bin 24 alone, and barely
    one = obs[:1]
    free = TokenizedPolicy(6, 4, bins=32, hidden_sizes=[32], obs_norm=False)
    ratio = {}
    for name, pol in (("gaussian", policy), ("free", free)):
        before = torch.softmax(pol.logits(one), -1)[0, 0].detach()
        torch.log_softmax(pol.logits(one), -1)[0, 0, 24].neg().backward()
        torch.optim.SGD(pol.parameters(), lr=0.002).step()
        ratio[name] = torch.softmax(pol.logits(one), -1)[0, 0].detach() / before
    assert (ratio["gaussian"][20:29] > 1.1).all() and (ratio["gaussian"][:12] < 0.9).all()
    assert (ratio["free"][:24] - 1).abs().max() < 1e-3 and ratio["free"][24] > 1
    policy.log_width.data.fill_(20.0)
    policy.after_step()
    assert policy.log_width.max().item() == pytest.approx(1.0)  # bounded as a Gaussian's log-std


def test_the_bump_folded_into_one_layer_is_the_discretized_gaussian_it_stands_for():
    """The free logits plus -(c_k - mu)^2 / 2w^2, computed as one linear layer: the same
    categorical as the formula, after training has moved every weight, and the same gradients."""
    torch.manual_seed(1)
    policy = TokenizedPolicy(6, 3, bins=16, hidden_sizes=[32], obs_norm=False, bin_logits="gaussian")
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    obs = torch.randn(40, 6)

    def formula():
        features = policy.trunk(obs)
        mu = policy.mean_head(features)[..., None]
        free = policy.logits_head(features).view(40, 3, 16)
        return free - 0.5 * ((policy.centres - mu) * torch.exp(-policy.log_width)[:, None]).square()

    grads = []
    for logits in (lambda: policy.logits(obs), formula):
        log_p = torch.log_softmax(logits(), -1)
        policy.zero_grad()
        log_p[..., 5].sum().backward()
        grads.append([p.grad.clone() for p in policy.parameters()])
        grads[-1].append(log_p.detach())
    for fused, explicit in zip(*grads, strict=True):
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [dict(type="gaussian"), dict(type="gaussian", state_dependent_std=True), dict(type="tokenized", bins=16),
     dict(type="tokenized", bins=16, bin_logits="gaussian", learn_temperature=True),
     dict(type="tokenized", bins=8, head="autoregressive", embed_dim=4)],
)  # fmt: skip
def test_the_validators_parameter_count_is_the_policys(kwargs):
    from grpo_robot.config.schema import policy_kwargs
    from grpo_robot.config.validate import network_parameters
    from grpo_robot.policies import build_policy

    cfg = PolicyConfig(hidden_sizes=[32, 24], **kwargs)
    policy = build_policy(cfg.type, 7, 3, **policy_kwargs(cfg))
    assert network_parameters(cfg, 7, 3) == sum(p.numel() for p in policy.parameters())


@pytest.mark.parametrize("schedule", ["constant", "adaptive"])
def test_free_logits_train_at_their_fraction_of_the_learning_rate(tmp_path, schedule):
    """policy.free_logits_lr puts the bump policy's free logits in an optimizer group of their own
    at that fraction of algo.lr, under every schedule; 0 freezes them while the bump's mean moves.
    A checkpoint keeps the groups, so a resumed run trains the same way."""
    cfg = small_config(
        policy=PolicyConfig(type="tokenized", bins=16, hidden_sizes=[32, 32], bin_logits="gaussian",
                            free_logits_lr=0.0),
        algo=AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2, lr=1e-3, lr_schedule=schedule),
    )  # fmt: skip
    trainer = Trainer(cfg, tmp_path)
    policy, optimizer = trainer.policy, trainer.learner.optimizer
    free = {id(p) for p in policy.logits_head.parameters()}
    assert [g["lr_scale"] for g in optimizer.param_groups] == [1.0, 0.0]
    assert {id(p) for p in optimizer.param_groups[1]["params"]} == free
    assert not free & {id(p) for p in optimizer.param_groups[0]["params"]}
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    batch, _ = trainer.sampler.sample(policy, 0)
    adv = torch.randn(batch.num_trajectories, generator=torch.Generator().manual_seed(0))[batch.packed()[3]]
    for it in range(3):
        trainer.learner.update(batch, adv, it)
        lrs = [g["lr"] for g in optimizer.param_groups]  # adaptive: the next update's rate
        assert lrs[0] == pytest.approx(1e-3 if schedule == "constant" else lrs[0]) and lrs[0] > 0 and lrs[1] == 0.0
    after = policy.state_dict()
    for name in ("logits_head.0.weight", "logits_head.0.bias"):
        assert torch.equal(before[name], after[name]), name
    for name in ("mean_head.0.weight", "trunk.0.weight"):
        assert not torch.equal(before[name], after[name]), name
    # at 0.5 the free logits move, by less than at the full rate from the same start
    steps = {}
    for scale in (0.5, 1.0):
        policy.load_state_dict(before)
        policy.free_logits_lr = scale
        trainer.learner.set_policy(policy)
        trainer.learner.update(batch, adv, 0)
        lrs = [g["lr"] for g in trainer.learner.optimizer.param_groups]
        assert lrs[1] == pytest.approx(scale * lrs[0]) if scale != 1.0 else len(lrs) == 1
        steps[scale] = (policy.state_dict()["logits_head.0.weight"] - before["logits_head.0.weight"]).abs().mean()
    assert 0 < steps[0.5] < 0.75 * steps[1.0]
    policy.free_logits_lr = 0.0
    trainer.learner.set_policy(policy)
    trainer.learner.update(batch, adv, 1)
    path = trainer.save("last")
    trainer.close()
    resumed = Trainer(replace(cfg, resume=str(path)), tmp_path / "resumed")
    groups = resumed.learner.optimizer.param_groups
    assert [g["lr_scale"] for g in groups] == [1.0, 0.0] and groups[1]["lr"] == 0.0
    resumed.close()
    # a checkpoint from before optimizer groups (one group, no scale) resumes and trains at the rate
    plain = replace(cfg, policy=replace(cfg.policy, free_logits_lr=1.0), resume=None)
    old = Trainer(plain, tmp_path / "old")
    ckpt = old.state()
    for group in ckpt["optimizer"]["param_groups"]:
        del group["lr_scale"]
    torch.save(ckpt, tmp_path / "old.pt")
    old.close()
    resumed = Trainer(replace(plain, resume=str(tmp_path / "old.pt")), tmp_path / "old_resumed")
    resumed.learner.update(batch, adv, 0)
    (group,) = resumed.learner.optimizer.param_groups  # adaptive: the rate it sets for the next update
    assert group["lr"] == (resumed.learner.lr if schedule == "constant" else group["lr"]) > 0
    resumed.close()


@pytest.mark.parametrize("bins, sigma_bins", [(64, 8.0), (16, 1.5), (21, 8.0)])
def test_bc_targets_keep_an_inside_actions_bin_and_a_clipped_actions_tail(bins, sigma_bins):
    """BC's smoothed target: for an action inside the bounds, the discretized density around it
    (its own bin the argmax, however wide the target); for an action at a bound (censored: the
    expert's command was clipped), where clip(a + N(0, s^2)) lands, bin by bin, so the target's
    mean is the clipped draws' (the density cut at the bound put it 0.8 s inside at a = 1)."""
    actions = torch.tensor([[-1.0, -0.97, 0.01, 0.31, 0.6, 0.95, 1.0]])
    target = smoothed_targets(actions, bins, sigma_bins)[0]  # [7, K]
    assert target.shape == (7, bins) and torch.allclose(target.sum(-1), torch.ones(7), atol=1e-6)
    s, centres = sigma_bins * 2.0 / bins, bin_centres(bins).double()
    inside = actions[0, 1:-1]
    assert torch.equal(target[1:-1].argmax(-1), to_tokens(inside, bins))  # the action's own bin
    density = torch.softmax(-0.5 * ((centres - inside[:, None].double()) / s) ** 2, dim=-1)
    torch.testing.assert_close(target[1:-1].double(), density, atol=1e-6, rtol=0)
    noise = torch.randn(2, 400_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    draws = (actions[0, [0, -1], None].double() + s * noise).clamp(-1, 1)
    hist = torch.stack([torch.bincount(to_tokens(row, bins), minlength=bins) for row in draws]).double() / 400_000
    assert (target[[0, -1]].double() - hist).abs().max() < 3e-3  # 400k draws: a bin's standard error <= 8e-4
    mean = (target[[0, -1]].double() * centres).sum(-1)
    torch.testing.assert_close(mean, (hist * centres).sum(-1), atol=2e-3, rtol=0)
    cut = torch.softmax(-0.5 * ((centres - 1.0) / s) ** 2, dim=-1)  # the density at the centres, at a = 1
    assert mean[1] - (cut * centres).sum() > 0.2 * s and abs(mean[0] + mean[1]) < 1e-6


def test_a_clone_of_an_action_at_the_bound_decodes_near_the_bound():
    """Fitted to a saturated expert's action (1.0) and its opposite, the mean decode lands within the
    clipped target's mean (1 - 0.4 s, s = 8 bins = 0.25 here); the target cut at the bound gave 0.80."""
    torch.manual_seed(0)
    policy = TokenizedPolicy(2, 2, bins=64, hidden_sizes=(32,), decode="mean")
    obs, action = torch.randn(256, 2), torch.tensor([[1.0, -1.0]]).expand(256, 2)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(300):
        loss = policy.soft_cross_entropy(obs, action, 8.0).mean()
        optimizer.zero_grad(), loss.backward(), optimizer.step()
    decoded = policy.sample(obs, deterministic=True)[1]
    assert (decoded[:, 0] > 0.88).all() and (decoded[:, 1] < -0.88).all(), decoded.mean(0)


def test_the_decoding_benchmark_runs_as_documented(monkeypatch, capsys):
    # scripts/benchmark_decode.py (docs/benchmarks.md, "Autoregressive decoding") indexed the (tokens,
    # actions) pair `_choose` returns as a tensor, and crashed
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmark_decode.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--batch", "8", "--repeats", "2", "--hidden", "16", "--bins", "8"])
    runpy.run_path(str(script), run_name="__main__")  # asserts the two decodings give the same tokens
    out = capsys.readouterr().out
    assert "| every pass from the observation |" in out and "speed-up: " in out and "torch threads" in out
