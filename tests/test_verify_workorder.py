"""The work order (``railplan verify --format csv``) says which cage and which cable to fetch.

Each end's front-panel label comes from the catalog (`Switch.port_label`: a QM97xx logical
port 17 is cage 9's first port, ``9/1``); a server port keeps its device name and says that
the catalog has no cage label for it; the cable length is the planned one, as
``cabling.csv`` gives it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.render.sheets import cabling_csv
from infra.spec import load_spec_text
from infra.topology import expand
from infra.topology.model import Plan

from .cli_run import run_cli
from .verify_dump import Dump, as_built

H100 = """name: h100-su
site: {rack: {power_kw: 41, units: 42}, management_cidr: 10.0.0.0/16, bmc_cidr: 10.1.0.0/16}
node_groups: [{name: dgx, node: dgx-h100, count: 32, hostname: "dgx{index:03d}"}]
fabrics:
  compute: {switch: qm9700, su_size: 32}
"""


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec_text(H100, "h100-su.yaml").spec, load_catalog())


def _work_order(plan: Plan, tmp_path: Path, cut: str) -> list[dict[str, str]]:
    spec, dump = tmp_path / "h100-su.yaml", tmp_path / "fabric.txt"
    spec.write_text(H100)
    lines = as_built(plan, Dump(plan, speed="NDR"))
    del lines[cut]
    dump.write_text("\n".join(lines.values()) + "\n")
    result = run_cli("verify", str(spec), str(dump), "--format", "csv")
    assert result.returncode == 1, result.stderr
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_a_missing_cable_names_the_leaf_cage_and_the_length_to_fetch(
    plan: Plan, tmp_path: Path
) -> None:
    cable = next(
        c for c in plan.cables_in("compute", "node_leaf") if c.b_port == "17"
    )  # cage 9, first port
    (row,) = _work_order(plan, tmp_path, cable.id)
    assert (row["kind"], row["a_device"], row["z_device"]) == ("missing", cable.a, cable.b)
    assert row["z_port"] == "17" and row["z_label"] == "9/1"
    assert row["a_label"] == f"{cable.a_port} (no cage label in the catalog)"
    planned = {r["cable_id"]: r for r in csv.DictReader(io.StringIO(cabling_csv(plan)))}
    assert row["cable_m"] == planned[cable.id]["length_m"] != ""
    assert list(row)[-1] == "done"


def test_a_missing_uplink_names_both_cages(plan: Plan, tmp_path: Path) -> None:
    cable = next(c for c in plan.cables_in("compute", "leaf_spine") if c.a_port == "34")
    (row,) = _work_order(plan, tmp_path, cable.id)
    assert (row["a_label"], row["z_label"]) == (
        "17/2",
        load_catalog().switches["qm9700"].port_label(int(cable.b_port)),
    )
    assert row["cable_m"] != ""
