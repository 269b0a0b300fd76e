import os
import re
import sys
from collections import Counter

import pytest
import torch

import grpo_robot  # noqa: F401  (registers the Gymnasium ids)
from grpo_robot.envs import TASKS
from grpo_robot.machine import usable_cores

# checks that time the machine or use its GPU: they run in one process that has every core
WHOLE_MACHINE = ("slow", "cuda")
# set in each pinned xdist worker: the cores the run was given (tests/test_regression.py uses them)
MACHINE_CORES = "GRPO_ROBOT_TEST_CORES"


def selects(markexpr: str, mark: str) -> bool:
    """Whether `-m markexpr` selects a test that carries `mark` alone (True when unsure)."""
    words = re.findall(r"\w+|[()]", markexpr)
    if not words:
        return True
    if "".join(words) != re.sub(r"\s+", "", markexpr):  # marks with arguments, or anything else
        return True
    expr = " ".join(w if w in ("and", "or", "not", "(", ")") else str(w == mark) for w in words)
    try:
        return bool(eval(expr, {"__builtins__": {}}))  # only True, False, and, or, not, parentheses
    except SyntaxError:
        return True


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the default run, pyproject.toml): one worker per core the process may use, and
    none (a single process) when the run selects slow or cuda checks."""
    if any(selects(config.option.markexpr, mark) for mark in WHOLE_MACHINE):
        return 0
    return usable_cores()


def worker_share() -> tuple[int, int]:
    """(this xdist worker's index, the number of workers); (0, 1) outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return 0, 1
    return int(worker.removeprefix("gw")), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its own share of the cores.

    The project sizes its torch and MuJoCo thread pools from the process's CPU affinity, so
    workers that all see every core run as many threads each as there are cores, and their
    spin-waits starve each other: with `-n 2` on a 2-core EPYC, a 6 s test took 79 s and the whole
    run 777 s, against 525 s pinned. Pinning worker i to every n-th core makes each worker, and
    every process it starts, a smaller machine of its own. With more workers than cores, workers
    share a core each, one thread each.
    """
    index, count = worker_share()
    if count == 1 or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    mine = cores[index::count] or [cores[index % len(cores)]]  # more workers than cores: they share
    os.environ[MACHINE_CORES] = ",".join(map(str, cores))
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(len(mine))


# No test of the default run may take the run's whole budget (10 minutes on 2 cores, README.md):
# one that hangs fails there with every thread's stack (pytest-timeout), instead of holding the
# run until CI's own limit without a word. Slow and CUDA checks, which train to targets, have none.
TEST_TIMEOUT_S = 600


# Seconds each test file takes in the default run (a 2-core AMD EPYC, `pytest --durations=0` summed
# per file). xdist hands a worker a whole file at a time (--dist loadfile); it sorted them by their
# number of tests, so a file of a few long tests (test_faults.py, test_ray.py) came late and ran
# on while the other worker idled. The files go out longest first (with --no-loadscope-reorder),
# the rest by 0.5 s a test. Only the order depends on these numbers.
FILE_SECONDS = {
    "test_faults.py": 231,
    "test_ray.py": 222,
    "test_train.py": 107,
    "test_regression.py": 85,
    "test_render.py": 77,
    "test_config_fuzz.py": 75,
    "test_tune.py": 72,
    "test_bc.py": 60,
    "test_rollout_split.py": 50,
    "test_gym_envs.py": 36,
    "test_env_faults.py": 34,
    "test_any_env_demos.py": 29,
    "test_packaging.py": 25,
    "test_robosuite_env.py": 23,
    "test_bad_files.py": 20,
    "test_curriculum.py": 17,
    "test_plot.py": 17,
    "test_fetch.py": 17,
    "test_envs.py": 15,
    "test_registry.py": 12,
    "test_tokenized.py": 10,
    "test_readme.py": 7,
    "test_benchmark.py": 7,
    "test_ppo.py": 6,
    "test_std_anneal.py": 6,
}


def _file_cost(items) -> dict[str, float]:
    counts = Counter(item.nodeid.split("::")[0] for item in items)
    return {path: FILE_SECONDS.get(path.removeprefix("tests/"), 0.5 * n) for path, n in counts.items()}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not any(item.get_closest_marker(mark) for mark in (*WHOLE_MACHINE, "timeout")):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))
    cost = _file_cost(items)
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])  # stable: a file's tests keep their order


def pytest_runtest_setup(item):
    marks = [mark for mark in WHOLE_MACHINE if item.get_closest_marker(mark)]
    if marks and worker_share()[1] > 1:
        pytest.fail(f"{marks[0]} checks time the whole machine or use its GPU: run them in one process (-n 0)",
                    pytrace=False)


@pytest.fixture(params=list(TASKS))
def task_name(request) -> str:
    return request.param


@pytest.fixture
def plugin():
    """tests/plugin_example.py imported by the test, its entries and module removed after it, so
    that no other test of this process sees its names."""
    yield "plugin_example"
    import plugin_example

    from grpo_robot import registry

    for table, name in plugin_example.NAMES.items():
        getattr(registry, table).pop(name, None)
    sys.modules.pop("plugin_example", None)
