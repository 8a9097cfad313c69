"""Hall geometry: where racks stand, how long a cable between two rack units is, its medium.

The hall is a grid of row segments: each scalable unit's (or node group's) racks form one
segment, the shared ``core`` racks as many segments of at most ``racks_per_row`` as they
need, placed in the middle of the grid so the longest spine and core runs stay short.
Segments stand ``row_pitch_m`` apart front to back and one segment length plus an aisle
(``row_pitch_m``) apart side by side; racks in a segment stand ``rack_width_m`` apart. A cable inside a rack runs between its two units; between racks it
rises from each unit to the top of its rack and ``tray_rise_m`` more, then follows the
overhead tray (along the row, then across rows). Every cable adds ``slack_m`` and is rounded
up to the next half metre, the steps cables are sold in. Defaults are in `infra.spec.Layout`.

Media (reach limits are the common LinkX product lengths, not a vendor's cable matrix: treat
them as estimates): 1 GbE out-of-band cables are Cat6 copper (RJ45). HDR and 100 GbE links
up to 2 m (HDR) or 3 m (100 GbE) are passive copper (DAC), longer ones active optical cables
(AOC, up to 100 m). NDR links up to 2 m are DAC, longer ones transceivers and fibre
(``optical``), NVIDIA's practice for NDR switch-to-switch links.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from infra.spec.site import Layout
from infra.topology.model import FabricName, Medium

__all__ = [
    "RACK_UNIT_M",
    "End",
    "Place",
    "cable_length",
    "end_of",
    "medium",
    "rack_places",
    "run_metres",
]

RACK_UNIT_M = 0.04445  # EIA-310: 1.75 in
DAC_REACH_M = {"hdr": 2.0, "ndr": 2.0, "ethernet": 3.0}
AOC_REACH_M = 100.0

Place = tuple[float, float, int]  # x, y (metres), rack height (units)


def rack_places(
    racks: Iterable[tuple[str, str, int, int]], rows: list[str], layout: Layout
) -> dict[str, Place]:
    """``(rack, row, position, units)`` → (x, y, units) for every rack."""
    racks = list(racks)
    longest = max((p for _, row, p, _ in racks if row != "core"), default=1)
    per_segment = max(2, min(layout.racks_per_row, max(longest, 10)))
    core = max((p for _, row, p, _ in racks if row == "core"), default=0)
    segments = [r for r in rows if r != "core"]
    middle = len(segments) // 2
    core_cells = [f"core#{k}" for k in range(math.ceil(core / per_segment))]
    cells = segments[:middle] + core_cells + segments[middle:]
    columns = max(1, math.ceil(math.sqrt(len(cells))))
    width = per_segment * layout.rack_width_m + layout.row_pitch_m
    origin = {
        cell: ((k % columns) * width, (k // columns) * layout.row_pitch_m)
        for k, cell in enumerate(cells)
    }
    places: dict[str, Place] = {}
    for name, row, position, units in racks:
        if row == "core":
            cell, position = (
                f"core#{(position - 1) // per_segment}",
                (position - 1) % per_segment + 1,
            )
        else:
            cell = row
        x, y = origin[cell]
        places[name] = (x + (position - 1) * layout.rack_width_m, y, units)
    return places


def cable_length(
    a: tuple[str | None, int | None],
    b: tuple[str | None, int | None],
    places: dict[str, Place],
    layout: Layout,
) -> float | None:
    """Estimated length in metres between two (rack, unit) ends; None if one is unplaced.

    Each end rises to the top of its rack, then runs along the overhead tray; cables are sold
    in half metres. `infra.topology.finish` repeats these sums inline for half a million
    cables, and tests/test_render_scale.py holds the two equal.
    """
    run = run_metres(end_of(*a, places), end_of(*b, places), 2 * layout.tray_rise_m)
    if run is None:
        return None
    return math.ceil((run + layout.slack_m) * 2) / 2


# A cable end where the length sums start: (rack, unit, x, y, rise), rise the metres from
# the unit to the top of its rack. Unit None (a zero-U device, an unplaced one): no length.
End = tuple[str | None, int | None, float, float, float]
NO_END: End = (None, None, 0.0, 0.0, 0.0)


def end_of(rack: str | None, unit: int | None, places: dict[str, Place]) -> End:
    """The `End` of a device at ``unit`` of ``rack`` (`NO_END` without both)."""
    if rack is None or unit is None:
        return NO_END
    x, y, units = places[rack]
    return (rack, unit, x, y, (units - unit + 1) * RACK_UNIT_M)


def run_metres(a: End, b: End, tray: float) -> float | None:
    """The run between two ends before slack: inside one rack, or up, along the tray, down.

    ``tray``: twice `Layout.tray_rise_m`. `cable_length` and `infra.topology.finish` (which
    repeats these sums inline for half a million cables) add the same terms in this order.
    """
    if a[1] is None or b[1] is None:
        return None
    if a[0] == b[0]:
        return abs(a[1] - b[1]) * RACK_UNIT_M
    return a[4] + b[4] + tray + abs(a[2] - b[2]) + abs(a[3] - b[3])


def medium(fabric: FabricName, generation: str, length_m: float | None) -> Medium:
    """The cable medium for a link of ``length_m`` on ``fabric`` (see the module doc)."""
    if fabric == "oob":
        return "cat6"
    family = generation if generation in DAC_REACH_M else "ethernet"
    if length_m is not None and length_m <= DAC_REACH_M[family]:
        return "dac"
    if family == "ndr" or length_m is None or length_m > AOC_REACH_M:
        return "optical"
    return "aoc"
