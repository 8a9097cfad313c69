"""A link rate no tool prints (``¹x``, ``0x``, ``XDR9``) is a finding, not a pass.

verify read such a width or speed as "unknown" and passed the planned cable (exit 0), while
``1x HDR`` on the same cable is ``degraded``: an edited or damaged field hid exactly what the
check is for. Now each parser keeps the rate as printed when it cannot read it, and a planned
cable with one is an ``unreadable_rate`` finding (exit 1), listed and counted like the others.
The tools' own ``???`` (ibnetdiscover's word for a value it does not know) stays unknown.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Plan
from infra.verify import parse_text

from .cli_run import run_cli
from .verify_dump import Dump, as_built

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples/dgx-a100-superpod.yaml"
DATA = Path(__file__).parent / "data" / "verify"
CABLE = "dgx007:mlx5_1"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec(str(SPEC)).spec, load_catalog())


def _verify(plan: Plan, tmp_path: Path, width: str, speed: str, *fmt: str) -> tuple[int, str]:
    """verify on the as-built dump with one cable's rate printed as ``width speed``."""
    dump = Dump(plan)
    lines = as_built(plan, dump)
    cable = next(c for c in plan.cables if c.id == CABLE)
    lines[CABLE] = dump.cable(cable, width=width).replace(" HDR - ", f" {speed} - ")
    path = tmp_path / "fabric.txt"
    path.write_text("\n".join(lines.values()) + "\n")
    result = run_cli("verify", str(SPEC), str(path), *fmt)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("width", "speed"),
    [("¹x", "HDR"), ("0x", "HDR"), ("١x", "HDR"), ("4x", "XDR9"), ("4x", "H²R"), ("x", "HDR")],
)
def test_an_unreadable_rate_on_a_planned_cable_is_a_finding(
    plan: Plan, tmp_path: Path, width: str, speed: str
) -> None:
    code, out = _verify(plan, tmp_path, width, speed, "--format", "json")
    assert code == 1, out
    document = json.loads(out)
    assert document["summary"]["by_kind"] == {"unreadable_rate": 1}
    assert document["summary"]["as_planned"] is False
    (finding,) = document["findings"]
    assert finding["kind"] == "unreadable_rate"
    assert {finding["a"]["device"], finding["z"]["device"]} >= {"dgx007"}
    assert finding["expected"] == "200 Gb/s"
    assert repr(f"{width} {speed}") in finding["found"] and "fabric.txt:" in finding["found"]


def test_text_and_csv_list_and_count_it(plan: Plan, tmp_path: Path) -> None:
    code, text = _verify(plan, tmp_path, "0x", "HDR")
    assert code == 1
    assert "unreadable_rate: dgx007 mlx5_1: expected 200 Gb/s, found rate '0x HDR'" in text
    assert "1 finding (1 unreadable_rate); 3,364 links seen" in text
    code, sheet = _verify(plan, tmp_path, "0x", "HDR", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(sheet)))
    assert code == 1 and [r["kind"] for r in rows] == ["unreadable_rate"]


@pytest.mark.parametrize(("width", "kind"), [("1x", "degraded"), ("4x", None)])
def test_readable_rates_keep_their_verdicts(
    plan: Plan, tmp_path: Path, width: str, kind: str | None
) -> None:
    code, out = _verify(plan, tmp_path, width, "HDR", "--format", "json")
    assert json.loads(out)["summary"]["by_kind"] == ({kind: 1} if kind else {})
    assert code == (1 if kind else 0)


def _topology_rate(rate: str) -> str | None:
    text = (DATA / "ibnetdiscover.txt").read_text()
    line = '"gpu03-mlx5_0" lid 8 4xSDR'
    assert line in text
    fabric = parse_text(text.replace(line, f'"gpu03-mlx5_0" lid 8 {rate}'), "t.txt")
    (link,) = [k for k in fabric.links if k.source.line == 11]
    return link.unreadable


@pytest.mark.parametrize(
    ("rate", "unreadable"),
    [("0xSDR", "0xSDR"), ("¹xSDR", "¹xSDR"), ("4xXDR9", "4xXDR9"), ("???", None), ("4xSDR", None)],
)
def test_the_topology_file_keeps_an_unreadable_rate_as_printed(
    rate: str, unreadable: str | None
) -> None:
    assert _topology_rate(rate) == unreadable


@pytest.mark.parametrize(
    ("rate", "unreadable"),
    [("4X           2.5 Gbps", None), ("0X           2.5 Gbps", "0X 2.5 Gbps"),
     ("4X           2.7 Gbps", "4X 2.7 Gbps")],
)  # fmt: skip
def test_iblinkinfo_keeps_an_unreadable_rate_as_printed(rate: str, unreadable: str | None) -> None:
    text = (DATA / "iblinkinfo.txt").read_text()
    old = "4X           2.5 Gbps Active/  LinkUp"
    assert old in text
    first = text.index(old)
    text = text[:first] + text[first:].replace(old, f"{rate} Active/  LinkUp", 1)
    fabric = parse_text(text, "l.txt")
    found = [k.unreadable for k in fabric.links if k.unreadable]
    assert found == ([unreadable] if unreadable else [])


def test_structure_reports_an_unreadable_rate_too(tmp_path: Path) -> None:
    """``verify --structure`` (no spec) skipped such a link in its rate check: exit 0."""
    text = (DATA / "ibnetdiscover.txt").read_text()
    dump = tmp_path / "t.txt"
    dump.write_text(text.replace('"gpu03-mlx5_0" lid 8 4xSDR', '"gpu03-mlx5_0" lid 8 0xSDR'))
    result = run_cli("verify", "--structure", str(dump), "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["by_kind"] == {"unreadable_rate": 1}
    (finding,) = document["findings"]
    assert finding["a"]["device"] == "gpu03" and finding["expected"].startswith("4xSDR")
    assert f"'0xSDR' ({dump}:11)" in finding["found"]


def test_plan_and_structure_name_an_unreadable_rate_once(plan: Plan, tmp_path: Path) -> None:
    code, out = _verify(plan, tmp_path, "0x", "HDR", "--structure", "--format", "json")
    assert code == 1, out
    # (the as-built dump has no SHARP aggregation nodes: sharp_missing is the other finding)
    assert json.loads(out)["summary"]["by_kind"]["unreadable_rate"] == 1
