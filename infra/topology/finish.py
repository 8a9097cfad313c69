"""Finishing the plan: racks, switches and cables as the frozen records of `infra.topology.model`.

The planners work on mutable fills (`RackPlanner`) and unplaced parts (`SwitchPart`, `Link`);
this module turns them into records once everything is placed and addressed. Racks are
ordered as they stand in the hall (the shared ``core`` row first, then one row per scalable
unit or node group, each by position); a cable gets its id, both ends' rack and unit, and a
length and medium from `infra.topology.geometry`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.addressing import AddressBook
from infra.topology.geometry import NO_END, RACK_UNIT_M, End, end_of, medium, rack_places
from infra.topology.model import Cable, Rack, Switch
from infra.topology.parts import Link, SwitchPart
from infra.topology.racks import RackFill, RackPlanner
from infra.topology.record_maker import maker

__all__ = ["finish_cables", "rack_records", "row_order", "switch_records"]

_cable = maker(Cable)  # half a million of them in a large plan
_UNPLACED: tuple[None, None] = (None, None)
_NOWHERE: tuple[tuple[None, None], End, End] = (_UNPLACED, NO_END, NO_END)


def row_order(fills: Sequence[RackFill]) -> list[str]:
    """Rows as they stand in the hall: ``core`` first, then in order of first use."""
    rows = list(dict.fromkeys(r.row for r in fills))
    return (["core"] if "core" in rows else []) + [r for r in rows if r != "core"]


def _ordered(racks: RackPlanner) -> list[RackFill]:
    fills = list(racks.racks.values())
    index = {row: i for i, row in enumerate(row_order(fills))}
    return sorted(fills, key=lambda r: (index[r.row], r.position, r.name))


def rack_records(racks: RackPlanner) -> tuple[Rack, ...]:
    """Every rack as a record, in hall order."""
    return tuple(
        Rack(
            r.name,
            r.kind,
            r.rack_class,
            r.row,
            r.position,
            r.spec.cooling,
            r.spec.power_kw,
            r.spec.units,
            tuple(r.servers),
            tuple(r.switches),
            tuple(r.hosts),
            tuple(f"{r.name}-pdu{j + 1}" for j in range(r.pdus)),
            round(r.power_kw, 3),
            round(r.power_bound_kw, 3),
            round(r.power_typical_kw, 3),
            r.units_used,
        )
        for r in _ordered(racks)
    )


def switch_records(
    parts: Sequence[SwitchPart],
    where: dict[str, tuple[str, int]],
    book: AddressBook,
    catalog: Catalog,
) -> tuple[Switch, ...]:
    """Every switch with its rack, unit and management address, in plan order."""
    records = []
    for p in parts:
        sw = catalog.switches[p.model]
        rack, unit = where[p.name]
        records.append(
            Switch(
                p.name,
                p.fabric,
                p.tier,
                p.model,
                p.plane,
                p.pod,
                p.su,
                p.rail,
                rack,
                unit,
                sw.rack_units,
                sw.ports,
                book.bmc.get(p.name),
            )
        )
    return tuple(records)


def _ends(
    racks: RackPlanner, rack_list: Sequence[Rack], spec: Spec
) -> dict[str, tuple[tuple[str, int | None], End, End]]:
    """Every placed device: its (rack, unit), and its `End` as a cable's A end and B end.

    PDUs are zero-U (unit None); a PDU's network port sits about half-way up its rack, as
    an A end (a B end without a unit has no length, as it always had).
    """
    places = rack_places(
        ((r.name, r.row, r.position, r.units) for r in rack_list),
        row_order(list(racks.racks.values())),
        spec.site.layout,
    )
    ends: dict[str, tuple[tuple[str, int | None], End, End]] = {}
    for device, (rack, unit) in racks.where.items():
        end = end_of(rack, unit, places)
        ends[device] = ((rack, unit), end, end)
    for r in rack_list:
        half_up = end_of(r.name, r.units // 2, places)
        ends.update((pdu, ((r.name, None), half_up, NO_END)) for pdu in r.pdus)
    return ends


class _Media(dict[tuple[str, float | None], str]):
    """(fabric, length) -> `medium`, each worked out once: a few hundred, half a million cables."""

    def __init__(self, spec: Spec, catalog: Catalog) -> None:
        super().__init__()
        self.generation = {
            f: _generation(spec, catalog, f) for f in ("compute", "storage", "inband", "oob")
        }

    def __missing__(self, key: tuple[str, float | None]) -> str:
        fabric, length = key
        kind = self[key] = medium(fabric, self.generation[fabric], length)  # type: ignore[arg-type]
        return kind


def finish_cables(
    links: Sequence[Link],
    racks: RackPlanner,
    rack_list: Sequence[Rack],
    spec: Spec,
    catalog: Catalog,
) -> tuple[Cable, ...]:
    """Every link as a cable with both ends' rack and unit, medium and length.

    The length is `geometry.run_metres` plus slack in half metres, its sums written out
    here: a call per cable was a third of this loop.
    """
    ends = _ends(racks, rack_list, spec)
    tray, slack = 2 * spec.site.layout.tray_rise_m, spec.site.layout.slack_m
    media = _Media(spec, catalog)
    seen: dict[float, float] = {}  # equal lengths as one float object
    cables = []
    for link in links:
        (a_rack, a_unit), a, _ = ends.get(link.a, _NOWHERE)
        (b_rack, b_unit), _, b = ends.get(link.b, _NOWHERE)
        if a[1] is None or b[1] is None:
            length = None
        else:
            if a[0] == b[0]:
                run = abs(a[1] - b[1]) * RACK_UNIT_M
            else:
                run = a[4] + b[4] + tray + abs(a[2] - b[2]) + abs(a[3] - b[3])
            metres = math.ceil((run + slack) * 2) / 2
            length = seen.setdefault(metres, metres)
        cables.append(
            _cable(
                link.fabric,
                link.tier,
                link.a,
                link.a_port,
                link.b,
                link.b_port,
                link.gbps,
                a_rack,
                a_unit,
                b_rack,
                b_unit,
                media[link.fabric, length],
                length,
            )
        )
    return tuple(cables)


def _generation(spec: Spec, catalog: Catalog, fabric: str) -> str:
    """The link generation (``hdr``, ``ndr``, ``100gbe``, ...) of a fabric's switch model."""
    switch = None
    if fabric == "compute" and spec.fabrics.compute is not None:
        switch = spec.fabrics.compute.switch
    elif fabric == "storage" and spec.fabrics.storage is not None:
        switch = spec.fabrics.storage.switch
    elif fabric == "inband" and spec.fabrics.management is not None:
        switch = spec.fabrics.management.inband_switch
    elif fabric == "oob" and spec.fabrics.management is not None:
        switch = spec.fabrics.management.oob_switch
    return catalog.switches[switch].generation if switch in catalog.switches else ""
