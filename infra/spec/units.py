"""Quantities written the way cluster engineers write them: ``1GiB``, ``2.8TB``, ``175e9``.

YAML 1.1 reads ``175e9`` as a string (its float grammar wants a dot), so counts and sizes are
parsed here, once, into plain ints for the models. Decimal units (KB, MB, GB, TB, PB) are
powers of 1000, binary units (KiB ... PiB) powers of 1024, as in nccl-tests and IEC 80000-13.

>>> parse_bytes("1GiB"), parse_bytes("2.8TB"), parse_count("175e9")
(1073741824, 2800000000000, 175000000000)
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from infra.digits import ASCII_HINT, ascii_spelling, foreign_character
from infra.errors import HintedValueError

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}
# Spaces are ASCII spaces and tabs only: ``\s`` would also take U+001F or an em space, which
# `_ascii` names instead.
_SIZE = re.compile(r"^[ \t]*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)[ \t]*([A-Za-z]*)[ \t]*\Z")
# Upper bounds, so a 400-digit number is a located error rather than an OverflowError in the
# float arithmetic of the models: no cluster moves or stores an exbibyte in one message or
# checkpoint, and 10^15 parameters is over 500 times the largest published model (1.8e12).
MAX_SIZE = 2**60
MAX_COUNT = 10**15
_LIMITS = {
    "a size": (MAX_SIZE, "1 EiB (2^60 bytes), more than any message or checkpoint"),
    "a count": (MAX_COUNT, "10^15, over 500 times the largest published model"),
}
_MAX_TEXT = 64  # characters of a number written as text; more cannot be within the bounds


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else f"{shown[:30]}...({len(shown):,} chars)"


def _too_long(value: str, what: str) -> ValueError:
    return ValueError(f"{what} must be at most {_LIMITS[what][1]}, got {_shown(value)}")


def _as_positive_int(value: float, text: object, what: str) -> int:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be a positive finite number, got {_shown(text)}")
    if value <= 0:
        raise ValueError(f"{what} must be a positive number, got {_shown(text)}")
    limit, why = _LIMITS[what]
    if value > limit:
        raise ValueError(f"{what} must be at most {why}, got {_shown(text)}")
    if value != int(value):
        raise ValueError(f"{what} must be a whole number, got {_shown(text)}")
    return int(value)


def _ascii(text: str, what: str) -> None:
    r"""Refuse a number written with a character other than printable ASCII, naming it.

    ``float()`` reads fullwidth digits and Unicode spaces, and a regex ``\s`` matches U+001F
    and an em space: a size or count holding one was pasted or damaged, and is refused with
    the character named (and the ASCII spelling as the hint, where there is one).
    """
    found = foreign_character(text)
    if found is None:
        return
    spelt = ascii_spelling(text)
    raise HintedValueError(
        f"{_shown(text)} holds {found}; {what} is written in ASCII",
        hint=f"write {spelt!r}" if spelt else ASCII_HINT,
    )


def parse_bytes(value: Any) -> int:
    """Parse a byte size (``1GiB``, ``2.8TB``, ``4096``) into bytes."""
    if isinstance(value, bool):
        raise ValueError("a size must be a number or a string like '1GiB', not a boolean")
    if isinstance(value, int | float):
        return _as_positive_int(value, value, "a size")  # ints stay exact: no float overflow
    if not isinstance(value, str):
        raise ValueError(f"a size must be a number or a string like '1GiB', got {_shown(value)}")
    if len(value) > _MAX_TEXT:
        raise _too_long(value, "a size")
    _ascii(value, "a size")
    m = _SIZE.match(value)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"{_shown(value)} is not a size; write a number with an optional unit "
            "(B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)"
        )
    return _as_positive_int(float(m.group(1)) * _UNITS[m.group(2).lower()], value, "a size")


def parse_count(value: Any) -> int:
    """Parse a positive whole count given as a number or a string such as ``175e9``."""
    if isinstance(value, bool):
        raise ValueError("a count must be a number, not a boolean")
    text = value
    if isinstance(value, str):
        if len(value) > _MAX_TEXT:
            raise _too_long(value, "a count")
        _ascii(value, "a count")
        try:
            value = float(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"{_shown(value)} is not a number") from None
    if not isinstance(value, int | float):
        raise ValueError(f"a count must be a number, got {_shown(value)}")
    return _as_positive_int(value, text, "a count")


ByteSize = Annotated[
    int,
    BeforeValidator(parse_bytes),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {
                    "type": "string",
                    "pattern": r"^[ \t]*[0-9.]+([eE][+-]?[0-9]+)?[ \t]*[A-Za-z]*[ \t]*$",
                },
            ],
            "description": "Bytes: an integer or a string such as '1GiB' or '2.8TB'.",
        }
    ),
]
Count = Annotated[
    int,
    BeforeValidator(parse_count),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}],
            "description": "A positive whole number; '175e9' is accepted.",
        }
    ),
]
