"""Numbers as input files and command lines write them: ASCII digits only.

Python's ``int()`` and ``float()`` read any Unicode decimal digit (Arabic-Indic ``٣``, fullwidth
``３``) and underscores between digits (``1_000``), and ``str.isdigit()`` also takes superscripts
(``²``). No tool whose output railplan reads (ibnetdiscover, iblinkinfo, the published job
traces, nvidia-smi) writes any of them, so a field holding one was edited or damaged and is
refused where it stands, by every reader alike: verify's dump parsers, the trace readers and the
options that take a version. A shared helper, not part of one stage, so the readers cannot drift
apart.
"""

from __future__ import annotations

__all__ = [
    "ASCII_DIGITS",
    "ASCII_HINT",
    "ASCII_SPACE",
    "ascii_digits",
    "ascii_float",
    "ascii_int",
    "plain_ascii",
]

ASCII_DIGITS = frozenset("0123456789")
ASCII_HINT = "write numbers with the ASCII digits 0-9, without '_'"
"""The hint of an error about a number written otherwise."""
ASCII_SPACE = " \t\n\r\v\f"
"""What a reader strips around a field (``text.strip(ASCII_SPACE)``): ``str.strip()`` alone
also strips U+00A0 and the other Unicode spaces, and a number written ``3<U+00A0>`` would
then read as 3 where ``3٣`` is refused."""


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits and nothing else (no sign, no space).

    >>> ascii_digits("550"), ascii_digits("٥٥٠"), ascii_digits("²"), ascii_digits("")
    (True, False, False, False)
    """
    return bool(text) and ASCII_DIGITS.issuperset(text)


def plain_ascii(text: str) -> bool:
    """Whether ``int()``/``float()`` would read ``text`` only as ASCII without ``_``.

    Checked in C (``str.isascii``), so a reader can afford it on every field of a million rows.
    """
    return text.isascii() and "_" not in text


def ascii_int(text: str) -> int:
    """``int(text)`` for ASCII text without ``_`` (a sign and outer spaces are int()'s own).

    Raises:
        ValueError: any other text, as int() does for text it cannot read.

    >>> ascii_int("12"), ascii_int(" 7 ")
    (12, 7)
    """
    if not plain_ascii(text):
        raise ValueError(f"not ASCII digits: {text!r}")
    return int(text)


def ascii_float(text: str) -> float:
    """``float(text)`` for ASCII text without ``_``: ``12``, ``12.5``, ``1e3``, ``inf``, ``nan``.

    The caller checks the range (``inf`` and ``nan`` are read, as float() reads them, so the
    caller's message can say "finite").

    Raises:
        ValueError: any other text, as float() does for text it cannot read.
    """
    if not plain_ascii(text):
        raise ValueError(f"not an ASCII number: {text!r}")
    return float(text)
