"""Input files for NVIDIA's own fabric validators, from the plan's compute-fabric cables.

`fabric_files(plan, spec, catalog)` returns relative name -> text for ``files/fabric/`` when
the compute fabric is InfiniBand (else nothing): ``topology.topo`` (the ibdm topology file
``ibdiagnet --topo_file`` compares the discovered fabric against), ``cable-validation.csv``
and ``hca_mapping.csv`` (the UFM Cable Validation Tool's P2P sheet and HCA map),
``node-name-map.txt`` (``ibnetdiscover --node-name-map``; GUIDs from
``fabrics.compute.guids``), ``ibsim.net`` (the fabric twin: an ibsim netlist, see
`infra.render.ibsim_netlist`) and ``ACCEPTANCE.md`` (the commands, with only flags found in
NVIDIA's ibdiagnet documentation). Switch ports are logical ports in the topo file
(``P<n>``) and front-panel labels in the CVT sheet (``n``, or ``cage/k`` on QM97xx's
twin-port OSFP cages, per the catalog's ``Switch.port_label``).

Sources: ibdm-topo-file(1) (ibutils "IBDM Topology File"); IBUtils2 v2.23.0 "Topology
Comparison", "Rail Optimized Topology Validation", "Fat-Tree Topology Validation", "Routing
Validation", SHARP support; UFM Cable Validation Tool v1.5.0 "Topo File", "P2P File",
"Optional Files" (hca_mapping); ibnetdiscover(8) "NODE NAME MAP FILE FORMAT".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from infra.catalog import Catalog
from infra.render.ibsim_netlist import ibsim_netlist
from infra.render.sheets import joined_csv
from infra.spec import Spec
from infra.topology.model import Cable, Plan

__all__ = [
    "cable_validation_csv",
    "fabric_files",
    "hca_mapping_csv",
    "node_name_map",
    "system_type",
    "topology_topo",
]

_DOCS = "https://docs.nvidia.com/networking/display"
TOPO_URL = f"{_DOCS}/ibdiagnetutilityv2230/Topology+Comparison"
TOPO_MAN = "ibdm-topo-file(1), ibutils (https://www.unix.com/man_page/debian/1/ibdm-topo-file/)"
CVT_TOPO_URL = f"{_DOCS}/cablevalidationtool150/topo+file"
CVT_P2P_URL = f"{_DOCS}/cablevalidationtool150/p2p+file"
CVT_HCA_URL = f"{_DOCS}/cablevalidationtool150/optional+files"
RAIL_URL = f"{_DOCS}/ibdiagnetutilityv2230/Rail+Optimized+Topology+Validation"
FT_URL = f"{_DOCS}/ibdiagnetutilityv2230/fat-tree+topology+validation"
ROUTING_URL = f"{_DOCS}/ibdiagnetutilityv2230/Routing+Validation"
SHARP_URL = (
    f"{_DOCS}/ibdiagnetutilityv2230/nvidia+scalable+hierarchical+aggregation"
    "+and+reduction+protocol+(sharp)+support"
)
# The CVT documents its P2P sheet's columns as Rack, U, Name, HCA/Port for the A end and
# Rack, U, Name, Port for the Z end (its header row shows "Name" where the U values are).
CVT_HEADER = ("Rack", "U", "Name", "HCA/Port", "Rack", "U", "Name", "Port")
_SAFE = re.compile(r"^[A-Za-z0-9._-]+\Z")


def _checked(name: str) -> str:
    """Names reach whitespace-separated files: refuse any that could split a field."""
    if not _SAFE.match(name):
        raise ValueError(f"name {name!r} cannot be written to a fabric validator file")
    return name


def _compute_cables(plan: Plan) -> list[Cable]:
    return plan.cables_in("compute")


@dataclass(frozen=True)
class _Ends:
    """What a cable end is, looked up once per render rather than once per cable end.

    ``types``: compute switch -> its ibdm system type (``MQM9700``); anything else is a host.
    ``labels``: compute switch -> its model's front-panel labels (`_Labels`, one per
    model, each label made once). ``rails``: server -> HCA -> 1-based rail as text (the
    CVT's HCA/Port number). ``safe``: names already `_checked`, so a device with hundreds of
    cables is checked once, not once per cable end.
    """

    types: dict[str, str]
    labels: dict[str, _Labels]
    rails: dict[str, _AsPlanned]
    safe: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, plan: Plan, catalog: Catalog | None = None) -> _Ends:
        switches = plan.switches_in("compute")
        label: dict[str, _Labels] = {}
        if catalog is not None:  # a model has tens of ports, a fabric a million cable ends
            models = {s.model for s in switches}
            label = {m: _Labels(catalog.switches[m].port_label) for m in models}
        return cls(
            {s.name: "M" + s.model.upper() for s in switches},
            {s.name: label[s.model] for s in switches if s.model in label},
            {
                s.name: _AsPlanned({h: str(i) for i, h in enumerate(s.hcas, 1)})
                for s in plan.servers
            },
        )

    def checked(self, name: str) -> str:
        """`_checked`, remembered."""
        if name not in self.safe:
            self.safe.add(_checked(name))
        return name

    def system_type(self, name: str) -> str:
        return self.types.get(name, "HCA")

    def cvt_port(self, device: str, port: str) -> str:
        """The CVT's port: the cage label on a switch, the HCA/Port number on a server."""
        label = self.labels.get(device)
        if label is not None:
            return label[port]
        # the UFM appliance's ports keep their planned names (ib0, ib1), as does a
        # server's port off its rails (`_AsPlanned`)
        return self.rails.get(device, _AS_PLANNED)[port]

    def port_texts(self) -> dict[str, dict[str, str]]:
        """Device -> planned port -> its CVT port (`cvt_port`), as dictionaries.

        A switch's is its model's labels, a server's its rails; a device not listed keeps
        its planned ports (look it up in `_AS_PLANNED`).
        """
        return {**self.rails, **self.labels}


class _AsPlanned(dict[str, str]):
    """A device's CVT ports that are its planned ports (also a server's port off its rails)."""

    def __missing__(self, port: str) -> str:
        return port


_AS_PLANNED = _AsPlanned()


class _Labels(dict[str, str]):
    """Planned port -> one switch model's front-panel label, each made once."""

    def __init__(self, label: Callable[[int], str]) -> None:
        super().__init__()
        self.label = label

    def __missing__(self, port: str) -> str:
        text = self[port] = self.label(int(port))
        return text


def system_type(plan: Plan, name: str) -> str:
    """The ibdm system type: the switch part number stem (``MQM9700``), ``HCA`` for hosts.

    Switch types follow the names ibdiagnet writes (``MQM8700``, ``MQM9700`` in the CVT's
    topo-file example); hosts get ``HCA``, the generic type: ibdiagnet matches host
    ports by name (``mlx5_0/P1``), and ``ibdiagnet -w`` shows the type it writes.
    """
    return _Ends.of(plan).system_type(name)


class _PortTexts(dict[str, str]):
    """Planned port -> its panel name in the topo file, each made once (on first lookup).

    ``P<n>`` on switches, ``<device>/P1`` on hosts (one port each); a fabric has a few
    hundred distinct ports and a million cable ends.
    """

    def __init__(self, ends: _Ends, switch: bool) -> None:
        super().__init__()
        self.ends, self.switch = ends, switch

    def __missing__(self, port: str) -> str:
        text = self[port] = f"P{int(port)}" if self.switch else f"{self.ends.checked(port)}/P1"
        return text


def _links_by_system(cables: Sequence[Cable], ends: _Ends) -> dict[str, list[str]]:
    """Every system's link lines (``LOCAL -> REM-TYPE REM-SYS REM-PORT``), both directions.

    A device's first cable is written as every cable was (port texts, then names checked);
    after that its lines, its `` -> TYPE NAME `` text and its port texts are known, and
    each further cable end is a few lookups and one concatenation.
    """
    links: dict[str, list[str]] = {}
    types, checked = ends.types, ends.checked
    hosts, switches = _PortTexts(ends, switch=False), _PortTexts(ends, switch=True)
    known: dict[str, tuple[list[str], str, _PortTexts]] = {}  # device -> lines, arrow, ports
    for cable in cables:
        a, b = cable.a, cable.b
        a_end, b_end = known.get(a), known.get(b)
        if a_end is None or b_end is None:  # a device's first cable
            a_type, b_type = types.get(a), types.get(b)
            a_ports = hosts if a_type is None else switches
            b_ports = hosts if b_type is None else switches
            a_port, b_port = a_ports[cable.a_port], b_ports[cable.b_port]
            for device, kind, ports in (
                (checked(a), a_type, a_ports),
                (checked(b), b_type, b_ports),
            ):
                if device not in known:
                    lines = links.setdefault(device, [])
                    known[device] = (lines, f" -> {kind or 'HCA'} {device} ", ports)
            a_end, b_end = known[a], known[b]
        else:
            a_port, b_port = a_end[2][cable.a_port], b_end[2][cable.b_port]
        a_end[0].append(a_port + b_end[1] + b_port)
        b_end[0].append(b_port + a_end[1] + a_port)
    return links


def topology_topo(plan: Plan, cables: Sequence[Cable] | None = None) -> str:
    """``topology.topo``: one ibdm system section per device, a blank line between them.

    ``cables``: the plan's compute cables, if already listed.
    """
    ends = _Ends.of(plan)
    lines = [
        f"# ibdm topology file of {plan.name}'s compute fabric, generated by railplan.",
        f"# Format: {TOPO_MAN}; ibdiagnet -t/--topo_file ({TOPO_URL}).",
        "# SYSTEM-TYPE SYSTEM-NAME, then LOCAL-PORT -> REM-SYS-TYPE REM-SYS-NAME REM-PORT.",
        f"# Switch ports are logical (P1..Pn), hosts' are <rdma device>/P1 ({CVT_TOPO_URL}).",
        "",
    ]
    links = _links_by_system(_compute_cables(plan) if cables is None else cables, ends)
    for system in sorted(links):
        lines.append(f"{ends.system_type(system)} {system}")
        lines += links[system]
        lines.append("")
    return "\n".join(lines)


def cable_validation_csv(
    plan: Plan, catalog: Catalog, cables: Sequence[Cable] | None = None
) -> str:
    """``cable-validation.csv``: the CVT P2P sheet, one row per compute cable, A end first.

    Each end is Rack, U, Name, Port as the CVT's P2P sheet writes them. ``cables``: the
    plan's compute cables, if already listed.
    """
    ends = _Ends.of(plan, catalog)
    port = ends.cvt_port
    listed = _compute_cables(plan) if cables is None else cables

    def rows() -> Iterator[tuple[str, ...]]:
        for c in listed:
            yield (
                c.a_rack or "",
                "" if c.a_unit is None else str(c.a_unit),
                c.a,
                port(c.a, c.a_port),
                c.b_rack or "",
                "" if c.b_unit is None else str(c.b_unit),
                c.b,
                port(c.b, c.b_port),
            )

    return joined_csv(CVT_HEADER, _cvt_lines(listed, ends), rows)


def _cvt_lines(cables: Sequence[Cable], ends: _Ends) -> list[str]:
    """Each cable's P2P row as `joined_csv` takes it: ``rows()``'s cells in one f-string."""
    texts, same = ends.port_texts(), _AS_PLANNED
    return [
        f"{c.a_rack or ''},{'' if c.a_unit is None else c.a_unit},{c.a},"
        f"{texts.get(c.a, same)[c.a_port]},{c.b_rack or ''},"
        f"{'' if c.b_unit is None else c.b_unit},{c.b},{texts.get(c.b, same)[c.b_port]}"
        for c in cables
    ]


def _hca_layouts(plan: Plan) -> dict[tuple[str, ...], list[str]]:
    """Distinct per-rail HCA lists -> the node groups that have them, in plan order."""
    layouts: dict[tuple[str, ...], list[str]] = {}
    for server in plan.servers:
        groups = layouts.setdefault(server.hcas, [])
        if server.group not in groups:
            groups.append(server.group)
    return layouts


def hca_mapping_csv(hcas: tuple[str, ...]) -> str:
    """``port,hca-name`` rows: the CVT's HCA/Port number -> RDMA device, in rail order."""
    rows = ["port,hca-name"] + [f"{i},{_checked(h)}" for i, h in enumerate(hcas, 1)]
    return "\n".join(rows) + "\n"


def _hca_files(plan: Plan) -> dict[str, str]:
    """One ``hca_mapping.csv``, or one per node group where groups' HCAs differ."""
    layouts = _hca_layouts(plan)
    if len(layouts) <= 1:
        return {"hca_mapping.csv": hca_mapping_csv(next(iter(layouts), ()))}
    return {
        f"hca_mapping-{_checked(group)}.csv": hca_mapping_csv(hcas)
        for hcas, groups in layouts.items()
        for group in groups
    }


def _guids(spec: Spec) -> dict[str, list[str]]:
    fabric = spec.fabrics.compute
    raw = fabric.guids if fabric else {}
    return {name: [f"0x{int(g, 16):016x}" for g in values] for name, values in raw.items()}


def node_name_map(plan: Plan, spec: Spec) -> str:
    """``node-name-map.txt``: ``0x<guid> "<name>"`` per known switch node / server port GUID."""
    guids = _guids(spec)
    lines = [
        f"# ibnetdiscover --node-name-map of {plan.name} (format: ibnetdiscover(8), NODE",
        '# NAME MAP FILE FORMAT: <guid> "<name>"), generated by railplan.',
    ]
    switches = [s.name for s in plan.switches_in("compute")]
    servers = [s for s in plan.servers if s.hcas]
    known = [n for n in switches if n in guids] + [s.name for s in servers if s.name in guids]
    if not known:
        lines += [
            "# No GUIDs yet: add fabrics.compute.guids to the spec after cabling (a switch's",
            "# node GUID; a server's port GUIDs in rail order, `ibstat` on the host) and render.",
        ]
    for name in switches:
        if name in guids:
            lines.append(f'{guids[name][0]} "{name}"')
    for server in servers:
        for hca, guid in zip(server.hcas, guids.get(server.name, []), strict=False):
            lines.append(f'{guid} "{server.name} {hca}"')
    return "\n".join(lines) + "\n"


def _acceptance(plan: Plan, spec: Spec, hca_files: list[str], cables: int) -> str:
    sharp = spec.fabrics.compute is not None and spec.fabrics.compute.sharp
    tiers = plan.fabrics["compute"].tiers
    command = "ibdiagnet --topo_file topology.topo --rail_validation --ft -r"
    command += " --sharp" if sharp else ""
    lines = [
        f"# Fabric acceptance: {plan.name}",
        "",
        f"Compute fabric: {cables} cables, {tiers}-tier fat tree.",
        "Run from a host on the fabric, with these files copied beside it.",
        "",
        "## ibdiagnet (IBUtils2)",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- `--topo_file topology.topo`: compares the discovered fabric with the plan ({TOPO_URL}).",
        f"- `--rail_validation`: every HCA on one leaf sits at the same PCIe address ({RAIL_URL}).",
        f"- `--ft`: fat-tree structure and bisection report ({FT_URL}).",
        f"- `-r`: unicast/multicast routing, credit loops ({ROUTING_URL}).",
    ]
    if sharp:
        lines.append(f"- `--sharp`: SHARP trees and aggregation nodes ({SHARP_URL}).")
    lines += [
        "",
        "Expect no topology mismatches in `ibdiagnet2.log`. Port numbers there are logical",
        "(`P<n>`); `cable-validation.csv` gives the front-panel label of each.",
        "",
        "## UFM Cable Validation Tool",
        "",
        f"1. Load `cable-validation.csv` as the P2P sheet ({CVT_P2P_URL}); save it as",
        "   .xlsx if your CVT version takes only Excel files.",
        f"2. Load {', '.join(f'`{n}`' for n in hca_files)} as the HCA mapping ({CVT_HCA_URL}):",
        "   HCA/Port n is the server's rail n.",
        f"3. Or load `topology.topo` as the topo file (`load_topo`, {CVT_TOPO_URL}).",
        "",
        "## Names",
        "",
        "`node-name-map.txt` names GUIDs for `ibnetdiscover --node-name-map node-name-map.txt`.",
        "",
        "## Fabric twin (before the racks arrive)",
        "",
        "`ibsim.net` is this fabric in ibsim (Debian `ibsim-utils`): run the real OpenSM and",
        "infiniband-diags on it with no hardware, e.g. to see `railplan verify` on a clean",
        "fabric. Its header has the commands.",
        "",
        "Not sourced, so not here: port-counter flags; the pairing of QM97xx logical ports",
        "2c-1/2c onto OSFP cage c is inferred (catalog reference `sw-qm97-port-map`).",
    ]
    return "\n".join(lines) + "\n"


def fabric_files(plan: Plan, spec: Spec, catalog: Catalog) -> dict[str, str]:
    """The validator files by relative name; empty without an InfiniBand compute fabric."""
    fabric = spec.fabrics.compute
    if fabric is None or catalog.switches[fabric.switch].kind != "infiniband":
        return {}
    cables = _compute_cables(plan)  # listed once for every file below
    if not cables:
        return {}
    hca = _hca_files(plan)
    return {
        "ACCEPTANCE.md": _acceptance(plan, spec, sorted(hca), len(cables)),
        "cable-validation.csv": cable_validation_csv(plan, catalog, cables),
        **hca,
        "ibsim.net": ibsim_netlist(plan, cables),
        "node-name-map.txt": node_name_map(plan, spec),
        "topology.topo": topology_topo(plan, cables),
    }
