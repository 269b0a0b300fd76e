"""The CPU-load guard's arithmetic, on a scripted machine."""

import pytest

from grpo_robot.bench.cpu import CpuGuard, CpuSample, foreign_cpu_seconds, foreign_load, sample


class ScriptedMachine:
    """Counters that advance by one scripted interval per measurement: `(cores other processes
    used, cores this process used, seconds)`. The guard samples before and after each one."""

    def __init__(self, intervals):
        self.intervals = list(intervals)
        self.now = CpuSample(busy=100.0, own=10.0, time=50.0)
        self.calls = 0
        self.slept = []

    def sample(self) -> CpuSample:
        if self.calls % 2:  # the end of a measurement
            foreign, own, seconds = self.intervals.pop(0)
            n = self.now
            self.now = CpuSample(n.busy + (foreign + own) * seconds, n.own + own * seconds, n.time + seconds)
        self.calls += 1
        return self.now


def test_foreign_load_is_other_processes_cores_on_average():
    before, after = CpuSample(10.0, 1.0, 0.0), CpuSample(13.0, 2.0, 2.0)
    assert foreign_cpu_seconds(before, after) == 2.0
    assert foreign_load(before, after) == 1.0
    assert foreign_load(before, CpuSample(10.5, 2.0, 2.0)) == 0.0  # clipped at 0 (counter granularity)
    assert foreign_cpu_seconds(CpuSample(None, 1.0, 0.0), after) is None
    assert foreign_load(before, CpuSample(None, 2.0, 2.0)) is None


def test_sample_reads_this_machine():
    a, b = sample(), sample()
    assert b.time >= a.time and b.own >= a.own
    assert a.busy is None or b.busy >= a.busy


def test_a_busy_repeat_is_redone_and_its_time_charged_to_the_budget():
    # wait (quiet), repeat (2 cores busy: redone), wait (quiet), repeat (0.05 cores: kept)
    machine = ScriptedMachine([(0.0, 0.0, 0.25), (2.0, 2.0, 1.5), (0.0, 0.0, 0.25), (0.05, 2.0, 1.0)])
    guard = CpuGuard(max_load=0.1, max_wait=10.0, sample=machine.sample, sleep=machine.slept.append)
    rates = iter([111.0, 222.0])
    assert guard.run(lambda: next(rates)) == 222.0
    assert guard.discarded == 1 and guard.budget == 8.5
    assert guard.worst == pytest.approx(0.05)
    assert machine.slept == [0.25, 0.25] and not machine.intervals
    guard.new_row()
    assert (guard.worst, guard.discarded, guard.budget) == (0.0, 0, 8.5)  # the budget spans the run


def test_waiting_stops_when_the_budget_is_spent_and_the_repeat_is_kept():
    # two busy waits of 0.5 s spend the 0.8 s budget; the busy repeat is then kept as it came
    machine = ScriptedMachine([(1.0, 0.0, 0.5), (1.0, 0.0, 0.5), (3.0, 1.0, 2.0)])
    guard = CpuGuard(max_load=0.1, max_wait=0.8, sample=machine.sample, sleep=lambda s: None)
    assert guard.run(lambda: 7.0) == 7.0
    assert guard.budget == pytest.approx(-0.2) and guard.discarded == 0 and guard.worst == 3.0


def test_the_last_attempt_is_kept_however_busy():
    machine = ScriptedMachine([(0.0, 0.0, 0.25), (1.0, 1.0, 0.1)] * 2)
    guard = CpuGuard(max_load=0.1, max_wait=100.0, attempts=2, sample=machine.sample, sleep=lambda s: None)
    assert guard.run(lambda: 5.0) == 5.0
    assert guard.discarded == 1 and guard.worst == pytest.approx(1.0) and guard.budget == pytest.approx(99.9)


def test_without_proc_stat_repeats_just_run():
    slept = []
    guard = CpuGuard(0.1, 10.0, sample=lambda: CpuSample(None, 0.0, 0.0), sleep=slept.append)
    assert guard.run(lambda: 3.0) == 3.0
    assert (guard.worst, guard.discarded, guard.budget) == (0.0, 0, 10.0)
    assert slept == [0.25]  # one look at the machine, which cannot tell
