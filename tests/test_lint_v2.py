"""Lint v2: the checks an expert deployer expects, and the fixes to older rules.

Each new rule has a failing corpus case (tests/corpus/lint) and a passing twin in
tests/test_rules.py; this file checks the behaviour in between: boundaries, severities,
the wording of messages and hints.
"""

from __future__ import annotations

import re

import pytest

from infra.catalog import Catalog
from infra.catalog.drivers import CUDA_DRIVER_MINIMUMS, cuda_min_driver
from infra.lint.finding import Finding, Severity
from infra.render.subnet_manager import subnet_manager_files
from infra.spec import SpecValidationError, load_spec_text
from infra.topology import expand
from infra.wording import plural

from .conftest import lint_text

H100 = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
MIG_H100 = (
    "name: lab\nnode_groups:\n  - {name: infer, node: dgx-h100, count: 2, mig: x}\n"
    "mig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n"
)


def findings(text: str, rule: str) -> list[Finding]:
    return [f for f in lint_text(text) if f.rule == rule]


# --- drivers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "below", "at"),
    [
        ("11.8", "450.80.01", "450.80.02"),
        ("12.0", "525.60.12", "525.60.13"),
        ("13.0", "575.64.05", "580.0"),  # 13.x is known by branch only (>= 580)
    ],
)
def test_cuda_minimum_driver_is_exact(cuda: str, below: str, at: str) -> None:
    base = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-a100-640gb, count: 2}\n"
    spec = base + "software: {driver: '%s', cuda: '" + cuda + "'}\n"
    (found,) = findings(spec % below, "RP032")
    assert at.removesuffix(".0") in found.message and found.path == "software.driver"
    assert not findings(spec % at, "RP032")


def test_cuda_table_cites_the_release_notes() -> None:
    assert CUDA_DRIVER_MINIMUMS[12].driver == "525.60.13"
    assert all("docs.nvidia.com" in m.source for m in CUDA_DRIVER_MINIMUMS.values())
    assert cuda_min_driver("12.9") is CUDA_DRIVER_MINIMUMS[12]


def test_mig_first_driver_is_per_gpu(catalog: Catalog) -> None:
    firsts = {g: gpu.mig.min_driver for g, gpu in catalog.gpus.items() if gpu.mig}
    assert firsts["a100-sxm4-80gb"] == "450.80.02"
    assert firsts["h100-sxm5-80gb"] == "525.85.12"
    assert firsts["h200-sxm5-141gb"] == "550.90.07"
    ref = catalog.gpus["h100-sxm5-80gb"].sources["mig_min_driver"]
    assert catalog.references[ref].confidence == "primary"


def test_mig_driver_only_matters_where_mig_is_used() -> None:
    old = "software: {driver: 525.60.13, cuda: '12.0'}\nscheduler: {mig_strategy: mixed}\n"
    assert findings(MIG_H100 + old, "RP018")
    assert not findings(H100 + old, "RP018")
    disabled = MIG_H100.replace("mig: x}", "mig: disabled}")
    assert not findings(disabled + old, "RP018")


def test_an_older_branch_is_one_gpu_finding_not_also_a_mig_one() -> None:
    spec = (
        MIG_H100 + "software: {driver: 520.61.05, cuda: '11.8'}\nscheduler: {mig_strategy: mixed}\n"
    )
    rules = {f.rule for f in lint_text(spec)}
    assert "RP033" in rules and "RP018" not in rules


# --- fixes ------------------------------------------------------------------------------------


def test_mig_strategy_is_not_asked_of_slurm() -> None:
    assert findings(MIG_H100, "RP013")
    assert not findings(MIG_H100 + "scheduler: {kind: slurm}\n", "RP013")


def test_house_air_limit_warns_and_a_set_limit_is_an_error() -> None:
    hot = H100 + "site: {rack: {power_kw: 60, cooling: air%s}}\n"
    (house,) = findings(hot % "", "RP052")
    assert house.severity is Severity.WARNING and "default" in house.message
    (own,) = findings(hot % ", air_cooling_limit_kw: 50", "RP052")
    assert own.severity is Severity.ERROR and "the limit set" in own.message


def test_air_limit_checks_every_rack_class() -> None:
    spec = (
        "name: lab\nsite:\n  rack_classes:\n    hot: {power_kw: 70}\nnode_groups:\n"
        "  - {name: gpu, node: dgx-h100, count: 4, rack_class: hot}\n"
    )
    (found,) = findings(spec, "RP052")
    assert found.path == "site.rack_classes.hot.power_kw"


def test_a_too_small_cidr_asks_for_a_shorter_prefix() -> None:
    spec = H100.replace("count: 4", "count: 100") + "site: {management_cidr: 10.10.0.0/26}\n"
    hints = [f.hint for f in findings(spec, "RP053")]
    assert hints and all("shorter prefix" in h and "larger" not in h for h in hints)


def test_counted_nouns_agree() -> None:
    assert plural(1, "rack") == "1 rack" and plural(2, "rack") == "2 racks"
    assert plural(1, "host address", "host addresses") == "1 host address"
    spec = (
        "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
        "scheduler:\n  batch: kueue\n  tenants:\n    - {name: big, gpus: 33}\n"
    )
    (found,) = findings(spec, "RP070")
    assert "33 GPUs" in found.message and "32 GPUs" in found.message


# --- MIG against multi-GPU budgets -------------------------------------------------------------

TWO_GROUPS = (
    "name: lab\nnode_groups:\n  - {name: train, node: dgx-h100, count: 4}\n"
    "  - name: infer\n    node: dgx-h100\n    count: 2\n    mig: %s\n%s"
    "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n"
    "budgets:\n  - %s\n"
)
NIGHTLY = (
    "    mig_schedule:\n      changes:\n"
    '        - {at: "0 8 * * *", mig: x}\n        - {at: "0 20 * * *", mig: disabled}\n'
)


@pytest.mark.parametrize(
    "budget",
    [
        "all_reduce: {bytes: 1GiB, gpus: 16, max_ms: 50, group: infer}",
        "scaling_efficiency: {gpus: 16, min: 0.5, model_params: 7e9, group: infer}",
        "sharp_gain: {bytes: 1GiB, gpus: 16, min: 0.1, group: infer}",
        "model_fits: {model_params: 7e9, group: infer}",
    ],
)
def test_a_multi_gpu_budget_on_a_mig_group_is_an_error(budget: str) -> None:
    (found,) = findings(TWO_GROUPS % ("x", "", budget), "RP062")
    kind = budget.split(":")[0]
    assert found.path == f"budgets[0].{kind}.group" and "'infer'" in found.message
    assert "group: train" in found.hint
    assert not findings(TWO_GROUPS % ("x", "", budget.replace("infer", "train")), "RP062")


def test_a_mig_schedule_makes_the_group_mig_partitioned() -> None:
    budget = "all_reduce: {bytes: 1GiB, gpus: 16, max_ms: 50, group: infer}"
    (found,) = findings(TWO_GROUPS % ("disabled", NIGHTLY, budget), "RP062")
    assert "mig_schedule" in found.message
    # one root cause, one finding: the budget is not also reported as unevaluable
    assert "RP061" not in {f.rule for f in lint_text(TWO_GROUPS % ("x", "", budget))}


def test_a_one_gpu_model_fit_on_a_mig_group_is_fine() -> None:
    budget = "model_fits: {model_params: 1e9, gpus: 1, group: infer}"
    assert not findings(TWO_GROUPS % ("x", "", budget), "RP062")


# --- RP044 states its cost -------------------------------------------------------------------


def test_slow_ports_report_their_cost_in_predicted_bandwidth() -> None:
    spec = H100.replace("count: 4", "count: 32") + "fabrics:\n  compute: {switch: qm8700}\n"
    (found,) = findings(spec, "RP044")
    slow, fast = (float(x) for x in re.findall(r"([0-9.]+) GB/s", found.message))
    assert "\n" not in found.message and "over its 32 nodes" in found.message
    # HDR ports halve each NDR NIC: the multi-node all-reduce loses close to half
    assert 0.4 < slow / fast < 0.6


def test_one_node_has_no_fabric_cost() -> None:
    spec = H100.replace("count: 4", "count: 1") + "fabrics:\n  compute: {switch: qm8700}\n"
    (found,) = findings(spec, "RP044")
    assert "busbw" not in found.message


# --- NCCL feature gates ------------------------------------------------------------------------

SHARP_H100 = (
    "name: lab\nnode_groups:\n  - {name: gpu, node: %s, count: 32}\n"
    "fabrics:\n  compute: {switch: qm9700, sharp: true, subnet_manager: opensm}\n"
    "software: {nccl: '%s'}\n"
)


def test_collnet_only_sharp_on_hopper_is_a_warning() -> None:
    (found,) = findings(SHARP_H100 % ("dgx-h100", "2.17.1"), "RP034")
    assert found.severity is Severity.WARNING and ">= 2.18.1" in found.message
    # Ampere has no NVLS: SHARP through CollNet is all NCCL would do there anyway
    assert not findings(SHARP_H100 % ("dgx-a100-640gb", "2.17.1"), "RP034")


def test_a_budget_nvls_tree_would_speed_up_names_2_18_1_and_both_times() -> None:
    spec = SHARP_H100.replace(", sharp: true", "") + (
        "budgets:\n  - all_reduce: {bytes: 1GiB, gpus: 256, max_ms: 50}\n"
    )
    (found,) = findings(spec % ("dgx-h100", "2.17.1"), "RP034")
    assert found.severity is Severity.WARNING and ">= 2.18.1" in found.message
    assert "budgets[0].all_reduce would run nvls_tree" in found.message
    assert " ms instead of " in found.message
    assert not findings(spec % ("dgx-h100", "2.18.1"), "RP034")


def test_no_sharp_at_all_is_one_finding_not_also_a_collnet_only_one() -> None:
    (found,) = findings(SHARP_H100 % ("dgx-h100", "2.7.2"), "RP034")
    assert ">= 2.7.3" in found.message and found.severity is Severity.ERROR


# --- SHARP prerequisites ------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["updn", "ar_updn", "ftree", "ar_ftree", "auto"])
def test_sharp_accepts_the_tree_engines(engine: str) -> None:
    spec = H100 + "fabrics:\n  compute: {switch: qm9700, sharp: true, routing_engine: %s}\n"
    assert not findings(spec % engine, "RP080")


def test_a_non_tree_engine_is_fine_without_sharp() -> None:
    spec = H100 + "fabrics:\n  compute: {switch: qm9700, routing_engine: minhop}\n"
    assert not findings(spec, "RP080")


def test_the_spec_routing_engine_reaches_opensm_conf(catalog: Catalog) -> None:
    text = H100 + "fabrics:\n  compute: {switch: qm9700, subnet_manager: nvidia-opensm, %s}\n"
    chosen = load_spec_text(text % "routing_engine: ftree, sharp: true", "s.yaml").spec
    files = subnet_manager_files(expand(chosen, catalog), chosen, catalog)
    master = min(n for n in files if n.startswith("opensm-"))
    assert "routing_engine ftree" in files[master]
    assert "on-board subnet manager" in files["README.md"]
    upstream = text.replace("nvidia-opensm", "opensm")
    auto = load_spec_text(upstream % "sharp: false", "s.yaml").spec
    files = subnet_manager_files(expand(auto, catalog), auto, catalog)
    # the distributions' OpenSM has no ar_updn: auto picks updn there
    assert "routing_engine updn" in files[master]
    assert "on-board subnet manager" not in files["README.md"]


# --- power feeds -------------------------------------------------------------------------------


def test_psu_redundancy_is_in_the_catalog_with_sources(catalog: Catalog) -> None:
    h100 = catalog.nodes["dgx-h100"]
    assert (h100.psus, h100.psu_kw, h100.psus_needed) == (6, 3.3, 4)
    assert {"psus", "psu_kw", "psus_needed"} <= set(h100.sources)
    a100 = catalog.nodes["dgx-a100-640gb"]
    assert (a100.psus, a100.psus_needed) == (6, 3)


def test_one_feed_is_reported_at_the_rack_class_it_comes_from() -> None:
    spec = (
        "name: lab\nsite:\n  rack_classes:\n    lab: {pdus: 1}\nnode_groups:\n"
        "  - {name: gpu, node: dgx-h100, count: 2, rack_class: lab}\n"
        "  - {name: gpu2, node: dgx-h100, count: 2}\n"
    )
    (found,) = findings(spec, "RP059")
    assert found.path == "site.rack_classes.lab.pdus" and "4+2" in found.message
    assert "'gpu'" in found.message and "2 nodes" in found.message


def test_no_pdus_and_unsourced_psus_are_not_reported() -> None:
    assert not findings(H100 + "site: {rack: {pdus: 0}}\n", "RP059")
    hgx = "name: lab\nnode_groups:\n  - {name: gpu, node: hgx-a100-80gb, count: 2}\n"
    assert not findings(hgx + "site: {rack: {pdus: 1}}\n", "RP059")


def test_absurd_version_lengths_never_reach_the_version_rules() -> None:
    # Python refuses int() past 4,300 digits; the schema bounds each part to 8 digits, so the
    # rules' comparisons never see such a version and the one error names the rule broken
    huge = "2." + "1" * 5000
    spec = H100 + f"software: {{nccl: '{huge}', cuda: '{huge}', driver: '{huge}'}}\n"
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(spec, "s.yaml")
    assert all("at most 8 digits a part" in e.message for e in caught.value.errors)
    assert all(len(e.message) < 200 for e in caught.value.errors)
