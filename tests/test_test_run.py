"""The test run's own set-up (tests/conftest.py): which runs take pytest-xdist workers, and each
worker's share of the cores."""

import os
from types import SimpleNamespace

import pytest
import torch
from conftest import MACHINE_CORES, pytest_xdist_auto_num_workers, selects, worker_share


@pytest.mark.parametrize(("markexpr", "slow", "cuda"), [
    ("not slow and not cuda", False, False),  # the default run
    ("slow", True, False),
    ("cuda", False, True),
    ("slow or not slow", True, True),
    ("not (slow or cuda)", False, False),
    ("cuda and not slow", False, True),
    ("not slow", False, True),
    ("other", False, False),
    ("", True, True),  # no -m: every test
    ("slow and marked(key=1)", True, True),  # marks with arguments: unsure, so as if selected
])  # fmt: skip
def test_a_marker_expression_selects_slow_or_cuda_checks_as_pytest_would(markexpr, slow, cuda):
    assert (selects(markexpr, "slow"), selects(markexpr, "cuda")) == (slow, cuda)


def test_auto_takes_a_worker_per_usable_core_and_none_for_slow_or_cuda_checks():
    def workers(markexpr):
        return pytest_xdist_auto_num_workers(SimpleNamespace(option=SimpleNamespace(markexpr=markexpr)))

    assert workers("not slow and not cuda") == len(os.sched_getaffinity(0))  # here: this worker's share
    assert workers("slow") == workers("cuda") == workers("slow or not slow") == 0


def test_each_worker_has_its_share_of_the_cores_and_as_many_torch_threads():
    index, count = worker_share()
    if count == 1:  # one process (-n 0): nothing pinned
        assert MACHINE_CORES not in os.environ
        return
    cores = [int(core) for core in os.environ[MACHINE_CORES].split(",")]
    mine = sorted(os.sched_getaffinity(0))
    assert mine == (cores[index::count] or [cores[index % len(cores)]])
    assert torch.get_num_threads() == len(mine)
