"""`railplan verify`: a port the dumps show cabled to two different peers.

A port holds one cable. Every tool prints a cable from both ends, and several dumps of one
fabric print it again, so the same cable seen many times is one link; a port seen with two
*different* peers (an edited dump, or dumps taken while a cable moved) is one `unexpected`
finding naming both dump lines, the second sighting is not counted as a link, and the
structure checks do not see a phantom cable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Plan
from infra.verify import parse_files

from .cli_run import run_cli
from .verify_dump import as_built

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/verify"
LAB = DATA / "ibnetdiscover-p.txt"  # real ibsim output: 9 cables, 2 leaves, 2 spines, 5 HCAs
SAME_FABRIC = ("ibnetdiscover.txt", "ibnetdiscover-p.txt", "iblinkinfo.txt", "iblinkinfo-l.txt")
SPEC = str(ROOT / "examples/a100-lab-mig.yaml")  # 4 servers, 32 compute cables on one leaf
# gpu04-mlx5_0 is cabled to leaf-02 port 2 (line 1); this says leaf-01 port 5 holds it too
SECOND_PEER = (
    "SW     4  5 0x0000000000200002 4x SDR - CA     9  1 0x000000000010000a "
    "( 'leaf-01' - 'gpu04-mlx5_0' )"
)


def _with(tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "fabric.txt"
    path.write_text(LAB.read_text() + "".join(line + "\n" for line in extra))
    return path


def test_the_same_fabric_in_every_format_is_nine_links_and_no_finding() -> None:
    """Each cable printed from both ends, in four files: no conflict, nine links."""
    fabric = parse_files([DATA / name for name in SAME_FABRIC])
    assert fabric.conflicts == ()
    result = run_cli("verify", "--structure", *(str(DATA / n) for n in SAME_FABRIC))
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("no finding: 9 links seen"), result.stdout


def test_an_hca_port_on_two_switch_ports_is_a_finding_not_a_tenth_link(tmp_path: Path) -> None:
    dump = _with(tmp_path, SECOND_PEER)
    lines = dump.read_text().split("\n")
    second = lines.index(SECOND_PEER) + 1
    result = run_cli("verify", "--structure", str(dump), "--format", "json")
    assert result.returncode == 1, result.stdout
    document = json.loads(result.stdout)
    assert document["summary"]["links_seen"] == 9
    (finding,) = document["findings"]
    assert finding["kind"] == "unexpected" and finding["expected"] == "one cable"
    assert (finding["a"]["device"], finding["a"]["port"]) == ("gpu04", "mlx5_0")
    assert (finding["z"]["device"], finding["z"]["port"]) == ("leaf-01", "5")
    assert finding["found"] == f"a second link (4xSDR) at {dump}:{second}"
    assert f"leaf-02 port 2 at {dump}:1" in finding["fix"], finding["fix"]
    text = run_cli("verify", "--structure", str(dump))
    assert text.returncode == 1 and "1 finding (1 unexpected); 9 links seen" in text.stdout


def test_a_second_peer_in_another_file_is_found_and_each_file_named(tmp_path: Path) -> None:
    """Multi-file dumps: the conflict is across files; the finding names both."""
    other = tmp_path / "later.txt"
    other.write_text(SECOND_PEER + "\n")
    result = run_cli("verify", "--structure", str(LAB), str(other), "--format", "json")
    assert result.returncode == 1, result.stdout
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["found"] == f"a second link (4xSDR) at {other}:1"
    assert f"at {LAB}:1" in finding["fix"]


def test_the_phantom_cable_does_not_change_the_structure(tmp_path: Path) -> None:
    """The second peer is not a cable: leaf-01 does not gain an HCA from it."""
    plain = run_cli("verify", "--structure", str(LAB), "--format", "json")
    doubled = run_cli("verify", "--structure", str(_with(tmp_path, SECOND_PEER)), "-f", "json")
    shape = json.loads(plain.stdout)["summary"]["structure"]
    assert json.loads(doubled.stdout)["summary"]["structure"] == shape


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec(SPEC).spec, load_catalog())


def test_with_a_spec_a_planned_hcas_second_switch_port_is_named_once(
    plan: Plan, tmp_path: Path
) -> None:
    """train01 mlx5_0's HCA port also on leaf port 40: 32 links seen, one finding."""
    cables = as_built(plan)
    first = next(iter(cables.values()))
    assert first.startswith("CA     1  1 0x0000000000100000") and "'ib0-leaf-01'" in first
    moved = first.replace("SW     2  1 0x0000000000100001", "SW     2 40 0x0000000000100001")
    dump = tmp_path / "fabric.txt"
    dump.write_text("\n".join([*cables.values(), moved]) + "\n")
    result = run_cli("verify", SPEC, str(dump), "--format", "json")
    assert result.returncode == 1, result.stdout
    document = json.loads(result.stdout)
    assert document["summary"]["links_seen"] == 32, document["summary"]
    (finding,) = document["findings"]
    assert finding["kind"] == "unexpected" and finding["found"].endswith(f"{dump}:33")
    assert {finding["a"]["device"], finding["z"]["device"]} == {"train01", "ib0-leaf-01"}
    assert finding["z"]["port"] == "40"


# --- the sibling in a node-name map: one GUID given two names -------------------------------


def test_a_guid_named_twice_differently_in_the_maps_is_a_located_error(tmp_path: Path) -> None:
    """The map's last name won silently; which one names the switch is the map's to say."""
    names = tmp_path / "names.txt"
    names.write_text('0x0000000000200002 "leaf-01"\n# note\n0x0000000000200002 "leaf-09"\n')
    result = run_cli("verify", "--structure", str(LAB), "--names", str(names))
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(f"{names}:3:1: error: "), result.stderr
    assert "'leaf-09'" in result.stderr and f"{names}:1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    again = tmp_path / "again.txt"  # the same name twice, or in a second map: as one
    again.write_text('0x0000000000200002 "leaf-01"\n0x0000000000200002 "leaf-01"\n')
    assert run_cli("verify", "--structure", str(LAB), "--names", str(again)).returncode == 0
    other = tmp_path / "other.txt"
    other.write_text('0x0000000000200002 "leaf-07"\n')
    both = run_cli("verify", "--structure", str(LAB), str(again), "--names", str(other))
    assert both.returncode == 2 and both.stderr.startswith(f"{other}:1:1: error: "), both.stderr


def test_a_remote_lid_two_nodes_hold_is_not_guessed(tmp_path: Path) -> None:
    """iblinkinfo names a remote by LID; two nodes with LID 9 made leaf-02 port 2's cable
    gpu03's (the last one read). The cable is left out with the reason, never guessed."""
    dump = tmp_path / "links.txt"
    text = (DATA / "iblinkinfo.txt").read_text()
    text = text.replace("0x0000000000100007      8    1", "0x0000000000100007      9    1")
    text = text.replace('==>       8    1[  ] "gpu03', '==>       9    1[  ] "gpu03')
    dump.write_text(text)
    fabric = parse_files([dump])
    assert fabric.conflicts == ()
    reasons = [i.reason for i in fabric.ignored if "LID 9" in i.reason]
    assert len(reasons) == 2 and all("2 nodes" in r for r in reasons), fabric.ignored
    result = run_cli("verify", "--structure", str(dump), "--format", "json")
    assert json.loads(result.stdout)["summary"]["links_seen"] == 9  # each HCA's own line
