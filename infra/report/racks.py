"""Rack elevations for the HTML report: every device at its rack unit, row by row.

Each rack is drawn front view, unit 1 at the bottom: servers, switches and hosts as boxes
at their lowest unit (``data-u``) spanning their units (``data-units``), zero-U PDUs as
strips down the sides (feed A left, feed B right), and under the rack a bar of its maximum
draw against its class's power budget. Air and liquid racks differ in frame, header and
body colour, and the header says which in words (so a black-and-white print tells them
apart too). A row is cut into lines of `RACKS_PER_LINE` racks, one SVG each, so no SVG is
wider than a printed page can show legibly and a page break never falls inside a rack.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from infra.catalog import Catalog
from infra.report.svg import el, line, rect, svg, text
from infra.topology.model import Pdu, Plan, Rack

__all__ = ["RACKS_PER_LINE", "U_PX", "RackRow", "rack_rows", "unit_y"]

U_PX = 9  # one rack unit
RACK_W, STRIP, GAP, RULER = 136, 8, 20, 26
HEAD, FOOT = 32, 36
RACKS_PER_LINE = 6


@dataclass(frozen=True)
class RackRow:
    """One hall row: its name, racks, power, and its elevation SVGs (one per line)."""

    name: str
    racks: int
    power_kw: float
    budget_kw: float
    svgs: tuple[Markup, ...]


@dataclass(frozen=True)
class _Box:
    """A racked device to draw: name, class, lowest unit, height and tooltip."""

    name: str
    css: str
    unit: int
    units: int
    tip: str
    sub: str


def unit_y(top: float, rack_units: int, unit: int, units: int) -> float:
    """The SVG y of the top edge of a device whose lowest unit is ``unit``."""
    return top + HEAD + (rack_units - unit - units + 1) * U_PX


def _boxes(plan: Plan, catalog: Catalog, rack: Rack) -> list[_Box]:
    boxes = []
    for name in rack.servers:
        s = plan.server(name)
        if s.rack_unit is None:
            continue
        where = f"{s.su} slot {s.slot}" if s.su else s.group
        tip = f"{s.name}: {s.node}, group {s.group}, {where}, mgmt {s.mgmt_ip}, bmc {s.bmc_ip}"
        units = catalog.nodes[s.node].rack_units or 1
        boxes.append(_Box(s.name, "dev srv", s.rack_unit, units, tip, f"{s.group} · {where}"))
    for name in rack.switches:
        w = plan.switch(name)
        tip = f"{w.name}: {w.model}, {w.fabric} {w.tier}, {w.ports} ports, bmc {w.bmc_ip}"
        boxes.append(_Box(w.name, f"dev sw {w.fabric}", w.rack_unit, w.units, tip, w.model))
    for h in plan.hosts:
        if h.rack == rack.name and h.rack_unit is not None:
            tip = f"{h.name}: {h.role} host, {h.units}U, {h.power_kw:g} kW"
            boxes.append(_Box(h.name, "dev host", h.rack_unit, h.units, tip, h.role))
    return boxes


def _clip(label: str, width: float, font_px: float) -> str:
    fits = max(3, int(width / (font_px * 0.6)))
    return label if len(label) <= fits else label[: fits - 1] + "…"


def _box_parts(box: _Box, x: float, top: float, rack_units: int) -> list[Markup]:
    y = unit_y(top, rack_units, box.unit, box.units)
    w, h = RACK_W - 2 * STRIP, box.units * U_PX
    parts = [
        rect(
            x + STRIP,
            y,
            w,
            h,
            box.tip,
            class_=box.css,
            data_name=box.name,
            data_u=box.unit,
            data_units=box.units,
        )
    ]
    font = 8.0 if h >= 2 * U_PX else 7.0
    baseline = y + (h + font) / 2 - 1 if h < 3 * U_PX else y + font + 3
    parts.append(
        text(
            x + STRIP + 3,
            baseline,
            _clip(box.name, w - 6, font),
            class_="dev-label",
            font_size=font,
        )
    )
    if h >= 3 * U_PX:
        parts.append(text(x + STRIP + 3, baseline + 10, _clip(box.sub, w - 6, 7), class_="dev-sub"))
    return parts


def _pdu_parts(pdus: Sequence[Pdu], x: float, top: float, rack_units: int) -> list[Markup]:
    """PDUs as zero-U strips: feed A down the left side, feed B down the right."""
    parts: list[Markup] = []
    height = rack_units * U_PX
    for feed, left in (("A", x), ("B", x + RACK_W - STRIP)):
        side = [p for p in pdus if p.feed == feed]
        for i, p in enumerate(side):
            seg = height / len(side)
            y = top + HEAD + i * seg
            tip = f"{p.name}: PDU, feed {p.feed}, zero-U, bmc {p.bmc_ip}"
            parts.append(
                rect(
                    left, y + 1, STRIP, seg - 2, tip, class_="pdu", data_name=p.name, data_feed=feed
                )
            )
            parts.append(
                text(left + STRIP / 2, y + 9, feed, class_="pdu-label", text_anchor="middle")
            )
    return parts


def _power_parts(rack: Rack, x: float, y: float) -> list[Markup]:
    share = rack.power_kw / rack.power_budget_kw if rack.power_budget_kw else 0.0
    css = "over" if share > 1 + 1e-9 else "hot" if share > 0.9 else "ok"
    tip = (
        f"{rack.name}: {rack.power_kw:g} kW at maximum draw of a {rack.power_budget_kw:g} kW "
        f"budget ({rack.power_bound_kw:g} kW of it PSU ratings, an upper bound; "
        f"{rack.power_typical_kw:g} kW typical draw)"
    )
    return [
        rect(x, y, RACK_W, 8, tip, class_="pbar-track"),
        rect(x, y, RACK_W * min(share, 1.0), 8, class_=f"pbar {css}"),
        text(
            x,
            y + 21,
            f"{rack.power_kw:.1f} / {rack.power_budget_kw:g} kW ({share:.0%})",
            class_=f"pbar-label {css}",
            data_power_kw=f"{rack.power_kw:g}",
        ),
    ]


def _rack_meta(rack: Rack) -> str:
    """``liquid · 43/48U``, or ``air · default · 26/42U`` when class and cooling differ."""
    return " · ".join(
        dict.fromkeys((rack.cooling, rack.rack_class, f"{rack.units_used}/{rack.units}U"))
    )


def _rack(
    plan: Plan, catalog: Catalog, rack: Rack, pdus: Sequence[Pdu], x: float, top: float
) -> Markup:
    """One rack at (x, top): header, devices at their units, PDU strips, power bar."""
    height = rack.units * U_PX
    parts = [
        rect(x, top, RACK_W, HEAD - 2, class_="rack-head"),
        text(x + 4, top + 12, rack.name, class_="rack-name"),
        text(x + 4, top + 25, _rack_meta(rack), class_="rack-meta"),
        rect(x, top + HEAD, RACK_W, height, class_="rack-body"),
    ]
    for box in _boxes(plan, catalog, rack):
        parts += _box_parts(box, x, top, rack.units)
    parts += _pdu_parts(pdus, x, top, rack.units)
    parts += _power_parts(rack, x, top + HEAD + height + 6)
    return el(
        "g",
        Markup("").join(parts),
        class_=f"rack {rack.cooling} {rack.kind}",
        data_rack=rack.name,
        data_units=rack.units,
        data_top=float(top),
        data_x=float(x),
    )


def _ruler(units: int) -> list[Markup]:
    parts = []
    for u in range(1, units + 1, 6):
        y = unit_y(0, units, u, 1) + U_PX - 1
        parts.append(text(RULER - 4, y, f"U{u}", class_="ruler", text_anchor="end"))
    return parts


def _line_svg(
    plan: Plan, catalog: Catalog, racks: Sequence[Rack], pdus: dict[str, list[Pdu]]
) -> Markup:
    units = max(r.units for r in racks)
    parts: list[Markup] = list(_ruler(units))
    for i, rack in enumerate(racks):
        x = RULER + i * (RACK_W + GAP)
        top = float((units - rack.units) * U_PX)  # racks of another height share the floor
        parts.append(_rack(plan, catalog, rack, pdus.get(rack.name, []), x, top))
    for u in range(1, units + 1, 6):
        y = unit_y(0, units, u, 1) + U_PX
        parts.insert(0, line(RULER - 2, y, RULER, y, class_="ruler-tick"))
    width = RULER + len(racks) * (RACK_W + GAP)
    label = f"Rack elevations: {', '.join(r.name for r in racks)}"
    return svg(width, HEAD + units * U_PX + FOOT, parts, label, class_="racks")


def _chunks(racks: Sequence[Rack], size: int) -> Iterator[Sequence[Rack]]:
    for start in range(0, len(racks), size):
        yield racks[start : start + size]


def rack_rows(plan: Plan, catalog: Catalog) -> list[RackRow]:
    """Every hall row of the plan, in plan order, with its elevation SVGs."""
    pdus: dict[str, list[Pdu]] = {}
    for p in plan.pdus:
        pdus.setdefault(p.rack, []).append(p)
    by_row: dict[str, list[Rack]] = {}
    for rack in plan.racks:
        by_row.setdefault(rack.row, []).append(rack)
    return [
        RackRow(
            name,
            len(racks),
            round(sum(r.power_kw for r in racks), 1),
            round(sum(r.power_budget_kw for r in racks), 1),
            tuple(
                _line_svg(plan, catalog, chunk, pdus) for chunk in _chunks(racks, RACKS_PER_LINE)
            ),
        )
        for name, racks in by_row.items()
    ]
