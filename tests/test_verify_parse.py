"""infra.verify's dump parsers, on real tool output and on hand-written messy dumps.

The ibsim fixtures (tests/data/verify/, see its README) are what Debian's real ibnetdiscover
and iblinkinfo printed for tests/data/verify/ibsim.net; `test_live_ibsim_dumps_...` makes
them again from the netlist (under a second) and checks the parsers against today's tools.
Only the hardware is simulated (ibsim); the discovery tools are the packaged ones.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.errors import DiscoveredError, RailplanError
from infra.verify import Fabric, detect, parse_files, parse_text
from tests.ibsim_fabric import tools_or_skip

DATA = Path(__file__).parent / "data" / "verify"
DUMPS = {
    "ibnetdiscover.txt": "ibnetdiscover",
    "ibnetdiscover-p.txt": "ibnetdiscover-ports",
    "iblinkinfo.txt": "iblinkinfo",
    "iblinkinfo-l.txt": "iblinkinfo",
}
LEAF_01, SPINE_01 = "0x0000000000200002", "0x0000000000200000"
GPU01_MLX5_0 = "0x0000000000100001"  # the port GUID (its node GUID is ...100000)


def _netlist_edges() -> set[tuple[str, int, str, int]]:
    """The cables the netlist declares, by node name: what every dump must show."""
    edges, node = set(), ""
    for line in (DATA / "ibsim.net").read_text().splitlines():
        if line.startswith(("Switch", "Hca")):
            node = line.split('"')[1]
        elif line.startswith("["):
            _, remote, rport = line.split('"')
            a = (node, int(line[1 : line.index("]")]))
            b = (remote, int(rport.strip().strip("[]")))
            edges.add((*min(a, b), *max(a, b)))
    return edges


def _named_edges(fabric: Fabric) -> set[tuple[str, int, str, int]]:
    edges = set()
    for link in fabric.links:
        a, b = fabric.node_for(link.a), fabric.node_for(link.b)
        assert a is not None and b is not None and a.name and b.name
        ends = sorted([(a.name, link.a.port), (b.name, link.b.port)])
        edges.add((*ends[0], *ends[1]))
    return edges


@pytest.mark.parametrize("name", sorted(DUMPS))
def test_every_real_format_is_detected_and_gives_the_netlists_cables(name: str) -> None:
    text = (DATA / name).read_text()
    assert detect(text.splitlines(), name) == DUMPS[name]
    fabric = parse_text(text, name)
    assert _named_edges(fabric) == _netlist_edges()
    assert {n.kind for n in fabric.nodes if n.name and n.name.startswith("gpu")} == {"CA"}
    assert {n.kind for n in fabric.nodes if n.name and "-0" in n.name[:6]} == {"SW"}
    assert all(link.width == "4x" and link.speed == "SDR" for link in fabric.links)
    assert fabric.ignored == ()


def test_the_four_formats_give_the_same_edge_set_by_guid() -> None:
    fabrics = [parse_files([DATA / name]) for name in sorted(DUMPS)]
    assert len(fabrics[0].edges()) == 9
    assert all(f.edges() == fabrics[0].edges() for f in fabrics)
    # an HCA end is its port GUID, a switch end its node GUID (as the spec's guids: are)
    assert ((GPU01_MLX5_0, 1), (LEAF_01, 1)) in fabrics[0].edges()
    assert ((SPINE_01, 1), (LEAF_01, 33)) in fabrics[0].edges()


def test_ibnetdiscover_keeps_lids_port_counts_node_guids_and_sources() -> None:
    fabric = parse_files([DATA / "ibnetdiscover.txt"])
    leaf = next(n for n in fabric.nodes if n.guid == LEAF_01)
    assert (leaf.kind, leaf.ports, leaf.lid, leaf.name) == ("SW", 36, 4, "leaf-01")
    link = next(x for x in fabric.links if x.a.guid == GPU01_MLX5_0)
    assert link.a.node_guid == "0x0000000000100000"
    assert link.source.file.endswith("ibnetdiscover.txt") and link.source.line > 0
    assert fabric.sources == (str(DATA / "ibnetdiscover.txt"),)


def test_iblinkinfo_gives_port_state_and_physical_state() -> None:
    fabric = parse_files([DATA / "messy-iblinkinfo.txt"])
    states = {
        link.key(): (link.width, link.speed, link.state, link.physical) for link in fabric.links
    }
    assert states[(("0x98039b0300a1b2c0", 2), ("0xb8cef60300112240", 1))] == (
        "4x",
        "HDR",
        "Init",
        "LinkUp",
    )
    assert states[(("0x98039b0300a1b2c0", 3), ("0x98039b0300a1b2d0", 3))] == (
        "2x",
        "NDR",
        "Active",
        "LinkUp",
    )
    reasons = [i.reason for i in fabric.ignored]
    assert any("SHARP aggregation node" in r for r in reasons), reasons
    assert any("remote LID 99" in r for r in reasons), reasons


def test_messy_ibnetdiscover_names_models_split_ports_and_ignored_records() -> None:
    fabric = parse_files([DATA / "messy-ibnetdiscover.txt"])
    nodes = {n.guid: n for n in fabric.nodes}
    leaf = nodes["0x98039b0300a1b2c0"]
    assert (leaf.name, leaf.model, leaf.unnamed, leaf.ports) == (
        "ib0-leaf-01",
        "MQM8700",
        False,
        41,
    )
    default = nodes["0xb8cef60300112240"]
    assert (default.name, default.unnamed) == (None, True)
    assert "0x98039b0300a1b2c8" not in nodes  # the SHARP pseudo-HCA is no node
    split = next(x for x in fabric.links if x.a.port == 3)
    assert (split.width, split.speed) == ("2x", "NDR")
    unknown = next(x for x in fabric.links if x.a.port == 4)
    assert (unknown.width, unknown.speed) == (None, None)  # "???"
    ignored = {(i.line, i.reason.split(" ")[0]) for i in fabric.ignored}
    assert (12, "self-loop") in ignored
    assert (13, "SHARP") in ignored


def test_a_node_name_map_names_the_nodes_it_lists() -> None:
    fabric = parse_files([DATA / "messy-ibnetdiscover.txt", DATA / "node-name-map.txt"])
    nodes = {n.guid: n for n in fabric.nodes}
    assert nodes["0xb8cef60300112240"].name == "gpu02 mlx5_0"
    assert not nodes["0xb8cef60300112240"].unnamed
    assert nodes["0x98039b0300a1b2c0"].name == "ib0-leaf-01"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# noise\nibwarn: x\nhello world\n", 3, "cannot tell what dump"),
        ('Switch\t36 "S-0000000000200003"\n[1]\t"S-zz"[2]\n', 2, "not a GUID"),
        ('Switch\t36 "S-0000000000200003"\n[1]\tgarbage\n', 2, "cannot read port line"),
        ('caguid=0x1\nCa 1 "H-01"\nbogus line here\n', 3, "cannot read"),
        ('vendid=0x0\n[1]\t"S-01"[2]\n', 2, "port line before any"),
        ("CA 1 1 0x01 4x HDR - SW 2 x 0x02 ( 'a' - 'b' )\n", 1, "port 'x'"),
        (
            'Switch: 0x02 leaf:\n  2  1[  ] ==( 4X 2.5 Gbps Active/ LinkUp) 3 1 "a"\n',
            2,
            "cannot read port line",
        ),
        ('0x0002 "leaf"\n0x0003 leaf\n', 2, "expected 0x<guid>"),
    ],
)
def test_garbage_is_a_located_error_with_a_hint(text: str, line: int, words: str) -> None:
    with pytest.raises(DiscoveredError) as caught:
        parse_text(text, "dump.txt")
    error = caught.value
    assert words in error.message, error.message
    assert error.file == "dump.txt"
    assert error.position is not None and error.position.line == line
    assert error.one_line().startswith(f"dump.txt:{line}:1: error: ")


def test_an_empty_dump_is_an_error_not_an_empty_fabric() -> None:
    with pytest.raises(DiscoveredError, match="holds no switch"):
        parse_text("ibwarn: no port\n\n# only noise\n", "empty.txt")


LINES = st.sampled_from(
    [
        line
        for name in [*DUMPS, "messy-ibnetdiscover.txt", "messy-iblinkinfo.txt"]
        for line in (DATA / name).read_text().splitlines()[:40]
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(LINES, st.text(max_size=60)), max_size=25), st.binary(max_size=40))
def test_random_lines_raise_only_the_error_family(lines: list[str], junk: bytes) -> None:
    text = "\n".join(lines) + junk.decode("utf-8", errors="replace")
    with contextlib.suppress(RailplanError):  # the only exception a dump may cause
        parse_text(text, "fuzz.txt")


def dgx_a100_dump(servers: int = 1250) -> str:
    """An ibnetdiscover dump of a DGX A100 rail fabric: 8 HCAs a server, 20 down- and 20
    up-links a QM8700 leaf, 50 spines of 200 ports: 10,000 HCA ports and 20,000 switch cables.

    Uplink ``u`` of the 10,000 goes to spine ``u % 50``, its port ``u // 50 + 1``: a port
    number is 8 bits in InfiniBand, so no spine has the 500 ports 20 spines would need.
    """
    leaves, spines = servers * 8 // 20, 50
    ports = leaves * 20 // spines
    out: list[str] = []
    for leaf in range(leaves):
        out += [
            f"switchguid=0x{0x200000 + leaf:x}",
            (
                f'Switch\t40 "S-{0x200000 + leaf:016x}"\t\t'
                f'# "MF0;leaf-{leaf:03d}:MQM8700/U1" enhanced port 0 lid {leaf + 1} lmc 0'
            ),
        ]
        for port in range(1, 21):
            hca = leaf * 20 + port - 1
            out.append(
                f'[{port}]\t"H-{0x100000 + 2 * hca:016x}"[1]({0x100001 + 2 * hca:x}) \t\t'
                f'# "gpu{hca // 8:04d} mlx5_{hca % 8}" lid {5000 + hca} 4xHDR'
            )
        for port in range(21, 41):
            spine, remote = (leaf * 20 + port - 21) % spines, (leaf * 20 + port - 21) // spines
            out.append(
                f'[{port}]\t"S-{0x300000 + spine:016x}"[{remote + 1}]\t\t'
                f'# "MF0;spine-{spine:02d}:MQM8700/U1" lid {2000 + spine} 4xHDR'
            )
        out.append("")
    for spine in range(spines):
        out.append(
            f'Switch\t{ports} "S-{0x300000 + spine:016x}"\t\t# "spine-{spine:02d}" '
            f"enhanced port 0 lid {2000 + spine} lmc 0"
        )
        for port in range(ports):
            leaf, up = divmod(port * spines + spine, 20)
            out.append(
                f'[{port + 1}]\t"S-{0x200000 + leaf:016x}"[{21 + up}]\t\t# "leaf-{leaf:03d}"'
                f" lid {leaf + 1} 4xHDR"
            )
        out.append("")
    for hca in range(servers * 8):
        leaf, port = divmod(hca, 20)
        out += [
            f"caguid=0x{0x100000 + 2 * hca:x}",
            f'Ca\t1 "H-{0x100000 + 2 * hca:016x}"\t\t# "gpu{hca // 8:04d} mlx5_{hca % 8}"',
            (
                f'[1]({0x100001 + 2 * hca:x}) \t"S-{0x200000 + leaf:016x}"[{port + 1}]\t\t'
                f'# lid {5000 + hca} lmc 0 "leaf-{leaf:03d}" lid {leaf + 1} 4xHDR'
            ),
            "",
        ]
    return "\n".join(out)


def test_a_1250_server_dgx_a100_dump_parses_whole() -> None:
    """Size, not speed: `make bench` (case verify:1250) times it; tests assert no durations."""
    fabric = parse_text(dgx_a100_dump(), "dgx.txt")
    assert len(fabric.links) == 20_000
    assert sum(n.kind == "CA" for n in fabric.nodes) == 10_000


def _run(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        ["ibsim-run", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout


def test_live_ibsim_dumps_parse_to_the_netlists_cables(tmp_path: Path) -> None:
    """The committed fixtures, made again by today's ibnetdiscover/iblinkinfo (~1.5 s)."""
    tools_or_skip()
    env = {
        **os.environ,
        "IBSIM_SOCKNAME": f"railplan-verify-{os.getpid()}",
        "SIM_HOST": "gpu01-mlx5_0",
        "OSM_TMP_DIR": str(tmp_path),
        "OSM_CACHE_DIR": str(tmp_path),
    }
    sim = subprocess.Popen(
        ["ibsim", "-s", str(DATA / "ibsim.net")],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        time.sleep(1.0)  # ibsim loads the netlist before it accepts clients
        _run(["opensm", "-o", "-f", str(tmp_path / "osm.log")], env)  # assigns the LIDs
        dumps = {
            args: _run(list(args), env)
            for args in [
                ("ibnetdiscover",),
                ("ibnetdiscover", "-p"),
                ("iblinkinfo",),
                ("iblinkinfo", "-l"),
            ]
        }
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    for args, text in dumps.items():
        assert _named_edges(parse_text(text, " ".join(args))) == _netlist_edges(), args


def test_hca_port_guids_and_lids_come_from_the_port_lines() -> None:
    fabric = parse_files([DATA / "ibnetdiscover.txt"])
    hca = next(n for n in fabric.nodes if n.name == "gpu03-mlx5_0")
    assert (hca.guid, hca.port_guids, hca.lid, hca.ports) == (
        "0x0000000000100006",
        ("0x0000000000100007",),
        8,
        2,
    )


def test_name_map_with_tabs_and_port_guid_keys(tmp_path: Path) -> None:
    names = tmp_path / "map"
    names.write_text('# comment\n0x0000000000100001\t"rack1 gpu01 hca0"\n')
    fabric = parse_files([DATA / "ibnetdiscover-p.txt", names])
    node = next(n for n in fabric.nodes if n.guid == GPU01_MLX5_0)
    assert node.name == "rack1 gpu01 hca0"
    assert fabric.sources == (str(DATA / "ibnetdiscover-p.txt"), str(names))


def test_a_binary_file_is_an_input_error_not_a_traceback(tmp_path: Path) -> None:
    blob = tmp_path / "dump.bin"
    blob.write_bytes(b"vendid=0x0\n\x00\x01\x02")
    with pytest.raises(RailplanError, match="binary") as caught:
        parse_files([blob])
    assert caught.value.position is not None and caught.value.position.line == 2


def test_back_to_back_hcas_ext_ports_and_full_info_suffixes() -> None:
    """Forms from rdma-core's ibnetdiscover.c (out_ca_port/out_switch_port) ibsim never
    prints: a remote HCA's GUID as " (<guid>) ", "[ext N]" and -f's "s=.. w=.. v=.."."""
    text = (
        'Ca\t2 "H-0000000000000010"\t\t# "a"\n'
        '[1](11) \t"H-0000000000000020"[1] (21) \t\t# lid 1 lmc 0 "b" lid 2 4xNDR s=1 w=2 v=3\n'
        'Switch\t8 "S-0000000000000030"\t\t# "sw" enhanced port 0 lid 4 lmc 0\n'
        '[1][ext 3]\t"H-0000000000000040"[1](41) \t\t# "c" lid 5 2xHDR\n'
    )
    links = {link.key(): (link.width, link.speed) for link in parse_text(text).links}
    assert links == {
        (("0x0000000000000011", 1), ("0x0000000000000021", 1)): ("4x", "NDR"),
        (("0x0000000000000030", 1), ("0x0000000000000041", 1)): ("2x", "HDR"),
    }


def test_iblinkinfo_fdr10_additional_settings_ext_ports_and_routers() -> None:
    """Forms from rdma-core's iblinkinfo.c (print_port) ibsim never prints: FDR10's
    "10.0 Gbps (FDR10)", -p's "(HOQ:.. VL_Stall:..)", "[ 3]" front-panel numbers, routers."""
    text = (
        "Switch: 0x0000000000000030 sw:\n"
        "     4    1[ 3] ==( 4X 10.0 Gbps (FDR10) Active/  LinkUp) (HOQ:19 VL_Stall:7)==>"
        '       5    1[  ] "c" ( )\n'
        "CA: c:\n"
        "      0x0000000000000041      5    1[  ] ==( 4X 10.0 Gbps (FDR10) Active/  LinkUp)==>"
        '       4    1[ 3] "sw" ( )\n'
        "Router: r1:\n"
        "      0x0000000000000051      6    1[  ] ==( 4X 2.5 Gbps Active/  LinkUp)==>"
        '       4    2[  ] "sw" ( )\n'
    )
    fabric = parse_text(text)
    (link,) = fabric.links
    assert link.key() == (("0x0000000000000030", 1), ("0x0000000000000041", 1))
    assert (link.width, link.speed, link.state, link.physical) == (
        "4x",
        "FDR10",
        "Active",
        "LinkUp",
    )
    assert [i.line for i in fabric.ignored] == [5]


def test_iblinkinfo_l_reads_a_spine_with_two_cables_as_a_switch() -> None:
    """-l has no Switch:/CA: headers: a node listing more than 2 ports is a switch.

    Its unconnected ports count too: ibsim's spines have 2 cables on 36 ports.
    """
    fabric = parse_files([DATA / "iblinkinfo-l.txt"])
    kinds = {node.name: node.kind for node in fabric.nodes}
    assert kinds["spine-01"] == kinds["spine-02"] == "SW"
    assert kinds["gpu03-mlx5_0"] == "CA"  # a 2-port HCA with port 2 unconnected
