"""Progress bars on stderr for long work (plan, render, report).

Rich bars shown only on a terminal and after a delay, gone when the work ends, so piped and
CI output stays clean.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from infra.progress import Progress as ProgressFn
from infra.progress import quiet

PROGRESS_DELAY_S = 1.0  # work shorter than this shows no bar at all


class _ProgressBar:
    """Rich progress bars on stderr for long work; silent unless stderr is a terminal.

    Off in CI (``CI`` set), on a dumb terminal and when stderr is not a tty;
    ``RAILPLAN_PROGRESS=always|never`` overrides. The bar appears only once the work has
    run for `PROGRESS_DELAY_S` and is gone when it ends (transient), so output stays clean.
    """

    def __init__(self) -> None:
        mode = os.environ.get("RAILPLAN_PROGRESS", "auto")
        tty = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self.enabled = mode == "always" or (mode == "auto" and tty and "CI" not in os.environ)
        self.bars: Any = None
        self.timer: threading.Timer | None = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

            columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
            console = Console(file=sys.stderr, force_terminal=mode == "always")
            self.bars = Progress(*columns, console=console, transient=True)
            delay = 0.0 if mode == "always" else PROGRESS_DELAY_S
            self.timer = threading.Timer(delay, self.bars.start)
            self.timer.daemon = True
            self.timer.start()

    def task(self, title: str) -> ProgressFn:
        """A progress callback that drives one bar titled ``title``."""
        if self.bars is None:
            return quiet
        bars, task = self.bars, self.bars.add_task(title, total=None)

        def report(what: str, done: int, total: int) -> None:
            bars.update(task, description=f"{title}: {what}", completed=done, total=total)

        return report

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.bars is not None:
            self.bars.stop()


@contextmanager
def _progress_bar() -> Iterator[_ProgressBar]:
    bar = _ProgressBar()
    try:
        yield bar
    finally:
        bar.close()
