"""Behaviour is pinned: the weights after 3 CPU iterations of the documented configs hash to the
values recorded before the trainer was split into its modules. A change that moves any of them
changes the math (or the random streams) of training; update a hash only for such an intended
change, and say so in the commit. The hashes hold for one kind of CPU's arithmetic (torch's math
libraries take other code paths on another vendor's CPU, and kernels of another vector width
may sum in another order), so they are recorded per CPU vendor and
torch CPU capability, on the 2-core Intel Xeon and AMD EPYC machines this project runs on, with
torch's 2 CPU threads there: a reduction split over another number of threads sums in another
order, so every case runs with 2, on any number of cores. A pytest-xdist worker pinned to one core
(tests/conftest.py) runs each case in a process of its own given back the cores of the machine,
where the 2 threads need not take turns on one core. On a
CPU kind with no record the test skips and says so; record its hashes with `python
tests/test_regression.py` on the commit before a change, then compare after it. The default job
as it runs now (`default_now`) has a record for AMD EPYC with AVX-512 only, so far; elsewhere that
case skips and says so."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import MACHINE_CORES

from grpo_robot.cli import compose_train_config
from grpo_robot.machine import cpu_vendor
from grpo_robot.rollout import torch_threads
from grpo_robot.trainer import Trainer

# every run: 3 iterations on the CPU, a short evaluation (it does not touch the weights), and two
# ways of computing that give the same math to float rounding, as when the hashes were recorded:
# the hidden layers' tanh as torch computes it (the default "tanh" now takes a sigmoid form on the
# CPU, within 2e-7 of it: tests/test_algo.py), and every step's forward pass in the update (a
# zero-advantage step's entropy bonus now goes without one: tests/test_train.py)
RUN = ("device=cpu", "eval_every=1000", "eval_seeds=4", "progress=false")
COMMON = (*RUN, "iterations=3", "policy.activation=torch_tanh", "algo.forward_every_step=true")
# The hashes were recorded on the tasks' 5 ms versions, which stay available by id (PushCube-v1,
# Reach-v0): each case runs on them, so the hashes hold on both CPU kinds' records. The current
# versions differ from them only in the physics step (tests/test_envs.py).
PUSH, REACH = "env.task=PushCube-v1", "env.task=Reach-v0"
# PushCube from scratch gives no success in 3 iterations (so no GRPO-family update): the
# group-advantage variants run on Reach, where random rollouts succeed and every term is exercised.
# "default" pins the default job as its hashes were recorded, before its start curriculum (which
# changes only which starts it draws; tests/test_curriculum.py holds that to account), its std
# bound and its training horizon (tests/test_train_horizon.py), and before the PushCube jobs acted in
# the mirror frame (tests/test_mirror.py holds the frame to account; with it off a policy computes
# as before, to the bit)
NO_MIRROR = "policy.mirror=false"
CASES = {
    "default": ("algo.curriculum.start=null", "policy.max_std=null", "algo.train_horizon=null", NO_MIRROR, PUSH),
    "ppo": ("algo=ppo", "algo.groups_per_iter=128", NO_MIRROR, PUSH),  # a quarter of the batch: every term, less time
    "grpo_reach": ("env=reach", REACH),
    "dr_grpo": ("algo=dr_grpo", "env=reach", REACH),
    "dapo_tokenized": ("algo=dapo", "policy=tokenized_factorized", "env=reach", "algo.groups_per_iter=8", REACH),
    "gspo_autoregressive": ("algo=rloo", "policy=tokenized_autoregressive", "algo.ratio=sequence", "env=reach",
                            REACH),
    # the demo pipeline with GRPO's settings as they were when its hashes were recorded
    "bc_start": ("experiment=push_cube_bc", PUSH, "demos.episodes=10", "bc.max_steps=300", "eval_every=1000",
                 "policy.init_std=0.3", "algo.lr=3e-4", "algo.group_size=16", "algo.groups_per_iter=32",
                 "algo.epochs=4", "algo.minibatches=4", "algo.clip.high=null", "algo.train_horizon=null",
                 "target_success=null", NO_MIRROR),
    # The default job as it runs now (PushCube-v3, the mirror frame, the start curriculum, the std
    # bound, the 80-step training horizon, and the tanh and update forms it computes with):
    # recorded later than the cases above, on the CPU kinds listed in CURRENT only; another kind
    # skips it and says so. Its first successes come in iteration 6, so it runs 7: two updates
    # from mixed groups.
    "default_now": ("iterations=7",),
}
NOW = ("default_now",)  # without COMMON's iterations and forms of computing
INTEL = {
    "default": "0399d2c2adb189c9192def4b8e47bea1595ad0ec268267e308ce8cf61b010844",
    "ppo": "b1aee11237cfe2acfe51560d2440e67430e1374b341555cbf8fc9fe39f458aec",
    "grpo_reach": "6236270bc992ed58a446d89cf749f9a8fd5013d0ff5b139729fe4c69f92a9aa5",
    "dr_grpo": "d2c1399372cb7ed7239c7d8374dfd0b16a215ac17e1ae0dd2ab048726dc7467d",
    "dapo_tokenized": "7e28c04d7669456b2187f9b237e2edc65a9f36a087a0c5930d289754372abe86",
    "gspo_autoregressive": "42e01e12e4211f0caff899954c5703a52a0651ece1b3a471df0e405a65dbbe69",
    "bc_start": "75acd6524edf0f7fbb9160d1d20cd712f22407a2847a0e2ba73d7dbcebb7ee53",
}
AMD = {
    "default": "1105e8c7f6f8feb445a8e67b1a020f721a75cf967281c30afa48d7f96377c103",
    "ppo": "a356008ef7b66ff66baa60bfcfd6aa1fce0f995fd4788e986f413f066d340001",
    "grpo_reach": "6e53934363ba4dab0341222e8d0913baced0086c085e60b894e672c07f6dfdc8",
    "dr_grpo": "6da316c2339ae8a90cbb394e5268e3842f8faee887e10f06c64b869e8f7f9616",
    "dapo_tokenized": "4aa9a08cd6aa753cf0eccfc4051ad7ccad5d4149135773a882394b3868b236e8",
    "gspo_autoregressive": "e6163fb664edbe3fe2b0b38de67e2f44cebff17b5fb20e2118c91e04f2e40930",
    "bc_start": "4296cf7ad23abbce348a8d937e50c85b08eb1113a954bca571030325b92fd67e",
}
# An AMD EPYC without AVX-512 (Zen 3, torch capability AVX2), recorded on the same commit as it
# passed the Gaussian cases of the AVX-512 record: only the tokenized policies' cases differ
AMD_AVX2 = {
    **AMD,
    "dapo_tokenized": "708a105339ff54bdfc17bb3b0aafe77497855360d68f54888d38e6df726c0ad1",
    "gspo_autoregressive": "9d97cf861cb22c40bb6df817b097d49c0d56eb810d22ccaa9367b1d4f908070e",
}
# by the CPU's vendor id and torch's CPU capability (the widest vector kernels it dispatches to)
RECORDED = {("GenuineIntel", "AVX512"): INTEL, ("AuthenticAMD", "AVX512"): AMD, ("AuthenticAMD", "AVX2"): AMD_AVX2}
CURRENT = {
    ("AuthenticAMD", "AVX512"): {"default_now": "bc2551a6128a0de836eeefddfa121238059f46f2433d1d9273f632c2cd4401e1"},
}


def recorded(kind: tuple[str, str]) -> dict[str, str]:
    """The hashes recorded for a CPU kind: each case's, the later ones where they were recorded."""
    return {**RECORDED.get(kind, {}), **CURRENT.get(kind, {})}


def parameter_hash(trainer: Trainer) -> str:
    """sha256 over the policy's (and critic's) tensors, in state_dict order."""
    digest = hashlib.sha256()
    modules = [("policy", trainer.policy)] + ([("critic", trainer.critic.value)] if trainer.critic is not None else [])
    for name, module in modules:
        for key, value in module.state_dict().items():
            digest.update(f"{name}.{key}".encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


THREADS = 2  # torch's CPU threads when the hashes were recorded


def train_and_hash(case: str, run_dir) -> str:
    torch.manual_seed(0)
    cfg = compose_train_config(*CASES[case], *(RUN if case in NOW else COMMON))
    with torch_threads(THREADS):
        trainer = Trainer(cfg, run_dir)
        try:
            trainer.run()
        finally:
            trainer.close()
    return parameter_hash(trainer)


def machine_kind() -> tuple[str, str]:
    return cpu_vendor(), torch.backends.cpu.get_cpu_capability()


@pytest.fixture(scope="module")
def pinned_worker_hashes(request) -> tuple[dict[str, str], str] | None:
    """In a pinned xdist worker, `(hashes, stderr)` of this run's selected cases, trained in one
    process with every core (at 2 threads on the worker's one core, the ppo case took 171 s
    instead of 12), one after another, so torch is imported once; None elsewhere, where each test
    trains its own case. `--dist loadfile` keeps the cases in one worker, so two of them never
    take the same cores at once."""
    if not os.environ.get(MACHINE_CORES) or machine_kind() not in RECORDED:
        return None
    selected = {item.callspec.params["case"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")}  # fmt: skip
    selected &= set(recorded(machine_kind()))  # a case with no record here skips: not trained
    cases = [case for case in CASES if case in selected]
    run = subprocess.run([sys.executable, __file__, *cases], capture_output=True, text=True, timeout=300 * len(cases))
    return dict(re.findall(r'^    "(\w+)": "(\w+)",$', run.stdout, re.MULTILINE)), run.stderr[-3000:]


@pytest.mark.parametrize("case", list(CASES))
def test_three_iterations_hash_as_recorded(case, tmp_path, pinned_worker_hashes):
    kind = machine_kind()
    if case not in recorded(kind):
        pytest.skip(f"no hash of {case} recorded for {kind[0]} CPUs with torch capability {kind[1]}: "
                    "record it with python tests/test_regression.py")  # fmt: skip
    if pinned_worker_hashes is None:
        digest = train_and_hash(case, tmp_path)
    else:
        hashes, stderr = pinned_worker_hashes
        assert case in hashes, stderr
        digest = hashes[case]
    assert digest == recorded(kind)[case]


if __name__ == "__main__":  # print the hashes of this checkout
    import tempfile

    if os.environ.get(MACHINE_CORES):
        os.sched_setaffinity(0, [int(core) for core in os.environ[MACHINE_CORES].split(",")])

    print(f"# {cpu_vendor()}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}")
    for name in sys.argv[1:] or CASES:
        with tempfile.TemporaryDirectory() as tmp:
            print(f'    "{name}": "{train_and_hash(name, tmp)}",', flush=True)
