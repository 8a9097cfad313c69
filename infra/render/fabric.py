"""Fabric files: the plan as JSON and text, the bill of materials and the cabling plan (CSV).

`plan_json` carries the keys DESIGN.md fixes for `railplan plan --format json` and more.
`bom_csv` counts switches, cables by fabric, rate and length class, and transceivers;
`cabling_csv` has one row per cable with both ends (device, port, rack). Media follow the
length class: ``in-rack`` cables are passive copper (DAC, up to ~3 m); ``row`` and ``hall``
cables are optical, each end a transceiver. NDR switch cages and DGX H100/H200 compute
cages are twin-port OSFP (one transceiver serves two ports), so those ends count half.
The transceiver count is an estimate for budgeting; the vendor's cable matrix decides.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from typing import Any

from infra.catalog import Catalog
from infra.topology.model import Cable, FabricSummary, Plan

__all__ = ["bom_csv", "cabling_csv", "plan_json", "plan_text"]

CABLING_COLUMNS = [
    "fabric",
    "tier",
    "a_device",
    "a_port",
    "a_rack",
    "b_device",
    "b_port",
    "b_rack",
    "gbps",
    "length_class",
]


def _fabric_json(f: FabricSummary) -> dict[str, Any]:
    return {
        "switch": f.switch,
        "tiers": f.tiers,
        "planes": f.planes,
        "pods": f.pods,
        "sus": f.sus,
        "radix": f.radix,
        "switches": {"leaf": f.leaf, "spine": f.spine, "core": f.core},
        "cables": {t: f.cables.get(t, 0) for t in ("node_leaf", "leaf_spine", "spine_core")},
        "oversubscription": f.oversubscription,
        "bisection_gbps": f.bisection_gbps,
    }


def plan_json(plan: Plan) -> str:
    """The plan summary as deterministic JSON (sorted keys, trailing newline)."""
    doc = {
        "name": plan.name,
        "servers": len(plan.servers),
        "gpus": plan.gpus,
        "racks": len(plan.racks),
        "power_kw": plan.power_kw,
        "fabrics": {name: _fabric_json(f) for name, f in plan.fabrics.items()},
        "partition_keys": plan.pkeys,
        "notes": plan.notes,
        "rack_list": [
            {
                "name": r.name,
                "kind": r.kind,
                "servers": len(r.servers),
                "switches": len(r.switches),
                "power_kw": r.power_kw,
                "units_used": r.units_used,
            }
            for r in plan.racks
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def plan_text(plan: Plan) -> str:
    """A human summary of the plan."""
    compute_racks = sum(1 for r in plan.racks if r.kind == "compute")
    racks = (
        f"{len(plan.racks)} racks ({compute_racks} compute, "
        f"{len(plan.racks) - compute_racks} network), {plan.power_kw:,.1f} kW"
        if plan.racks
        else "no racks (cloud instances: nothing to rack or power)"
    )
    lines = [f"{plan.name}: {len(plan.servers):,} servers, {plan.gpus:,} GPUs, {racks}"]
    for name, f in plan.fabrics.items():
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
            line += f"; {f.oversubscription:g}:1, bisection {f.bisection_gbps / 1000:,.1f} Tb/s"
        lines.append(line)
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"


def cabling_csv(plan: Plan) -> str:
    """One row per cable, both ends with device, port and rack."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CABLING_COLUMNS)
    for c in plan.cables:
        writer.writerow(
            [
                c.fabric,
                c.tier,
                c.a,
                c.a_port,
                c.a_rack,
                c.b,
                c.b_port,
                c.b_rack,
                f"{c.gbps:g}",
                c.length_class,
            ]
        )
    return out.getvalue()


def _media(c: Cable) -> str:
    return "DAC copper" if c.length_class == "in-rack" else "optical"


def _twin_port(device: str, plan_models: dict[str, str], catalog: Catalog) -> bool:
    model = plan_models.get(device.split("/", 1)[0])
    if model in catalog.switches:
        return catalog.switches[model].generation == "ndr"
    return model in {"dgx-h100", "dgx-h200"}


def _transceivers(plan: Plan, catalog: Catalog) -> Counter[tuple[str, float]]:
    models = {s.name: s.model for s in plan.switches} | {s.name: s.node for s in plan.servers}
    ports: Counter[tuple[str, str, float]] = Counter()
    for c in plan.cables:
        if _media(c) == "optical" and c.fabric in ("compute", "storage"):
            ports[(c.a, c.fabric, c.gbps)] += 1
            ports[(c.b, c.fabric, c.gbps)] += 1
    out: Counter[tuple[str, float]] = Counter()
    for (device, _, gbps), n in ports.items():
        if _twin_port(device, models, catalog):
            out[("twin-port OSFP transceiver", gbps)] += math.ceil(n / 2)
        else:
            out[("single-port transceiver", gbps)] += n
    return out


def bom_csv(plan: Plan, catalog: Catalog) -> str:
    """Bill of materials: switches, cables by fabric/rate/length class, transceivers."""
    rows: list[tuple[str, str, str, str, int]] = []
    switches = Counter((s.fabric, s.model) for s in plan.switches)
    rows += [
        ("switch", fabric, model, catalog.switches[model].name, n)
        for (fabric, model), n in switches.items()
    ]
    cables = Counter(
        (c.fabric, f"{c.gbps:g} Gb/s {_media(c)}", c.length_class) for c in plan.cables
    )
    rows += [("cable", fabric, media, length, n) for (fabric, media, length), n in cables.items()]
    rows += [
        ("transceiver", "compute+storage", f"{gbps:g} Gb/s", kind, n)
        for (kind, gbps), n in _transceivers(plan, catalog).items()
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["category", "fabric", "item", "detail", "quantity"])
    writer.writerows(sorted(rows))
    return out.getvalue()
