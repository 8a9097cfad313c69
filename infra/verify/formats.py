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
with an ellipsis and its length. The JSON keeps every string exact: `json.dumps` escapes
control characters (and, ASCII-only, every other non-ASCII one) itself.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from infra.errors import KEEP_CHARS, cut_long_values, escape_controls, shorten, spreadsheet_safe
from infra.verify.compare import KINDS, Finding, Place
from infra.verify.model import Ignored
from infra.verify.structure import STRUCTURE_KINDS, Shape
from infra.wording import plural

__all__ = ["WORK_ORDER_COLUMNS", "Summary", "verify_csv", "verify_json", "verify_text"]

WORK_ORDER_COLUMNS = (
    "order", "kind", "a_rack", "a_unit", "a_device", "a_port",
    "z_rack", "z_unit", "z_device", "z_port", "expected", "found", "fix", "done",
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


def _place(place: Place) -> dict[str, object]:
    return {
        "device": place.device,
        "port": place.port,
        "rack": place.rack,
        "rack_unit": place.rack_unit,
    }


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    counted = Counter(f.kind for f in findings)
    return {kind: counted[kind] for kind in (*KINDS, *STRUCTURE_KINDS) if counted[kind]}


def verify_json(findings: Sequence[Finding], summary: Summary, ignored: Iterable[Ignored]) -> str:
    """The one JSON document of ``railplan verify --format json``."""
    document = {
        "findings": [
            {
                "kind": f.kind,
                "a": _place(f.a),
                "z": _place(f.z),
                "expected": f.expected,
                "found": f.found,
                "fix": f.fix,
            }
            for f in findings
        ],
        "summary": {
            "as_planned": not findings,
            "cables_planned": summary.cables_planned,
            "links_seen": summary.links_seen,
            "files": list(summary.files),
            "by_kind": _counts(findings),
            **({"structure": summary.structure.as_dict()} if summary.structure else {}),
        },
        "ignored": [{"file": i.file, "line": i.line, "reason": i.reason} for i in ignored],
    }
    return json.dumps(document, indent=2, sort_keys=True)


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
    seen = plural(summary.links_seen, "link") + " seen"
    if summary.cables_planned is not None:
        seen += ", " + plural(summary.cables_planned, "planned cable")
    if findings:
        counts = ", ".join(f"{n:,} {kind}" for kind, n in _counts(findings).items())
        lines.append(f"{plural(len(findings), 'finding')} ({counts}); {seen}")
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


def verify_csv(findings: Sequence[Finding]) -> str:
    """The work-order sheet: one row per fix, in walking order, with a ``done`` column."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(WORK_ORDER_COLUMNS)
    for order, f in enumerate(findings, start=1):
        names = (
            order, f.kind, f.a.rack, f.a.rack_unit, f.a.device, f.a.port,
            f.z.rack, f.z.rack_unit, f.z.device, f.z.port,
        )  # fmt: skip
        row = [*map(_name, names), *map(_prose, (f.expected, f.found, f.fix)), ""]
        writer.writerow([spreadsheet_safe(v) for v in row])
    return out.getvalue()
