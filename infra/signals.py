"""Catchable signals as an exception, so every ``finally`` (temp files, staging trees) runs.

Inside `raising_on_signals`, SIGINT, SIGTERM and SIGHUP raise `Interrupted` in the main thread
instead of killing the process (SIGTERM, SIGHUP) or raising KeyboardInterrupt (SIGINT, which
click would turn into a blank line and an Abort). The stack unwinds like any exception, so the
code that created a temporary file removes it; `infra.cli` then reports the signal in one line
and exits the conventional way. A signal the parent ignores (``nohup`` ignores SIGHUP) stays
ignored. SIGKILL cannot be caught: the writers sweep what a killed railplan left instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["CATCHABLE", "Interrupted", "raising_on_signals"]

CATCHABLE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A catchable signal arrived; ``signum`` says which.

    A BaseException, like KeyboardInterrupt, so ``except Exception`` does not swallow it.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def raising_on_signals() -> Iterator[None]:
    """Turn `CATCHABLE` signals into `Interrupted` for the duration (main thread only).

    Nests: an inner use inside an outer one changes nothing. Outside the main thread Python
    cannot install handlers, so the block runs unguarded.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in CATCHABLE:
        current = signal.getsignal(signum)
        if current is _raise or current == signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
