"""A day-2 change plan between two specs, at plan level (`railplan diff OLD NEW`).

Pure functions, no printing: `plan_diff` compares two plans (and the specs they came from)
and returns a frozen `PlanDiff`; `infra.day2.diff_format` formats it. Servers and switches
are matched by name and cables by their ends ``(a, a_port, b, b_port, fabric)``: names are
stable identities in the plan, and a cable's ``id`` (``<a device>:<a port>``) is stable too,
but matching by both ends also reports a cable whose far end moved (same id, new peer) as
one removed and one added, which is what a technician has to do with it.

The rolling order (`infra.day2.rolling`) lists the scalable units (or racks, for servers
without an SU; the node group for servers without either) that hold changed, added or
removed servers, in plan order, servers whose leaves' uplinks move counting as changed
(`infra.day2.recabling`, of every group); each step drains the unit (when it holds
servers in service), removes and uncables what goes, recables, cables what comes, applies
the change, joins the added servers and undrains, with its cable counts and an estimate of
its time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.catalog import Catalog
from infra.day2.recabling import affected_servers
from infra.day2.rolling import RollingStep, rolling_order, with_cables
from infra.day2.setting_changes import SettingChange, setting_changes
from infra.spec import NodeGroup, Spec
from infra.topology import Cable, Plan
from infra.topology.migconfig import mig_config_name

__all__ = [
    "AddressChange",
    "BudgetDelta",
    "MigEdit",
    "Move",
    "PlanDiff",
    "RollingStep",
    "SettingChange",
    "SoftwareChange",
    "plan_diff",
]

DeviceKind = Literal["server", "switch"]
CableKey = tuple[str, str, str, str, str]


@dataclass(frozen=True, slots=True)
class AddressChange:
    """One address of a server or switch that differs between the plans."""

    kind: DeviceKind
    name: str
    field: Literal["mgmt_ip", "bmc_ip"]
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True)
class Move:
    """A server or switch standing in another rack or rack unit."""

    kind: DeviceKind
    name: str
    old_rack: str | None
    old_unit: int | None
    new_rack: str | None
    new_unit: int | None


@dataclass(frozen=True, slots=True)
class MigEdit:
    """A node group's MIG layout (`mig`) or schedule (`mig_schedule`) edited between two specs.

    Not a scheduled change (that is `infra.spec.MigChange`, one entry of a `mig_schedule`).
    """

    group: str
    old: str
    new: str
    old_schedule: tuple[str, ...]  # "<cron> <config>" per change
    new_schedule: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SoftwareChange:
    """One `software:` version that differs."""

    field: str
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True)
class BudgetDelta:
    """One budget evaluated on both plans: its predicted value before and after."""

    path: str
    kind: str
    unit: str
    old: float
    new: float


@dataclass(frozen=True)
class PlanDiff:
    """Everything that differs between two plans, each list in a deterministic order."""

    servers_added: tuple[str, ...]
    servers_removed: tuple[str, ...]
    switches_added: tuple[str, ...]
    switches_removed: tuple[str, ...]
    cables_added: tuple[Cable, ...]
    cables_removed: tuple[Cable, ...]
    addresses: tuple[AddressChange, ...]
    moves: tuple[Move, ...]
    mig: tuple[MigEdit, ...]
    software: tuple[SoftwareChange, ...]
    budgets: tuple[BudgetDelta, ...]
    rolling_order: tuple[RollingStep, ...]
    notes: tuple[str, ...] = ()  # advice, e.g. how to avoid the recabling listed
    affected_groups: tuple[str, ...] = ()  # node groups whose running jobs a step drains
    settings: tuple[SettingChange, ...] = ()  # other spec settings (the rendered tree's)

    @property
    def changed(self) -> bool:
        """Whether anything differs (a budget counts only when its prediction moved)."""
        lists: tuple[Sequence[object], ...] = (
            self.servers_added,
            self.servers_removed,
            self.switches_added,
            self.switches_removed,
            self.cables_added,
            self.cables_removed,
            self.addresses,
            self.moves,
            self.mig,
            self.software,
            self.settings,
        )
        return any(lists) or any(b.old != b.new for b in self.budgets)


def plan_diff(
    old_spec: Spec,
    old_plan: Plan,
    new_spec: Spec,
    new_plan: Plan,
    catalog: Catalog,
    *,
    files: tuple[str | None, str | None] = (None, None),
) -> PlanDiff:
    """The change plan from ``old_plan`` to ``new_plan`` (and their specs).

    ``files`` are the specs' files, which the traces their replay budgets name are read
    relative to.
    """
    servers_added, servers_removed = _names_diff(old_plan.servers, new_plan.servers)
    switches_added, switches_removed = _names_diff(old_plan.switches, new_plan.switches)
    cables_added, cables_removed = cable_diff(old_plan, new_plan)
    addresses, moves = address_changes(old_plan, new_plan), moves_between(old_plan, new_plan)
    mig, software = mig_changes(old_spec, new_spec), software_changes(old_spec, new_spec)
    budgets = budget_deltas(
        evaluate_budgets(old_spec, catalog, old_plan, spec_file=files[0]),
        evaluate_budgets(new_spec, catalog, new_plan, spec_file=files[1]),
    )
    changed = _changed_servers(old_plan, new_plan, addresses, moves, mig, software)
    changed |= {n for c in (*cables_added, *cables_removed) for n in (c.a, c.b)}
    gone = set(switches_removed) | set(servers_removed)
    both = {s.name for s in new_plan.servers} - set(servers_added)
    changed |= affected_servers(old_plan, cables_removed, gone) & both
    under = affected_servers(old_plan, cables_removed, gone, "spine_core") & both
    steps = rolling_order(old_plan, new_plan, changed, set(servers_added), set(servers_removed))
    steps = with_cables(
        steps, old_plan, new_plan, cables_added, cables_removed, under,
        float(catalog.site.get("minutes_per_cable", 0.0)),
    )  # fmt: skip
    drained = {n for step in steps for n in (*step.changed, *step.removed)} | under
    groups = {s.name: s.group for s in (*old_plan.servers, *new_plan.servers)}
    order = list(dict.fromkeys(s.group for s in (*new_plan.servers, *old_plan.servers)))
    affected = tuple(g for g in order if any(groups[n] == g for n in drained))
    return PlanDiff(
        servers_added,
        servers_removed,
        switches_added,
        switches_removed,
        cables_added,
        cables_removed,
        addresses,
        moves,
        mig,
        software,
        budgets,
        steps,
        recabling_notes(new_spec, new_plan, cables_removed, set(switches_removed)),
        affected,
        setting_changes(old_spec, new_spec),
    )


def recabling_notes(
    spec: Spec, plan: Plan, removed: Sequence[Cable], gone: set[str]
) -> tuple[str, ...]:
    """Why uplink cables between kept switches move, and the spec key that avoids it.

    Spines and cores are sized for the SUs planned unless ``fabrics.compute.max_sus``
    says what the fabric is to grow to (the storage and in-band trees follow it).
    """
    moved = Counter(c.fabric for c in removed if c.tier != "node_leaf" and not {c.a, c.b} & gone)
    compute = spec.fabrics.compute
    if not moved or compute is None:
        return ()
    where = ", ".join(f"{n} {fabric}" for fabric, n in sorted(moved.items()))
    sus = len(plan.sus)
    if compute.max_sus is None:
        hint = (
            f"declare fabrics.compute.max_sus (at least {sus}) in both specs, and "
            "node_groups[].max_count for a group that is not the last"
        )
    else:
        hint = (
            "keep the same max_sus in both specs, and declare node_groups[].max_count "
            "for a group that grows and is not the last"
        )
    note = (
        f"{where} uplink cables between switches that stay are recabled: the spines were "
        f"sized for the old size; to grow without recabling, {hint}"
    )
    return (note,)


def _names_diff(old: Iterable[Any], new: Iterable[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Names only in ``new`` (added, in new plan order) and only in ``old`` (removed)."""
    old_names = [item.name for item in old]
    new_names = [item.name for item in new]
    old_set, new_set = set(old_names), set(new_names)
    added = tuple(n for n in new_names if n not in old_set)
    return added, tuple(n for n in old_names if n not in new_set)


def cable_key(cable: Cable) -> CableKey:
    """What identifies a cable for the diff: both ends and the fabric."""
    return (cable.a, cable.a_port, cable.b, cable.b_port, cable.fabric)


def cable_diff(old: Plan, new: Plan) -> tuple[tuple[Cable, ...], tuple[Cable, ...]]:
    """Cables only in ``new`` (added) and only in ``old`` (removed), each in plan order."""
    old_keys = {cable_key(c) for c in old.cables}
    new_keys = {cable_key(c) for c in new.cables}
    added = tuple(c for c in new.cables if cable_key(c) not in old_keys)
    return added, tuple(c for c in old.cables if cable_key(c) not in new_keys)


def address_changes(old: Plan, new: Plan) -> tuple[AddressChange, ...]:
    """Management and BMC addresses of servers, and BMC addresses of switches, that moved."""
    changes: list[AddressChange] = []
    new_servers = {s.name: s for s in new.servers}
    for s in old.servers:
        n = new_servers.get(s.name)
        if n is not None and s.mgmt_ip != n.mgmt_ip:
            changes.append(AddressChange("server", s.name, "mgmt_ip", s.mgmt_ip, n.mgmt_ip))
        if n is not None and s.bmc_ip != n.bmc_ip:
            changes.append(AddressChange("server", s.name, "bmc_ip", s.bmc_ip, n.bmc_ip))
    new_switches = {s.name: s for s in new.switches}
    for w in old.switches:
        m = new_switches.get(w.name)
        if m is not None and w.bmc_ip != m.bmc_ip:
            changes.append(AddressChange("switch", w.name, "bmc_ip", w.bmc_ip, m.bmc_ip))
    return tuple(changes)


def moves_between(old: Plan, new: Plan) -> tuple[Move, ...]:
    """Servers, then switches, that stand in another rack or unit in ``new``."""
    moves: list[Move] = []
    kinds: tuple[tuple[DeviceKind, Sequence[Any], Sequence[Any]], ...] = (
        ("server", old.servers, new.servers),
        ("switch", old.switches, new.switches),
    )
    for kind, old_items, new_items in kinds:
        placed = {item.name: (item.rack, item.rack_unit) for item in new_items}
        for item in old_items:
            where = placed.get(item.name)
            if where is not None and where != (item.rack, item.rack_unit):
                moves.append(Move(kind, item.name, item.rack, item.rack_unit, *where))
    return tuple(moves)


def _schedule(group: NodeGroup) -> tuple[str, ...]:
    if group.mig_schedule is None:
        return ()
    changes = group.mig_schedule.changes
    return tuple(f"{c.at} {mig_config_name(group, k)}" for k, c in enumerate(changes))


def mig_changes(old: Spec, new: Spec) -> tuple[MigEdit, ...]:
    """Node groups in both specs whose `mig` or `mig_schedule` differs, in new spec order."""
    before = {g.name: g for g in old.node_groups}
    changes: list[MigEdit] = []
    for group in new.node_groups:
        prior = before.get(group.name)
        if prior is None or (prior.mig, prior.mig_schedule) == (group.mig, group.mig_schedule):
            continue
        changes.append(
            MigEdit(
                group.name,
                mig_config_name(prior),
                mig_config_name(group),
                _schedule(prior),
                _schedule(group),
            )
        )
    return tuple(changes)


def software_changes(old: Spec, new: Spec) -> tuple[SoftwareChange, ...]:
    """`software:` fields whose value differs, in field order."""
    before, after = old.software.model_dump(), new.software.model_dump()
    return tuple(
        SoftwareChange(key, before.get(key), value)
        for key, value in after.items()
        if before.get(key) != value
    )


def budget_deltas(
    old: Sequence[BudgetResult], new: Sequence[BudgetResult]
) -> tuple[BudgetDelta, ...]:
    """Budgets (matched by path and kind) evaluated without error on both plans."""
    before = {(r.path, r.kind): r for r in old if not r.error}
    deltas: list[BudgetDelta] = []
    for r in new:
        prior = before.get((r.path, r.kind))
        if prior is not None and not r.error:
            deltas.append(BudgetDelta(r.path, r.kind, r.unit, prior.predicted, r.predicted))
    return tuple(deltas)


def _changed_servers(
    old: Plan,
    new: Plan,
    addresses: Sequence[AddressChange],
    moves: Sequence[Move],
    mig: Sequence[MigEdit],
    software: Sequence[SoftwareChange],
) -> set[str]:
    """Servers present in both plans that the change touches."""
    both = {s.name for s in old.servers} & {s.name for s in new.servers}
    if software:  # a version change reaches every server
        return both
    changed = {a.name for a in addresses if a.kind == "server"}
    changed |= {m.name for m in moves if m.kind == "server"}
    groups = {m.group for m in mig}
    before = {s.name: s.mig for s in old.servers}
    changed |= {
        s.name for s in new.servers if s.group in groups or before.get(s.name, s.mig) != s.mig
    }
    return changed & both
