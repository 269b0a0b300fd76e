"""grpo-robot: GRPO for robot manipulation from outcome-only (success/failure) rewards."""

import os

# Rollouts alternate torch inference with MuJoCo's physics thread pool on the same cores, and the
# update runs torch ops back to back. OpenMP's default (spin about 3 ms after each parallel region)
# lets torch's idle threads starve the physics threads; sleeping at once (OMP_WAIT_POLICY=PASSIVE)
# makes every op of the update wake its threads again. A short spin serves both: measured on 2
# cores, the default job's update takes 0.26 s per iteration against 0.43 s when passive, with the
# rollout unchanged (docs/benchmarks.md, "Profile"). These must be set before torch loads its
# OpenMP runtime, so import grpo_robot before torch.
OPENMP_SPIN = {"GOMP_SPINCOUNT": "100000", "KMP_BLOCKTIME": "1"}  # libgomp: spins (about 1 ms); LLVM/Intel: ms
for _name, _value in OPENMP_SPIN.items():
    os.environ.setdefault(_name, _value)
del _name, _value

from grpo_robot.machine import mujoco_gl_error  # noqa: E402

_gl_error = mujoco_gl_error()
if _gl_error:  # `import mujoco` (the built-in tasks) would raise with a traceback: one line instead
    import sys

    print(f"error: {_gl_error}", file=sys.stderr)
    raise SystemExit(2)
del _gl_error

from grpo_robot import envs  # noqa: E402

__version__ = "0.1.0"

envs.register_all()

__all__ = ["BatchedEnv", "group_seeds", "load_policy", "envs", "__version__"]

# loaded on first use, so that what needs neither (the config's checks) runs without torch
_LAZY = {"BatchedEnv": "grpo_robot.batched", "group_seeds": "grpo_robot.seeding", "load_policy": "grpo_robot.deploy"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'grpo_robot' has no attribute {name!r}")
