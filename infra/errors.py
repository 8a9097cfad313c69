"""The one family of errors railplan's library code raises.

Every stage raises a `RailplanError` (or a subclass) instead of printing or exiting; only
`infra.cli` turns them into a message and an exit code. An error carries what a user needs to
fix their input: the file, a position (1-based line and column) where known, the dotted spec
path (``node_groups[0].count``), the rule that was broken and, where we can guess, a hint.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    """A 1-based line and column in a source file."""

    line: int
    column: int


class RailplanError(Exception):
    """Root of every error railplan raises on purpose.

    Attributes:
        message: the rule that was broken, stated as a sentence fragment.
        file: the file the problem is in, when there is one.
        path: dotted path into the spec (``fabrics.compute.su_size``), or ``""``.
        position: where in ``file`` the problem is, when known.
        hint: what the user probably meant or should do, or ``None``.
        rule: the rule id the problem breaks (``RP000`` for a spec that does not match the
            schema), shown as ``error[RP000]`` like a lint finding; ``None`` for usage errors.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        path: str = "",
        position: Position | None = None,
        hint: str | None = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.path = path
        self.position = position
        self.hint = hint
        self.rule = rule

    def location(self) -> str:
        """Return ``file:line:column`` (or as much of it as is known)."""
        parts = [self.file or "<input>"]
        if self.position is not None:
            parts += [str(self.position.line), str(self.position.column)]
        return ":".join(parts)

    def one_line(self) -> str:
        """Render the error as the single line the CLI prints.

        Control characters from file names or values (a newline, ESC) are shown escaped, so
        the line stays one line and nothing reaches the terminal or a CI log parser raw; a
        long value echoed in the message is cut (`cut_long_values`), so the line stays
        readable whatever the input held.
        """
        where = self.location() if self.file else "railplan"  # a usage error, no file
        text = f"{where}: error{f'[{self.rule}]' if self.rule else ''}: "
        text += cut_long_values(self.message)
        if self.path:
            text += f" [{cut_long_values(self.path)}]"
        if self.hint:
            text += f" (hint: {cut_long_values(self.hint)})"
        return escape_controls(text)


KEEP_CHARS = 60  # of a long value echoed in a message; the rest is counted, not shown
_LONG_RUN = re.compile(rf"\S{{{KEEP_CHARS + 40},}}")
MAX_MESSAGE = 1000  # characters of one message part (message, path or hint)


def shorten(text: str, keep: int = KEEP_CHARS) -> str:
    """``text`` itself, or its first ``keep`` characters and how long it was.

    Examples:
        >>> shorten("9" * 400, 8)
        '99999999...(400 chars)'
    """
    if len(text) <= keep + 20:  # cutting would barely save anything
        return text
    return f"{text[:keep]}...({len(text):,} chars)"


def cut_long_values(text: str) -> str:
    """Cut every run of over 100 non-blank characters, then the whole, with `shorten`.

    A 7 MB value in a spec reaches messages through ``repr`` and f-strings in many places;
    cutting here, where every error line is made, bounds them all in linear time.
    """
    if len(text) > KEEP_CHARS + 40:
        text = _LONG_RUN.sub(lambda m: shorten(m.group()), text)
    return shorten(text, MAX_MESSAGE)


def escape_controls(text: str) -> str:
    r"""Show control characters (newlines, ESC, ...) as Python escapes, keep the rest.

    Examples:
        >>> print(escape_controls("a\nb\x1b[31m"))
        a\nb\x1b[31m
    """
    if text.isprintable():  # the usual case, checked in C
        return text
    return "".join(escape_char(ch) if is_control(ch) else ch for ch in text)


# Spreadsheets run a cell that starts with one of these as a formula (OWASP, CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading formula character gets a ``'``.

    For the CSV files railplan writes from names it read (a fabric dump's, a trace's).

    >>> spreadsheet_safe("=HYPERLINK(1)"), spreadsheet_safe("gpu01")
    ("'=HYPERLINK(1)", 'gpu01')
    """
    return "'" + text if text.startswith(_FORMULA_START) else text


def escape_lines(text: str) -> str:
    r"""`escape_controls` on each line of a multi-line report: its newlines stay, nothing else raw.

    For the human outputs that show names read from input files (a trace's tenants and job ids).

    Examples:
        >>> print(escape_lines("tenant \x1b]0;x\x07\nb\u202ec"))
        tenant \x1b]0;x\x07
        b\u202ec
    """
    return "\n".join(escape_controls(line) for line in text.split("\n"))


_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def is_control(ch: str) -> bool:
    r"""Whether ``ch`` must never reach a terminal or log raw; the one test every echo uses.

    Control characters (Cc: newline, ESC), line and paragraph separators (Zl, Zp), and
    format characters (Cf): the bidirectional overrides and isolates U+202A-202E and
    U+2066-2069 that reorder what a reviewer sees (Trojan Source, CVE-2021-42574), the
    zero-width U+200B-200F and the byte-order mark U+FEFF; and lone surrogates (Cs), which
    is how Python holds a file name's bytes that are not UTF-8 (``\udcff`` for byte 0xff):
    written out, they would be those raw bytes (0x9b is a C1 escape to some terminals).

    >>> [is_control(c) for c in ("\n", "\u202e", "\u2067", "\ufeff", "\udcff", "é", " ")]
    [True, True, True, True, True, False, False]
    """
    return unicodedata.category(ch) in _CONTROL_CATEGORIES


def escape_char(ch: str) -> str:
    r"""``ch`` as a Python escape (``\n``, ``\x1b``, ``\u202e``)."""
    return ch.encode("unicode_escape").decode("ascii")


class InputError(RailplanError):
    """The input cannot be read or parsed at all (not YAML, binary, too large, ...)."""


class SpecError(RailplanError):
    """The input parsed but does not describe a valid spec or file (schema violation)."""


class HintedValueError(ValueError):
    """A spec validator's ValueError that knows the fix: the loader shows ``hint`` as the hint.

    Pydantic keeps the raised error in the error's context; `infra.spec.loader` reads its
    ``hint`` there, so a value check can say what to write instead, as a schema error does.
    """

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class CatalogError(RailplanError):
    """The bundled hardware catalog is inconsistent; a bug in railplan, not in user input."""


MAX_PREFIX_MATCHES = 4
"""Most choices a hint names when several start with what was typed (more: no prefix hint)."""


def spelling_hint(word: str, choices: Iterable[str], what: str = "known") -> str:
    """``did you mean 'x'?`` for the closest choice, else ``<what>: a, b, c`` ("" if none).

    Choices that start with ``word`` come first: an id typed short (``dgx-a100`` for
    ``dgx-a100-640gb``) is a truncation, and difflib's ratio would rather offer a same-length
    id that differs in the one character that matters (``dgx-h100``). Up to
    `MAX_PREFIX_MATCHES` of them are named; beyond that the prefix says too little. The other
    way round, a word that extends a choice (a suffix typed after an id) means that choice.

    >>> spelling_hint("dgx-a100", ["dgx-a100-320gb", "dgx-a100-640gb", "dgx-h100"])
    "did you mean 'dgx-a100-320gb' or 'dgx-a100-640gb'?"
    >>> spelling_hint("dgx-h100-80gb", ["dgx-h100", "hgx-a100-80gb"])
    "did you mean 'dgx-h100'?"
    >>> spelling_hint("liqiud", ["default", "liquid"])
    "did you mean 'liquid'?"

    Case does not count against a choice: ids are lower case, and ``DGX-H100`` as printed on
    the box is ``dgx-h100``.

    >>> spelling_hint("DGX-H100", ["dgx-h100", "dgx-h200"])
    "did you mean 'dgx-h100'?"
    """
    options = sorted(set(choices))
    same = [o for o in options if o.casefold() == word.casefold()]
    if same:
        return f"did you mean {same[0]!r}?"
    started = [o for o in options if word and o.casefold().startswith(word.casefold())]
    if 0 < len(started) <= MAX_PREFIX_MATCHES:
        named = [repr(o) for o in started]
        listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"
        return f"did you mean {listed}?"
    extended = [o for o in options if word.casefold().startswith(o.casefold())]
    if extended:  # a suffix typed after an id (``dgx-h100-80gb``): the id it extends
        return f"did you mean {max(extended, key=len)!r}?"
    folded = {o.casefold(): o for o in options}
    close = difflib.get_close_matches(word.casefold(), list(folded), n=1, cutoff=0.6)
    if close:
        return f"did you mean {folded[close[0]]!r}?"
    return f"{what}: {', '.join(options)}" if options else ""


class DiscoveredError(InputError):
    """A line of a discovered-fabric dump that `railplan verify` cannot understand.

    Raised for ibnetdiscover, iblinkinfo and node-name-map input; carries file and line.
    """
