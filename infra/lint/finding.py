"""The `Finding`: one problem (or observation) a lint rule reports about one place in a file.

Findings are plain frozen data so every output format (text, JSON, SARIF, GitHub annotations)
renders the same facts. Their order is deterministic: by file, line, column, then rule id.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
