"""The plan as people and pipelines read it: `railplan plan` JSON and text.

`plan_json` carries the keys docs/design.md fixes for `railplan plan --format json` and more:
per fabric the switch counts, cables per tier, oversubscription, injection and bisection
bandwidth, the lower bound on switches and port use per tier; per rack its class, row,
cooling and power against the budget. `plan_text` is the same for a terminal, with each
fabric's distance from the lower bound and each rack class's hottest rack. The CSV files
(cabling, BOM, hosts) are in `infra.render.sheets`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from infra.topology.model import TIERS, FabricSummary, Plan, Rack
from infra.wording import plural

__all__ = ["plan_json", "plan_text"]


def _fabric_json(f: FabricSummary) -> dict[str, Any]:
    return {
        "switch": f.switch,
        "tiers": f.tiers,
        "planes": f.planes,
        "pods": f.pods,
        "sus": f.sus,
        "radix": f.radix,
        "port_gbps": f.port_gbps,
        "switches": {"leaf": f.leaf, "spine": f.spine, "core": f.core},
        "lower_bound": f.lower_bound,
        "built_for_sus": f.built_for_sus,
        "cables": {t: f.cables.get(t, 0) for t in TIERS},
        "oversubscription": f.oversubscription,
        "injection_gbps": f.injection_gbps,
        "bisection_gbps": f.bisection_gbps,
        "port_use": {
            u.tier: {"switches": u.switches, "used": u.ports_used, "total": u.ports_total}
            for u in f.port_use
        },
    }


def _rack_json(r: Rack) -> dict[str, Any]:
    return {
        "name": r.name,
        "kind": r.kind,
        "class": r.rack_class,
        "row": r.row,
        "position": r.position,
        "cooling": r.cooling,
        "servers": len(r.servers),
        "switches": len(r.switches),
        "hosts": len(r.hosts),
        "pdus": len(r.pdus),
        "power_kw": r.power_kw,
        "power_bound_kw": r.power_bound_kw,
        "power_typical_kw": r.power_typical_kw,
        "power_budget_kw": r.power_budget_kw,
        "units_used": r.units_used,
        "units": r.units,
    }


def plan_json(plan: Plan) -> str:
    """The plan summary as deterministic JSON (sorted keys, trailing newline)."""
    doc = {
        "name": plan.name,
        "servers": len(plan.servers),
        "gpus": plan.gpus,
        "racks": len(plan.racks),
        "power_kw": plan.power_kw,
        "power_bound_kw": plan.power_bound_kw,
        "power_typical_kw": plan.power_typical_kw,
        "fabrics": {name: _fabric_json(f) for name, f in plan.fabrics.items()},
        "partition_keys": dict(plan.pkeys),
        "warnings": [
            {"code": w.code, "message": w.message, "path": w.path, "hint": w.hint}
            for w in plan.warnings
        ],
        "rack_list": [_rack_json(r) for r in plan.racks],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _racks_line(plan: Plan) -> str:
    if not plan.racks:
        return "no racks (cloud instances: nothing to rack or power)"
    compute = sum(1 for r in plan.racks if r.kind == "compute")
    line = (
        f"{plural(len(plan.racks), 'rack')} ({compute} compute, {len(plan.racks) - compute} network), "
        f"{plan.power_kw:,.1f} kW"
    )
    # Parts of the total are not sourced maxima: say so rather than pretend precision.
    caveats = []
    if plan.power_bound_kw:
        caveats.append(f"{plan.power_bound_kw:,.1f} kW PSU ratings, an upper bound")
    if plan.power_typical_kw:
        caveats.append(f"{plan.power_typical_kw:,.1f} kW typical draw, the maximum is higher")
    if caveats:
        line += f" (of which {'; '.join(caveats)})"
    return line


def _fabric_lines(name: str, f: FabricSummary) -> list[str]:
    counts = ", ".join(f"{n:,} {t.replace('_', '-')}" for t, n in f.cables.items() if n)
    switches = " + ".join(
        f"{n:,} {t}" for t, n in (("leaf", f.leaf), ("spine", f.spine), ("core", f.core)) if n
    )
    shape = (
        f"{f.tiers}-tier"
        + (f", {f.planes} planes" if f.planes > 1 else "")
        + (f", {f.sus} SU" + ("s" if f.sus > 1 else "") if f.sus else "")
        + (f", {f.pods} pods" if f.pods > 1 else "")
    )
    line = f"  {name:<8} {f.switch} {shape}: {switches}; cables {counts}"
    if name == "compute":
        line += (
            f"; {f.oversubscription:g}:1, injection {f.injection_gbps / 1000:,.1f} Tb/s, "
            f"bisection {f.bisection_gbps / 1000:,.1f} Tb/s"
        )
    over = f.switches - f.lower_bound
    bound = (
        "at the lower bound" if over <= 0 else f"{over:,} over the lower bound of {f.lower_bound:,}"
    )
    use = ", ".join(
        f"{u.tier} {u.ports_used:,}/{u.ports_total:,} ports"
        f" ({100 * u.ports_used / u.ports_total:.0f}%)"
        for u in f.port_use
        if u.ports_total
    )
    noun = "switch" if f.switches == 1 else "switches"
    lines = [line, f"           {f.switches:,} {noun}, {bound}; {use}"]
    if f.built_for_sus:
        lines.append(
            f"           spines and cores built for {f.built_for_sus} SUs (max_sus): "
            "growing to them moves no cable"
        )
    return lines


def _class_lines(plan: Plan) -> list[str]:
    by_class: dict[str, list[Rack]] = defaultdict(list)
    for rack in plan.racks:
        by_class[rack.rack_class].append(rack)
    lines = []
    for name, racks in by_class.items():
        hot = max(racks, key=lambda r: r.power_kw)
        full = max(racks, key=lambda r: r.units_used)
        lines.append(
            f"  racks    {name} ({hot.cooling}, {hot.power_budget_kw:g} kW, {hot.units}U): "
            f"{len(racks)}; hottest {hot.name} {hot.power_kw:g} kW, fullest {full.name} "
            f"{full.units_used}U"
        )
    return lines


def plan_text(plan: Plan) -> str:
    """A human summary of the plan."""
    lines = [f"{plan.name}: {len(plan.servers):,} servers, {plan.gpus:,} GPUs, {_racks_line(plan)}"]
    for name, f in plan.fabrics.items():
        lines += _fabric_lines(name, f)
    lines += _class_lines(plan)
    lines += [f"  warning[{w.code}]: {w.message} ({w.hint})" for w in plan.warnings]
    return "\n".join(lines) + "\n"
