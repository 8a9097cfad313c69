"""How a day-2 change plan reads: `diff_text` for people, `diff_json` for programs.

This module owns the presentation of a `PlanDiff` (`infra.day2.diff` computes it): the text
form (a summary line per category, the notes, the detail lines, the rolling order) and the
JSON document (`diff_document`, lists sorted deterministically, plan order kept where it
is the point). Pure functions, no printing.
"""

from __future__ import annotations

import json
from typing import Any

from infra.day2.diff import BudgetDelta, PlanDiff
from infra.topology import Cable
from infra.topology.growth import natural_key
from infra.wording import plural

__all__ = ["diff_document", "diff_json", "diff_text"]


def _cable_line(c: Cable) -> str:
    return f"{c.id} {c.fabric} {c.tier} {c.a}:{c.a_port} -> {c.b}:{c.b_port}"


def _summary(d: PlanDiff) -> list[str]:
    moved = sum(b.old != b.new for b in d.budgets)
    return [
        f"servers: {len(d.servers_added)} added, {len(d.servers_removed)} removed",
        f"switches: {len(d.switches_added)} added, {len(d.switches_removed)} removed",
        f"cables: {len(d.cables_added)} added, {len(d.cables_removed)} removed",
        f"addresses: {len(d.addresses)} changed",
        f"moves: {len(d.moves)}",
        f"mig: {plural(len(d.mig), 'group')} changed",
        f"software: {plural(len(d.software), 'version')} changed",
        f"settings: {len(d.settings)} changed",
        f"budgets: {moved} of {plural(len(d.budgets), 'prediction')} changed",
        f"rolling order: {plural(len(d.rolling_order), 'step')}"
        + (f" (about {sum(s.minutes for s in d.rolling_order):g} min)" if d.rolling_order else ""),
    ] + ([f"jobs affected: {', '.join(d.affected_groups)}"] if d.affected_groups else [])


def _detail(d: PlanDiff) -> list[str]:
    lines = [f"+ server {n}" for n in d.servers_added]
    lines += [f"- server {n}" for n in d.servers_removed]
    lines += [f"+ switch {n}" for n in d.switches_added]
    lines += [f"- switch {n}" for n in d.switches_removed]
    lines += [f"+ cable {_cable_line(c)}" for c in d.cables_added]
    lines += [f"- cable {_cable_line(c)}" for c in d.cables_removed]
    lines += [f"~ {a.kind} {a.name} {a.field} {a.old} -> {a.new}" for a in d.addresses]
    lines += [
        f"~ {m.kind} {m.name} {m.old_rack}/U{m.old_unit} -> {m.new_rack}/U{m.new_unit}"
        for m in d.moves
    ]
    lines += [
        f"~ mig {m.group} {m.old} -> {m.new}"
        + (
            f" (schedule {list(m.old_schedule)} -> {list(m.new_schedule)})"
            if m.old_schedule or m.new_schedule
            else ""
        )
        for m in d.mig
    ]
    lines += [f"~ software {s.field} {s.old} -> {s.new}" for s in d.software]
    lines += [f"~ setting {s.path} {_json(s.old)} -> {_json(s.new)}" for s in d.settings]
    lines += [
        f"~ budget {b.path} {b.kind} {b.old:g} -> {b.new:g} {b.unit}"
        for b in d.budgets
        if b.old != b.new
    ]
    return lines


def diff_text(d: PlanDiff) -> str:
    """The change plan as text: a summary line per category, the lists, the rolling order."""
    lines = _summary(d) + [f"note: {n}" for n in d.notes]
    detail = _detail(d)
    if detail:
        lines += ["", *detail]
    if d.rolling_order:
        lines += ["", "rolling order:"]
        lines += [
            f"{k}. {s.kind} {s.unit}: {', '.join(s.actions)}"
            for k, s in enumerate(d.rolling_order, 1)
        ]
    return "\n".join(lines) + "\n"


def _cable_json(c: Cable) -> dict[str, str]:
    return {
        "id": c.id,
        "fabric": c.fabric,
        "tier": c.tier,
        "a": c.a,
        "a_port": c.a_port,
        "b": c.b,
        "b_port": c.b_port,
    }


def diff_document(d: PlanDiff) -> dict[str, Any]:
    """The change plan as the JSON document's data (lists sorted deterministically)."""
    return {
        "changed": d.changed,
        "servers": {
            "added": sorted(d.servers_added, key=natural_key),
            "removed": sorted(d.servers_removed, key=natural_key),
        },
        "switches": {
            "added": sorted(d.switches_added, key=natural_key),
            "removed": sorted(d.switches_removed, key=natural_key),
        },
        "cables": {
            "added": sorted((_cable_json(c) for c in d.cables_added), key=_by_id),
            "removed": sorted((_cable_json(c) for c in d.cables_removed), key=_by_id),
        },
        "addresses": sorted((_fields(a) for a in d.addresses), key=_by_name),
        "moves": sorted((_fields(m) for m in d.moves), key=_by_name),
        "mig": [_fields(m) for m in sorted(d.mig, key=lambda m: m.group)],
        "software": [_fields(s) for s in sorted(d.software, key=lambda s: s.field)],
        "settings": [_fields(s) for s in d.settings],  # spec order
        "budgets": [_budget_json(b) for b in d.budgets],
        "rolling_order": [_fields(s) for s in d.rolling_order],  # plan order is the point
        "notes": list(d.notes),
        "affected_groups": list(d.affected_groups),
    }


def _json(value: Any) -> str:
    """A setting's value on one line, control and non-ASCII characters escaped."""
    return json.dumps(value, sort_keys=True)


def _fields(record: Any) -> dict[str, Any]:
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name in record.__slots__
        for value in (getattr(record, name),)
    }


def _by_name(record: dict[str, Any]) -> tuple[object, ...]:
    return (record["kind"], natural_key(record["name"]), str(record.get("field", "")))


def _by_id(cable: dict[str, str]) -> tuple[object, ...]:
    return natural_key(cable["id"])


def _budget_json(b: BudgetDelta) -> dict[str, Any]:
    return {
        "path": b.path,
        "kind": b.kind,
        "unit": b.unit,
        "old_predicted": round(b.old, 6),
        "new_predicted": round(b.new, 6),
        "changed": b.old != b.new,
    }


def diff_json(d: PlanDiff) -> str:
    """The change plan as one JSON document (keys sorted, two-space indent)."""
    return json.dumps(diff_document(d), indent=2, sort_keys=True) + "\n"
