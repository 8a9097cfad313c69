"""Catchable signals as an exception, so every ``finally`` (temp files, staging trees) runs.

Inside `raising_on_signals`, SIGINT, SIGTERM and SIGHUP raise `Interrupted` in the main thread
instead of killing the process (SIGTERM, SIGHUP) or raising KeyboardInterrupt (SIGINT, which
click would turn into a blank line and an Abort). The stack unwinds like any exception, so the
code that created a temporary file removes it; `infra.cli` then reports the signal in one line
and exits the conventional way. A signal the parent ignores (``nohup`` ignores SIGHUP) stays
ignored. SIGKILL cannot be caught: the writers sweep what a killed railplan left instead.

Some work must not stop half way once begun (putting a rendered tree back, removing what a
render left): inside `deferring_signals` the same signals are only recorded; the code asks for
them where stopping is safe (`Held.raise_pending`), and whatever is still held is delivered to
the previous handlers when the block ends.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = [
    "CATCHABLE",
    "Held",
    "Interrupted",
    "deferring_signals",
    "raised_signal",
    "raising_on_signals",
    "swallowed_signal",
]

CATCHABLE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A catchable signal arrived; ``signum`` says which.

    A BaseException, like KeyboardInterrupt, so ``except Exception`` does not swallow it.
    ``after`` says what was done when the signal is delivered only once a step is complete
    ("after the new tree was in place at ..."), for the one line the CLI prints.
    """

    def __init__(self, signum: int, after: str = "") -> None:
        self.signum = signum
        self.after = after
        super().__init__(signal.Signals(signum).name)


_RAISED: list[int] = []  # the signals `_raise` turned into Interrupted, oldest first


def _raise(signum: int, frame: FrameType | None) -> None:
    _RAISED.append(signum)
    raise Interrupted(signum)


_SWALLOWED: list[int] = []  # raised where Python only prints "Exception ignored" (callbacks)


def _unraisable(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` that keeps an `Interrupted` Python could not raise, silently.

    The handler raises wherever the main thread is, a weakref callback or a ``__del__``
    among them (importlib's module locks have one); Python prints such an exception as
    "Exception ignored" with a traceback and goes on, so the signal was lost.
    """

    def keep(unraisable: Any) -> object:
        if isinstance(unraisable.exc_value, Interrupted):
            _SWALLOWED.append(unraisable.exc_value.signum)
            return None
        return hook(unraisable)

    return keep


def swallowed_signal() -> int | None:
    """The first signal raised as `Interrupted` where Python could not raise it, or None."""
    return _SWALLOWED[0] if _SWALLOWED else None


def raised_signal() -> int | None:
    """The last signal raised as `Interrupted` in this process, or None.

    For code that sees another exception where `Interrupted` was raised: a library that
    catches it inside its own machinery (pydantic building a schema from Rust wraps it in a
    SchemaError) hands back its own error, and the signal would pass for a railplan bug.
    """
    return _RAISED[-1] if _RAISED else None


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
        if current is _raise or current == signal.SIG_IGN or isinstance(current, Held):
            continue  # an outer deferral stays in force: its block must not be cut short
        previous[signum] = signal.signal(signum, _raise)
    hook = sys.unraisablehook
    if previous:  # the outermost block (a command): what an earlier one saw is not ours
        _RAISED.clear()
        _SWALLOWED.clear()
        sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Held:
    """The signals that arrived inside `deferring_signals`, oldest first (the handler)."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: record ``signum`` (once) for later."""
        if signum not in self.signals:
            self.signals.append(signum)

    def raise_pending(self) -> None:
        """Raise `Interrupted` for the oldest signal held, if any: it is handled then."""
        if self.signals:
            raise Interrupted(self.signals.pop(0))


@contextmanager
def deferring_signals() -> Iterator[Held]:
    """Hold `CATCHABLE` signals for the duration; deliver the ones still held at its end.

    Delivered to the handlers that were in force before (`raising_on_signals` raises
    `Interrupted`, the default SIGTERM handler ends the process), after the block, whether it
    returned or raised. Nests: an inner block hands what it held to the outer one. Ignored
    signals stay ignored; outside the main thread the block runs unguarded.
    """
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    for signum in CATCHABLE:
        if signal.getsignal(signum) != signal.SIG_IGN:
            previous[signum] = signal.signal(signum, held)
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for pending in held.signals:
            signal.raise_signal(pending)
