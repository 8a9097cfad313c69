"""The plan as spreadsheets: cabling plan, bill of materials and address plan (CSV).

- `cabling_csv`: one row per cable with its stable id, both ends (device, port, rack, unit),
  rate, medium and estimated length in metres (`infra.topology.geometry`).
- `bom_csv`: servers, racks per class, PDUs per feed, switches per fabric, the UFM
  appliance, cables by fabric, rate, medium and stock length (the shortest common length
  that reaches the estimate), and transceivers per cable end.
  Only ``optical`` cables take transceivers (DAC and AOC have their ends built in). NDR
  switch cages and DGX H100/H200 compute cages are twin-port OSFP (one transceiver serves
  two ports), so those ends count half. The transceiver count is an estimate for budgeting;
  the vendor's cable matrix decides.
- `hosts_csv`: the address plan, one row per server, columns as docs/design.md names them.
- `etc_hosts`: the same addresses as /etc/hosts lines, for the os_tuning role.

Missing facts (a cloud instance's rack, an exhausted address block) are empty cells.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby
from operator import attrgetter

from infra.catalog import Catalog
from infra.topology.model import Cable, Plan

__all__ = [
    "BOM_COLUMNS",
    "CABLING_COLUMNS",
    "HOSTS_COLUMNS",
    "BomRow",
    "bom_csv",
    "bom_rows",
    "cabling_csv",
    "etc_hosts",
    "hosts_csv",
    "stock_length",
]

CABLING_COLUMNS = (
    "cable_id", "fabric", "tier", "a_device", "a_port", "a_rack", "a_unit",
    "b_device", "b_port", "b_rack", "b_unit", "gbps", "medium", "length_m",
)  # fmt: skip
BOM_COLUMNS = ("category", "fabric", "item", "detail", "quantity")
HOSTS_COLUMNS = ("name", "group", "su", "slot", "rack", "rack_unit", "mgmt_ip", "bmc_ip")
# Lengths LinkX DAC, AOC and fibre cables are commonly sold in (metres); an estimate for
# ordering, the vendor's cable matrix decides.
STOCK_LENGTHS_M = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0)
BomRow = tuple[str, str, str, str, int]  # category, fabric, item, detail, quantity
TWIN_PORT_NODES = frozenset({"dgx-h100", "dgx-h200"})  # 4 twin-port OSFP cages for 8 NICs


def _cell(value: object) -> str:
    if value is None:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _csv(header: Sequence[str], rows: Iterable[Sequence[object]], *, raw: bool = False) -> str:
    """CSV text; ``raw`` rows hold no floats (the csv module writes None as "" itself)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows if raw else ([_cell(v) for v in row] for row in rows))
    return out.getvalue()


def joined_csv(
    header: Sequence[str], lines: Sequence[str], rows: Callable[[], Iterable[Sequence[object]]]
) -> str:
    """CSV text of ``lines`` (each row's cells as text joined by commas), else of ``rows()``.

    csv.writer writes a row as its cells joined by commas unless a cell holds a comma, a
    quote or a line break; the whole text shows whether one does (more commas or line
    breaks than the cells and rows account for, or any quote), and only then is the sheet
    written cell by cell from ``rows()`` (raw, as `_csv`). Joining is several times faster
    than the csv module, which at half a million cables was most of a render's time.
    """
    text = "\n".join([",".join(header), *lines, ""])
    commas = (len(header) - 1) * (len(lines) + 1)
    if '"' in text or "\r" in text or text.count(",") != commas:
        return _csv(header, rows(), raw=True)
    if text.count("\n") != len(lines) + 1:
        return _csv(header, rows(), raw=True)
    return text


class _Numbers(dict[float | None, str]):
    """Number -> its ``:g`` text (None -> empty), each made once.

    Half a million cables have a few rates and lengths.
    """

    def __missing__(self, number: float | None) -> str:
        text = self[number] = "" if number is None else f"{number:g}"
        return text


def _cabling_lines(cables: Iterable[Cable]) -> list[str]:
    """Each cable's row as `joined_csv` takes it (None cells empty, as csv.writer writes them)."""
    n = _Numbers()
    return [  # the id (`Cable.id`) written out: a property call per cable is a tenth of this
        f"{c.a}:{c.a_port},{c.fabric},{c.tier},{c.a},{c.a_port},{c.a_rack or ''},"
        f"{'' if c.a_unit is None else c.a_unit},{c.b},{c.b_port},{c.b_rack or ''},"
        f"{'' if c.b_unit is None else c.b_unit},{n[c.gbps]},{c.medium},{n[c.length_m]}"
        for c in cables
    ]


def _cabling_row(c: Cable) -> tuple[object, ...]:
    return (
        c.id, c.fabric, c.tier, c.a, c.a_port, c.a_rack, c.a_unit, c.b, c.b_port, c.b_rack,
        c.b_unit, f"{c.gbps:g}", c.medium, None if c.length_m is None else f"{c.length_m:g}",
    )  # fmt: skip


def cabling_csv(plan: Plan) -> str:
    """One row per cable (columns `CABLING_COLUMNS`)."""
    return joined_csv(
        CABLING_COLUMNS,
        _cabling_lines(plan.cables),
        lambda: map(_cabling_row, plan.cables),
    )


def hosts_csv(plan: Plan) -> str:
    """The address plan: one row per server (columns `HOSTS_COLUMNS`)."""
    return _csv(
        HOSTS_COLUMNS,
        (
            (s.name, s.group, s.su, s.slot, s.rack, s.rack_unit, s.mgmt_ip, s.bmc_ip)
            for s in plan.servers
        ),
    )


def etc_hosts(plan: Plan) -> str:
    """``<address> <name>`` per server with a management address.

    The os_tuning role's /etc/hosts block, so every server resolves the others (mpirun,
    Slurm) without DNS.
    """
    lines = [f"{s.mgmt_ip} {s.name}" for s in plan.servers if s.mgmt_ip is not None]
    return "\n".join(lines) + "\n" if lines else ""


def _twin_port(device: str, models: dict[str, str], catalog: Catalog) -> bool:
    model = models.get(device)
    if model in catalog.switches:
        return catalog.switches[model].generation == "ndr"
    return model in TWIN_PORT_NODES


def _transceivers(plan: Plan, catalog: Catalog) -> Counter[tuple[str, str, float]]:
    """Transceivers per fabric, kind and rate: one per optical cable end (twin-port: half)."""
    models = {s.name: s.model for s in plan.switches} | {s.name: s.node for s in plan.servers}
    optical = [c for c in plan.cables if c.medium == "optical"]
    # Ends per device, counted within each (fabric, rate) by device name alone: cables come
    # in long runs of one fabric and rate, and a name is a cheaper key than a tuple.
    ends: dict[tuple[str, float], Counter[str]] = {}
    for kind, run in groupby(optical, attrgetter("fabric", "gbps")):
        cables = list(run)
        devices = ends.setdefault(kind, Counter())
        devices.update(map(attrgetter("a"), cables))
        devices.update(map(attrgetter("b"), cables))
    out: Counter[tuple[str, str, float]] = Counter()
    for (fabric, gbps), devices in ends.items():
        for device, n in devices.items():
            if _twin_port(device, models, catalog):
                out[(fabric, "twin-port OSFP transceiver", gbps)] += math.ceil(n / 2)
            else:
                out[(fabric, "single-port transceiver", gbps)] += n
    return out


def stock_length(medium: str, length_m: float | None) -> str:
    """The stock length a cable is ordered in: the shortest common length that reaches."""
    if length_m is None:
        return "length unknown"
    if medium == "cat6":
        return f"{math.ceil(length_m):g} m"
    stock = next((n for n in STOCK_LENGTHS_M if n >= length_m), None)
    return f"{stock:g} m" if stock is not None else f"{math.ceil(length_m):g} m (custom)"


def _cable_rows(cables: Iterable[Cable]) -> list[BomRow]:
    # counted as planned first, then named: half a million cables, a few dozen kinds
    planned = Counter(map(attrgetter("fabric", "gbps", "medium", "length_m"), cables))
    counts: Counter[tuple[str, str, str]] = Counter()
    for (fabric, gbps, medium, length_m), n in planned.items():
        counts[(fabric, f"{gbps:g} Gb/s {medium}", stock_length(medium, length_m))] += n
    return [("cable", f, item, detail, n) for (f, item, detail), n in counts.items()]


def _equipment_rows(plan: Plan, catalog: Catalog) -> list[BomRow]:
    rows: list[BomRow] = []
    servers = Counter(s.node for s in plan.servers)
    rows += [("server", "", n, catalog.nodes[n].name, k) for n, k in servers.items()]
    racks = Counter((r.rack_class, r.units, r.cooling, r.power_budget_kw) for r in plan.racks)
    rows += [
        ("rack", "", f"rack class {c}", f"{u}U {cool}, {kw:g} kW budget", k)
        for (c, u, cool, kw), k in racks.items()
    ]
    pdus = Counter(p.feed for p in plan.pdus)
    rows += [("pdu", "", "rack PDU, zero-U, metered", f"feed {f}", k) for f, k in pdus.items()]
    switches = Counter((s.fabric, s.model) for s in plan.switches)
    rows += [("switch", f, m, catalog.switches[m].name, k) for (f, m), k in switches.items()]
    hosts = Counter(h.role for h in plan.hosts if h.role == "ufm")
    rows += [
        ("appliance", "compute", "UFM Enterprise appliance", "subnet manager", k)
        for k in hosts.values()
    ]
    return rows


def bom_rows(plan: Plan, catalog: Catalog) -> list[BomRow]:
    """Bill of materials rows (`BOM_COLUMNS`), sorted: what `bom_csv` and the report list."""
    rows = _equipment_rows(plan, catalog) + _cable_rows(plan.cables)
    rows += [
        ("transceiver", fabric, f"{gbps:g} Gb/s", kind, n)
        for (fabric, kind, gbps), n in _transceivers(plan, catalog).items()
    ]
    return sorted(rows)


def bom_csv(plan: Plan, catalog: Catalog) -> str:
    """Bill of materials (columns `BOM_COLUMNS`), rows sorted."""
    return _csv(BOM_COLUMNS, bom_rows(plan, catalog))
