"""Progress of long stages: the callback a stage reports to, and the one that ignores it.

Stages stay pure: they take a `Progress` and call it as ``progress(what, done, total)`` at
their own milestones (``done`` of ``total`` steps, ``what`` the step starting); they never
print. `infra.cli` turns the calls into a progress bar on a terminal; everything else passes
`quiet`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Progress", "quiet"]


class Progress(Protocol):
    """Receives ``(what, done, total)`` as a stage advances."""

    def __call__(self, what: str, done: int, total: int) -> None:
        """Step ``done`` of ``total`` done; ``what`` is starting."""


def quiet(what: str, done: int, total: int) -> None:
    """The progress callback that reports nothing."""
