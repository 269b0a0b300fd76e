import pytest

import grpo_robot  # noqa: F401  (registers the Gymnasium ids)
from grpo_robot.envs import TASKS


@pytest.fixture(params=list(TASKS))
def task_name(request) -> str:
    return request.param
