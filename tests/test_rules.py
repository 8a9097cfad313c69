"""Lint rules: a passing case beside each failing corpus case, and the engine's contracts."""

from __future__ import annotations

import pytest

from infra.catalog import Catalog
from infra.lint.engine import all_rules, rule, select_rules
from infra.lint.finding import Severity

from .conftest import lint_text

BASE = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
A100 = "name: lab\nnode_groups:\n  - {name: infer, node: dgx-a100-640gb, count: 2, mig: x}\n"
# A100 with a day/night MIG schedule: `x` by day, whole GPUs by night (as in the design sketch).
SCHEDULED = (
    "name: lab\nnode_groups:\n  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n"
    "    mig: x\n    mig_schedule:\n      changes:\n"
    '        - {at: "0 8 * * *", mig: x}\n        - {at: "0 20 * * *", mig: disabled}\n'
)
MIG_X = "mig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n"
AUTOSCALED = (
    "scheduler:\n  kind: kubernetes\n  mig_strategy: mixed\n  batch: kueue\n  tenants:\n"
    "    - {name: serving, gpus: 8,\n"
    "       autoscale: {deployment: llm, group: infer, min_replicas: 1, max_replicas: 4}}\n"
)
TENANTS = (
    "scheduler:\n  batch: kueue\n  tenants:\n"
    "    - {name: research, gpus: 24, priority: high}\n    - {name: serving, gpus: 8}\n"
)


def rule_ids(text: str, catalog: Catalog | None = None) -> set[str]:
    return {f.rule for f in lint_text(text, catalog)}


# (rule, a spec that must NOT trigger it) -- the fixed twin of the corpus case.
PASSING = {
    "RP001": BASE,
    "RP002": BASE + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP003": A100
    + "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n",
    "RP004": BASE + "  - {name: gpu2, node: dgx-h100, count: 2}\n",
    # the hostnames g1, g2 and the group names g, x never meet
    "RP005": "name: lab\nnode_groups:\n  - {name: g, node: dgx-h100, count: 2, hostname: 'g{index}'}\n"
    "  - {name: x, node: dgx-h100, count: 2, hostname: 'x{index}'}\n",
    # a name near it: `defaults`
    "RP006": "name: lab\nnode_groups:\n  - {name: defaults, node: dgx-h100, count: 4}\n",
    "RP007": BASE + "site:\n  device_power:\n    dgx-h100: {typical_kw: 8.0, max_kw: 10.2}\n",
    "RP008": "name: lab\nnode_groups:\n  - {name: gpu, node: aws-p4d.24xlarge, count: 2}\n"
    "aws:\n  fsx: {storage_capacity_gib: 2400, throughput_MBps_per_TiB: 125}\n"
    "site:\n  device_power:\n    aws-p4d.24xlarge: {typical_kw: 4.0, max_kw: 6.0}\n",
    "RP010": A100
    + "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n",
    "RP011": A100 + "scheduler: {mig_strategy: mixed}\n"
    "mig_layouts:\n  x: {profiles: {4g.40gb: 1, 3g.40gb: 1}}\n",
    "RP012": A100
    + "scheduler: {mig_strategy: single}\nmig_layouts:\n  x: {profiles: {3g.40gb: 2}}\n",
    "RP013": A100
    + "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {7g.80gb: 1}}\n",
    "RP014": "name: lab\nnode_groups:\n  - name: infer\n    node: dgx-h100\n    count: 1\n"
    "    mig: [{gpus: [0, 7], layout: x}]\nscheduler: {mig_strategy: mixed}\n"
    "mig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n",
    "RP015": BASE,
    "RP016": SCHEDULED + "scheduler: {kind: kubernetes, mig_strategy: mixed}\n" + MIG_X,
    "RP017": SCHEDULED + "scheduler: {mig_strategy: mixed}\n" + MIG_X,
    # 12 h apart; one change's Job may run 55 min (one batch: 30m drain + 15 + 10 min)
    "RP019": SCHEDULED + "scheduler: {kind: kubernetes, mig_strategy: mixed}\n" + MIG_X,
    # the driver at exactly each minimum passes (H100 MIG needs 525.85.12, CUDA 12.x 525.60.13)
    "RP018": "name: lab\nnode_groups:\n  - {name: infer, node: dgx-h100, count: 2, mig: x}\n"
    "software: {driver: 525.85.12, cuda: '12.0'}\nscheduler: {mig_strategy: mixed}\n" + MIG_X,
    "RP032": BASE + "software: {driver: 525.60.13, cuda: '12.4'}\n",
    "RP033": BASE + "software: {driver: 525.60.13, cuda: '11.8'}\n",
    # open at exactly the first open branch (R515)
    "RP035": "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-a100-640gb, count: 2}\n"
    "software: {driver: 515.43.04, cuda: '11.7', gpu_kernel_modules: open}\n",
    # DCGM 4 on Slurm (the exporter package's pairing), and DCGM 3 on Kubernetes (the GPU
    # Operator's exporter embeds its own DCGM)
    "RP036": BASE + "scheduler: {kind: slurm}\nsoftware: {dcgm: 4.2.3}\n",
    # the same MIG group on Kubernetes, whose device plugin reads MIG itself
    "RP037": A100
    + "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n",
    "RP020": BASE + "budgets:\n  - scaling_efficiency: {gpus: 32, min: 0.9, model_params: 7e9, "
    "precision: fp8}\n",
    "RP030": BASE + "software: {driver: 550.90.07, fabric_manager: 550.90.07}\n",
    "RP031": BASE + "software: {fabric_manager: auto}\n",
    # each NCCL feature gate at exactly its first release
    "RP034": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true, subnet_manager: opensm}\n"
    "software: {nccl: 2.18.1}\nbudgets:\n  - all_reduce: {bytes: 1GiB, gpus: 32, max_ms: 50}\n",
    "RP084": BASE + "fabrics:\n  compute: {switch: qm9700, subnet_manager: nvidia-opensm}\n",
    "RP040": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true, rail_optimized: true}\n",
    "RP041": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true, subnet_manager: opensm}\n",
    "RP042": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true}\n",
    "RP043": BASE + "fabrics:\n  compute: {switch: qm9700, subnet_manager: switch}\n",
    "RP044": BASE + "fabrics:\n  compute: {switch: qm9790}\n",
    "RP045": BASE + "fabrics:\n  compute: {switch: qm9700, spines: 4}\n",
    "RP046": BASE + "fabrics:\n  compute: {switch: qm9700, su_size: 32}\n",
    "RP047": BASE + "fabrics:\n  compute: {switch: qm9700, spines: 8}\n",
    "RP048": BASE + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP049": BASE + "fabrics:\n  compute: {switch: qm9700, planes: 8}\n",
    "RP050": BASE + "site: {rack: {power_kw: 10.2}}\n",
    "RP055": BASE + "site: {rack: {power_kw: 12}}\nfabrics:\n  compute: {switch: qm9700}\n",
    "RP059": BASE + "site: {rack: {pdus: 2}}\n",
    "RP060": BASE,
    "RP061": BASE,
    "RP062": BASE
    + "  - {name: infer, node: dgx-h100, count: 2, mig: x}\nscheduler: {mig_strategy: mixed}\n"
    + MIG_X
    + "budgets:\n  - all_reduce: {bytes: 1GiB, gpus: 16, max_ms: 50, group: gpu}\n"
    "  - model_fits: {model_params: 1e9, gpus: 1, group: infer}\n",
    "RP080": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true, routing_engine: ftree}\n",
    "RP081": BASE + "fabrics:\n  compute: {switch: qm9700, subnet_manager: opensm, "
    "routing_engine: updn}\n",
    "RP082": BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true, "
    "subnet_manager: nvidia-opensm}\n",
    "RP083": BASE + "fabrics:\n  compute: {switch: qm9700, subnet_manager: opensm}\n",
    "RP070": BASE + TENANTS + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP071": BASE + TENANTS + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP072": BASE + TENANTS + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP073": BASE + "scheduler: {batch: volcano}\nfabrics:\n  compute: {switch: qm9700}\n",
    # names near the reserved ones: `kube` alone, `monitoring-team`, `defaults`
    "RP074": BASE + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: kueue\n"
    "  tenants:\n    - {name: kube, gpus: 8}\n    - {name: monitoring-team, gpus: 8}\n"
    "    - {name: defaults, gpus: 8}\n",
    # a cluster whose name only contains "system", and one named system with no tenants
    "RP075": "name: gpu-system\n"
    + BASE.split("\n", 1)[1]
    + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: kueue\n"
    "  tenants:\n    - {name: research, gpus: 8, priority: high}\n",
    # Volcano with HyperNodes and tenants, neither preempt nor reclaim rendered
    "RP076": BASE + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: volcano\n"
    "  preemption: {reclaim: never, within_tenant: never}\n  tenants:\n"
    "    - {name: research, gpus: 24, priority: high, borrowing_limit: 8}\n"
    "    - {name: serving, gpus: 8}\n",
    "RP077": BASE + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: kueue\n"
    "  tenants:\n    - {name: serving, gpus: 8,\n"
    "       autoscale: {deployment: llm, group: gpu, max_replicas: 4}}\n",
    "RP079": BASE + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: kueue\n"
    "  tenants:\n    - {name: serving, gpus: 8,\n"
    "       autoscale: {deployment: llm, group: gpu, min_replicas: 1, max_replicas: 4}}\n",
    # the other tenant lends one GPU: enough to borrow
    "RP078": BASE + "fabrics:\n  compute: {switch: qm9700}\nscheduler:\n  batch: kueue\n"
    "  tenants:\n    - {name: research, gpus: 24, borrowing_limit: 8}\n"
    "    - {name: serving, gpus: 8, lending_limit: 1}\n",
    "RP056": BASE + "fabrics:\n  compute: {switch: qm9700}\n",
    "RP057": BASE + "fabrics:\n  compute: {switch: qm9700, subnet_manager: ufm}\n",
    "RP058": BASE + "fabrics:\n  compute: {switch: qm9700, max_sus: 3}\n",
    "RP051": BASE + "site: {rack: {units: 8}}\n",
    "RP052": BASE + "site: {rack: {power_kw: 80, cooling: liquid}}\n",
    "RP053": BASE + "site: {management_cidr: 10.10.0.0/29}\n",
    "RP054": BASE + "site: {management_cidr: 10.10.0.0/16, bmc_cidr: 10.11.0.0/16}\n",
    # a group that exists; suspend_time exactly one power cycle (5m + 15m); three of four
    # servers may power off
    "RP090": BASE + "scheduler:\n  kind: slurm\n  power_saving: {exclude_groups: [gpu]}\n",
    "RP091": BASE + "scheduler:\n  kind: slurm\n  power_saving: {suspend_time: 20m}\n",
    "RP092": BASE + "scheduler:\n  kind: slurm\n  power_saving: {}\n",
    "RP093": BASE + "software: {os: ubuntu-24.04}\nscheduler:\n  kind: slurm\n  power_saving: {}\n",
    # by night GPU 0 of each server stays 7 x 1g.10gb: the slices exist at every hour
    "RP107": SCHEDULED.replace("mig: disabled}", "mig: [{gpus: [0], layout: x}]}")
    + "fabrics:\n  compute: {switch: qm8790}\n"
    + AUTOSCALED
    + MIG_X,
}


def test_every_rule_has_a_passing_case() -> None:
    assert set(PASSING) == {r.id for r in all_rules()}


@pytest.mark.parametrize(("rule_id", "text"), sorted(PASSING.items()))
def test_passing_case(rule_id: str, text: str) -> None:
    assert rule_id not in rule_ids(text)


def test_rp042_fires_on_a_switch_without_sharp(catalog: Catalog) -> None:
    # No InfiniBand switch in the shipped catalog lacks SHARP, so build one that does.
    plain = catalog.switches["qm9700"].model_copy(update={"sharp": False, "sharp_flows": 0})
    custom = catalog.model_copy(update={"switches": {**catalog.switches, "qm9700": plain}})
    spec = BASE + "fabrics:\n  compute: {switch: qm9700, sharp: true}\n"
    assert "RP042" in rule_ids(spec, custom)
    assert "RP042" not in rule_ids(spec, catalog)


def test_air_cooling_limit_can_be_raised_for_a_rated_hall() -> None:
    hot = BASE + "site: {rack: {power_kw: 60, cooling: air%s}}\n"
    assert "RP052" in rule_ids(hot % "")
    assert "RP052" not in rule_ids(hot % ", air_cooling_limit_kw: 75")


def test_single_strategy_accepts_one_profile_everywhere() -> None:
    text = A100 + "scheduler: {mig_strategy: single}\nmig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n"
    assert rule_ids(text) == set()


def test_compute_instance_profiles_are_understood() -> None:
    text = (
        A100 + "scheduler: {mig_strategy: mixed}\nmig_layouts:\n  x: {profiles: {1c.3g.40gb: 3}}\n"
    )
    assert rule_ids(text) == set()


def test_rules_document_why_and_fix() -> None:
    for r in all_rules():
        assert r.id.startswith("RP") and len(r.id) == 5
        assert "Why:" in r.doc and "Fix:" in r.doc, r.id
        assert r.summary.endswith("."), r.id


def test_selection_by_id_prefix_and_name() -> None:
    assert {r.id for r in select_rules(["RP01"])} == {
        r.id for r in all_rules() if r.id.startswith("RP01")
    }
    assert [r.id for r in select_rules(["air-cooling-exceeded"])] == ["RP052"]
    assert "RP052" not in {r.id for r in select_rules(ignore=["RP05"])}


def test_duplicate_rule_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        rule("RP001", "another", Severity.ERROR, "Duplicate.")(lambda ctx: iter(()))


def test_findings_are_sorted_and_deterministic() -> None:
    text = (
        "name: lab\nsite: {rack: {power_kw: 8, units: 6}}\nnode_groups:\n"
        "  - {name: a, node: dgx-h100, count: 4}\n  - {name: b, node: dgx-h10, count: 2}\n"
    )
    first, second = lint_text(text), lint_text(text)
    assert first == second == sorted(first)
    assert [f.rule for f in first] == ["RP050", "RP051", "RP001"]


def test_scheduled_spec_and_tenants_lint_clean() -> None:
    assert rule_ids(SCHEDULED + "scheduler: {mig_strategy: mixed}\n" + MIG_X) == set()
    tenants = BASE + TENANTS + "fabrics:\n  compute: {switch: qm9700}\n"
    assert {f.rule for f in lint_text(tenants) if f.severity is not Severity.INFO} == set()


def test_a_schedule_finding_lands_on_its_change() -> None:
    text = SCHEDULED.replace("mig: disabled}", "mig: y}") + "scheduler: {mig_strategy: mixed}\n"
    (finding,) = [f for f in lint_text(text + MIG_X) if f.rule == "RP003"]
    assert finding.path == "node_groups[0].mig_schedule.changes[1].mig"
    assert (finding.line, finding.column) == (10, 30)
    assert text.splitlines()[finding.line - 1][finding.column - 1 :] == "mig: y}"


def test_a_layout_only_a_schedule_uses_is_used() -> None:
    text = SCHEDULED.replace("mig: x}", "mig: z}") + "scheduler: {mig_strategy: mixed}\n"
    layouts = MIG_X + "  z: {profiles: {7g.80gb: 1}}\n"
    assert rule_ids(text + layouts) == set()
    assert "RP015" in rule_ids(text + layouts + "  w: {profiles: {7g.80gb: 1}}\n")


def test_single_strategy_accepts_a_schedule_of_single_profile_values() -> None:
    text = SCHEDULED.replace("mig: x}", "mig: z}") + "scheduler: {mig_strategy: single}\n"
    assert rule_ids(text + MIG_X + "  z: {profiles: {3g.40gb: 2}}\n") == set()
    mixed = MIG_X + "  z: {profiles: {3g.40gb: 1, 4g.40gb: 1}}\n"
    (finding,) = [f for f in lint_text(text + mixed) if f.rule == "RP012"]
    assert finding.path == "node_groups[0].mig_schedule.changes[0].mig"


def test_a_schedule_back_to_mig_is_a_change() -> None:
    # mig -> x at 8, disabled at 20: the first change equals `mig` but the schedule cycles.
    assert "RP017" not in rule_ids(SCHEDULED + "scheduler: {mig_strategy: mixed}\n" + MIG_X)
    same = SCHEDULED.replace("mig: disabled}", "mig: [{gpus: all, layout: x}]}")
    findings = [f for f in lint_text(same + "scheduler: {mig_strategy: mixed}\n" + MIG_X)]
    assert [(f.rule, f.path) for f in findings] == [("RP017", "node_groups[0].mig_schedule")]


def test_one_oversized_tenant_is_an_error_not_also_an_overcommit() -> None:
    text = (
        BASE + TENANTS.replace("gpus: 24", "gpus: 240") + "fabrics:\n  compute: {switch: qm9700}\n"
    )
    assert {"RP070"} == {f.rule for f in lint_text(text) if f.severity is not Severity.INFO}


def test_quota_totals_note_mig_gpus() -> None:
    text = SCHEDULED + "scheduler:\n  mig_strategy: mixed\n  batch: kueue\n  tenants:\n"
    text += "    - {name: a, gpus: 10}\n    - {name: b, gpus: 10}\n" + MIG_X
    text += "fabrics:\n  compute: {switch: qm8790}\n"
    (finding,) = [f for f in lint_text(text) if f.rule == "RP071"]
    assert "sum to 20 GPUs (a 10 + b 10)" in finding.message
    assert "16 GPUs; 16 of them are in node groups that use MIG" in finding.message


def test_quotas_are_not_checked_against_unknown_nodes() -> None:
    text = BASE.replace("dgx-h100", "dgx-h10") + TENANTS.replace("gpus: 24", "gpus: 240")
    assert rule_ids(text) & {"RP070", "RP071"} == set()


def test_rp035_refuses_proprietary_modules_on_a_gpu_that_needs_open(catalog: Catalog) -> None:
    """No catalog GPU needs the open modules yet (Grace Hopper, Blackwell do): mark H100 so."""
    h100 = catalog.gpus["h100-sxm5-80gb"].model_copy(update={"open_kernel_modules": "required"})
    needs_open = catalog.model_copy(update={"gpus": {**catalog.gpus, "h100-sxm5-80gb": h100}})
    proprietary = BASE + "software: {gpu_kernel_modules: proprietary}\n"
    assert "RP035" in rule_ids(proprietary, needs_open)
    assert "RP035" not in rule_ids(proprietary, catalog)  # H100 only recommends open
    assert "RP035" not in rule_ids(BASE + "software: {gpu_kernel_modules: auto}\n", needs_open)


def test_rp107_wants_one_mig_profile_at_every_hour() -> None:
    fabric = "fabrics:\n  compute: {switch: qm8790}\n"
    nightly_whole = SCHEDULED + fabric + AUTOSCALED + MIG_X
    assert "RP107" in rule_ids(nightly_whole)
    # with the single strategy a slice is nvidia.com/gpu, which whole GPUs serve at night too
    assert "RP107" not in rule_ids(
        nightly_whole.replace("mig_strategy: mixed", "mig_strategy: single")
    )
    # slices by day and by night, but of no one profile: whichever the pods ask for is gone
    # at some hours
    disjoint = (
        SCHEDULED.replace("mig: disabled}", "mig: y}")
        + fabric
        + AUTOSCALED
        + MIG_X
        + "  y: {profiles: {3g.40gb: 2}}\n"
    )
    (finding,) = [f for f in lint_text(disjoint) if f.rule == "RP107"]
    assert "no profile is in every scheduled layout" in finding.message
    # a tenant that does not autoscale asks for nothing around the clock
    plain = "    - {name: serving, gpus: 8}\n"
    assert "RP107" not in rule_ids(nightly_whole.replace(AUTOSCALED.split("tenants:\n")[1], plain))
