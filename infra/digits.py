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

import unicodedata

__all__ = [
    "ASCII_DIGITS",
    "ASCII_HINT",
    "ASCII_SPACE",
    "ascii_digits",
    "ascii_float",
    "ascii_int",
    "ascii_spelling",
    "foreign_character",
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


def foreign_character(text: str) -> str | None:
    r"""The first character of ``text`` a number written in ASCII cannot hold, named; or None.

    Printable ASCII and tab are a number's own; anything else (a fullwidth or other script's
    digit, a superscript, a Unicode space, a control character such as U+001F, which Python's
    ``str.split`` and regex ``\s`` take for a separator) is named, so the message says what
    was typed instead of "not a number".

    >>> foreign_character("16"), foreign_character("\uff11\uff16")
    (None, 'a fullwidth digit U+FF11 (FULLWIDTH DIGIT ONE)')
    >>> foreign_character("1\x1fGiB")
    'a control character U+001F'
    """
    for char in text:
        if " " <= char <= "~" or char == "\t":
            continue
        code = f"U+{ord(char):04X}"
        name = unicodedata.name(char, "")
        return f"{_kind(char, name)} {code}" + (f" ({name})" if name else "")
    return None


def _kind(char: str, name: str) -> str:
    if char.isdigit():  # decimal digits of every script, superscripts, circled digits
        if "FULLWIDTH" in name:
            return "a fullwidth digit"
        if char.isdecimal():
            return "a digit of another script"
        return "a superscript digit" if "SUPERSCRIPT" in name else "a digit-like sign"
    if char.isspace() and not char.isascii():
        return "a non-ASCII space"
    category = unicodedata.category(char)
    if category == "Cc":
        return "a control character"
    if category == "Cf":
        return "an invisible format character"
    return "a non-ASCII character"


def ascii_spelling(text: str) -> str | None:
    """``text`` in ASCII, when it differs only by characters `foreign_character` names.

    Fullwidth and other scripts' digits are made ASCII, Unicode spaces plain spaces, control
    and format characters dropped; None when more than that differs.

    >>> ascii_spelling("\uff11\uff16"), ascii_spelling("1\u2003GiB"), ascii_spelling("\u00b2")
    ('16', '1 GiB', None)
    """
    out = []
    for char in text:
        if " " <= char <= "~" or char == "\t":
            out.append(char)
        elif char.isdecimal():
            out.append(str(unicodedata.decimal(char)))
        elif unicodedata.category(char) in ("Cc", "Cf"):
            continue
        elif char.isspace():
            out.append(" ")
        else:
            return None
    spelt = "".join(out).strip()
    return spelt if spelt and spelt != text else None
