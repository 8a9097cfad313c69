"""`files/fabric/ibsim.net`, read back as ibsim reads it: the plan's compute cables, no more.

The reader below follows ibsim's netlist grammar (ibsim/sim_net.c: a ``Switch <ports>
"<name>"`` or ``Hca <ports> "<name>"`` header, then ``[<port>] "<remote>"[<port>]`` lines,
``#`` starting a comment) independently of the writer; the twin tests run ibsim itself on it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from infra.catalog import Catalog
from infra.render.fabric_validators import fabric_files
from infra.render.ibsim_netlist import hca_node, ibsim_netlist, link_rate, sim_limits
from infra.spec import load_spec_text
from infra.topology import expand
from infra.topology.model import Plan

ROOT = Path(__file__).resolve().parent.parent
_HEADER = re.compile(r'^(Switch|Hca)\s+(\d+)\s+"([^"]+)"')
_PORT = re.compile(r'^\[(\d+)\]\s+"([^"]+)"\[(\d+)\]\s*(?:#.*\s(\d+x[A-Z]+))?\s*$')

Edge = frozenset[tuple[str, int]]


def _read(text: str) -> tuple[dict[str, tuple[str, int]], dict[Edge, set[str]]]:
    """Nodes (name -> kind, ports) and edges (both ends -> the rates the two lines give)."""
    nodes: dict[str, tuple[str, int]] = {}
    edges: dict[Edge, set[str]] = {}
    node = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header:
            node = header[3]
            assert node not in nodes, node
            nodes[node] = (header[1], int(header[2]))
            continue
        port = _PORT.match(line)
        assert port and node, line
        assert int(port[1]) <= nodes[node][1], line
        edge = frozenset({(node, int(port[1])), (port[2], int(port[3]))})
        edges.setdefault(edge, set()).add(port[4])
    return nodes, edges


def _plan(catalog: Catalog, path: Path) -> Plan:
    return expand(load_spec_text(path.read_text(), path.name).spec, catalog)


@pytest.mark.parametrize(
    "spec",
    [
        "examples/a100-lab-mig.yaml",
        "examples/dgx-a100-superpod.yaml",
        "tests/golden/inputs/h100-slurm-opensm.yaml",
    ],
)
def test_the_netlist_holds_exactly_the_plans_compute_cables(catalog: Catalog, spec: str) -> None:
    plan = _plan(catalog, ROOT / spec)
    nodes, edges = _read(ibsim_netlist(plan))
    switches = {s.name: s for s in plan.switches_in("compute")}

    def end(device: str, port: str) -> tuple[str, int]:
        return (device, int(port)) if device in switches else (hca_node(device, port), 1)

    cables = plan.cables_in("compute")
    planned = {frozenset({end(c.a, c.a_port), end(c.b, c.b_port)}): c for c in cables}
    assert set(edges) == set(planned)
    # both lines of a cable give its planned rate, which carries the cable's Gb/s
    lanes = {"HDR": 50, "NDR": 100}
    for edge, rates in edges.items():
        (rate,) = rates
        assert 4 * lanes[rate.removeprefix("4x")] >= planned[edge].gbps, (edge, rate)
    assert {n: k for n, (k, _) in nodes.items() if k == "Switch"}.keys() == switches.keys()
    assert all(ports == switches[n].ports for n, (k, ports) in nodes.items() if k == "Switch")
    hcas = {hca_node(s.name, h) for s in plan.servers for h in s.hcas}
    hosts = {h.name for h in plan.hosts}  # the UFM appliance's ports are HCAs too
    hcas |= {hca_node(c.a, c.a_port) for c in cables if c.a in hosts}
    assert {n for n, (k, ports) in nodes.items() if k == "Hca" and ports == 1} == hcas


def test_rates_and_limits(catalog: Catalog) -> None:
    assert [link_rate(g) for g in (100, 200, 400)] == ["4xEDR", "4xHDR", "4xNDR"]
    plan = _plan(catalog, ROOT / "examples/dgx-a100-superpod.yaml")
    # 1,120 HCAs, 4 UFM ports and 144 switches (144 x 41 + 1,124 x 2 ports) fit ibsim's
    # defaults (2,048 nodes, 256 switches, 13,312 ports): the flags then repeat them
    assert sim_limits(plan) == (2048, 256, 13312)
    assert "-N 2048 -S 256 -P 13312 ibsim.net" in ibsim_netlist(plan)
    text = (
        (ROOT / "examples/dgx-a100-superpod.yaml").read_text().replace("count: 140", "count: 560")
    )
    big = expand(load_spec_text(text, "big.yaml").spec, catalog)
    nodes, switches, ports = sim_limits(big)
    written, _ = _read(ibsim_netlist(big))
    assert nodes == len(written) > 560 * 8
    assert switches == sum(kind == "Switch" for kind, _ in written.values()) > 256
    assert ports > 13312


def test_render_writes_it_beside_the_other_validator_files(catalog: Catalog) -> None:
    path = ROOT / "examples/a100-lab-mig.yaml"
    spec = load_spec_text(path.read_text(), path.name).spec
    files = fabric_files(expand(spec, catalog), spec, catalog)
    assert files["ibsim.net"].startswith("# ibsim netlist of a100-lab's compute fabric")
    assert "`ibsim.net`" in files["ACCEPTANCE.md"]


def test_a_name_that_would_break_the_netlist_is_refused(catalog: Catalog) -> None:
    text = (ROOT / "examples/a100-lab-mig.yaml").read_text()
    plan = expand(load_spec_text(text, "lab.yaml").spec, catalog)
    cable = plan.cables_in("compute")[0]
    plan = replace(plan, cables=(replace(cable, a_port='mlx5_0"[9]'), *plan.cables[1:]))
    with pytest.raises(ValueError, match="cannot be written to an ibsim netlist"):
        ibsim_netlist(plan)
