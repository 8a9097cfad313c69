"""A hint for every schema error: the fix when the error itself gives none.

`infra.spec.loader` turns each Pydantic error into one located line; errors with a known fix
(a misspelt key, a value YAML typed otherwise, a validator's own hint) get that fix there.
`fallback_hint` covers the rest, so no schema error is printed without a hint: a name that
breaks its pattern gets the nearest name that fits (``Train`` -> ``train``, a zero-width
space dropped), a number or bound what to write instead. Free text (a description, a claim,
a source) is not a name: it gets no guessed name, only what to remove.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from pydantic_core import ErrorDetails

from infra.digits import ASCII_HINT, ascii_spelling, foreign_character
from infra.spec.base import ONE_LINE, ONE_LINE_OR_EMPTY, ONE_LINE_RULE

__all__ = ["fallback_hint", "nearest_fitting"]

_SCHEMA = "`railplan schema` shows what this key takes"
_FREE_TEXT = (ONE_LINE, ONE_LINE_OR_EMPTY)
_FREE_TEXT_FIX = (
    "remove the control characters (shown above as escapes such as \\x1b or \\n); "
    "write the text on one line"
)
_BOUND = {
    "greater_than": "above",
    "greater_than_equal": "of at least",
    "less_than": "below",
    "less_than_equal": "of at most",
}


def fallback_hint(err: ErrorDetails, key: str | None) -> str:
    """The fix for ``err`` at ``key`` (None: a list item) when nothing more specific is known."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err["input"]
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in _FREE_TEXT:
        return _FREE_TEXT_FIX
    if kind == "value_error" and ONE_LINE_RULE in str(err.get("msg", "")):  # TextRule's own
        return _FREE_TEXT_FIX
    if kind == "string_pattern_mismatch" and isinstance(value, str):
        guess = nearest_fitting(value, str(ctx.get("pattern", "")))
        return f"did you mean {guess!r}?" if guess else f"rename it to follow that rule; {_SCHEMA}"
    if kind in _NUMBER_KINDS and isinstance(value, str) and foreign_character(value):
        return _foreign_number(value, key)
    if kind in _BOUND:
        limit = next(iter(ctx.values()), None)
        return f"use a value {_BOUND[kind]} {_number(limit)}" if limit is not None else _SCHEMA
    return _by_kind(kind, ctx, key)


# Pydantic error kind -> the fix; {at} is "key: " (empty for a list item), {key} the key,
# {max}/{min} the length bound, {max_entries}/{min_entries} the count of entries.
_FIXES = {
    **dict.fromkeys(
        ("int_parsing", "int_type", "int_from_float"),
        "write a whole number in plain decimal digits (e.g. {at}4)",
    ),
    **dict.fromkeys(("float_parsing", "float_type"), "write a plain number (e.g. {at}2.5)"),
    **dict.fromkeys(("bool_parsing", "bool_type"), "write true or false (e.g. {at}true)"),
    "finite_number": "write a finite number: .inf and .nan are not values a spec can use",
    "string_too_long": "shorten it to at most {max} characters",
    "string_too_short": "write at least {min} characters",
    "too_long": "keep at most {max_entries}",
    "too_short": "give at least {min_entries}",
    **dict.fromkeys(
        ("model_type", "model_attributes_type", "dict_type"),
        "write {key} as a mapping: `key: value` lines, or {{key: value, ...}}",
    ),
    **dict.fromkeys(
        ("list_type", "set_type", "tuple_type"),
        "write {key} as a list: `- item` lines, or [a, b, ...]",
    ),
    "missing": "add `{key}:`; " + _SCHEMA,
}


_NUMBER_KINDS = frozenset({"int_parsing", "int_type", "float_parsing", "float_type"})


def _foreign_number(value: str, key: str | None) -> str:
    """The hint for a number typed with a fullwidth digit, a Unicode space or a control.

    It names the character and gives the ASCII spelling (``count: １６`` -> ``count: 16``),
    not the generic "plain decimal digits".
    """
    spelt = ascii_spelling(value)
    fix = f"write {key + ': ' if key else ''}{spelt}" if spelt else ASCII_HINT
    return f"it holds {foreign_character(value)}; {fix}"


def _by_kind(kind: str, ctx: dict[str, Any], key: str | None) -> str:
    fix = _FIXES.get(kind)
    if fix is None:
        return _SCHEMA
    return fix.format(
        at=f"{key}: " if key else "",
        key=key or "it",
        max=ctx.get("max_length", "?"),
        min=ctx.get("min_length", "?"),
        max_entries=_entries(ctx.get("max_length")),
        min_entries=_entries(ctx.get("min_length")),
    )


def nearest_fitting(value: str, pattern: str) -> str | None:
    """The nearest string to ``value`` that ``pattern`` matches, or None.

    Tried in order: the value in NFKC form without format characters (zero-width spaces,
    bidirectional controls) and surrounding spaces; in Latin letters (`_latin`) and lower case; ``_`` and ``-`` swapped;
    every run of other characters made one separator; cut to the pattern's length.

    >>> nearest_fitting("Train", r"^[a-z][a-z0-9_]{0,31}$")
    'train'
    >>> nearest_fitting("gpu-nodes", r"^[a-z][a-z0-9_]{0,31}$")
    'gpu_nodes'
    >>> nearest_fitting("2024-01-01", r"^[a-z][a-z0-9-]{0,62}$") is None
    True
    """
    try:
        fits = re.compile(pattern).fullmatch
    except re.error:
        return None
    plain = "".join(
        c for c in unicodedata.normalize("NFKC", value) if unicodedata.category(c) != "Cf"
    ).strip()[:256]
    lower = _latin(plain).lower()
    candidates = [plain, lower, lower.replace("_", "-"), lower.replace("-", "_")]
    for sep in ("-", "_"):
        joined = re.sub(r"[^a-z0-9]+", sep, lower).strip(sep)
        candidates += [joined, *(joined[:n].rstrip(sep) for n in (63, 40, 32))]
    return next((c for c in candidates if c and c != value and fits(c)), None)


# Letters of other scripts that look like a Latin letter (Unicode's confusables, the lowercase
# ones a name may be typed with: Cyrillic, Greek, the dotless i), as the Latin letter.
_LOOKALIKES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u04bb\u0501"
    "\u03b1\u03bf\u03bd\u03b9\u03ba\u03c1\u03c5\u03c7\u0131\u0237",
    "aeopcyxijshdaovikpuxij",
)


def _latin(text: str) -> str:
    """``text`` with accents dropped and look-alike letters of other scripts made Latin.

    A name typed with an accent or a Cyrillic ``а`` most likely means the plain letter, not
    a separator in its place (``résearch`` -> ``research``, not ``r-search``).

    >>> _latin("re\u0301search"), _latin("rese\u0430rch"), _latin("lustre.cs\u0131.hpe.com")
    ('research', 'research', 'lustre.csi.hpe.com')
    """
    decomposed = unicodedata.normalize("NFKD", text.translate(_LOOKALIKES))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _number(value: object) -> str:
    """``16,384`` for an integer bound, the value itself otherwise."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _entries(count: object) -> str:
    return "1 entry" if count == 1 else f"{count if count is not None else '?'} entries"
