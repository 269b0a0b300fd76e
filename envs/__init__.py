"""Built-in manipulation tasks and their Gymnasium registration (`grpo_robot/<Task>-v<version>`)."""

from __future__ import annotations

import difflib

from . import scene
from .lift_cube import LiftCube
from .place_cube import PlaceCube
from .push_cube import PushCube
from .reach import Reach
from .task import Task, versioned


class _FiveMs:
    """The physics step of the tasks' previous versions: 5 ms, 8 steps per 25 Hz control step."""

    timestep, n_substeps = scene.TIMESTEP_5MS, scene.N_SUBSTEPS_5MS


# The previous versions: the same tasks at the 5 ms step, on which every number measured before
# the 10 ms step reproduces (`env.task=PushCube-v1`), and PushCube-v2, which judged the cube in
# the table's plane only; demos recorded on them stay usable.
class ReachV0(_FiveMs, Reach):
    version = 0


class PushCubeV2(PushCube):
    """Success in the table's plane only: a cube held above the goal counts (envs/push_cube.py)."""

    version = 2
    on_table = False


class PushCubeV1(_FiveMs, PushCubeV2):
    version = 1


class LiftCubeV0(_FiveMs, LiftCube):
    version = 0


class PlaceCubeV1(_FiveMs, PlaceCube):
    version = 1


TASKS: dict[str, type[Task]] = {t.name: t for t in (Reach, PushCube, LiftCube, PlaceCube)}  # current versions
# every version by its id, the current ones included (`PushCube-v3`, `PushCube-v2` ...)
TASK_IDS: dict[str, type[Task]] = {
    t.task_id(): t for t in (*TASKS.values(), ReachV0, PushCubeV2, PushCubeV1, LiftCubeV0, PlaceCubeV1)
}
TASK_NAMES: dict[str, type[Task]] = {**TASKS, **TASK_IDS}  # what `env.task` and `make_task` take


def pinned_id(task: str) -> str:
    """The id of the version that `env.task=task` runs: `PushCube` -> `PushCube-v3` (the current
    version), an id unchanged; a name that is not a built-in task comes back as it is."""
    return TASK_NAMES[task].task_id() if task in TASK_NAMES else task


def make_task(name: str) -> Task:
    """The built-in task `name`: its current version by name (one of `TASKS`), or a version by id
    (`PushCube-v1`, one of `TASK_IDS`)."""
    try:
        return TASK_NAMES[name]()
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), TASK_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown task {name!r}{hint}; known tasks: {', '.join(TASK_NAMES)}") from None


def register_all() -> None:
    """Register every version of every task with Gymnasium as `grpo_robot/<name>-v<version>` (idempotent)."""
    import gymnasium

    for task_id in TASK_IDS:
        env_id = f"grpo_robot/{task_id}"
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="grpo_robot.envs.gym_env:TaskEnv", kwargs={"task": task_id})


__all__ = ["TASKS", "TASK_IDS", "TASK_NAMES", "Task", "make_task", "pinned_id", "register_all", "versioned",
           "Reach", "PushCube", "LiftCube", "PlaceCube", "ReachV0", "PushCubeV2", "PushCubeV1", "LiftCubeV0",
           "PlaceCubeV1"]
