"""How `railplan verify` writes its findings: text by rack in walking order, JSON, a CSV work order.

The text groups findings by the rack of their near end, racks and units in plan order, so a
technician walks the row once. The JSON document is DESIGN.md's
``{"findings": [...], "summary": {...}, "ignored": [...]}``. The CSV is a sheet to print: one
row per fix with both ends' rack, unit, device and port and an empty ``done`` column. Names in
it can come from a discovered fabric (NodeDescriptions anyone on the fabric may set), so a cell
that a spreadsheet would run as a formula is prefixed with an apostrophe. The text and the CSV
show every name and message the way error lines do (`infra.errors`): control, bidirectional and
zero-width characters escaped (an ESC, OSC or U+202E from a NodeDescription or a ``--names``
entry never reaches a terminal or a spreadsheet raw), a name over `KEEP_CHARS` characters cut
with an ellipsis and its length. The JSON keeps strings exact up to `JSON_KEEP_CHARS`
(`json.dumps` escapes control characters itself) and cuts longer ones the same way. Each
output lists at most `LISTED` findings of a kind the dump alone can multiply, and says how
many more there are.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from infra.errors import (
    KEEP_CHARS,
    MAX_MESSAGE,
    cut_long_values,
    escape_controls,
    shorten,
    spreadsheet_safe,
)
from infra.verify.compare import LISTED
from infra.verify.findings import KINDS, Finding, Place
from infra.verify.model import Ignored
from infra.verify.structure import STRUCTURE_KINDS, Shape
from infra.verify.workorder import Sheet
from infra.wording import plural

__all__ = ["WORK_ORDER_COLUMNS", "Summary", "verify_csv", "verify_json", "verify_text"]

# A name in the JSON past this is cut, its length said (``...(52,428,800 chars)``): an
# InfiniBand NodeDescription is 64 bytes, so only an edited dump or a map reaches it.
JSON_KEEP_CHARS = 256
_LONG_JSON_RUN = re.compile(rf"\S{{{JSON_KEEP_CHARS + 21},}}")

WORK_ORDER_COLUMNS = (
    "order", "kind", "a_rack", "a_unit", "a_device", "a_port",
    "z_rack", "z_unit", "z_device", "z_port", "expected", "found", "fix",
    "a_label", "z_label", "cable_m", "done",
)  # fmt: skip


@dataclass(frozen=True)
class Summary:
    """What was compared: planned cables, seen links, the files read, the structure's shape.

    `cables_planned` is None without a spec, `structure` None without ``--structure``.
    """

    cables_planned: int | None
    links_seen: int
    files: tuple[str, ...]
    structure: Shape | None = None
    not_listed: Mapping[str, int] = field(default_factory=dict)  # kind -> findings past LISTED


def _counts(findings: Sequence[Finding], not_listed: Mapping[str, int]) -> dict[str, int]:
    """Findings by kind, those not listed included."""
    counted = Counter(f.kind for f in findings) + Counter(not_listed)
    return {kind: counted[kind] for kind in (*KINDS, *STRUCTURE_KINDS) if counted[kind]}


def _json_place(place: Place) -> dict[str, object]:
    return {
        "device": shorten(place.device, JSON_KEEP_CHARS),
        "port": shorten(place.port, JSON_KEEP_CHARS),
        "rack": place.rack,
        "rack_unit": place.rack_unit,
    }


def _json_prose(text: str) -> str:
    """A finding's text in JSON, cut where it runs long, each cut saying the length it had.

    Each run of non-blanks past `JSON_KEEP_CHARS`, then the whole past `MAX_MESSAGE`.
    """
    if len(text) <= JSON_KEEP_CHARS + 20:
        return text
    text = _LONG_JSON_RUN.sub(lambda m: shorten(m.group(), JSON_KEEP_CHARS), text)
    return shorten(text, MAX_MESSAGE)


def verify_json(findings: Sequence[Finding], summary: Summary, ignored: Iterable[Ignored]) -> str:
    """The one JSON document of ``railplan verify --format json``."""
    document = {
        "findings": [
            {
                "kind": f.kind,
                "a": _json_place(f.a),
                "z": _json_place(f.z),
                "expected": _json_prose(f.expected),
                "found": _json_prose(f.found),
                "fix": _json_prose(f.fix),
            }
            for f in findings
        ],
        "summary": {
            "as_planned": not findings,
            "cables_planned": summary.cables_planned,
            "links_seen": summary.links_seen,
            "files": list(summary.files),
            "by_kind": _counts(findings, summary.not_listed),
            "not_listed": dict(summary.not_listed),
            **({"structure": summary.structure.as_dict()} if summary.structure else {}),
        },
        "ignored": _ignored(ignored),
    }
    return json.dumps(document, indent=2, sort_keys=True)


def _ignored(ignored: Iterable[Ignored]) -> list[dict[str, object]]:
    """The ignored records, the first `LISTED` of each reason; then how many more of it."""
    shown: Counter[str] = Counter()
    rows: list[dict[str, object]] = []
    for i in ignored:
        shown[i.reason] += 1
        if shown[i.reason] <= LISTED:
            rows.append({"file": i.file, "line": i.line, "reason": _json_prose(i.reason)})
    for reason, n in sorted(shown.items()):
        if n > LISTED:
            more = f"{n - LISTED:,} more of: {_json_prose(reason)}"
            rows.append({"file": "", "line": 0, "reason": more})
    return rows


def _not_listed(summary: Summary) -> list[str]:
    """``and 854,184 more unexpected, not listed (the first 1,000 are)``, a line a kind."""
    return [
        f"and {n:,} more {kind}, not listed (the first {LISTED:,} are)"
        for kind, n in summary.not_listed.items()
    ]


def _name(value: object) -> str:
    """A device, port or rack as text and CSV show it: escaped, cut past `KEEP_CHARS`."""
    return escape_controls(shorten("" if value is None else str(value), KEEP_CHARS))


def _prose(text: str) -> str:
    """A finding's expected, found or fix text: escaped, each long name in it cut."""
    return escape_controls(cut_long_values(text))


def verify_text(findings: Sequence[Finding], summary: Summary, ignored: Sequence[Ignored]) -> str:
    """Findings by rack in walking order, each with its fix; then one summary line."""
    lines: list[str] = []
    for rack, group in groupby(findings, key=lambda f: f.a.rack or "(not racked)"):
        lines.append(f"rack {_name(rack)}")
        for finding in group:
            unit = f"U{finding.a.rack_unit}" if finding.a.rack_unit else "  "
            near = f"{_name(finding.a.device)} {_name(finding.a.port)}".strip()
            lines.append(
                f"  {unit:>4}  {finding.kind}: {near}: expected {_prose(finding.expected)}, "
                f"found {_prose(finding.found)}"
            )
            lines.append(f"        fix: {_prose(finding.fix)}")
    lines += _not_listed(summary)
    seen = plural(summary.links_seen, "link") + " seen"
    if summary.cables_planned is not None:
        seen += ", " + plural(summary.cables_planned, "planned cable")
    if findings:
        counts = _counts(findings, summary.not_listed)
        total = sum(counts.values())
        said = ", ".join(f"{n:,} {kind}" for kind, n in counts.items())
        lines.append(f"{plural(total, 'finding')} ({said}); {seen}")
    else:
        lines.append(
            f"{'as planned' if summary.cables_planned is not None else 'no finding'}: {seen}"
        )
    if summary.structure is not None:
        lines.append(summary.structure.text())
    if ignored:
        reasons = Counter(i.reason for i in ignored)
        parts = ", ".join(f"{n} {_prose(reason)}" for reason, n in sorted(reasons.items()))
        lines.append(f"ignored {plural(len(ignored), 'record')}: {parts}")
    return "\n".join(lines) + "\n"


def verify_csv(
    findings: Sequence[Finding], summary: Summary | None = None, sheet: Sheet | None = None
) -> str:
    """The work-order sheet: one row per fix, in walking order, with a ``done`` column.

    With the plan's `Sheet`, each end's front-panel label and the planned cable's length in
    metres; empty without a spec. Findings not listed (`Summary.not_listed`) end the sheet
    as one row a kind, saying so.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(WORK_ORDER_COLUMNS)
    for order, f in enumerate(findings, start=1):
        names = (
            order, f.kind, f.a.rack, f.a.rack_unit, f.a.device, f.a.port,
            f.z.rack, f.z.rack_unit, f.z.device, f.z.port,
        )  # fmt: skip
        extra = (sheet.label(f.a), sheet.label(f.z), sheet.length(f)) if sheet else ("",) * 3
        row = [
            *map(_name, names),
            *map(_prose, (f.expected, f.found, f.fix)),
            *map(_prose, extra),  # a server's label repeats its (escaped, cut) port name
            "",
        ]
        writer.writerow([spreadsheet_safe(v) for v in row])
    for kind, n in (summary.not_listed if summary else {}).items():
        more = f"{n:,} more {kind} findings, not listed here (the first {LISTED:,} are)"
        fix = "fix the listed ones, then run railplan verify again"
        writer.writerow(["", kind, *[""] * 8, "", more, fix, "", "", "", ""])
    return out.getvalue()
