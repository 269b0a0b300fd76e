"""Ctrl-C and SIGTERM end a training run cleanly (grpo_robot/trainer.py).

While a `SignalGuard` is active (main thread only), the first SIGINT or SIGTERM is recorded: the
run abandons the current iteration when it is still collecting rollouts (nothing has changed yet)
or else finishes it, then saves and stops. A second signal abandons at once (`Interrupted`): the
run goes back to the last completed iteration, saves it and stops. Once the run is saving and
ending, a signal no longer interrupts it, and the next one is not caught (the process ends; the
atomic writes leave the previous files whole).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

CAUGHT = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):  # noqa: N818  (like KeyboardInterrupt: not an Exception, nothing swallows it)
    """A signal abandons the current iteration."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class SignalGuard:
    def __init__(self) -> None:
        self.received: int | None = None  # the first signal, once one came
        self.count = 0
        self._abandonable = False
        self._stopping = False
        self._previous: dict[int, object] = {}

    @property
    def name(self) -> str | None:
        return None if self.received is None else signal.Signals(self.received).name

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in CAUGHT:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous = {}

    def stopping(self) -> None:
        """The run is saving and ending now: a signal no longer interrupts (that would cut the save
        short); the one after it is not caught (the process ends)."""
        self._stopping = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.received is None:
            self.received = signum
        if self._stopping:
            for s in CAUGHT:
                signal.signal(s, signal.SIG_DFL)
            return
        if self.count >= 2:  # a third signal is the default action: the process ends
            for s in CAUGHT:
                signal.signal(s, signal.SIG_DFL)
            raise Interrupted(signum)
        if self._abandonable:
            raise Interrupted(signum)

    @contextmanager
    def abandonable(self) -> Iterator[None]:
        """A stretch that a first signal may abandon at once (it changes nothing that is saved)."""
        if self.received is not None:
            raise Interrupted(self.received)
        self._abandonable = True
        try:
            yield
        except SystemError as err:
            stop = interrupted_by(err)
            if stop is not None:
                raise stop from None
            raise
        finally:
            self._abandonable = False


def interrupted_by(err: BaseException) -> Interrupted | None:
    """The signal `err` stands for, or None: an `Interrupted`, or a SystemError it caused, as a
    handler that raised inside a C extension's own signal check (Ray's `ray.wait` or `ray.get`)
    comes out ("returned a result with an exception set", the signal its cause)."""
    if isinstance(err, Interrupted):
        return err
    return err.__cause__ if isinstance(err, SystemError) and isinstance(err.__cause__, Interrupted) else None
