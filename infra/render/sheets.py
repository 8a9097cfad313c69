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
from collections.abc import Iterable, Sequence

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


def cabling_csv(plan: Plan) -> str:
    """One row per cable (columns `CABLING_COLUMNS`).

    Rows are built without a per-cell conversion: at 500,000 cables that was most of the
    render's time.
    """
    return _csv(
        CABLING_COLUMNS,
        (
            (
                c.id,
                c.fabric,
                c.tier,
                c.a,
                c.a_port,
                c.a_rack,
                c.a_unit,
                c.b,
                c.b_port,
                c.b_rack,
                c.b_unit,
                f"{c.gbps:g}",
                c.medium,
                None if c.length_m is None else f"{c.length_m:g}",
            )
            for c in plan.cables
        ),
        raw=True,
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
    ends: Counter[tuple[str, str, float]] = Counter()
    for c in plan.cables:
        if c.medium == "optical":
            ends[(c.a, c.fabric, c.gbps)] += 1
            ends[(c.b, c.fabric, c.gbps)] += 1
    out: Counter[tuple[str, str, float]] = Counter()
    for (device, fabric, gbps), n in ends.items():
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
    counts = Counter(
        (c.fabric, f"{c.gbps:g} Gb/s {c.medium}", stock_length(c.medium, c.length_m))
        for c in cables
    )
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
