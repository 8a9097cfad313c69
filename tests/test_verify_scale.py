"""`railplan verify` at the issue's size: 1,250 DGX A100 (10,000 GPUs), one of each fault.

The dump is the plan's cabling as `ibnetdiscover -p` prints it (tests/verify_dump.py: no
fabric of that size exists here), changed the way technicians get it wrong. Each injected
fault must come back exactly once, placed in the right rack and unit; the unmodified dump
must exit 0. The time is measured in `make bench` (case verify:1250), not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec_text
from infra.topology import expand
from infra.topology.model import Cable, Plan

from .cli_run import run_cli
from .verify_dump import Dump, as_built

SPEC = """name: tenk
site: {rack: {power_kw: 28, units: 42}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}
node_groups: [{name: dgx, node: dgx-a100-640gb, count: 1250, hostname: "dgx{index:04d}"}]
fabrics:
  compute: {switch: qm8790, su_size: 20, sharp: true, subnet_manager: ufm}
"""


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tenk") / "tenk.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec_text(SPEC, "tenk.yaml").spec, load_catalog())


def _cable(plan: Plan, cable_id: str) -> Cable:
    return next(c for c in plan.cables_in("compute") if c.id == cable_id)


def _verify(spec_file: Path, tmp_path: Path, lines: dict[str, str]) -> tuple[int, dict]:
    dump = tmp_path / "fabric.txt"
    dump.write_text("\n".join(lines.values()) + "\n")
    done = run_cli("verify", str(spec_file), str(dump), "--format", "json")
    return done.returncode, json.loads(done.stdout)


def test_the_unmodified_10000_gpu_fabric_is_as_planned(
    plan: Plan, spec_file: Path, tmp_path: Path
) -> None:
    code, document = _verify(spec_file, tmp_path, as_built(plan))
    assert code == 0 and document["findings"] == []
    assert document["summary"]["links_seen"] == len(plan.cables_in("compute")) > 30_000


def test_each_fault_injected_into_10000_gpus_comes_back_once_in_its_rack(
    plan: Plan, spec_file: Path, tmp_path: Path
) -> None:
    dump = Dump(plan)
    lines = as_built(plan, dump)
    missing = _cable(plan, "dgx0605:mlx5_3")
    del lines[missing.id]
    one, two = _cable(plan, "dgx1001:mlx5_0"), _cable(plan, "dgx1002:mlx5_0")
    lines[one.id] = dump.line((one.a, one.a_port), (two.b, two.b_port))
    lines[two.id] = dump.line((two.a, two.a_port), (one.b, one.b_port))
    rail, other = _cable(plan, "dgx0303:mlx5_0"), _cable(plan, "dgx0303:mlx5_1")
    lines[rail.id] = dump.line((rail.a, rail.a_port), (other.b, "41"))
    port = _cable(plan, "dgx0404:mlx5_2")
    lines[port.id] = dump.line((port.a, port.a_port), (port.b, "42"))
    switch, far = _cable(plan, "dgx0006:mlx5_2"), _cable(plan, "dgx1240:mlx5_2")
    lines[switch.id] = dump.line((switch.a, switch.a_port), (far.b, "41"))
    slow = _cable(plan, "dgx0707:mlx5_1")
    lines[slow.id] = dump.cable(slow, width="2x")
    for key in [k for k in lines if k.startswith("dgx0810:")]:
        del lines[key]  # a server never cabled
    lines["extra"] = dump.line(("dgx0011", "mlx5_9"), ("dgx0012", "mlx5_9"))
    code, document = _verify(spec_file, tmp_path, lines)
    assert code == 1
    assert document["summary"]["by_kind"] == {
        "missing": 1,
        "swapped_pair": 1,
        "wrong_rail": 1,
        "wrong_port": 1,
        "wrong_switch": 1,
        "degraded": 1,
        "device_missing": 1,
        "unexpected": 1,
    }
    placed = {f["kind"]: f["a"] for f in document["findings"]}
    for kind, server in [
        ("missing", "dgx0605"),
        ("wrong_rail", "dgx0303"),
        ("wrong_port", "dgx0404"),
        ("wrong_switch", "dgx0006"),
        ("degraded", "dgx0707"),
        ("device_missing", "dgx0810"),
    ]:
        host = plan.server(server)
        assert (placed[kind]["device"], placed[kind]["rack"], placed[kind]["rack_unit"]) == (
            server,
            host.rack,
            host.rack_unit,
        ), kind
