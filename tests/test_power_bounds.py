"""Power as stated bounds: typical to maximum draw, PSU ratings named, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.budget.budget_result import BudgetResult
from infra.budget.checkpoint_term import SERIALISATION_GBPS_PER_NODE
from infra.budget.evaluate import evaluate_budgets
from infra.budget.power_bounds import rack_bounds
from infra.catalog import load_catalog
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.topology import expand

ROOT = Path(__file__).resolve().parents[1]
SPEC = """
name: a100-pw
node_groups:
  - {name: dgx, node: dgx-a100-640gb, count: 40}
fabrics:
  compute: {switch: qm8790, su_size: 20, rail_optimized: true, oversubscription: 1}
budgets:
  - cluster_power: {max_kw: 10000}
  - rack_power: {max_kw: 100}
"""


@pytest.mark.parametrize("example", ["dgx-a100-superpod.yaml", "dgx-h100-superpod.yaml"])
def test_rack_bounds_reproduce_the_planned_rack_power(example: str) -> None:
    spec = load_spec(ROOT / "examples" / example).spec
    catalog = load_catalog()
    plan = expand(spec, catalog)
    bounds = rack_bounds(spec, catalog, plan)
    for rack in plan.racks:
        assert bounds[rack.name].max_kw == pytest.approx(rack.power_kw, abs=0.01)
        assert bounds[rack.name].typical_kw <= bounds[rack.name].max_kw


def test_power_budgets_name_the_psu_rating_and_test_the_maximum() -> None:
    spec = load_spec_text(SPEC).spec
    catalog = load_catalog()
    cluster, rack = evaluate_budgets(spec, catalog, expand(spec, catalog))
    assert cluster.bound == "conservative" and cluster.tested == cluster.band_high
    assert "PSU rating of qm8790 (an upper bound" in cluster.detail
    assert "no sourced typical draw for dgx-a100-640gb, qm8790" in cluster.detail
    assert rack.band_low <= rack.band_high == rack.predicted


def test_device_power_overrides_the_catalog_figures_for_the_budgets() -> None:
    base = load_spec_text(SPEC).spec
    text = SPEC.replace(
        "name: a100-pw",
        "name: a100-pw\nsite: {device_power: {qm8790: {typical_kw: 0.35, max_kw: 0.64}}}",
    )
    spec = load_spec_text(text).spec
    catalog = load_catalog()
    before = evaluate_budgets(base, catalog, expand(base, catalog))[0]
    after = evaluate_budgets(spec, catalog, expand(spec, catalog))[0]
    switches = sum(1 for s in expand(spec, catalog).switches if s.model == "qm8790")
    assert before.predicted - after.predicted == pytest.approx(switches * (1.1 - 0.64), abs=0.01)
    assert after.band_high - after.band_low == pytest.approx(switches * (0.64 - 0.35), abs=0.01)
    assert "site.device_power for qm8790" in after.detail and "PSU rating" not in after.detail


def test_device_power_refuses_typical_above_maximum() -> None:
    with pytest.raises(SpecValidationError, match="exceeds max_kw"):
        load_spec_text(
            SPEC.replace(
                "name: a100-pw",
                "name: a100-pw\nsite: {device_power: {qm8790: {typical_kw: 2, max_kw: 1}}}",
            )
        )


def test_device_power_must_name_a_catalog_device() -> None:
    text = SPEC.replace(
        "name: a100-pw", "name: a100-pw\nsite: {device_power: {qm8799: {max_kw: 1}}}"
    )
    spec = load_spec_text(text).spec
    catalog = load_catalog()
    result = evaluate_budgets(spec, catalog, expand(spec, catalog))[0]
    assert result.verdict == "error" and "qm8799" in result.error and "qm8790" in result.error_text


def _checkpoint_budgets(storage: str) -> tuple[BudgetResult, BudgetResult]:
    """A sharded and a replica (model parallel 64: 8 nodes) save of 2.45 TB on 40 DGX A100."""
    text = SPEC.replace(
        "  compute: {switch: qm8790",
        f"  storage: {storage}\n  compute: {{switch: qm8790",
    ).replace(
        "  - cluster_power: {max_kw: 10000}\n  - rack_power: {max_kw: 100}\n",
        "  - checkpoint: {bytes: 2.45TB, max_s: 600}\n"
        "  - checkpoint: {bytes: 2.45TB, max_s: 600, writers: replica, model_parallel: 64}\n",
    )
    spec = load_spec_text(text).spec
    catalog = load_catalog()
    sharded, replica = evaluate_budgets(spec, catalog, expand(spec, catalog))
    return sharded, replica


def test_checkpoint_writers_and_per_client_rate_limit_the_write() -> None:
    # "2.45 TB in 6.1 s" was once the filesystem alone, as if every server wrote.
    # A replica checkpoint (rank 0 of each model shard) writes from one replica's nodes, and
    # fabrics.storage.client_GBps caps what one node writes (here below the serialisation
    # rate, so the client rate is the limit).
    sharded, replica = _checkpoint_budgets(
        "{switch: qm8790, filesystem_gbps: 400, client_GBps: 0.5}"
    )
    assert sharded.predicted == pytest.approx(2450 / min(40 * 0.5, 400), rel=1e-3)  # 40 clients
    assert replica.predicted == pytest.approx(2450 / (8 * 0.5), rel=1e-3)  # 8 nodes write
    # the stage is all the writing nodes' client rates together, and says how many
    assert "8 filesystem clients 4 GB/s" in replica.detail, replica.detail
    assert "rank 0 of each model shard" in replica.detail and "per client" not in replica.detail
    assert "held-out published checkpoints took" in sharded.detail
    assert sharded.fit is not None and sharded.fit.nearest == "bloom-176b-384"


def test_checkpoint_writers_serialise_at_the_fitted_per_node_rate() -> None:
    # A checkpoint's time was once its I/O stages alone, so 8 DGX A100 writing 2.45 TB to
    # a 400 GB/s filesystem took 6.4 s, their 64 storage NICs' rate; published saves from few
    # writers (torch.save of 20 GB from one rank in 32 s on a disk that took it in 3.4 s)
    # take far longer. Each writing node now serialises at the fitted per-node rate.
    sharded, replica = _checkpoint_budgets("{switch: qm8790, filesystem_gbps: 400}")
    assert replica.predicted == pytest.approx(2450 / (8 * SERIALISATION_GBPS_PER_NODE), rel=1e-3)
    assert "limited by writers' serialisation" in replica.detail
    assert sharded.predicted == pytest.approx(2450 / (40 * SERIALISATION_GBPS_PER_NODE), rel=1e-3)
    assert replica.band_low is not None and replica.band_high is not None
    assert replica.band_low < replica.predicted < replica.band_high
