"""Power and cost: IT power of plans (racked and cloud), PUE, cost per PFLOP-day by hand."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from infra.budget.power_cost import (
    DEFAULT_MFU,
    DEFAULT_SERVER_OVERHEAD,
    PFLOP_DAY_FLOP,
    cloud_server_kw,
    cluster_dense_tflops,
    cluster_kw,
    cost_per_pflop_day,
    facility_kw,
    it_power,
    max_rack_kw,
    plan_cost_per_pflop_day,
)
from infra.catalog import Catalog
from infra.spec import load_spec_text
from infra.spec.base import Precision
from infra.topology import Plan, expand


def plan_of(node: str, count: int, catalog: Catalog, rack_kw: float = 44.0) -> Plan:
    spec = {
        "name": "t",
        "site": {"rack": {"power_kw": rack_kw}},
        "node_groups": [{"name": "gpu", "node": node, "count": count}],
    }
    return expand(load_spec_text(yaml.safe_dump(spec)).spec, catalog)


def test_pflop_day_is_8_64e19_flop() -> None:
    # Amodei and Hernandez 2018: 10^15 FLOP/s x 86,400 s; GPT-3's 3.14e23 FLOP = 3,640 PF-days.
    assert PFLOP_DAY_FLOP == 8.64e19
    assert round(3.14e23 / PFLOP_DAY_FLOP) == 3634  # Brown et al. round to "3,640"


def test_cost_worked_example_by_hand() -> None:
    # 100 kW IT at PUE 1.5 -> 150 kW at the meter. 10,000 dense TFLOP/s at 50 % MFU delivers
    # 5 PFLOP/s, so one PFLOP-day (1 PFLOP/s for 24 h) takes 24 / 5 = 4.8 h:
    # 150 kW x 4.8 h = 720 kWh, x $0.10 = $72.00.
    c = cost_per_pflop_day(it_kw=100.0, dense_tflops=10_000.0, price_per_kwh=0.10, pue=1.5, mfu=0.5)
    assert c.facility_kw == pytest.approx(150.0)
    assert c.delivered_pflops == pytest.approx(5.0)
    assert c.hours_per_pflop_day == pytest.approx(4.8)
    assert c.kwh_per_pflop_day == pytest.approx(720.0)
    assert c.usd_per_pflop_day == pytest.approx(72.0)
    assert (c.it_kw, c.pue, c.mfu, c.price_per_kwh, c.dense_tflops) == (100.0, 1.5, 0.5, 0.10, 1e4)


def test_cost_for_one_dgx_h100_by_hand(catalog: Catalog) -> None:
    # One DGX H100: 10.2 kW (catalog max), 8 x 989.5 = 7,916 bf16 dense TFLOP/s.
    # At the default 40 % MFU: 3.1664 PFLOP/s -> 24 / 3.1664 = 7.5796 h per PFLOP-day.
    # PUE 1.3: 13.26 kW x 7.5796 h = 100.51 kWh; at $0.08/kWh = $8.04.
    plan = plan_of("dgx-h100", 1, catalog)
    c = plan_cost_per_pflop_day(plan, catalog, Precision.BF16, price_per_kwh=0.08, pue=1.3)
    assert c.it_kw == pytest.approx(10.2)
    assert c.dense_tflops == pytest.approx(7916.0)
    assert c.mfu == DEFAULT_MFU
    assert c.hours_per_pflop_day == pytest.approx(24 / 3.1664)
    assert c.kwh_per_pflop_day == pytest.approx(100.51, abs=0.01)
    assert c.usd_per_pflop_day == pytest.approx(8.04, abs=0.01)


def test_cost_energy_matches_flop_accounting() -> None:
    # Cross-check with units: energy = power x (FLOP in a PFLOP-day / delivered FLOP/s).
    c = cost_per_pflop_day(it_kw=1295.4, dense_tflops=1_005_332.0, price_per_kwh=0.12, pue=1.25)
    seconds = PFLOP_DAY_FLOP / (1_005_332.0e12 * DEFAULT_MFU)
    assert c.kwh_per_pflop_day == pytest.approx(1295.4 * 1.25 * seconds / 3600)


@given(
    st.floats(0.1, 1e5),
    st.floats(1.0, 1e7),
    st.floats(0.01, 1.0),
    st.floats(1.0, 3.0),
    st.floats(0.05, 1.0),
)
def test_cost_scales_as_expected(it: float, tflops: float, price: float, pue: float, mfu: float):
    base = cost_per_pflop_day(it, tflops, price, pue, mfu)
    assert cost_per_pflop_day(2 * it, tflops, price, pue, mfu).usd_per_pflop_day == (
        pytest.approx(2 * base.usd_per_pflop_day)
    )
    assert cost_per_pflop_day(it, 2 * tflops, price, pue, mfu).usd_per_pflop_day == (
        pytest.approx(base.usd_per_pflop_day / 2)
    )
    assert base.usd_per_pflop_day >= 0


@pytest.mark.parametrize(
    "kwargs",
    [{"mfu": 0.0}, {"mfu": 1.5}, {"pue": 0.9}, {"dense_tflops": 0.0}, {"it_kw": -1.0}],
)
def test_cost_rejects_bad_values(kwargs: dict[str, float]) -> None:
    args = {"it_kw": 10.0, "dense_tflops": 100.0, "price_per_kwh": 0.1, "pue": 1.2}
    with pytest.raises(ValueError):
        cost_per_pflop_day(**{**args, **kwargs})


def test_facility_power_is_it_times_pue() -> None:
    assert facility_kw(1000.0, 1.3) == pytest.approx(1300.0)
    with pytest.raises(ValueError):
        facility_kw(1000.0, 0.99)


def test_racked_plan_power_is_sum_of_racks(catalog: Catalog) -> None:
    plan = plan_of("dgx-h100", 8, catalog)
    power = it_power(plan, catalog)
    assert not power.is_estimate
    assert power.estimated_kw == 0.0
    assert power.total_kw == pytest.approx(sum(r.power_kw for r in plan.racks))
    assert power.total_kw == pytest.approx(8 * 10.2)
    assert cluster_kw(plan, catalog) == pytest.approx(plan.power_kw, abs=0.05)
    # 44 kW racks hold four 10.2 kW DGX H100s: 40.8 kW per rack.
    assert max_rack_kw(plan) == pytest.approx(40.8)
    assert max_rack_kw(plan) <= 44.0


def test_cloud_nodes_are_estimated_from_gpu_tdp(catalog: Catalog) -> None:
    # 16 x p4d.24xlarge: no racks, catalog max_power_kw 0. Estimate: 8 x 400 W x 1.8 = 5.76 kW
    # per instance, 92.16 kW in all.
    plan = plan_of("aws-p4d.24xlarge", 16, catalog)
    assert plan.racks == ()
    power = it_power(plan, catalog)
    assert power.is_estimate
    assert power.estimated_servers == 16
    assert power.racked_kw == 0.0
    assert power.total_kw == pytest.approx(16 * 8 * 400 * 1.8 / 1000)
    assert max_rack_kw(plan) == 0.0
    node, gpu = catalog.nodes["aws-p4d.24xlarge"], catalog.gpus["a100-sxm4-40gb"]
    assert cloud_server_kw(node, gpu) == pytest.approx(5.76)
    assert cloud_server_kw(node, gpu, 2.0) == pytest.approx(6.4)
    with pytest.raises(ValueError):
        cloud_server_kw(node, gpu, 0.5)


def test_default_overhead_matches_catalog_dgx_ratios(catalog: Catalog) -> None:
    # The default factor is documented as inferred from DGX max power / GPU TDP.
    for dgx in ("dgx-h100", "dgx-a100-640gb"):
        node = catalog.nodes[dgx]
        ratio = node.max_power_kw * 1000 / (catalog.gpus[node.gpu].tdp_w * node.gpus)
        assert 1.7 < ratio < 2.1
        assert ratio >= DEFAULT_SERVER_OVERHEAD


def test_cloud_plan_cost_uses_estimate(catalog: Catalog) -> None:
    plan = plan_of("aws-p5.48xlarge", 2, catalog)
    c = plan_cost_per_pflop_day(plan, catalog, Precision.FP8, price_per_kwh=0.1, pue=1.1, mfu=0.3)
    it_kw = 2 * 8 * 700 * DEFAULT_SERVER_OVERHEAD / 1000  # 20.16 kW
    delivered = 2 * 8 * 1979 * 0.3 / 1000  # 9.4992 PFLOP/s
    assert c.it_kw == pytest.approx(it_kw)
    assert c.usd_per_pflop_day == pytest.approx(it_kw * 1.1 * 24 / delivered * 0.1)


def test_dense_tflops_by_precision(catalog: Catalog) -> None:
    plan = plan_of("dgx-a100-640gb", 2, catalog)
    assert cluster_dense_tflops(plan, catalog, Precision.BF16) == pytest.approx(16 * 312)
    assert cluster_dense_tflops(plan, catalog, Precision.TF32) == pytest.approx(16 * 156)
    with pytest.raises(ValueError, match="fp8"):
        cluster_dense_tflops(plan, catalog, Precision.FP8)  # no FP8 on A100
    # plain FP64 (9.7 per A100); the FP64 Tensor Core 19.5 is `fp64_tensor_tflops`
    assert math.isclose(cluster_dense_tflops(plan, catalog, Precision.FP64), 16 * 9.7)
