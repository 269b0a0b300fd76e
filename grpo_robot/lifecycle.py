"""How a run ends when it cannot end normally.

`emergency_exit(message, code)` is for a thread that finds the run stuck where no exception can
reach it (a Gymnasium env's `step` hung in the main thread): it runs the handlers registered with
`on_emergency` (the trainer's: write the last completed iteration's checkpoint and summary), prints
one line and ends the process with `os._exit`, which does not wait for the stuck thread.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_handlers: list[Callable[[str], None]] = []
_lock = threading.Lock()


def on_emergency(handler: Callable[[str], None]) -> Callable[[], None]:
    """Run `handler(reason)` before an emergency exit; -> a function that unregisters it."""
    with _lock:
        _handlers.append(handler)

    def remove() -> None:
        with _lock:
            if handler in _handlers:
                _handlers.remove(handler)

    return remove


def emergency_exit(message: str, code: int = 1) -> None:
    """Run the registered handlers (each one's failure is reported, not raised), print `error:
    <message>` on stderr and end the process at once with exit code `code`."""
    with _lock:
        handlers = list(_handlers)
    notes = []
    for handler in handlers:
        try:
            note = handler(message)
            if note:
                notes.append(str(note))
        except BaseException as err:  # noqa: BLE001  (nothing may stop the exit)
            notes.append(f"(could not save: {type(err).__name__}: {err})")
    line = " ".join([message, *notes])
    try:
        sys.stdout.flush()
        print(f"error: {line}", file=sys.stderr, flush=True)
    finally:
        os._exit(code)
