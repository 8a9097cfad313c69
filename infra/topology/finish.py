"""Finishing the plan: racks, switches and cables as the frozen records of `infra.topology.model`.

The planners work on mutable fills (`RackPlanner`) and unplaced parts (`SwitchPart`, `Link`);
this module turns them into records once everything is placed and addressed. Racks are
ordered as they stand in the hall (the shared ``core`` row first, then one row per scalable
unit or node group, each by position); a cable gets its id, both ends' rack and unit, and a
length and medium from `infra.topology.geometry`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.addressing import AddressBook
from infra.topology.geometry import measurer, medium, rack_places
from infra.topology.model import Cable, Rack, Switch
from infra.topology.parts import Link, SwitchPart
from infra.topology.racks import RackFill, RackPlanner
from infra.topology.record_maker import maker

__all__ = ["finish_cables", "rack_records", "row_order", "switch_records"]

_cable = maker(Cable)  # half a million of them in a large plan
_UNPLACED: tuple[None, None] = (None, None)


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


def _ends(racks: RackPlanner, rack_list: Sequence[Rack]) -> dict[str, tuple[str, int | None]]:
    """(rack, unit) of every placed device; PDUs are zero-U (unit None)."""
    ends: dict[str, tuple[str, int | None]] = dict(racks.where)
    for rack in rack_list:
        ends.update((pdu, (rack.name, None)) for pdu in rack.pdus)
    return ends


def finish_cables(
    links: Sequence[Link],
    racks: RackPlanner,
    rack_list: Sequence[Rack],
    spec: Spec,
    catalog: Catalog,
) -> tuple[Cable, ...]:
    """Every link as a cable with both ends' rack and unit, medium and length."""
    places = rack_places(
        ((r.name, r.row, r.position, r.units) for r in rack_list),
        row_order(list(racks.racks.values())),
        spec.site.layout,
    )
    heights = {r.name: r.units for r in rack_list}
    ends = _ends(racks, rack_list)
    generation = {f: _generation(spec, catalog, f) for f in ("compute", "storage", "inband", "oob")}
    length_of = measurer(places, spec.site.layout)
    medium_of = functools.cache(medium)  # a few fabrics and lengths, half a million cables
    cables = []
    for link in links:
        a_rack, a_unit = ends.get(link.a, _UNPLACED)
        b_rack, b_unit = ends.get(link.b, _UNPLACED)
        # A zero-U PDU's network port sits about half-way up its rack.
        a_len_unit = a_unit if a_unit is not None or a_rack is None else heights[a_rack] // 2
        length = length_of(a_rack, a_len_unit, b_rack, b_unit)
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
                medium_of(link.fabric, generation[link.fabric], length),
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
