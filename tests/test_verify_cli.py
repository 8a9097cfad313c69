"""`railplan verify` end to end: a dump written from the plan, with and without faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Plan

from .cli_run import run_cli
from .verify_dump import Dump, as_built

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples/dgx-a100-superpod.yaml"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec(str(SPEC)).spec, load_catalog())


def _write(tmp_path: Path, lines: list[str]) -> Path:
    dump = tmp_path / "fabric.txt"
    dump.write_text(
        "ibwarn: [1234] mad_rpc_open_port: noise a real run prints\n" + "\n".join(lines)
    )
    return dump


def test_the_fabric_as_planned_exits_0(plan: Plan, tmp_path: Path) -> None:
    dump = _write(tmp_path, list(as_built(plan).values()))
    result = run_cli("verify", str(SPEC), str(dump))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("as planned: 3,364 links seen, 3,364 planned cables")


def test_each_injected_fault_is_one_finding(plan: Plan, tmp_path: Path) -> None:
    dump = Dump(plan)
    lines = as_built(plan, dump)
    del lines["dgx005:mlx5_3"]  # missing
    one, two = (
        next(c for c in plan.cables if c.id == i) for i in ("dgx001:mlx5_0", "dgx002:mlx5_0")
    )
    lines[one.id] = dump.line((one.a, one.a_port), (two.b, two.b_port))  # swapped pair
    lines[two.id] = dump.line((two.a, two.a_port), (one.b, one.b_port))
    slow = next(c for c in plan.cables if c.id == "dgx007:mlx5_1")
    lines[slow.id] = dump.cable(slow, width="2x")  # degraded
    result = run_cli(
        "verify", str(SPEC), str(_write(tmp_path, list(lines.values()))), "--format", "json"
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["by_kind"] == {"missing": 1, "swapped_pair": 1, "degraded": 1}
    missing = next(f for f in document["findings"] if f["kind"] == "missing")
    assert missing["a"] == {
        "device": "dgx005",
        "port": "mlx5_3",
        "rack": plan.server("dgx005").rack,
        "rack_unit": plan.server("dgx005").rack_unit,
    }


def test_the_work_order_is_a_csv(plan: Plan, tmp_path: Path) -> None:
    lines = as_built(plan)
    del lines["dgx140:mlx5_9"]
    result = run_cli("verify", str(SPEC), str(_write(tmp_path, list(lines.values()))), "-f", "csv")
    assert result.returncode == 1
    header, row = result.stdout.splitlines()
    assert header.startswith("order,kind,a_rack,a_unit,a_device,a_port")
    assert row.startswith("1,missing,") and ",dgx140,mlx5_9," in row


def test_a_line_no_parser_understands_is_located_exit_2(plan: Plan, tmp_path: Path) -> None:
    lines = [*list(as_built(plan).values())[:3], "CA this is not a port line"]
    dump = _write(tmp_path, lines)
    result = run_cli("verify", str(SPEC), str(dump))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{dump}:5:")


def test_unnamed_hcas_are_reported_until_the_name_map_names_them(
    plan: Plan, tmp_path: Path
) -> None:
    dump = Dump(plan, unnamed=frozenset({"dgx003"}))
    fabric = _write(tmp_path, list(as_built(plan, dump).values()))
    result = run_cli("verify", str(SPEC), str(fabric), "--format", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["by_kind"] == {"unnamed": 8}  # checked by their leaf ports
    assert {f["z"]["device"] for f in document["findings"]} == {"dgx003"}
    names = tmp_path / "names.txt"
    names.write_text(
        "# node-name map\n"
        + "".join(
            f'{guid} "{device} {port}"\n'
            for (device, port), guid in dump.guids.items()
            if device == "dgx003"
        )
    )
    result = run_cli("verify", str(SPEC), str(fabric), "--names", str(names))
    assert result.returncode == 0, result.stdout + result.stderr
