"""The rolling order of a day-2 change: one step per unit to drain, recable and rejoin.

Units are scalable units (racks for servers without an SU, the node group for servers with
neither) holding changed, added or removed servers, in plan order: group by group, SU by
SU, which is row order on the floor. `with_cables` gives each step the cables it takes out
and puts in (`infra.day2.recabling`) and an estimate of its time, and adds a last step
for the cables above the leaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from infra.day2.recabling import SPINE_STEP, step_minutes, unit_cables
from infra.topology import Cable, Plan, Server
from infra.topology.growth import natural_key
from infra.wording import plural

__all__ = ["RollingStep", "UnitKind", "rolling_order", "unit_of", "with_cables"]

UnitKind = Literal["su", "rack", "group", "fabric"]


@dataclass(frozen=True, slots=True)
class RollingStep:
    """One step of the rolling change: a unit (SU, rack or group) and what to do there.

    ``cables_added`` and ``cables_removed`` are the cables the step handles (those of its
    servers and of the switches in its row or under it), ``minutes`` their estimated time
    at the catalog's ``minutes_per_cable`` (an assumption). The ``fabric`` step
    (`SPINE_STEP`) holds the cables above the leaves, and drains the SUs under them.
    """

    unit: str
    kind: UnitKind
    changed: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    actions: tuple[str, ...]
    cables_added: int = 0
    cables_removed: int = 0
    minutes: float = 0.0


def with_cables(
    steps: Sequence[RollingStep],
    old: Plan,
    new: Plan,
    added: Sequence[Cable],
    removed: Sequence[Cable],
    hit: set[str],
    minutes_per_cable: float,
) -> tuple[RollingStep, ...]:
    """Each step with its cable counts and time; a last step for the cables above leaves.

    That step drains the units of the servers under the spines it recables (``hit``).
    """
    units = {s.name: unit_of(s)[0] for s in (*new.servers, *old.servers)}
    plus = unit_cables(old, new, added, units)
    minus = unit_cables(old, new, removed, units)
    out = []
    for step in steps:
        a, r = plus.get(step.unit, 0), minus.get(step.unit, 0)
        minutes = step_minutes(a + r, minutes_per_cable)
        actions = list(step.actions)
        if a or r:  # after the drain, before apply
            at = sum(1 for x in actions if x.startswith(("drain ", "remove ")))
            actions.insert(at, _cable_action(r, a, minutes))
        out.append(
            replace(step, actions=tuple(actions), cables_added=a, cables_removed=r, minutes=minutes)
        )
    up, down = plus.get(SPINE_STEP, 0), minus.get(SPINE_STEP, 0)
    if up or down:
        under = sorted({units[n] for n in hit if n in units}, key=natural_key)
        actions = [f"drain {', '.join(under)}"] if down and under else []
        minutes = step_minutes(up + down, minutes_per_cable)
        actions += [_cable_action(down, up, minutes, " above the leaves"), "apply"]
        actions += [f"undrain {', '.join(under)}"] if down and under else []
        out.append(
            RollingStep(
                SPINE_STEP, "fabric", (), (), (), tuple(actions), up, down, minutes,
            )
        )  # fmt: skip
    return tuple(out)


def unit_of(server: Server) -> tuple[str, UnitKind]:
    """The unit a server is drained with: its SU, else its rack, else its node group."""
    if server.su is not None:
        return server.su, "su"
    if server.rack is not None:
        return server.rack, "rack"
    return server.group, "group"


def rolling_order(
    old: Plan, new: Plan, changed: set[str], added: set[str], removed: set[str]
) -> tuple[RollingStep, ...]:
    """One step per unit holding changed, added or removed servers.

    Units of ``new`` come in its plan order; units that only held removed servers follow in
    ``old``'s plan order.
    """
    units: dict[str, tuple[UnitKind, dict[str, list[str]]]] = {}
    touched = [(s, "added" if s.name in added else "changed") for s in new.servers]
    touched += [(s, "removed") for s in old.servers if s.name in removed]
    for server, how in touched:
        if how == "changed" and server.name not in changed:
            continue
        name, kind = unit_of(server)
        lists = units.setdefault(name, (kind, {"changed": [], "added": [], "removed": []}))[1]
        lists[how].append(server.name)
    return tuple(_step(name, kind, lists) for name, (kind, lists) in units.items())


def _step(unit: str, kind: UnitKind, lists: dict[str, list[str]]) -> RollingStep:
    changed, added, removed = lists["changed"], lists["added"], lists["removed"]
    actions: list[str] = [f"drain {unit}"] if changed or removed else []
    if removed:
        actions.append(f"remove {plural(len(removed), 'server')}, then uncable them")
    if added:
        actions.append(f"cable {plural(len(added), 'added server')}")
    actions.append("apply")
    if added:
        actions.append(f"join {plural(len(added), 'added server')}")
    if changed or removed:
        actions.append(f"undrain {unit}")
    return RollingStep(unit, kind, tuple(changed), tuple(added), tuple(removed), tuple(actions))


def _cable_action(removed: int, added: int, minutes: float, where: str = "") -> str:
    """``take out 3 and put in 5 cables (about 40 min)``: what a step does with cables."""
    verbs = [f"take out {removed}"] if removed else []
    verbs += [f"put in {added}"] if added else []
    return f"{' and '.join(verbs)} cables{where} (about {minutes:g} min)"
