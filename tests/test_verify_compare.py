"""`infra.verify.compare`: each injected fault of a cabled fabric is exactly one finding.

The "discovered" fabric is the plan's own cabling turned into seen links (names resolved, as
the parsers and the node-name map give them), then changed the way technicians get it wrong:
a cable left out, two cables swapped, an HCA on the leaf of another rail, a port that stays
Polling, a server never cabled, a link trained at 4xSDR, an HCA with the default description.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Cable, Plan
from infra.verify.compare import compare
from infra.verify.seen import NamedEnd, Seen, SeenLink, SeenPort, link_gbps

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plan() -> Plan:
    """140 DGX A100 in 7 SUs of 20 on QM8790 (HDR), leaves and spines."""
    spec = load_spec(str(ROOT / "examples/dgx-a100-superpod.yaml")).spec
    return expand(spec, load_catalog())


def _link(cable: Cable, width: str = "4x", speed: str = "HDR", state: str = "") -> SeenLink:
    return SeenLink(
        NamedEnd(cable.a, cable.a_port), NamedEnd(cable.b, cable.b_port), width, speed, state
    )


def _as_built(plan: Plan) -> dict[str, SeenLink]:
    return {c.id: _link(c) for c in plan.cables_in("compute")}


def _node_leaf(plan: Plan, server: str, hca: str) -> Cable:
    (cable,) = [c for c in plan.cables_in("compute", "node_leaf") if c.id == f"{server}:{hca}"]
    return cable


def _kinds(findings: list) -> Counter[str]:
    return Counter(f.kind for f in findings)


def test_the_fabric_as_planned_has_no_finding(plan: Plan) -> None:
    assert compare(plan, Seen(tuple(_as_built(plan).values()))) == []


def test_a_missing_cable_names_both_ends_racks_and_units(plan: Plan) -> None:
    links = _as_built(plan)
    cable = _node_leaf(plan, "dgx005", "mlx5_3")
    del links[cable.id]
    (finding,) = compare(plan, Seen(tuple(links.values())))
    assert finding.kind == "missing"
    assert (finding.a.device, finding.a.port) == ("dgx005", "mlx5_3")
    assert (finding.a.rack, finding.a.rack_unit) == (cable.a_rack, cable.a_unit)
    assert (finding.z.device, finding.z.port, finding.z.rack) == (
        cable.b,
        cable.b_port,
        cable.b_rack,
    )
    assert "install a 200 Gb/s" in finding.fix and cable.b in finding.fix


def test_two_swapped_cables_are_one_swap(plan: Plan) -> None:
    links = _as_built(plan)
    one, two = _node_leaf(plan, "dgx001", "mlx5_0"), _node_leaf(plan, "dgx002", "mlx5_0")
    assert one.b == two.b  # the same rail's leaf
    links[one.id] = SeenLink(NamedEnd(one.a, one.a_port), NamedEnd(two.b, two.b_port), "4x", "HDR")
    links[two.id] = SeenLink(NamedEnd(two.a, two.a_port), NamedEnd(one.b, one.b_port), "4x", "HDR")
    (finding,) = compare(plan, Seen(tuple(links.values())))
    assert finding.kind == "swapped_pair"
    assert finding.fix == f"at {one.b} exchange the cables in ports {one.b_port} and {two.b_port}"


def test_an_hca_on_another_rails_leaf_is_wrong_rail(plan: Plan) -> None:
    links = _as_built(plan)
    cable, other = _node_leaf(plan, "dgx003", "mlx5_0"), _node_leaf(plan, "dgx003", "mlx5_1")
    assert plan.switch(cable.b).rail != plan.switch(other.b).rail
    links[cable.id] = SeenLink(
        NamedEnd(cable.a, cable.a_port), NamedEnd(other.b, "41"), "4x", "HDR"
    )
    (finding,) = compare(plan, Seen(tuple(links.values())))
    assert finding.kind == "wrong_rail"
    assert finding.found.startswith(f"{other.b} port 41")
    assert finding.fix.startswith(f"move the cable of {cable.a} port mlx5_0")


def test_right_switch_wrong_port_and_another_sus_leaf(plan: Plan) -> None:
    links = _as_built(plan)
    cable = _node_leaf(plan, "dgx004", "mlx5_2")
    far = _node_leaf(plan, "dgx040", "mlx5_2")  # the same rail in SU 2
    assert plan.switch(far.b).su != plan.switch(cable.b).su
    links[cable.id] = SeenLink(
        NamedEnd(cable.a, cable.a_port), NamedEnd(cable.b, "41"), "4x", "HDR"
    )
    moved = _node_leaf(plan, "dgx006", "mlx5_2")
    links[moved.id] = SeenLink(NamedEnd(moved.a, moved.a_port), NamedEnd(far.b, "42"), "4x", "HDR")
    assert _kinds(compare(plan, Seen(tuple(links.values())))) == {
        "wrong_port": 1,
        "wrong_switch": 1,
    }


def test_slow_links_are_degraded_and_a_polling_port_is_down(plan: Plan) -> None:
    links = _as_built(plan)
    sdr = _node_leaf(plan, "dgx007", "mlx5_0")
    half = next(c for c in plan.cables_in("compute", "leaf_spine"))
    polling = _node_leaf(plan, "dgx008", "mlx5_1")
    links[sdr.id] = _link(sdr, "4x", "SDR")
    links[half.id] = _link(half, "2x", "HDR")
    del links[polling.id]
    ports = (SeenPort(NamedEnd(polling.a, polling.a_port), "Polling"),)
    findings = compare(plan, Seen(tuple(links.values()), ports))
    assert _kinds(findings) == {"degraded": 2, "down": 1}
    found = {f.a.device: f.found for f in findings if f.kind == "degraded"}
    assert found[sdr.a] == "4xSDR (10 Gb/s)" and found[half.a] == "2xHDR (100 Gb/s)"


def test_a_server_never_cabled_is_one_device_missing(plan: Plan) -> None:
    links = {k: v for k, v in _as_built(plan).items() if not k.startswith("dgx010:")}
    (finding,) = compare(plan, Seen(tuple(links.values())))
    assert finding.kind == "device_missing" and finding.a.device == "dgx010"
    assert finding.a.rack == plan.server("dgx010").rack
    assert "none of its 8 planned cables" in finding.fix


def test_a_cable_the_plan_does_not_have_is_unexpected(plan: Plan) -> None:
    links = _as_built(plan)
    extra = SeenLink(NamedEnd("dgx011", "mlx5_9"), NamedEnd("dgx012", "mlx5_9"), "4x", "HDR")
    (finding,) = compare(plan, Seen((*links.values(), extra)))
    assert finding.kind == "unexpected"
    assert finding.fix.startswith("remove the cable between dgx011 port mlx5_9")


def test_an_unnamed_hca_is_named_by_its_leaf_port_and_checked(plan: Plan) -> None:
    links = _as_built(plan)
    cable = _node_leaf(plan, "dgx013", "mlx5_6")
    guid = "0xb83fd2030071a2c6"
    links[cable.id] = SeenLink(NamedEnd(guid, "1"), NamedEnd(cable.b, cable.b_port), "4x", "HDR")
    unnamed = ((guid, "MT4123 ConnectX6 Mellanox Technologies"),)
    (finding,) = compare(plan, Seen(tuple(links.values()), unnamed=unnamed))
    assert finding.kind == "unnamed" and finding.a.device == guid
    assert (finding.z.device, finding.z.port) == ("dgx013", "mlx5_6")


def test_self_loops_are_not_cables(plan: Plan) -> None:
    loop = SeenLink(NamedEnd("dgx001", "mlx5_0"), NamedEnd("dgx001", "mlx5_0"))
    assert compare(plan, Seen((*_as_built(plan).values(), loop))) == []


def test_findings_come_in_walking_order(plan: Plan) -> None:
    links = _as_built(plan)
    for server in ("dgx140", "dgx001", "dgx070"):
        del links[f"{server}:mlx5_0"]
    findings = compare(plan, Seen(tuple(links.values())))
    keys = [(f.a.rack, f.a.rack_unit) for f in findings]
    assert keys == sorted(keys) and len(findings) == 3


@pytest.mark.parametrize(
    ("width", "speed", "gbps"),
    [("4x", "HDR", 200.0), ("2x", "NDR", 200.0), ("4X", "ndr", 400.0), ("4x", "SDR", 10.0)],
)
def test_link_rates(width: str, speed: str, gbps: float) -> None:
    assert link_gbps(width, speed) == gbps


def test_unknown_rates_are_not_degraded() -> None:
    assert link_gbps("", "HDR") is None and link_gbps("4x", "ZDR") is None
