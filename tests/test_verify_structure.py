"""`infra.verify.structure` and `railplan verify --structure`: checks that need no spec.

Two kinds of input: the real ibsim dumps in tests/data/verify (made by Debian's
infiniband-diags, see its README), edited where a fault is needed; and `ibnetdiscover -p`
dumps written from a plan by `tests.verify_dump` (no fabric of 140 DGX exists here), clean and
with one fault each: two HCA cables swapped across rails, a leaf-spine cable left out, a leaf
never powered, a server HCA not cabled, a link trained narrow, a switch without its SHARP
aggregation node. A clean dump of any small random plan has no structure finding.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.spec import load_spec, load_spec_text
from infra.topology import expand
from infra.topology.model import Cable, Plan
from infra.verify import parse_files, parse_text
from infra.verify.compare import compare
from infra.verify.resolve import resolve
from infra.verify.structure import STRUCTURE_KINDS, Structure, check_structure

from .cli_run import run_cli
from .verify_dump import Dump, as_built

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/verify"
SPEC = ROOT / "examples/dgx-a100-superpod.yaml"


@pytest.fixture(scope="module")
def plan() -> Plan:
    """140 DGX A100 in 7 SUs of 20, 8 rails, leaves, spines and cores (SHARP enabled)."""
    return expand(load_spec(str(SPEC)).spec, load_catalog())


def _check(lines: list[str], **options: object) -> Structure:
    return check_structure(parse_text("\n".join(lines)), **options)  # type: ignore[arg-type]


def _kinds(result: Structure) -> Counter[str]:
    return Counter(f.kind for f in result.findings)


def _hca(plan: Plan, server: str, hca: str) -> Cable:
    return next(c for c in plan.cables_in("compute", "node_leaf") if c.id == f"{server}:{hca}")


# --- dumps written from the plan -----------------------------------------------------------


def test_the_plans_clean_fabric_has_no_structure_finding(plan: Plan) -> None:
    result = _check(list(as_built(plan).values()))
    assert result.findings == ()
    shape = result.shape
    assert (shape.leaves, shape.spines, shape.cores, shape.pods) == (56, 56, 32, 7)
    assert shape.uplinks == "2-3"  # 20 uplinks over the 8 spines of each pod
    assert (shape.servers, shape.rails, shape.sus, shape.unplaced) == (140, 8, 7, 0)


def test_two_hca_cables_swapped_across_rails_are_rail_mixed(plan: Plan) -> None:
    dump = Dump(plan)
    lines = as_built(plan, dump)
    zero, one = _hca(plan, "dgx001", "mlx5_0"), _hca(plan, "dgx001", "mlx5_1")
    lines[zero.id] = dump.line((zero.a, zero.a_port), (one.b, one.b_port))
    lines[one.id] = dump.line((one.a, one.a_port), (zero.b, zero.b_port))
    result = _check(list(lines.values()))
    assert _kinds(result) == {"rail_mixed": 2}
    first = next(f for f in result.findings if f.a.port == "mlx5_0")
    assert (first.a.device, first.z.device, first.z.port) == ("dgx001", one.b, one.b_port)
    assert first.expected == f"HCA index 1 on {one.b}, as 19 server HCAs there"
    assert first.fix == (
        f"move the cable of dgx001 port mlx5_0 from {one.b} port {one.b_port} to {zero.b}"
    )


def test_a_leaf_spine_cable_left_out_is_uplinks_unequal(plan: Plan) -> None:
    uplinks = plan.cables_in("compute", "leaf_spine")
    per_pair = Counter((c.a, c.b) for c in uplinks)
    assert set(per_pair.values()) == {2, 3}  # 20 uplinks over 8 spines, by design
    for links in (2, 3):  # a pair left with 1 link (out of band) and one left with 2 (in band)
        cable = next(c for c in uplinks if per_pair[(c.a, c.b)] == links)
        lines = as_built(plan)
        del lines[cable.id]
        (finding,) = _check(list(lines.values())).findings
        assert finding.kind == "uplinks_unequal"
        assert (finding.a.device, finding.z.device) == (cable.a, cable.b)
        assert finding.fix.startswith(f"find the missing cable from {cable.a} to {cable.b}")


def test_a_leaf_never_powered_is_a_grid_gap_of_its_su(plan: Plan) -> None:
    leaf = _hca(plan, "dgx045", "mlx5_2").b  # SU 3's rail-2 leaf
    lines = {k: v for k, v in as_built(plan).items() if f"'{leaf}'" not in v}
    (finding,) = _check(list(lines.values())).findings
    assert finding.kind == "grid_gap" and finding.a.device == leaf  # named as its peers are
    assert finding.expected == (
        f"a leaf for HCA index 2 (mlx5_2), as the other SUs have (named as its peers are: {leaf})"
    )
    assert "(20 servers) has no leaf for HCA index 2" in finding.found
    assert finding.fix.startswith(f"power on and cable {leaf}, the leaf for HCA index 2 of")


def test_a_server_hca_not_cabled_is_a_grid_gap_of_the_server(plan: Plan) -> None:
    lines = as_built(plan)
    cable = _hca(plan, "dgx005", "mlx5_3")
    del lines[cable.id]
    (finding,) = _check(list(lines.values())).findings
    assert finding.kind == "grid_gap"
    assert (finding.a.device, finding.a.port, finding.z.device) == ("dgx005", "mlx5_3", cable.b)
    assert finding.found == "no link"


def test_a_link_trained_narrow_is_below_its_peers(plan: Plan) -> None:
    dump = Dump(plan)
    lines = as_built(plan, dump)
    cable = plan.cables_in("compute", "leaf_spine")[7]
    lines[cable.id] = dump.cable(cable, width="2x")
    (finding,) = _check(list(lines.values())).findings
    assert finding.kind == "rate_below_peers"
    assert (finding.a.device, finding.z.device) == (cable.a, cable.b)  # the leaf end first
    assert finding.found == "2xHDR (100 Gb/s)"
    assert finding.expected == "4xHDR (200 Gb/s), as 1,119 of 1,120 leaf-spine links"


def test_sharp_nodes_missing_against_peers_or_against_the_plan(plan: Plan) -> None:
    dump = Dump(plan)
    lines = list(as_built(plan, dump).values())
    switches = [s.name for s in plan.switches_in("compute")]
    every = [dump.aggregation_node(name) for name in switches]
    assert _check(lines).findings == ()  # no node anywhere and no plan: nothing to compare
    assert _check([*lines, *every], sharp=True).findings == ()
    (off,) = _check(lines, sharp=True).findings  # no node anywhere: SHARP is off, one fix
    assert (off.kind, off.a.device) == ("sharp_missing", f"all {len(switches)} switches")
    some = _check([*lines, *every[:-3]], sharp=True).findings
    assert [(f.kind, f.a.device) for f in some] == [("sharp_missing", s) for s in switches[-3:]]
    odd = _check([*lines, *every[1:]]).findings  # one leaf lacks what its peers have
    assert [(f.kind, f.a.device) for f in odd] == [("sharp_missing", switches[0])]


def test_hcas_with_the_firmware_description_are_counted_not_guessed(plan: Plan) -> None:
    dump = Dump(plan, unnamed=frozenset({"dgx003", "dgx077"}))
    result = _check(list(as_built(plan, dump).values()))
    assert result.findings == ()
    assert (result.shape.unplaced, result.shape.servers) == (16, 138)
    assert "HCAs whose description names no host: 16" in result.shape.text()


def test_with_the_plan_findings_carry_racks(plan: Plan) -> None:
    from infra.verify.compare import placer

    lines = as_built(plan)
    cable = _hca(plan, "dgx005", "mlx5_3")
    del lines[cable.id]
    (finding,) = _check(list(lines.values()), place=placer(plan)).findings
    server = plan.server("dgx005")
    assert (finding.a.rack, finding.a.rack_unit) == (server.rack, server.rack_unit)
    assert finding.z.rack == plan.switch(cable.b).rack


_SIZES = st.sampled_from(
    [
        ("dgx-a100-640gb", "qm8790", 20),
        ("dgx-h100", "qm9700", 32),
    ]
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=_SIZES, servers=st.integers(2, 260), su=st.sampled_from([None, 8, 16]))
def test_any_clean_dump_of_a_small_plan_has_no_structure_finding(
    kind: tuple[str, str, int], servers: int, su: int | None
) -> None:
    node, switch, default_su = kind
    text = (
        "name: prop\n"
        f"node_groups: [{{name: g, node: {node}, count: {servers}, hostname: 'n{{index:04d}}'}}]\n"
        f"fabrics: {{compute: {{switch: {switch}, su_size: {su or default_su}}}}}\n"
    )
    small = expand(load_spec_text(text).spec, load_catalog())
    assert _check(list(as_built(small).values())).findings == ()


# --- the real ibsim dumps ------------------------------------------------------------------

_IBSIM = ["ibnetdiscover.txt", "ibnetdiscover-p.txt", "iblinkinfo.txt", "iblinkinfo-l.txt"]


@pytest.mark.parametrize("name", _IBSIM)
def test_the_ibsim_fabric_reads_the_same_from_every_tool(name: str) -> None:
    result = check_structure(parse_files([DATA / name]))
    assert result.findings == ()
    shape = result.shape
    assert (shape.leaves, shape.spines, shape.pods, shape.hcas) == (2, 2, 1, 5)
    # gpu01 has both HCAs on leaf-01: the fabric is not rail-optimized, so no rail check
    assert (shape.servers, shape.rails) == (1, 0)


def _ibsim_without(pattern: str) -> list[str]:
    lines = (DATA / "ibnetdiscover-p.txt").read_text().splitlines()
    return [line for line in lines if pattern not in line]


def test_ibsim_without_one_uplink_is_uplinks_unequal() -> None:
    lines = _ibsim_without("( 'leaf-02' - 'spine-02' )")
    lines = [line for line in lines if "( 'spine-02' - 'leaf-02' )" not in line]
    (finding,) = _check(lines).findings
    assert finding.kind == "uplinks_unequal"
    assert (finding.a.device, finding.z.device) == ("leaf-02", "spine-02")
    assert (finding.expected, finding.found) == ("1 links to spine-02", "0 links to spine-02")


def _ibsim_narrow() -> list[str]:
    """The ibsim -p dump with the leaf-01 - spine-01 cable at 1x (both sightings)."""
    cable = ("( 'leaf-01' - 'spine-01' )", "( 'spine-01' - 'leaf-01' )")
    return [
        line.replace("4x SDR", "1x SDR") if line.endswith(cable) else line
        for line in (DATA / "ibnetdiscover-p.txt").read_text().splitlines()
    ]


def test_ibsim_with_one_narrow_uplink_is_below_its_peers() -> None:
    (finding,) = _check(_ibsim_narrow()).findings
    assert finding.kind == "rate_below_peers"
    assert (finding.a.device, finding.a.port, finding.z.device) == ("leaf-01", "33", "spine-01")


def test_a_sharp_node_on_one_leaf_only_is_missing_on_the_other() -> None:
    result = check_structure(parse_files([DATA / "messy-ibnetdiscover.txt"]))
    assert result.shape.sharp == 1  # the messy fixture's aggregation node on its leaf
    assert result.findings == ()  # its only leaf has one: nothing to compare


# --- a production dump's line format -------------------------------------------------------

# Written for this test in the line format of a real EDR cluster's `ibnetdiscover`
# (SwitchIB switches keep the firmware description, HCAs are "<host> HCA-<n>", caguid lines
# drop leading zeros, one leaf-spine cable trained at 4xDDR): 2 leaves, 2 spines, 2 links
# from each leaf to each spine, one server on each leaf.
_EDR = """\
#
# Topology file: generated on Mon Jan  1 00:00:00 2024
#
vendid=0x2c9
devid=0xcb20
sysimgguid=0xa00000000000001
switchguid=0xa00000000000001(a00000000000001)
Switch\t36 "S-0a00000000000001"\t\t# "SwitchIB Mellanox Technologies" base port 0 lid 1 lmc 0
[1]\t"H-0c00000000000001"[1](c00000000000001) \t\t# "cn01 HCA-1" lid 10 4xEDR
[2]\t"S-0b00000000000001"[1]\t\t# "SwitchIB Mellanox Technologies" lid 3 4xEDR
[3]\t"S-0b00000000000001"[2]\t\t# "SwitchIB Mellanox Technologies" lid 3 4xEDR
[4]\t"S-0b00000000000002"[1]\t\t# "SwitchIB Mellanox Technologies" lid 4 4xDDR
[5]\t"S-0b00000000000002"[2]\t\t# "SwitchIB Mellanox Technologies" lid 4 4xEDR
vendid=0x2c9
devid=0xcb20
sysimgguid=0xa00000000000002
switchguid=0xa00000000000002(a00000000000002)
Switch\t36 "S-0a00000000000002"\t\t# "SwitchIB Mellanox Technologies" base port 0 lid 2 lmc 0
[1]\t"H-0c00000000000002"[1](c00000000000002) \t\t# "cn02 HCA-1" lid 11 4xEDR
[2]\t"S-0b00000000000001"[3]\t\t# "SwitchIB Mellanox Technologies" lid 3 4xEDR
[3]\t"S-0b00000000000001"[4]\t\t# "SwitchIB Mellanox Technologies" lid 3 4xEDR
[4]\t"S-0b00000000000002"[3]\t\t# "SwitchIB Mellanox Technologies" lid 4 4xEDR
[5]\t"S-0b00000000000002"[4]\t\t# "SwitchIB Mellanox Technologies" lid 4 4xEDR
vendid=0x2c9
devid=0x1017
sysimgguid=0xc00000000000001
caguid=0xc00000000000001
Ca\t1 "H-0c00000000000001"\t\t# "cn01 HCA-1"
[1](c00000000000001) \t"S-0a00000000000001"[1]\t\t# lid 10 lmc 0 "SwitchIB Mellanox Technologies" lid 1 4xEDR
"""


def test_a_production_format_dump_parses_and_names_its_slow_uplink() -> None:
    fabric = parse_text(_EDR, "edr.txt")
    assert len(fabric.links) == 10  # 2 HCA cables, 8 leaf-spine cables
    cn01 = next(n for n in fabric.nodes if n.guid == "0x0c00000000000001")
    assert (cn01.kind, cn01.name, cn01.ports) == ("CA", "cn01 HCA-1", 1)
    result = check_structure(fabric)
    (finding,) = result.findings
    assert finding.kind == "rate_below_peers"
    assert (finding.a.device, finding.a.port) == ("0x0a00000000000001", "4")  # by GUID
    assert finding.found == "4xDDR (20 Gb/s)"
    assert (result.shape.leaves, result.shape.spines, result.shape.servers) == (2, 2, 0)
    assert result.shape.uplinks == "2"


# --- the command ---------------------------------------------------------------------------


def _write(tmp_path: Path, lines: list[str]) -> Path:
    dump = tmp_path / "fabric.txt"
    dump.write_text("\n".join(lines) + "\n")
    return dump


def test_structure_needs_no_spec_and_exits_1_with_findings(tmp_path: Path) -> None:
    result = run_cli("verify", "--structure", str(_write(tmp_path, _ibsim_narrow())), "-f", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"findings", "summary", "ignored"}
    assert document["summary"]["by_kind"] == {"rate_below_peers": 1}
    assert document["summary"]["cables_planned"] is None
    assert document["summary"]["structure"]["leaves"] == 2


def test_structure_of_a_clean_dump_exits_0(tmp_path: Path) -> None:
    result = run_cli("verify", "--structure", str(DATA / "ibnetdiscover.txt"))
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = result.stdout.splitlines()
    assert first == "no finding: 9 links seen"
    assert second.startswith(
        "structure: 2 leaves, 2 spines, 0 cores in 1 pod, 1 link from each leaf to each spine; "
        "5 HCAs"
    )


def test_without_structure_a_dump_first_is_a_usage_error() -> None:
    dump = str(DATA / "ibnetdiscover.txt")
    result = run_cli("verify", dump, str(DATA / "iblinkinfo.txt"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{dump}: error: is a dump, not the spec")
    assert "--structure" in result.stderr


def test_spec_and_structure_run_both_checks_once_each(plan: Plan, tmp_path: Path) -> None:
    dump = Dump(plan)
    lines = as_built(plan, dump)
    zero, one = _hca(plan, "dgx001", "mlx5_0"), _hca(plan, "dgx001", "mlx5_1")
    lines[zero.id] = dump.line((zero.a, zero.a_port), (one.b, one.b_port))
    lines[one.id] = dump.line((one.a, one.a_port), (zero.b, zero.b_port))
    sharp = [dump.aggregation_node(s.name) for s in plan.switches_in("compute")]
    fabric = _write(tmp_path, [*lines.values(), *sharp])
    result = run_cli("verify", "--structure", str(SPEC), str(fabric), "-f", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    # the plan check names each moved HCA; the structure check does not name them again
    assert document["summary"]["by_kind"] == {"swapped_pair": 1}
    assert not set(document["summary"]["by_kind"]) & set(STRUCTURE_KINDS)
    clean = _write(tmp_path, [*as_built(plan, dump).values(), *sharp])
    result = run_cli("verify", "--structure", str(SPEC), str(clean))
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("as planned: 3,364 links seen, 3,364 planned cables")


def test_structure_with_one_unreadable_file_says_it_cannot_be_read() -> None:
    result = run_cli("verify", "--structure", "/nonexistent/fabric.txt")
    assert result.returncode == 2
    assert result.stderr.startswith("/nonexistent/fabric.txt: error: cannot read")


# --- a production NDR fabric: NVIDIA topograph's ibnetdiscover fixture (README.md there) -----


def test_the_topograph_fabric_names_its_one_missing_leaf() -> None:
    """SU ``-01`` has no rail-3 leaf: one grid_gap, naming it; HCA-<n> and mlx5_<n> agree."""
    result = run_cli("verify", "--structure", str(DATA / "topograph-ndr.out"), "-f", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    gaps = [f for f in document["findings"] if f["kind"] == "grid_gap"]
    assert [g["a"]["device"] for g in gaps] == ["A09-P1-IBLEAF-03-01"]
    assert gaps[0]["expected"].startswith("a leaf for HCA index 4 (HCA-5, mlx5_4), as the other")
    assert "A09-P1-IBLEAF-01-01, A09-P1-IBLEAF-02-01, A09-P1-IBLEAF-04-01" in gaps[0]["found"]
    structure = document["summary"]["structure"]
    assert (structure["leaves"], structure["rails"], structure["sus"]) == (31, 4, 8)
    mixed = {f["a"]["device"] + " " + f["a"]["port"] for f in document["findings"]}
    assert {"b08-p1-dgx-08-c01 HCA-5", "b08-p1-dgx-08-c01 HCA-6"} <= mixed  # crossed at c01


def test_the_topograph_dump_cut_after_one_hca_is_an_error() -> None:
    cut = DATA / "topograph-ndr-cut.out"
    for args in (["--structure", str(cut)], [str(SPEC), str(cut)]):
        result = run_cli("verify", *args)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith(f"{cut}: error: holds no cable between two nodes")


def test_a_leaf_that_is_never_seen_is_named_with_its_rail_and_su(plan: Plan) -> None:
    leaf = plan.switch(_hca(plan, "dgx045", "mlx5_2").b)
    lines = {k: v for k, v in as_built(plan).items() if f"'{leaf.name}'" not in v}
    fabric = parse_text("\n".join(lines.values()))
    findings = compare(plan, resolve(fabric))
    (finding,) = [f for f in findings if f.kind == "device_missing"]
    assert finding.a.device == leaf.name and finding.a.rack == leaf.rack
    assert finding.expected.startswith(f"{leaf.name} (the leaf of rail 2 in SU {leaf.su}) with")
