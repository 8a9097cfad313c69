"""Render lint findings as text, JSON, SARIF 2.1.0 or GitHub Actions workflow commands.

Each renderer is a pure function from findings (plus rule metadata or source lines where a
format needs them) to one string; `infra.cli` decides where the string goes. Output is
deterministic: findings are sorted, JSON keys are sorted, and nothing depends on the clock,
the working directory or the machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Protocol
from urllib.parse import quote

from infra.errors import cut_long_values, escape_char, is_control
from infra.errors import escape_controls as _escape_controls
from infra.lint.finding import Finding, Severity

__all__ = [
    "INFORMATION_URI",
    "MAX_SOURCE_WIDTH",
    "SARIF_SCHEMA_URI",
    "TAB_SIZE",
    "RuleInfo",
    "format_github",
    "format_json",
    "format_sarif",
    "format_text",
]

TAB_SIZE = 4
"""Tab stops used when a source line with tabs is shown in text output."""

MAX_SOURCE_WIDTH = 200
"""Source lines longer than this many characters are cut to a window around the column."""

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://railplan.dev/"
SRCROOT = "%SRCROOT%"

_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


class RuleInfo(Protocol):
    """What the renderers need to know about a rule (`infra.lint.engine.Rule` matches)."""

    @property
    def id(self) -> str:
        """Stable rule id, ``RP`` + number."""

    @property
    def name(self) -> str:
        """Slug name of the rule."""

    @property
    def severity(self) -> Severity:
        """Default severity."""

    @property
    def summary(self) -> str:
        """One-line summary."""

    @property
    def doc(self) -> str:
        """Why the rule matters and how to fix a violation."""


# --------------------------------------------------------------------------------------------
# text


_COLOR = {Severity.ERROR: "\x1b[1;31m", Severity.WARNING: "\x1b[1;33m", Severity.INFO: "\x1b[1;36m"}
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


def format_text(
    findings: Iterable[Finding],
    sources: Mapping[str, Sequence[str]] | None = None,
    files_checked: int | None = None,
    *,
    color: bool = False,
) -> str:
    """Render findings for a terminal, compiler style, with a closing summary line.

    Each finding is ``file:line:col: severity[RULE] message [spec.path]``. When ``sources``
    holds the file's lines and the line exists, the source line follows with a caret under
    the column (tabs expanded to `TAB_SIZE` stops, lines over `MAX_SOURCE_WIDTH` characters
    cut to a window around the column), then ``= hint: ...`` when there is a hint. Control
    characters from the spec are shown escaped, never sent to the terminal raw.

    Args:
        findings: what to show; rendered sorted by file, line, column and rule.
        sources: file name -> its lines (line 1 first), for the source excerpts.
        files_checked: how many files were linted, for the summary line (when None, the
            number of files with findings).
        color: add ANSI colors.

    Returns:
        The report, ending with a newline.

    Examples:
        >>> f = Finding("a.yaml", 2, 3, "RP001", Severity.ERROR, "bad", "x.y", "fix it")
        >>> print(format_text([f], {"a.yaml": ["x:", "  y: 1"]}, 1), end="")
        a.yaml:2:3: error[RP001] bad [x.y]
          2 |   y: 1
            |   ^
          = hint: fix it
        <BLANKLINE>
        1 error in 1 file
    """
    ordered = sorted(findings)
    out: list[str] = []
    for f in ordered:
        out.append(_header(f, color))
        lines = (sources or {}).get(f.file)
        if lines is not None:
            out.extend(_excerpt(f, lines, color))
        if f.hint:
            out.append(f"  = hint: {_escape_controls(cut_long_values(f.hint))}")
    if out:
        out.append("")
    out.append(_summary(ordered, files_checked))
    return "\n".join(out) + "\n"


def _header(f: Finding, color: bool) -> str:
    if f.line <= 0:
        where = f"{f.file}:"
    elif f.column <= 0:
        where = f"{f.file}:{f.line}:"
    else:
        where = f"{f.file}:{f.line}:{f.column}:"
    where = _escape_controls(where)
    severity = str(f.severity)
    if color:
        where = f"{_BOLD}{where}{_RESET}"
        severity = f"{_COLOR[f.severity]}{severity}{_RESET}"
    path = f" [{_escape_controls(f.path)}]" if f.path else ""
    message = _escape_controls(cut_long_values(f.message))  # a 7 MB value is not echoed whole
    return f"{where} {severity}[{_escape_controls(f.rule)}] {message}{path}"


def _cells(line: str) -> list[tuple[str, int]]:
    """One (shown text, display width) cell per character of ``line``; tabs become spaces."""
    if line.isascii() and line.isprintable():  # the usual case, checked in C
        return [(ch, 1) for ch in line]
    cells: list[tuple[str, int]] = []
    width = 0
    for ch in line:
        if ch == "\t":
            shown = " " * (TAB_SIZE - width % TAB_SIZE)
            cell = (shown, len(shown))
        elif is_control(ch):  # shown escaped, as in the error line: \u202e, never raw
            shown = escape_char(ch)
            cell = (shown, len(shown))
        elif unicodedata.combining(ch):
            cell = (ch, 0)
        else:
            cell = (ch, 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1)
        cells.append(cell)
        width += cell[1]
    return cells


def _window(line: str, caret: int) -> tuple[int, int, int]:
    """``(start, end, length)``: the characters of ``line`` shown around index ``caret``.

    Works on character indexes without copying ``line``, so a finding costs the same on a
    73 KB one-line spec as on a short line (the window, not the line, is scanned).
    """
    length = len(line)
    while length and line[length - 1] in "\r\n":
        length -= 1
    start, end = 0, length
    if length > MAX_SOURCE_WIDTH:
        # Keep the column near the middle of the window, and the window full.
        start = max(0, min(caret - MAX_SOURCE_WIDTH // 2, length - MAX_SOURCE_WIDTH))
        end = start + MAX_SOURCE_WIDTH
    return start, end, length


def _excerpt(f: Finding, lines: Sequence[str], color: bool) -> list[str]:
    """The source line of ``f`` and a caret under its column; nothing if the line is unknown.

    Tabs in a cut line are expanded from the start of the window that is shown.
    """
    if not 0 < f.line <= len(lines):
        return []
    line = lines[f.line - 1]
    start, end, length = _window(line, max(f.column - 1, 0))
    cells = _cells(line[start:end])
    caret = min(max(f.column - 1 - start, 0), len(cells))
    lead = "…" if start > 0 else ""
    tail = "…" if end < length else ""
    shown = lead + "".join(text for text, _ in cells) + tail
    gutter = str(f.line)
    out = [f"  {gutter} | {shown}".rstrip()]
    if f.column > 0:
        offset = len(lead) + sum(width for _, width in cells[:caret])
        mark = f"{_COLOR[f.severity]}^{_RESET}" if color else "^"
        out.append(f"  {' ' * len(gutter)} | {' ' * offset}{mark}")
    return out


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _summary(findings: Sequence[Finding], files_checked: int | None) -> str:
    counts = Counter(f.severity for f in findings)
    parts = []
    if counts[Severity.ERROR]:
        parts.append(_plural(counts[Severity.ERROR], "error"))
    if counts[Severity.WARNING]:
        parts.append(_plural(counts[Severity.WARNING], "warning"))
    if counts[Severity.INFO]:
        parts.append(f"{counts[Severity.INFO]} info")
    if files_checked is None and not findings:
        return "no problems found"
    files = len({f.file for f in findings}) if files_checked is None else files_checked
    where = f" in {_plural(files, 'file')}"
    return (", ".join(parts) if parts else "no problems found") + where


# --------------------------------------------------------------------------------------------
# JSON


def format_json(findings: Iterable[Finding]) -> str:
    """Render findings as the JSON of the CLI contract, one object per finding.

    The document is ``{"findings": [{"rule", "severity", "message", "path", "file", "line",
    "column", "hint"}, ...]}`` with findings sorted, keys sorted, two-space indent, ASCII only
    (other characters escaped, so any terminal can print it) and a trailing newline.

    Args:
        findings: what to render.

    Returns:
        The JSON text.
    """
    document = {"findings": [f.as_json() for f in sorted(findings)]}
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


# --------------------------------------------------------------------------------------------
# GitHub Actions workflow commands

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


# Escaping as the Actions toolkit does it, in packages/core/src/command.ts of actions/toolkit
# (commit a944251692e50709e44d95e64d43c80236b9f6af): `escapeData` turns % CR LF into %25 %0D
# %0A in the message; `escapeProperty` does the same and also turns : and , into %3A and %2C,
# since "," separates properties and "::" ends them. `%` goes first so escapes are not
# re-escaped. Property names (file, line, col, title) are those of `toCommandProperties` in
# packages/core/src/utils.ts; see also "Workflow commands for GitHub Actions" in GitHub's docs.
def _escape_data(text: str) -> str:
    # Other control characters (ESC, BEL, ...) as the text format shows them: a raw one from
    # an input string would reach the terminal of whoever reads the log. CR and LF are the
    # toolkit's own %0D and %0A, which GitHub shows as line breaks.
    if not text.isprintable():
        text = "".join(escape_char(c) if is_control(c) and c not in "\r\n" else c for c in text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Iterable[Finding], rules: Sequence[RuleInfo] = ()) -> str:
    """Render findings as GitHub Actions annotations, one workflow command per line.

    Errors become ``::error``, warnings ``::warning`` and info ``::notice``, with the file,
    line and column when known (0 means unknown and is left out, as the toolkit does) and a
    title of the rule id plus, when ``rules`` names it, the rule name. The message carries
    the spec path and the hint; every line break in it is escaped, so each finding stays one
    line of output.

    Args:
        findings: what to render.
        rules: known rules, for the rule names in titles.

    Returns:
        The workflow commands, each ending with a newline.

    Examples:
        >>> f = Finding("a,b.yaml", 3, 1, "RP001", Severity.WARNING, "100% off", "x")
        >>> print(format_github([f]), end="")
        ::warning file=a%2Cb.yaml,line=3,col=1,title=RP001::100%25 off [x]
    """
    names = {r.id: r.name for r in rules}
    out = []
    for f in sorted(findings):
        properties = []
        if f.file:
            properties.append(f"file={_escape_property(f.file)}")
        if f.line > 0:
            properties.append(f"line={f.line}")
            if f.column > 0:
                properties.append(f"col={f.column}")
        title = f"{f.rule} {names[f.rule]}" if names.get(f.rule) else f.rule
        if title:
            properties.append(f"title={_escape_property(title)}")
        message = cut_long_values(f.message) + (f" [{f.path}]" if f.path else "")
        if f.hint:
            message += f"\nhint: {cut_long_values(f.hint)}"
        command = _COMMAND[f.severity]
        head = f"::{command} {','.join(properties)}" if properties else f"::{command}"
        out.append(f"{head}::{_escape_data(message)}\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# SARIF 2.1.0 for GitHub code scanning
#
# Follows "SARIF support for code scanning" (GitHub docs): every property marked required
# there is non-empty (rule short/full description and help text, result message, location
# uri, partialFingerprints.primaryLocationLineHash, the only fingerprint GitHub reads); rule
# names are cut to 255 characters and descriptions to 1024; uris are relative to the
# repository root under uriBaseId %SRCROOT%.

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_PROBLEM_SEVERITY = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "recommendation",
}
_GITHUB_NAME_LIMIT = 255
_GITHUB_DESCRIPTION_LIMIT = 1024
# RFC 3986 sub-delims and the "@" and ":" of pchar stay literal in a path, except that ":" is
# escaped in a relative reference, whose first segment would otherwise read as a scheme.
_URI_PATH_SAFE = "/!$&'()*+,;=@"


def format_sarif(
    findings: Iterable[Finding],
    rules: Sequence[RuleInfo],
    tool_version: str,
    *,
    root: str | None = None,
) -> str:
    """Render findings as one SARIF 2.1.0 log for GitHub code scanning and other viewers.

    One run of tool ``railplan``: ``rules`` become ``tool.driver.rules`` in the given order
    (the first of duplicate ids wins; a rule id found only in findings gets a descriptor
    made from the id), and each finding becomes a result pointing at its rule by ``ruleId``
    and ``ruleIndex``. A result's location is the file as a relative URI under
    ``%SRCROOT%`` with its line and column, and the spec path as a logical location; a
    finding on line 0 has no region, since SARIF lines start at 1. ``partialFingerprints``
    hashes rule, file, spec path and message, not the line, so an alert survives edits
    above it.

    Args:
        findings: what to render.
        rules: the rules that ran, for the rule metadata GitHub shows next to alerts.
        tool_version: railplan's version.
        root: directory that absolute file names are made relative to; an absolute name
            outside it is kept as an absolute ``file://`` URI.

    Returns:
        The SARIF log as JSON text (sorted keys, ASCII only) ending with a newline.
    """
    ordered = sorted(findings)
    descriptors, index, shorts = _descriptors(rules, ordered)
    driver: dict[str, object] = {
        "name": "railplan",
        "informationUri": INFORMATION_URI,
        "rules": descriptors,
    }
    if tool_version:
        driver["version"] = tool_version
    seen: Counter[str] = Counter()
    results = []
    for f in ordered:
        results.append(_result(f, index[f.rule], shorts[f.rule], root, seen))
    log = {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _descriptor(
    rule_id: str, name: str, severity: Severity, short: str, doc: str
) -> dict[str, object]:
    full = doc.strip() or short
    descriptor: dict[str, object] = {
        "id": rule_id,
        "shortDescription": {"text": _clip(short, _GITHUB_DESCRIPTION_LIMIT)},
        "fullDescription": {"text": _clip(full, _GITHUB_DESCRIPTION_LIMIT)},
        "help": {"text": full},
        "defaultConfiguration": {"level": _LEVEL[severity]},
        "properties": {"problem.severity": _PROBLEM_SEVERITY[severity]},
    }
    if name:
        descriptor["name"] = _clip(name, _GITHUB_NAME_LIMIT)
    return descriptor


def _descriptors(
    rules: Sequence[RuleInfo], findings: Sequence[Finding]
) -> tuple[list[dict[str, object]], dict[str, int], dict[str, str]]:
    """Rule descriptors, each rule id's index among them, and each rule's short text."""
    descriptors: list[dict[str, object]] = []
    index: dict[str, int] = {}
    shorts: dict[str, str] = {}
    unknown: dict[str, Severity] = {}
    for f in findings:
        worst = unknown.get(f.rule)
        if worst is None or _RANK[f.severity] < _RANK[worst]:
            unknown[f.rule] = f.severity
    known = [(r.id, r.name, r.severity, r.summary, r.doc) for r in rules]
    known += [
        (rid, "", unknown[rid], "", "") for rid in sorted(unknown.keys() - {r.id for r in rules})
    ]
    for rule_id, name, severity, summary, doc in known:
        if rule_id not in index:
            index[rule_id] = len(descriptors)
            shorts[rule_id] = summary.strip() or f"railplan rule {rule_id}"
            descriptors.append(_descriptor(rule_id, name, severity, shorts[rule_id], doc))
    return descriptors, index, shorts


def _artifact_location(file: str, root: str | None) -> dict[str, str]:
    """A relative URI under ``%SRCROOT%``, or an absolute ``file://`` URI."""
    path = PurePath(file)
    if root is not None and path.is_absolute():
        with contextlib.suppress(ValueError):  # outside root: stays absolute
            path = path.relative_to(root)
    posix = path.as_posix()
    if path.is_absolute():
        absolute = posix if posix.startswith("/") else "/" + posix
        return {"uri": "file://" + _quote(absolute, _URI_PATH_SAFE + ":")}
    return {"uri": _quote("" if posix == "." else posix, _URI_PATH_SAFE), "uriBaseId": SRCROOT}


def _quote(path: str, safe: str) -> str:
    try:
        return quote(path, safe=safe, errors="surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file system produced
        return quote(path, safe=safe, errors="replace")


def _message_text(f: Finding, fallback: str) -> str:
    """Message plus hint, with braces doubled: SARIF 2.1.0 §3.11.5 reserves ``{`` ``}``."""
    text = f.message.strip() or fallback
    if f.hint.strip():
        text += f"\nHint: {f.hint.strip()}"
    return text.replace("{", "{{").replace("}", "}}")


def _fingerprint(f: Finding, uri: str, seen: Counter[str]) -> str:
    """``hash:n`` as in GitHub's primaryLocationLineHash; n tells identical findings apart."""
    key = f"{f.rule}\0{uri}\0{f.path}\0{f.message}"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    seen[digest] += 1
    return f"{digest}:{seen[digest]}"


def _result(
    f: Finding, rule_index: int, short: str, root: str | None, seen: Counter[str]
) -> dict[str, object]:
    artifact = _artifact_location(f.file, root)
    physical: dict[str, object] = {"artifactLocation": artifact}
    if f.line > 0:
        region: dict[str, int] = {"startLine": f.line, "endLine": f.line}
        if f.column > 0:
            region["startColumn"] = f.column
        physical["region"] = region
    location: dict[str, object] = {"physicalLocation": physical}
    if f.path:
        location["logicalLocations"] = [{"fullyQualifiedName": f.path, "kind": "property"}]
    return {
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": _LEVEL[f.severity],
        "message": {"text": _message_text(f, short)},
        "locations": [location],
        "partialFingerprints": {"primaryLocationLineHash": _fingerprint(f, artifact["uri"], seen)},
    }
