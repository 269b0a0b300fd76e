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


def test_every_test_of_the_default_run_has_a_time_limit_and_slow_checks_have_none(request):
    """A hung test fails at `TEST_TIMEOUT_S`, at most the run's 10-minute budget, with every
    thread's stack (pytest-timeout) instead of holding the run; the items of this session, as the
    conftest marked them."""
    from conftest import TEST_TIMEOUT_S

    assert request.config.pluginmanager.hasplugin("timeout") and 0 < TEST_TIMEOUT_S <= 600
    for item in request.session.items:
        slow = any(item.get_closest_marker(mark) for mark in ("slow", "cuda"))
        limit = item.get_closest_marker("timeout")
        assert (limit is None) == slow, item.nodeid
        assert slow or limit.args[0] == TEST_TIMEOUT_S, item.nodeid
