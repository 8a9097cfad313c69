"""The fabric twin: `railplan verify` on what the real OpenSM and infiniband-diags discover.

Only the hardware is simulated (ibsim, on the netlist `railplan render` writes; see
tests/fabric_twin.py): Debian's opensm sweeps the fabric with the rendered conf, Debian's
ibnetdiscover, iblinkinfo and ibtracert read it, and `railplan verify` compares the dumps
with the plan. Faults are typed into ibsim's console before the sweep, as a technician's
mistakes would be there before discovery: each must come out as exactly its finding, with
the racks and units of both ends from the plan. Two plans: the 4-node lab (one leaf; its
spec runs the switch's SM, so the twin renders it with ``subnet_manager: opensm``) and one
full SU of DGX A100 (20 servers, 8 rails, 4 spines). The links come up at the planned rate
(the netlist says 4xHDR), so verify's rate checks run too; slower links are tested on
fixture files (tests/test_verify_compare.py). No root is needed: ibsim-run preloads
libumad2sim, a user-space library.
"""

from __future__ import annotations

import os
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from infra.catalog import Catalog
from infra.topology.model import Cable, Plan
from tests.fabric_twin import FabricTwin, with_opensm
from tests.ibsim_fabric import tools_or_skip

ROOT = Path(__file__).resolve().parent.parent
LAB = with_opensm((ROOT / "examples" / "a100-lab-mig.yaml").read_text())
SU = (ROOT / "tests" / "data" / "twin" / "dgx-a100-su.yaml").read_text()
# What opensm 3.3.23 logs when it ignores part of a conf or routes with another engine.
REJECTED = (
    "Unrecognized token",
    "cannot find or setup routing engine",
    "PARSE ERROR",
    "Failed to setup routing engine",
    "alling back to default routing",
)
Row = tuple[str, str, str, str | None, int | None, str, str, str | None, int | None]


@pytest.fixture(autouse=True)
def _tools() -> None:
    tools_or_skip()


def _twin(spec: str, catalog: Catalog, workdir: Path) -> FabricTwin:
    return FabricTwin(spec, catalog, workdir)


def _engine(twin: FabricTwin) -> str:
    match = re.search(r"^routing_engine (\S+)", twin.files[twin.sm_conf], re.MULTILINE)
    assert match, twin.files[twin.sm_conf]
    return match[1]


def _sweep(twin: FabricTwin) -> list[Path]:
    """opensm's sweep with the rendered conf (checked), then the discovery dumps."""
    out, log = twin.opensm()
    for line in REJECTED:
        assert line not in out + log, line
    assert f"{_engine(twin)} tables configured on all switches" in log, log[-2000:]
    assert "SUBNET UP" in log
    return [
        twin.dump("ibnetdiscover-p.txt", "ibnetdiscover", "-p"),
        twin.dump("iblinkinfo.txt", "iblinkinfo"),
    ]


def _rows(doc: dict[str, Any]) -> set[Row]:
    return {
        (f["kind"], *(f[e][k] for e in "az" for k in ("device", "port", "rack", "rack_unit")))
        for f in doc["findings"]
    }


def _row(kind: str, cable: Cable) -> Row:
    """A finding on `cable` as the plan places it: both ends' device, port, rack and unit."""
    return (
        kind,
        cable.a,
        cable.a_port,
        cable.a_rack,
        cable.a_unit,
        cable.b,
        cable.b_port,
        cable.b_rack,
        cable.b_unit,
    )


def _hca_cable(plan: Plan, server: str, rail: int) -> Cable:
    hca = plan.server(server).hcas[rail]
    return next(c for c in plan.cables_in("compute") if (c.a, c.a_port) == (server, hca))


def _lids(dump: Path) -> dict[str, int]:
    """Node name -> LID from `ibnetdiscover -p` (first port line of each node)."""
    lids: dict[str, int] = {}
    for line in dump.read_text().splitlines():
        match = re.match(r"^(?:SW|CA)\s+(\d+)\s.*?\( '([^']+)'", line)
        if match:
            lids.setdefault(match[2], int(match[1]))
    return lids


def _path(twin: FabricTwin, lids: dict[str, int], src: str, dst: str) -> list[str]:
    """The switches ibtracert walks from HCA `src` to HCA `dst`, in order."""
    out = twin.run("ibtracert", str(lids[src]), str(lids[dst]))
    assert "To ca {" in out and f'"{dst}"' in out, out
    return re.findall(r'-> switch port \{0x[0-9a-f]+\}\[\d+\] lid [\d-]+ "([^"]+)"', out)


@pytest.mark.parametrize("name", ["lab", "su", "su-ufm"])
def test_an_as_planned_twin_is_all_active_routed_and_verifies_clean(
    catalog: Catalog, tmp_path: Path, name: str
) -> None:
    """su-ufm: UFM owns its SM's settings, so the twin sweeps with the rehearsal conf."""
    spec = {
        "lab": LAB,
        "su": SU,
        "su-ufm": SU.replace("subnet_manager: opensm", "subnet_manager: ufm"),
    }[name]
    with _twin(spec, catalog, tmp_path) as twin:
        plan = twin.plan
        assert len(plan.servers) == {"lab": 4, "su": 20, "su-ufm": 20}[name]
        assert (twin.sm_conf == "rehearsal-opensm.conf") == (name == "su-ufm")
        cables = plan.cables_in("compute")
        dumps = _sweep(twin)
        code, doc = twin.verify(*dumps)
        assert (code, doc["findings"], doc["summary"]["by_kind"]) == (0, [], {})
        assert doc["summary"]["links_seen"] == len(cables)
        # iblinkinfo: both ends of every cable Active/LinkUp at the planned 4x HDR
        ports = [line for line in dumps[1].read_text().splitlines() if ")==>" in line]
        connected = [line for line in ports if '"" ( )' not in line]
        assert len(connected) == 2 * len(cables)
        assert all("4X        53.125 Gbps Active/  LinkUp" in line for line in connected)
        lids = _lids(dumps[0])
        leaves = [s.name for s in plan.switches_in("compute") if s.tier == "leaf"]
        if name == "lab":  # one leaf: every HCA pair meets there
            first, last = plan.servers[0], plan.servers[-1]
            src, dst = f"{first.name} {first.hcas[0]}", f"{last.name} {last.hcas[7]}"
            assert _path(twin, lids, src, dst) == leaves
            return
        # every pair of the SU's 8 leaves: an HCA on one reaches one on the other by a spine
        for i, j in combinations(range(len(leaves)), 2):
            src = f"dgx{i + 1:03d} {plan.server(f'dgx{i + 1:03d}').hcas[i]}"
            dst = f"dgx{20 - j:03d} {plan.server(f'dgx{20 - j:03d}').hcas[j]}"
            path = _path(twin, lids, src, dst)
            assert len(path) == 3 and path[0] == leaves[i] and path[2] == leaves[j], path
            assert plan.switch(path[1]).tier == "spine", path


def _faults(plan: Plan) -> dict[str, tuple[list[str], set[Row]]]:
    """Fault name -> (ibsim console commands, the exact findings verify must report)."""
    servers = [s.name for s in plan.servers]
    lost = _hca_cable(plan, servers[-1], 3)
    moved = _hca_cable(plan, servers[-2], 2)
    x, y = _hca_cable(plan, servers[1], 5), _hca_cable(plan, servers[2], 5)
    first = min((x, y), key=plan.cables_in("compute").index)  # compare walks plan order
    leaf_ports = {int(c.b_port) for c in plan.cables_in("compute") if c.b == moved.b}
    free = [p for p in range(1, 41) if p not in leaf_ports]
    faults = {
        "unlink": ([f'Unlink "{lost.a} {lost.a_port}"[1]'], {_row("missing", lost)}),
        "swap": (
            [
                f'Unlink "{x.a} {x.a_port}"[1]',
                f'Unlink "{y.a} {y.a_port}"[1]',
                f'Link "{x.a} {x.a_port}"[1] "{y.b}"[{y.b_port}]',
                f'Link "{y.a} {y.a_port}"[1] "{x.b}"[{x.b_port}]',
            ],
            {_row("swapped_pair", first)},
        ),
    }
    if lost.b != moved.b:  # the port `lost` frees, on the leaf of another rail of the SU
        faults["wrong_rail"] = (
            [
                f'Unlink "{lost.a} {lost.a_port}"[1]',
                f'Unlink "{moved.a} {moved.a_port}"[1]',
                f'Link "{moved.a} {moved.a_port}"[1] "{lost.b}"[{lost.b_port}]',
            ],
            {_row("missing", lost), _row("wrong_rail", moved)},
        )
    if free:  # a full SU's leaves have no free port
        found = (moved.b, str(free[0]))
        faults["wrong_port"] = (
            [
                f'Unlink "{moved.a} {moved.a_port}"[1]',
                f'Link "{moved.a} {moved.a_port}"[1] "{found[0]}"[{found[1]}]',
            ],
            {_row("wrong_port", moved)},
        )
    return faults


def _switch_faults(plan: Plan) -> dict[str, tuple[list[str], set[Row]]]:
    """A leaf and a spine that never come up: one device_missing each, their cables with it."""
    faults = {}
    for tier in ("leaf", "spine"):
        switches = [s for s in plan.switches_in("compute") if s.tier == tier]
        if len(switches) < 2:  # the lab's one leaf: its SM would see nothing at all
            continue
        switch = switches[-1]
        row = ("device_missing", switch.name, "", switch.rack, switch.rack_unit)
        faults[f"{tier}_down"] = ([f'Unlink "{switch.name}"'], {(*row, "", "", None, None)})
    return faults


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        ("lab", "unlink"),
        ("lab", "wrong_port"),
        ("lab", "swap"),
        ("su", "unlink"),
        ("su", "swap"),
        ("su", "wrong_rail"),
        ("su", "leaf_down"),
        ("su", "spine_down"),
    ],
)
def test_each_injected_fault_is_exactly_its_finding(
    catalog: Catalog, tmp_path: Path, name: str, fault: str
) -> None:
    with _twin({"lab": LAB, "su": SU}[name], catalog, tmp_path) as twin:
        commands, expected = (_faults(twin.plan) | _switch_faults(twin.plan))[fault]
        twin.console(*commands)
        code, doc = twin.verify(*_sweep(twin))
    assert code == 1
    assert _rows(doc) == expected, doc["findings"]


LARGEST = """# The largest DGX A100 plan railplan makes: 80 SUs of 20 (40 pods of QM8790 leaves)
name: a100-largest
node_groups: [{name: dgx, node: dgx-a100-640gb, count: 1600, hostname: "dgx{index:04d}"}]
fabrics:
  compute: {switch: qm8790, su_size: 20, rail_optimized: true, subnet_manager: opensm}
"""


def test_the_largest_a100_plan_sweeps_routes_and_verifies_on_the_twin(
    catalog: Catalog, tmp_path: Path
) -> None:
    """1,600 DGX A100 (12,800 GPUs, 38,400 cables): a clean sweep verifies clean and routes
    leaf to leaf across pods; then an HCA cable unplugged and a spine that never comes up are
    exactly their findings after a second sweep. About three minutes on a 2-core machine, so
    `make twin` runs it (`.ci/run` does, after `make test`), not `make test`."""
    if os.environ.get("RAILPLAN_TWIN_LARGE") != "1":
        pytest.skip("the largest twin runs in `make twin` (.ci/run), not in `make test`")
    with _twin(LARGEST, catalog, tmp_path) as twin:
        plan = twin.plan
        assert len(plan.servers) == 1600
        code, doc = twin.verify(_large_sweep(twin))
        assert (code, doc["summary"]["by_kind"]) == (0, {})
        assert doc["summary"]["links_seen"] == len(plan.cables_in("compute")) == 38_400
        lids = _lids(twin.workdir / "ibnetdiscover-p.txt")
        for src, dst in (("dgx0001", "dgx1600"), ("dgx0021", "dgx0801"), ("dgx0400", "dgx1201")):
            a, b = plan.server(src), plan.server(dst)
            path = _path(twin, lids, f"{src} {a.hcas[0]}", f"{dst} {b.hcas[0]}")
            tiers = [plan.switch(s).tier for s in path]
            assert tiers[0] == tiers[-1] == "leaf" and "spine" in tiers, path
        commands, lost = _faults(plan)["unlink"]
        down, spine = _switch_faults(plan)["spine_down"]
        twin.console(*commands, *down)
        code, doc = twin.verify(_large_sweep(twin))
    assert code == 1
    assert _rows(doc) == lost | spine, doc["summary"]


def _large_sweep(twin: FabricTwin) -> Path:
    """One opensm sweep of the largest fabric (a minute or more here), checked; its dump."""
    log_path = twin.workdir / "opensm.log"
    log_path.unlink(missing_ok=True)
    conf = str(twin.workdir / twin.sm_conf)
    out = twin.run("opensm", "-F", conf, "-f", str(log_path), "-o", timeout=900)
    log = log_path.read_text()
    for line in REJECTED:
        assert line not in out + log, line
    assert f"{_engine(twin)} tables configured on all switches" in log, log[-2000:]
    return twin.dump("ibnetdiscover-p.txt", "ibnetdiscover", "-p", timeout=600)
