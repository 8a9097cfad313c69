"""A cluster without MIG, with MIG held static and as declared: the variants and their replays.

`infra.simulate.variants` builds the variants, `infra.simulate.compare` the side-by-side
table; `railplan simulate --compare-mig` prints it and `railplan report --trace` shows it.
The replay figures are worked out by hand on one DGX A100 whose GPU 0 is split into seven
1g.10gb slices until 01:00 (a day/night schedule), with seven fractional jobs and one 7-GPU
job submitted at once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infra.report.report import report_html
from infra.simulate.compare import TENANT_ROWS, MigComparison, comparison_rows
from infra.simulate.policy import SimPolicy
from infra.simulate.result import Delays, SimResult
from infra.simulate.variants import DAY_NIGHT, NO_MIG, STATIC, mig_variants, split_groups
from infra.spec import Spec, load_spec
from infra.topology import expand
from tests.cli_run import ROOT, run_cli
from tests.sim_helpers import catalog, group_spec, job, replay, spec_of, starts

from .test_report_simulate import _cells, sample_result

TENANTS_SPEC = ROOT / "examples" / "k8s-tenants.yaml"  # infer: infer-day by day, whole by night
LAB_SPEC = ROOT / "examples" / "a100-lab-mig.yaml"  # infer: split per GPU, no schedule
PLAIN_SPEC = ROOT / "examples" / "aws-p4d.yaml"  # no MIG anywhere

SMALL = 'mig_layouts: {small: {profiles: {"1g.10gb": 7}}}\nscheduler: {mig_strategy: mixed}\n'
DAY_NIGHT_GROUP = (
    ", mig: [{gpus: [0], layout: small}], mig_schedule: {timezone: UTC, drain_timeout: 10m, "
    'changes: [{at: "0 1 * * *", mig: disabled}]}'
)
POLICY = SimPolicy(checkpoint_interval_s=1800, checkpoint_write_s=60)
# seven 0.1-GPU jobs of 2 h (one 1g.10gb slice each) and a 7-GPU job of 10 min, all at 0
JOBS = [job(f"f{i}", 0, 7200, 1, milli=100, tenant="serving") for i in range(7)]
JOBS.append(job("w", 0, 600, 7, tenant="research"))


def _groups(spec: Spec) -> dict[str, tuple[object, bool]]:
    return {g.name: (g.mig, g.mig_schedule is not None) for g in spec.node_groups}


def test_a_day_night_spec_has_three_variants_with_the_intended_mig() -> None:
    spec = load_spec(str(TENANTS_SPEC)).spec
    variants = mig_variants(spec, catalog())
    assert list(variants) == [NO_MIG, STATIC, DAY_NIGHT]
    assert _groups(variants[NO_MIG]) == {"train": ("disabled", False), "infer": ("disabled", False)}
    assert _groups(variants[STATIC]) == {
        "train": ("disabled", False),
        "infer": ("infer-day", False),
    }
    assert variants[DAY_NIGHT] is spec
    # everything but MIG is the spec's own
    for variant in variants.values():
        assert variant.model_dump(exclude={"node_groups"}) == spec.model_dump(
            exclude={"node_groups"}
        )
        assert Spec.model_validate(variant.model_dump(mode="json")) == variant


def test_every_variant_plans_to_the_same_servers_and_fabric() -> None:
    spec = load_spec(str(TENANTS_SPEC)).spec
    plans = [expand(v, catalog()) for v in mig_variants(spec, catalog()).values()]
    names = [[s.name for s in p.servers] for p in plans]
    assert names[0] and names[0] == names[1] == names[2]
    assert plans[0].cables == plans[1].cables == plans[2].cables
    split = [p.groups["infer"].mig_split for p in plans]
    assert split == [False, True, True]


def test_static_mig_holds_the_state_with_the_most_slices_per_node() -> None:
    # `big` is two 3g.40gb per GPU on all 8 GPUs: 16 slices a node; `small` seven 1g.10gb on
    # GPUs 0-3 only: 28 slices. Counted per GPU (not per layout), `small` holds more.
    layouts = 'mig_layouts: {big: {profiles: {"3g.40gb": 2}}, small: {profiles: {"1g.10gb": 7}}}\n'
    schedule = (
        ", mig: big, mig_schedule: {timezone: UTC, changes: ["
        '{at: "0 7 * * *", mig: [{gpus: [0, 1, 2, 3], layout: small}]}, '
        '{at: "0 21 * * *", mig: disabled}]}'
    )
    variants = mig_variants(group_spec(2, layouts, schedule), catalog())
    (held,) = variants[STATIC].node_groups
    assert [(a.gpus, a.layout) for a in held.mig] == [([0, 1, 2, 3], "small")]  # type: ignore[union-attr]
    assert held.mig_schedule is None
    # on a tie the first state in spec order wins: `mig`, before the changes
    tie = ", mig: big, mig_schedule: {changes: [{at: '0 7 * * *', mig: big2}]}"
    two = 'mig_layouts: {big: {profiles: {"3g.40gb": 2}}, big2: {profiles: {"2g.20gb": 2}}}\n'
    (first,) = mig_variants(group_spec(1, two, tie), catalog())[STATIC].node_groups
    assert first.mig == "big"


def test_a_group_mig_disabled_until_its_schedule_splits_it_is_held_split() -> None:
    # `mig` is left unset (disabled) and only the schedule splits: static MIG sets it
    schedule = ", mig_schedule: {changes: [{at: '0 7 * * *', mig: small}]}"
    spec = group_spec(1, SMALL, schedule)
    assert "mig" not in spec.node_groups[0].model_fields_set
    variants = mig_variants(spec, catalog())
    assert _groups(variants[STATIC]) == {"gpu": ("small", False)}
    assert _groups(variants[NO_MIG]) == {"gpu": ("disabled", False)}


def test_static_only_spec_is_its_own_static_variant_and_plain_spec_has_none() -> None:
    lab = load_spec(str(LAB_SPEC)).spec
    variants = mig_variants(lab, catalog())
    assert list(variants) == [NO_MIG, STATIC] and variants[STATIC] is lab
    assert _groups(variants[NO_MIG])["infer"] == ("disabled", False)
    assert split_groups(lab, catalog()) == ("infer",)
    assert mig_variants(load_spec(str(PLAIN_SPEC)).spec, catalog()) == {}
    # a layout declared but used by no group is no MIG either
    assert mig_variants(group_spec(1, SMALL), catalog()) == {}


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[dict[str, float | None], SimResult]]:
    """Each variant's job starts and result on the small day/night cluster."""
    variants = mig_variants(group_spec(1, SMALL, DAY_NIGHT_GROUP), catalog())
    out = {}
    for name, spec in variants.items():
        run, result = replay(spec, JOBS, POLICY)
        out[name] = (starts(run), result)
    return out


@pytest.fixture(scope="module")
def replays(
    runs: dict[str, tuple[dict[str, float | None], SimResult]],
) -> dict[str, SimResult]:
    return {name: result for name, (_, result) in runs.items()}


def test_no_mig_runs_fractions_on_whole_gpus_and_the_big_job_waits(
    runs: dict[str, tuple[dict[str, float | None], SimResult]],
) -> None:
    started, r = runs[NO_MIG]
    # seven fractions take GPUs 0-6 for 2 h; w (7 GPUs) waits for them beside one free GPU
    assert started["w"] == 7200.0
    assert r.horizon_s == 7800.0 and r.repartitions == ()
    assert r.allocation_mean == pytest.approx((7 * 7200 + 7 * 600) / (8 * 7800), abs=1e-6)
    assert r.fragmentation == pytest.approx(7200 / (8 * 7800), abs=1e-6)
    assert r.queueing["research"].p95_s == 7200.0


def test_static_mig_puts_the_fractions_on_slices_of_one_gpu(
    replays: dict[str, SimResult],
) -> None:
    r = replays[STATIC]
    assert r.repartitions == () and r.horizon_s == 7200.0
    assert r.queueing["research"].p95_s == 0.0  # GPUs 1-7 are whole and free
    # seven 1/7 slices hold one GPU's worth for 2 h: 1/8 of the node
    assert r.allocation_by_tenant["serving"] == pytest.approx(7200 / (8 * 7200), abs=1e-6)
    assert r.allocation_mean == pytest.approx((7200 + 7 * 600) / (8 * 7200), abs=1e-6)


def test_day_night_mig_evicts_the_fractions_at_the_change_and_reruns_them_whole(
    replays: dict[str, SimResult],
) -> None:
    r = replays[DAY_NIGHT]
    (rep,) = r.repartitions
    # 01:00: 10 min drain, evicted at 4,200 s; GPU 0 leaves MIG mode (reset: 60 + 600 s)
    assert (rep.at_s, rep.drain_s, rep.reconfigure_s, rep.evicted_jobs) == (3600.0, 600.0, 660.0, 7)
    # each lost 600 s of 1/7 GPU since its checkpoint at 3,660 s; then 3,600 s left from 4,860
    assert rep.lost_gpu_hours == pytest.approx(7 * 600 / 7 / 3600, abs=1e-5)
    assert r.horizon_s == 8460.0
    gpu_s = 7 * 600 + 4200 + 7 * 3600  # w; slices until the eviction; whole GPUs after
    assert r.allocation_mean == pytest.approx(gpu_s / (8 * 8460), abs=1e-6)
    # 4,200-4,860 s: seven jobs wait and the node's 8 GPUs are out of service
    assert r.fragmentation == pytest.approx(8 * 660 / (8 * 8460), abs=1e-6)


def _comparison(replays: dict[str, SimResult]) -> MigComparison:
    return MigComparison({n: replays[n] for n in (NO_MIG, STATIC, DAY_NIGHT)}, ("gpu",))


def test_the_comparison_rows_carry_the_figures(replays: dict[str, SimResult]) -> None:
    rows = dict(comparison_rows(_comparison(replays)))
    assert rows["allocation, mean over the trace window"] == ("87.5 %", "19.8 %", "49.6 %")
    assert rows["allocation, node group gpu"] == ("87.5 %", "19.8 %", "49.6 %")
    assert rows["p95 queueing, tenant research"] == ("2 h", "0 s", "0 s")
    assert rows["p95 queueing, jobs of 2-8 GPUs"] == ("2 h", "0 s", "0 s")  # the largest
    assert rows["fragmentation"] == ("11.5 %", "0.0 %", "7.8 %")
    assert rows["GPU-hours lost to re-partitioning"] == ("0.0", "0.0", "0.2")
    assert rows["re-partitions (SU changes)"] == ("0", "0", "1")
    down = f"{(600 + 660) / 3600:.1f}"  # one SU: 10 min drain and 11 min reset
    assert rows["SU-hours draining or reconfiguring"] == ("0.0", "0.0", down)


def test_many_tenants_show_the_worst_one_per_variant() -> None:
    tenants = {f"t{i}": Delays(1, 0.0, 0.0, 60.0 * i, 0.0) for i in range(TENANT_ROWS + 1)}
    few = {"t1": Delays(1, 0.0, 0.0, 90.0, 0.0)}
    results = {"a": sample_result(queueing=tenants), "b": sample_result(queueing=few)}
    rows = dict(comparison_rows(MigComparison(results, ())))
    assert rows["p95 queueing, worst tenant"] == ("6 min (t6)", "1.5 min (t1)")
    assert not any(label.startswith("p95 queueing, tenant") for label in rows)


def test_the_report_shows_the_comparison_by_value_and_escapes_names(
    replays: dict[str, SimResult],
) -> None:
    spec = spec_of("node_groups: [{name: gpu, node: dgx-a100-640gb, count: 1}]\n")
    plan = expand(spec, catalog())
    hostile = '<b>"x"</b>'
    results = dict(_comparison(replays).results) | {hostile: replays[STATIC]}
    html = report_html(
        spec, catalog(), plan, [], [], replays[DAY_NIGHT], MigComparison(results, ("gpu",))
    )
    assert "<h3>MIG variants on the same trace</h3>" in html
    assert "as declared (day/night MIG)" in html
    head = html.split('<table class="variants">')[1].split("</thead>")[0]
    assert "&lt;b&gt;&#34;x&#34;&lt;/b&gt;" in head and hostile not in html
    assert _cells(html, "allocation, mean over the trace window") == [
        "87.5 %",
        "19.8 %",
        "49.6 %",
        "19.8 %",
    ]
    assert _cells(html, "GPU-hours lost to re-partitioning") == ["0.0", "0.0", "0.2", "0.0"]
    without = report_html(spec, catalog(), plan, [], [], replays[DAY_NIGHT])
    assert "MIG variants" not in without


HEADER = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"
TRACE = "a,0,3600,8,1000,research,normal,\nc,120,600,1,250,serving,normal,\n"


def _trace(tmp_path: Path) -> str:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + TRACE, encoding="utf-8")
    return str(path)


def test_cli_compare_mig_json_has_each_variant_and_the_same_bytes_twice(tmp_path: Path) -> None:
    args = ("simulate", str(TENANTS_SPEC), "--trace", _trace(tmp_path), "--compare-mig")
    first, second = run_cli(*args, "-f", "json"), run_cli(*args, "-f", "json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert list(doc) == ["variants"]
    assert set(doc["variants"]) == {NO_MIG, STATIC, DAY_NIGHT}
    plain = json.loads(
        run_cli("simulate", str(TENANTS_SPEC), "--trace", _trace(tmp_path), "-f", "json").stdout
    )
    assert doc["variants"][DAY_NIGHT] == plain  # the spec as declared is the plain replay
    for variant in doc["variants"].values():
        assert set(variant) == set(plain)
    assert doc["variants"][NO_MIG]["repartitions"] == []


def test_cli_compare_mig_text_is_the_side_by_side_table(tmp_path: Path) -> None:
    result = run_cli("simulate", str(TENANTS_SPEC), "--trace", _trace(tmp_path), "--compare-mig")
    assert result.returncode == 0, result.stderr
    head, *rows = result.stdout.splitlines()
    assert head.split() == ["no", "MIG", "static", "MIG", "day/night", "MIG"]
    assert any(r.startswith("allocation, node group infer") for r in rows)
    assert rows[-1] == f"trace {tmp_path / 'trace.csv'}: 2 of 2 rows replayed on each"


def test_cli_compare_mig_without_mig_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("simulate", str(PLAIN_SPEC), "--trace", _trace(tmp_path), "--compare-mig")
    assert result.returncode == 2
    assert "--compare-mig needs a node group that splits GPUs with MIG" in result.stderr


def test_cli_report_with_a_trace_shows_the_variants_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run_cli("report", str(TENANTS_SPEC), "-o", str(out), "--trace", _trace(tmp_path))
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    head = html.split('<table class="variants">')[1].split("</thead>")[0]
    assert re.findall(r'<th scope="col" class="num">(.*?)</th>', head) == [
        NO_MIG,
        STATIC,
        DAY_NIGHT,
    ]
    # the trace ends at 01:02 on a Monday in Berlin: no change fires (07:00 and 21:00)
    assert _cells(html, "re-partitions (SU changes)") == ["0", "0", "0"]
    assert "as declared (day/night MIG)" in html
