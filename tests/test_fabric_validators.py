"""The fabric-validator files, parsed back, carry exactly the plan's compute cables.

No ibdiagnet or UFM CVT here (NVIDIA tools that need a live fabric): small parsers below
read each file the way its format is documented and compare edge sets with the plan.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
import yaml

from infra.catalog import Catalog
from infra.render.fabric_validators import fabric_files
from infra.render.tree import render_tree
from infra.spec import Spec, load_spec_text
from infra.topology import expand
from infra.topology.model import Plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
Edge = frozenset[tuple[str, str]]


def _load(name: str, catalog: Catalog) -> tuple[Spec, Plan]:
    spec = load_spec_text((EXAMPLES / f"{name}.yaml").read_text(), name).spec
    return spec, expand(spec, catalog)


def _plan_edges(plan: Plan, catalog: Catalog, switch_port: str) -> set[Edge]:
    """Plan cables as unordered pairs of (device, port) in the file's port notation."""
    switches = {s.name: s for s in plan.switches_in("compute")}

    def end(device: str, port: str) -> tuple[str, str]:
        if device not in switches:
            return device, port
        if switch_port == "topo":
            return device, f"P{port}"
        return device, catalog.switches[switches[device].model].port_label(int(port))

    return {frozenset({end(c.a, c.a_port), end(c.b, c.b_port)}) for c in plan.cables_in("compute")}


def _topo_edges(text: str) -> tuple[set[Edge], int]:
    """ibdm topo file: system header, then `LOCAL -> TYPE NAME REMOTE` lines; each link twice."""
    edges: set[Edge] = set()
    lines = 0
    system = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            system = None
            continue
        if system is None:
            _type, system = line.split()
            continue
        local, arrow, _rtype, remote, rport = line.split()
        assert arrow == "->"
        strip = (lambda p: p.removesuffix("/P1")) if not local.startswith("P") else str
        rstrip = (lambda p: p.removesuffix("/P1")) if not rport.startswith("P") else str
        edges.add(frozenset({(system, strip(local)), (remote, rstrip(rport))}))
        lines += 1
    return edges, lines


def _cvt_edges(text: str, hca_map: dict[str, str], servers: set[str]) -> set[Edge]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["Rack", "U", "Name", "HCA/Port", "Rack", "U", "Name", "Port"]

    def end(name: str, port: str) -> tuple[str, str]:
        return name, hca_map[port] if name in servers else port

    return {frozenset({end(r[2], r[3]), end(r[6], r[7])}) for r in rows[1:]}


@pytest.mark.parametrize(
    ("example", "split"), [("dgx-a100-superpod", False), ("dgx-h100-superpod", True)]
)
def test_every_artefact_carries_the_plans_cables(
    catalog: Catalog, example: str, split: bool
) -> None:
    spec, plan = _load(example, catalog)
    files = fabric_files(plan, spec, catalog)
    topo, links = _topo_edges(files["topology.topo"])
    assert topo == _plan_edges(plan, catalog, "topo")
    assert links == 2 * len(plan.cables_in("compute"))  # each end's section lists the link
    hca_rows = list(csv.reader(io.StringIO(files["hca_mapping.csv"])))
    assert hca_rows[0] == ["port", "hca-name"]
    cvt = _cvt_edges(
        files["cable-validation.csv"], dict(hca_rows[1:]), {s.name for s in plan.servers}
    )
    assert cvt == _plan_edges(plan, catalog, "cvt")
    labels = {p for e in cvt for n, p in e if n.startswith("ib0-")}
    assert any("/" in p for p in labels) is split
    if split:
        assert "32/2" in labels and all(re.fullmatch(r"\d+/[12]", p) for p in labels)


def test_qm97_logical_ports_pair_onto_cages(catalog: Catalog) -> None:
    qm97, qm87 = catalog.switches["qm9700"], catalog.switches["qm8790"]
    assert [qm97.port_label(p) for p in (1, 2, 3, 63, 64)] == ["1/1", "1/2", "2/1", "32/1", "32/2"]
    assert qm97.cages is not None and qm97.ports_per_cage is not None
    assert qm97.cages * qm97.ports_per_cage == qm97.ports
    assert qm87.port_label(40) == "40" and qm87.cages == qm87.ports
    ref = catalog.references[qm97.sources["port_map"]]
    assert ref.confidence == "inferred" and "UNCERTAIN" in ref.note


def test_node_name_map_names_known_guids_in_rail_order(catalog: Catalog) -> None:
    spec, plan = _load("dgx-h100-superpod", catalog)
    assert "No GUIDs yet" in fabric_files(plan, spec, catalog)["node-name-map.txt"]
    server, leaf = plan.servers[0], plan.switches_in("compute", "leaf")[0]
    data = yaml.safe_load((EXAMPLES / "dgx-h100-superpod.yaml").read_text())
    guids = {server.name: [f"0xa{r}" for r in range(8)], leaf.name: ["0xbeef"]}
    data["fabrics"]["compute"]["guids"] = guids
    spec = load_spec_text(yaml.safe_dump(data), "g.yaml").spec
    text = fabric_files(expand(spec, catalog), spec, catalog)["node-name-map.txt"]
    entries = re.findall(r'^(0x[0-9a-f]{16}) "([^"]+)"$', text, re.MULTILINE)
    assert entries[0] == ("0x000000000000beef", leaf.name)
    assert entries[1:] == [
        (f"0x{r + 0xA0:016x}", f"{server.name} {h}") for r, h in enumerate(server.hcas)
    ]
    assert "No GUIDs yet" not in text


def test_acceptance_uses_only_sourced_flags(catalog: Catalog) -> None:
    spec, plan = _load("dgx-h100-superpod", catalog)
    text = fabric_files(plan, spec, catalog)["ACCEPTANCE.md"]
    command = next(x for x in text.splitlines() if x.startswith("ibdiagnet "))
    flags = {f for f in command.split() if f.startswith("-")}
    assert flags <= {"--topo_file", "--rail_validation", "--ft", "-r", "--sharp"}
    assert "--topo_file topology.topo" in command and "--rail_validation" in command


def test_render_is_deterministic_and_stays_in_the_tree(catalog: Catalog) -> None:
    spec, plan = _load("dgx-h100-superpod", catalog)
    first, second = render_tree(spec, catalog, plan), render_tree(spec, catalog, plan)
    fabric = {p: b for p, b in first.items() if "/files/fabric/" in p}
    assert fabric and fabric == {p: b for p, b in second.items() if "/files/fabric/" in p}
    for path in fabric:
        assert not path.startswith("/") and ".." not in Path(path).parts
        assert path.startswith(f"inventories/{spec.name}/files/fabric/")


def test_no_infiniband_fabric_no_files(catalog: Catalog) -> None:
    spec, plan = _load("aws-p4d", catalog)
    assert fabric_files(plan, spec, catalog) == {}
