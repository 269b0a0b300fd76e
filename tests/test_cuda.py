"""The CUDA path against the CPU one: the same update gives the same weights, training learns,
a run is deterministic on the GPU, and a checkpoint written on the GPU loads, evaluates and
resumes on the CPU.

These tests need a CUDA device, so the default run deselects them; on a machine with a GPU run
`pytest -m cuda`. Without one they fail rather than skip, so they can never pass unseen.
"""

import time
from dataclasses import replace

import pytest
import torch
from test_train import small_config

from grpo_robot import checkpoint
from grpo_robot.config import AlgoConfig, PolicyConfig, TrainConfig
from grpo_robot.evaluation import evaluate
from grpo_robot.policies.tokenized import sample_categorical
from grpo_robot.rollout import Batch
from grpo_robot.seeding import eval_seeds
from grpo_robot.trainer import Trainer

pytestmark = pytest.mark.cuda

POLICIES = ["gaussian", "tokenized"]


@pytest.fixture(autouse=True)
def need_cuda():
    if not torch.cuda.is_available():
        pytest.fail("pytest -m cuda needs a CUDA device: torch.cuda.is_available() is False")


def config(device: str, policy: str = "gaussian", **overrides) -> TrainConfig:
    """test_train's small Reach config on `device`, with 100 evaluation seeds."""
    policy_cfg = PolicyConfig(type=policy, hidden_sizes=[64, 64])
    return small_config(device=device, policy=policy_cfg, **{"eval_seeds": 100, **overrides})


def params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in trainer.policy.state_dict().items()}


@pytest.mark.parametrize("policy", POLICIES)
def test_one_update_gives_the_cpu_weights(policy, tmp_path):
    """The same rollout (drawn on the CPU) and the same update on both devices: the weights
    agree to float32 rounding after 2 epochs x 2 minibatches of Adam steps."""
    cpu = Trainer(config("cpu", policy), tmp_path / "cpu")
    gpu = Trainer(config("cuda", policy), tmp_path / "gpu")
    assert gpu.device.type == "cuda" and next(gpu.policy.parameters()).is_cuda
    start = params(cpu)
    assert all(torch.equal(start[k], v) for k, v in params(gpu).items())  # same seeded init
    batch, _ = cpu.sampler.sample(cpu.policy, 0)
    # advantages drawn at random: an untrained policy's groups can all fail, giving zero advantages
    advantages = torch.randn(batch.valid_steps, generator=torch.Generator().manual_seed(0))
    stats_cpu = cpu.learner.update(batch, advantages, 0)
    on_gpu = Batch(*(x.to("cuda") for x in (batch.obs, batch.raw, batch.logp, batch.mask, batch.success, batch.failed)))
    stats_gpu = gpu.learner.update(on_gpu, advantages.to("cuda"), 0)
    end_cpu, end_gpu = params(cpu), params(gpu)
    moved = max((end_cpu[k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-3  # the update changed the weights, so agreement below means something
    for k in start:
        torch.testing.assert_close(end_gpu[k], end_cpu[k], rtol=1e-4, atol=1e-5, msg=k)
    assert stats_gpu["policy_loss"] == pytest.approx(stats_cpu["policy_loss"], rel=1e-3, abs=1e-5)
    cpu.close()
    gpu.close()


def test_sampling_on_the_gpu_follows_the_probabilities():
    probs = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4], device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    draws = sample_categorical(probs.log().expand(200_000, 5), g)
    assert draws.is_cuda
    freq = torch.bincount(draws, minlength=5).float().cpu() / len(draws)
    assert freq[0].item() == 0.0  # a bin of probability 0 is never drawn
    torch.testing.assert_close(freq, probs.cpu(), atol=4e-3, rtol=0)


def test_training_on_cuda_learns_and_its_checkpoint_runs_on_the_cpu(tmp_path):
    cfg = config("cuda", iterations=20, algo=AlgoConfig(group_size=8, groups_per_iter=32, lr=1e-3))
    trainer = Trainer(cfg, tmp_path / "run")
    before = trainer.evaluate().rate
    start = time.perf_counter()
    trainer.run()
    seconds = time.perf_counter() - start
    after = trainer.last_eval.rate
    assert after >= before + 0.4, f"success {before:.2f} -> {after:.2f} in {seconds:.0f} s"
    trainer.close()

    # the checkpoint loads on the CPU (every tensor mapped there) and scores what the GPU scored
    ckpt = checkpoint.load(tmp_path / "run", map_location="cpu")
    policy = checkpoint.policy_from_record(ckpt["policy"], "cpu")
    assert not any(p.is_cuda for p in policy.parameters())
    cpu_env = Trainer(config("cpu"), tmp_path / "unused").eval_env
    on_cpu = evaluate(cpu_env, policy, eval_seeds(cfg.eval_seeds), torch.device("cpu"), True, None, False)
    assert abs(on_cpu.rate - after) <= 0.03, f"GPU eval {after:.2f}, CPU eval of its checkpoint {on_cpu.rate:.2f}"

    # and a CPU run resumes from it, optimizer state included
    resumed = Trainer(replace(cfg, device="cpu", iterations=21, resume=str(tmp_path / "run")), tmp_path / "resumed")
    assert resumed.iteration == 20
    resumed.run()
    assert resumed.iteration == 21
    resumed.close()


def test_a_cuda_run_is_deterministic(tmp_path):
    runs = []
    for name in ("a", "b"):
        trainer = Trainer(config("cuda", "tokenized", iterations=3), tmp_path / name)
        trainer.run()
        runs.append(params(trainer))
        trainer.close()
    for k in runs[0]:
        assert torch.equal(runs[0][k], runs[1][k]), k
