"""Which servers' jobs a recabling interrupts, and how long each rolling step takes.

A cable taken out between switches that stay cuts paths that running jobs use: a leaf's
uplink moved interrupts every server on that leaf (in the compute, storage and in-band
networks; the out-of-band network carries no job traffic), a spine's uplink to a core every
server under that spine. `affected_servers` finds those servers in the old plan, so the
rolling order drains their scalable units (of every node group, not only the one that
grows). `unit_cables` gives each cable the unit whose step handles it (a server's, or the
unit of the servers under a leaf; a spine's uplinks go to a step of their own), and
`step_minutes` turns the counts into an estimate with the catalog's ``minutes_per_cable``
(an assumption, cited in ``infra/catalog/data/site.yaml``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from infra.topology import Cable, Plan

__all__ = ["SPINE_STEP", "affected_servers", "step_minutes", "unit_cables"]

SPINE_STEP = "spines-and-cores"  # the step for cables above the leaves
JOB_FABRICS = ("compute", "storage", "inband")  # the OOB network carries no job traffic


def _below(plan: Plan) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(servers on each leaf, leaves under each spine) from the plan's cables."""
    servers = {s.name for s in plan.servers}
    on_leaf: dict[str, set[str]] = defaultdict(set)
    under: dict[str, set[str]] = defaultdict(set)
    for c in plan.cables:
        if c.fabric not in JOB_FABRICS:
            continue
        if c.tier == "node_leaf" and c.a in servers:
            on_leaf[c.b].add(c.a)
        elif c.tier == "leaf_spine":
            under[c.b].add(c.a)
    return on_leaf, under


def affected_servers(
    old: Plan, removed: Iterable[Cable], gone: set[str], tier: str = "leaf_spine"
) -> set[str]:
    """Servers of ``old`` whose job traffic a removed ``tier`` cable between kept switches cuts.

    ``leaf_spine``: the servers on the leaf; ``spine_core``: the servers under the spine.
    """
    on_leaf, under = _below(old)
    hit: set[str] = set()
    for c in removed:
        if c.fabric not in JOB_FABRICS or c.tier != tier or {c.a, c.b} & gone:
            continue
        leaves = {c.a} if c.tier == "leaf_spine" else under.get(c.a, set())
        for leaf in leaves:
            hit |= on_leaf.get(leaf, set())
    return hit


def unit_cables(
    old: Plan, new: Plan, cables: Sequence[Cable], unit_of: dict[str, str]
) -> dict[str, int]:
    """Cables per rolling unit: by the server at the lower end, or the servers under a leaf.

    A leaf with servers of several units (a storage leaf spans SUs) counts for the first
    in ``unit_of`` order; a spine's uplinks count for `SPINE_STEP`.
    """
    order = {name: k for k, name in enumerate(dict.fromkeys(unit_of.values()))}
    leaf_unit: dict[str, str] = {}
    for plan in (new, old):
        on_leaf, _ = _below(plan)
        for leaf, servers in on_leaf.items():
            units = [unit_of[s] for s in servers if s in unit_of]
            if units and leaf not in leaf_unit:
                leaf_unit[leaf] = min(units, key=order.__getitem__)
    in_row = _row_units(old, new, set(order))
    counts: dict[str, int] = defaultdict(int)
    for c in cables:
        if c.tier == "spine_core":
            unit = SPINE_STEP
        else:  # the UFM host, storage systems and core-row devices: the spine step
            unit = unit_of.get(c.a) or in_row.get(c.a) or leaf_unit.get(c.a) or SPINE_STEP
        counts[unit] += 1
    return dict(counts)


def _row_units(old: Plan, new: Plan, units: set[str]) -> dict[str, str]:
    """Devices standing in a unit's own row (an SU's leaves, PDUs and OOB switches)."""
    found: dict[str, str] = {}
    for plan in (old, new):
        row = {r.name: r.row for r in plan.racks}
        placed = [(w.name, w.rack) for w in plan.switches]
        placed += [(p.name, p.rack) for p in plan.pdus]
        for name, rack in placed:
            unit = row.get(rack or "")
            if unit in units:
                found[name] = unit
    return found


def step_minutes(cables: int, minutes_per_cable: float) -> float:
    """Estimated minutes to take out and put in ``cables`` cables."""
    return round(cables * minutes_per_cable, 1)
