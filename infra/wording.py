"""Counted nouns in messages: ``1 rack``, ``2 racks``, ``1,024 GPUs`` (never ``1 racks``).

Every stage builds messages with counts in them; this one helper keeps their grammar right.

>>> plural(1, "rack"), plural(1024, "GPU"), plural(2, "leaf", "leaves")
('1 rack', '1,024 GPUs', '2 leaves')
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, in the plural (``many``, default ``noun + 's'``) unless 1."""
    word = noun if count == 1 else (many or f"{noun}s")
    return f"{count:,} {word}"
