"""The `Finding`: one problem (or observation) a lint rule reports about one place in a file.

Findings are plain frozen data so every output format (text, JSON, SARIF, GitHub annotations)
renders the same facts. Their order is deterministic: by file, line, column, then rule id.
A rule reports a `Violation` (a spec path, no position); `make_finding` is the one place a
`Finding` is built and located, for rule violations, mig-parted checks and schema errors alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from infra.errors import Position
from infra.spec.yamlpos import SourceMap


class Severity(StrEnum):
    """How much a finding matters; ``error`` fails `railplan lint` (exit 1)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, order=True)
class Finding:
    """One lint result.

    Attributes:
        file: path of the linted file as the user gave it.
        line: 1-based line (0 when the problem has no position, e.g. an empty file).
        column: 1-based column (0 when unknown).
        rule: stable rule id, ``RP`` + number (``RP011``).
        severity: error, warning or info.
        message: the rule broken, with the values involved.
        path: dotted spec path (``node_groups[0].mig``) or ``""``.
        hint: how to fix it, or ``""``.
    """

    file: str
    line: int
    column: int
    rule: str
    severity: Severity
    message: str
    path: str = ""
    hint: str = ""

    def as_json(self) -> dict[str, object]:
        """Return the JSON object of the CLI contract (``railplan lint --format json``)."""
        return {
            "rule": self.rule,
            "severity": str(self.severity),
            "message": self.message,
            "path": self.path,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "hint": self.hint,
        }


@dataclass(frozen=True)
class Violation:
    """What a rule reports: where (spec path), what rule was broken, and a hint."""

    path: str
    message: str
    hint: str = ""
    severity: Severity | None = None  # None: the rule's default severity


def make_finding(
    rule: str,
    severity: Severity,
    message: str,
    *,
    file: str,
    path: str = "",
    hint: str = "",
    source: SourceMap | None = None,
    position: Position | None = None,
) -> Finding:
    """Build the `Finding` of ``rule`` at ``path`` and locate it.

    The position is ``position`` when the caller already knows it (a schema error carries
    its own), else the position of ``path`` (or its nearest parent) in ``source``, else
    line 0 column 0: no position is known.
    """
    if position is None and source is not None:
        position = source.position(path)
    line, column = (position.line, position.column) if position else (0, 0)
    return Finding(file, line, column, rule, severity, message, path, hint)
