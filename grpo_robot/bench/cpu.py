"""How much CPU other processes take while a benchmark runs, and a guard that redoes the repeats
they disturbed.

The machine's busy time comes from /proc/stat (all processes, steal included), this process's
own from `getrusage` (all its threads); the difference is what the rest of the machine used.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has been busy (all processes, steal included), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads of this process
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class CpuSample:
    """The CPU counters at one moment."""

    busy: float | None  # `busy_cpu_seconds()`: None without /proc/stat
    own: float  # `own_cpu_seconds()`
    time: float  # `time.perf_counter()`


def sample() -> CpuSample:
    return CpuSample(busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter())


def foreign_cpu_seconds(before: CpuSample, after: CpuSample) -> float | None:
    """CPU seconds other processes used between two samples (None without /proc/stat)."""
    if before.busy is None or after.busy is None:
        return None
    return (after.busy - before.busy) - (after.own - before.own)


def foreign_load(before: CpuSample, after: CpuSample) -> float | None:
    """Cores other processes used on average between two samples, at least 0."""
    cpu = foreign_cpu_seconds(before, after)
    return None if cpu is None else max(0.0, cpu / (after.time - before.time))


class CpuGuard:
    """Times a repeat only while other processes leave the cores alone.

    A threaded run loses a whole core to any other busy process, so a repeat during which other
    processes averaged more than `max_load` cores is thrown away and run again (at most
    `attempts` times), after waiting for the machine to quieten. Waiting and redone repeats draw
    on one time budget for the whole run, `max_wait` seconds, so a busy machine delays the run by
    a bounded amount; once it is spent, repeats are kept as they come and the load they saw is
    reported. Without /proc/stat it only runs the repeats. `sample` and `sleep` read the counters
    and wait (replaceable, e.g. by a scripted machine).
    """

    def __init__(
        self,
        max_load: float,
        max_wait: float,
        attempts: int = 4,
        sample: Callable[[], CpuSample] = sample,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_load, self.budget, self.attempts = max_load, max_wait, attempts
        self.sample, self.sleep = sample, sleep
        self.worst = 0.0  # highest foreign load (cores) over the kept repeats since `new_row`
        self.discarded = 0  # repeats redone since `new_row`

    def new_row(self) -> None:
        self.worst, self.discarded = 0.0, 0

    def measure(self, fn: Callable[[], float]) -> tuple[float, float | None, float]:
        """`(fn(), average cores used by other processes while it ran, seconds it took)`."""
        before = self.sample()
        result = fn()
        after = self.sample()
        return result, foreign_load(before, after), after.time - before.time

    def wait_for_quiet(self) -> None:
        while self.budget > 0:
            _, load, seconds = self.measure(lambda: self.sleep(0.25) or 0.0)
            if load is None or load <= self.max_load:
                return
            self.budget -= seconds

    def run(self, fn: Callable[[], float]) -> float:
        """One repeat of `fn` (which returns a rate), redone while the machine is busy."""
        for attempt in range(self.attempts):
            self.wait_for_quiet()
            rate, load, seconds = self.measure(fn)
            if load is None or load <= self.max_load or attempt == self.attempts - 1 or self.budget <= 0:
                self.worst = max(self.worst, load or 0.0)
                return rate
            self.budget -= seconds
            self.discarded += 1
        raise AssertionError("unreachable")
