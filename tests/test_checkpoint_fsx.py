"""An AWS spec's checkpoint budget is evaluated against the FSx for Lustre railplan provisions.

AWS instances have no storage fabric: their checkpoints go to the FSx for Lustre file system
the AWS target creates (the spec's `aws.fsx`, else sized from the checkpoint budgets by
`fsx_size`). The budget, lint and the Pulumi program must all see that same file system, and
a spec that is neither AWS nor has a storage fabric still cannot be evaluated (RP061).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import get_args

import pytest

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.budget.storage import checkpoint_estimate, published_checkpoint_ratio, sized_fsx
from infra.catalog import Catalog
from infra.catalog.fsx import (
    FSX_CAPACITY_STEP_GIB,
    FSX_MIN_CAPACITY_GIB,
    FSX_TIERS,
    FsxLustre,
    fsx_size,
    provisioned_fsx,
)
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.spec.cloud import FSX_CAPACITY_FIRST, FSX_CAPACITY_STEP, FsxSettings
from infra.topology import expand

from .conftest import lint_text
from .pulumi_mocks import ROOT, run_program

SPEC_FILE = ROOT / "tests" / "data" / "aws-p5-checkpoint.yaml"  # 16 x p5, 1 TB in 300 s
FSX_TYPE = "aws:fsx/lustreFileSystem:LustreFileSystem"

P5 = """\
name: p5-train
node_groups:
  - {{name: p5, node: aws-p5.48xlarge, count: {count}, hostname: "p5-{{index:02d}}"}}
{extra}budgets:
  - checkpoint: {{bytes: {nbytes}, max_s: {max_s}, bound: central}}
"""


def _spec(count: int = 16, nbytes: str = "1TB", max_s: int = 300, extra: str = "") -> str:
    return P5.format(count=count, nbytes=nbytes, max_s=max_s, extra=extra)


def _budget(text: str, catalog: Catalog) -> BudgetResult:
    spec = load_spec_text(text, "spec.yaml").spec
    (result,) = evaluate_budgets(spec, catalog, expand(spec, catalog))
    return result


# --- the budget ----------------------------------------------------------------------------


def test_aws_checkpoint_budget_is_evaluated_against_the_sized_fsx(catalog: Catalog) -> None:
    result = _budget(_spec(), catalog)
    assert not result.error, result.error
    capacity, tier = fsx_size(10**12, 300)
    assert (capacity, tier) == (7200, 500)
    write_gbs = capacity / 1024 * tier / 1000  # 3.52 GB/s, narrower than 16 writers
    assert result.predicted == pytest.approx(1000 / write_gbs)
    assert result.passed, result.detail
    assert (
        "to the FSx for Lustre file system railplan provisions (PERSISTENT_2, 7,200 GiB at "
        "500 MB/s/TiB, sized from the checkpoint budgets); limited by FSx file system"
    ) in result.detail


def test_a_conservative_budget_gets_an_fsx_that_meets_its_slow_edge(catalog: Catalog) -> None:
    """railplan sizes the file system it provisions for the bound the budget tests: a budget
    that fails its own file system would send every AWS user to `aws.fsx` by hand."""
    text = _spec(max_s=600).replace(", bound: central", "")  # the default: conservative
    result = _budget(text, catalog)
    assert result.passed, result.detail
    _, slowest, _ = published_checkpoint_ratio()
    fsx = sized_fsx(load_spec_text(text, "spec.yaml").spec)
    assert fsx is not None and fsx.write_GBps * 600 >= 1e12 / 1e9 * slowest
    assert sized_fsx(load_spec_text(_spec(max_s=600), "spec.yaml").spec) != fsx  # central: 1x


def test_aws_checkpoint_budget_uses_the_users_fsx_and_can_fail(catalog: Catalog) -> None:
    fixed = "aws:\n  fsx: {storage_capacity_gib: 2400, throughput_MBps_per_TiB: 125}\n"
    result = _budget(_spec(extra=fixed), catalog)
    write_gbs = 2400 / 1024 * 125 / 1000  # 0.29 GB/s
    assert result.predicted == pytest.approx(1000 / write_gbs)
    assert not result.passed
    assert "2,400 GiB at 125 MB/s/TiB, as aws.fsx sets" in result.detail
    assert "FSx file system 0.293 GB/s" in result.detail


def test_per_client_rate_limits_few_writers(catalog: Catalog) -> None:
    """One p5 writes at most 100 Gbit/s (12.5 GB/s) to FSx, whatever the file system."""
    spec = load_spec_text(
        _spec(
            count=1,
            extra="aws:\n  fsx: {storage_capacity_gib: 96000, throughput_MBps_per_TiB: 1000}\n",
        ),
        "spec.yaml",
    ).spec
    est = checkpoint_estimate(10**12, spec, catalog, expand(spec, catalog))
    assert est.stages_gbs["1 FSx client"] == pytest.approx(12.5)
    assert est.stages_gbs["FSx file system"] == pytest.approx(93.75)


def test_the_clients_stage_says_it_is_all_of_them_together(catalog: Catalog) -> None:
    """It said "FSx per client 200 GB/s" for 16 clients of 100 Gbit/s (12.5 GB/s) each."""
    result = _budget(_spec(), catalog)
    rate = catalog.nodes["aws-p5.48xlarge"].fsx_client_gbps
    assert rate == 100  # the catalog's fact: a client without EFA, 100 Gbit/s
    assert f"16 FSx clients {16 * rate / 8:,.0f} GB/s" in result.detail, result.detail
    assert "per client" not in result.detail


def test_a_checkpoint_larger_than_the_fsx_never_lands(catalog: Catalog) -> None:
    fixed = "aws:\n  fsx: {storage_capacity_gib: 1200, throughput_MBps_per_TiB: 1000}\n"
    result = _budget(_spec(nbytes="2TB", extra=fixed), catalog)
    assert math.isinf(result.predicted) and not result.passed
    assert "FSx capacity (1,288 GB, less than the checkpoint)" in result.detail


# --- lint ----------------------------------------------------------------------------------


def test_rp061_no_longer_fires_on_an_aws_checkpoint_budget() -> None:
    findings = lint_text(_spec())
    assert [(f.rule, f.severity) for f in findings if f.rule in ("RP060", "RP061")] == [
        ("RP060", "info")
    ]
    assert not [f for f in findings if f.severity == "error"], findings


def test_rp060_fails_an_aws_checkpoint_budget_the_fsx_cannot_meet() -> None:
    fixed = "aws:\n  fsx: {storage_capacity_gib: 2400, throughput_MBps_per_TiB: 125}\n"
    errors = [f for f in lint_text(_spec(extra=fixed)) if f.severity == "error"]
    assert [f.rule for f in errors] == ["RP060"], errors


@pytest.mark.parametrize(
    "extra",
    ["", "aws:\n  fsx: {storage_capacity_gib: 2400, throughput_MBps_per_TiB: 125}\n"],
)
def test_rp061_still_fires_without_storage_on_servers_that_are_not_aws(extra: str) -> None:
    text = (
        "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
        f"{extra}budgets:\n  - checkpoint: {{bytes: 1TB, max_s: 60}}\n"
    )
    (finding,) = [f for f in lint_text(text) if f.rule == "RP061"]
    assert "no storage fabric in the spec (fabrics.storage)" in finding.message
    # the fix is lint's hint line, not part of the message (trial 7's note)
    assert finding.hint == "add fabrics.storage" and "add fabrics" not in finding.message
    assert ("aws.fsx is for AWS instance types only" in finding.message) == bool(extra)


def test_a_storage_fabric_still_wins_over_fsx_on_dgx(catalog: Catalog) -> None:
    text = (
        "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
        "fabrics:\n  storage: {switch: qm9700, filesystem_gbps: 40}\n"
        "budgets:\n  - checkpoint: {bytes: 1TB, max_s: 600}\n"
    )
    result = _budget(text, catalog)
    assert not result.error and "FSx" not in result.detail, result.detail


# --- the Pulumi program creates the file system the budget predicts with -------------------


def test_pulumi_program_provisions_the_fsx_the_budget_predicts_with(catalog: Catalog) -> None:
    config = {
        "railplan:spec": str(SPEC_FILE),
        "railplan:target": "aws",
        "railplan:availabilityZone": "us-east-1a",
        "railplan:amiId": "ami-0123456789abcdef0",
    }
    mocks = run_program(config)  # refused by lint (RP061) while FSx was unreachable
    (fsx,) = mocks.of_type(FSX_TYPE)
    declared = (int(fsx.inputs["storageCapacity"]), int(fsx.inputs["perUnitStorageThroughput"]))
    spec = load_spec(SPEC_FILE).spec
    assert provisioned_fsx(spec) == FsxLustre(*declared, "checkpoint budgets")
    (result,) = evaluate_budgets(spec, catalog, expand(spec, catalog))
    assert f"PERSISTENT_2, {declared[0]:,} GiB at {declared[1]} MB/s/TiB" in result.detail


def test_pulumi_program_provisions_the_users_fsx(tmp_path: Path) -> None:
    text = _spec(extra="aws:\n  fsx: {storage_capacity_gib: 19200, throughput_MBps_per_TiB: 250}\n")
    spec_file = tmp_path / "p5.yaml"
    spec_file.write_text(text, encoding="utf-8")
    config = {
        "railplan:spec": str(spec_file),
        "railplan:target": "aws",
        "railplan:availabilityZone": "us-east-1a",
        "railplan:amiId": "ami-0123456789abcdef0",
    }
    (fsx,) = run_program(config).of_type(FSX_TYPE)
    assert fsx.inputs["storageCapacity"] == 19200
    assert fsx.inputs["perUnitStorageThroughput"] == 250


def test_aws_fsx_alone_still_creates_the_file_system() -> None:
    text = "name: p5\nnode_groups:\n  - {name: p5, node: aws-p5.48xlarge, count: 2}\n"
    spec = load_spec_text(text, "spec.yaml").spec
    assert provisioned_fsx(spec) is None
    fixed = text + "aws:\n  fsx: {storage_capacity_gib: 4800, throughput_MBps_per_TiB: 500}\n"
    assert provisioned_fsx(load_spec_text(fixed, "spec.yaml").spec) == FsxLustre(
        4800, 500, "aws.fsx"
    )


# --- the spec key -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fsx", "message"),
    [
        ("{storage_capacity_gib: 3000, throughput_MBps_per_TiB: 250}", "use 2400 or 4800"),
        ("{storage_capacity_gib: 1000, throughput_MBps_per_TiB: 250}", "at least 1,200"),
        ("{storage_capacity_gib: 2400, throughput_MBps_per_TiB: 200}", "125, 250, 500 or 1000"),
        ("{storage_capacity_gib: 2400}", "throughput_MBps_per_TiB"),
    ],
)
def test_bad_aws_fsx_is_a_located_spec_error(fsx: str, message: str) -> None:
    text = (
        "name: p5\nnode_groups:\n  - {name: p5, node: aws-p5.48xlarge, count: 2}\n"
        f"aws:\n  fsx: {fsx}\n"
    )
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    line = caught.value.one_line()
    assert line.startswith("spec.yaml:5:") and "[aws.fsx" in line and message in line, line


def test_spec_valid_values_agree_with_the_catalog_facts() -> None:
    tiers = get_args(FsxSettings.model_fields["throughput_MBps_per_TiB"].annotation)
    assert tuple(sorted(tiers)) == tuple(sorted(FSX_TIERS))
    assert FSX_CAPACITY_FIRST == (FSX_MIN_CAPACITY_GIB, FSX_CAPACITY_STEP_GIB)
    assert FSX_CAPACITY_STEP == FSX_CAPACITY_STEP_GIB


def test_aws_instances_carry_a_sourced_fsx_client_rate(catalog: Catalog) -> None:
    aws = {k: n for k, n in catalog.nodes.items() if n.cloud == "aws"}
    assert aws and all(n.fsx_client_gbps == 100 for n in aws.values())
    for key, node in aws.items():
        ref = catalog.references[node.sources["fsx_client_gbps"]]
        assert "Uncertain" in ref.note and ref.confidence == "secondary", key
    assert all(n.fsx_client_gbps is None for n in catalog.nodes.values() if n.cloud is None)
