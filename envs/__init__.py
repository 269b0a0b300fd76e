"""Built-in manipulation tasks and their Gymnasium registration (`grpo_robot/<Task>-v<version>`)."""

from __future__ import annotations

import difflib

from .lift_cube import LiftCube
from .place_cube import PlaceCube
from .push_cube import PushCube
from .reach import Reach
from .task import Task

TASKS: dict[str, type[Task]] = {t.name: t for t in (Reach, PushCube, LiftCube, PlaceCube)}


def make_task(name: str) -> Task:
    """The built-in task called `name` (one of `TASKS`)."""
    try:
        return TASKS[name]()
    except KeyError:
        close = difflib.get_close_matches(str(name), TASKS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown task {name!r}{hint}; known tasks: {', '.join(TASKS)}") from None


def register_all() -> None:
    """Register every task with Gymnasium as `grpo_robot/<name>-v<version>` (idempotent)."""
    import gymnasium

    for task in TASKS.values():
        env_id = f"grpo_robot/{task.name}-v{task.version}"
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="grpo_robot.envs.gym_env:TaskEnv",
                kwargs={"task": task.name},
            )


__all__ = ["TASKS", "Task", "make_task", "register_all", "Reach", "PushCube", "LiftCube", "PlaceCube"]
