"""The simulation section of `railplan report`, from hand-built `SimResult`s.

The engine that produces a `SimResult` is separate (`infra.simulate.engine`); these tests
test the renderer, so they build results by hand with realistic figures: a 10,000-GPU
cluster over 7 days, three tenants, 400 samples of a diurnal wave, two MIG flips a day on
three SUs, jobs that never ran. They check the page by value (each figure as formatted),
its escaping of names from user files, its determinism, an empty replay, and the page in
Debian's Chromium (the pattern of `test_report_browser`).
"""

from __future__ import annotations

import json
import math
import re
import sys
import types
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from infra.catalog import Catalog
from infra.lint import lint_loaded
from infra.report.report import report_html
from infra.report.simulation import REPARTITION_ROWS, simulation_section
from infra.simulate import Trace
from infra.simulate.compare import MigComparison
from infra.simulate.policy import SimPolicy
from infra.simulate.result import Delays, NeverRan, Repartition, SimResult, TraceSummary
from infra.spec import Spec, load_spec
from infra.topology import Plan, expand

from .cli_run import ROOT
from .test_cli import railplan
from .test_report import LAB, parse

DAY = 86400.0
GPUS = 10_000
HOSTILE = '<script>alert(1)</script> & "quoted"'


def _series(points: int = 400) -> tuple[tuple[float, int], ...]:
    """Allocated GPUs: a day/night wave (peak mid-afternoon) with a slower weekly ripple."""
    out = []
    for i in range(points):
        t = i * 7 * DAY / (points - 1)
        wave = 0.62 + 0.22 * math.sin(2 * math.pi * (t / DAY - 0.375))
        ripple = 0.04 * math.sin(2 * math.pi * t / (3.5 * DAY))
        out.append((round(t, 1), int(GPUS * (wave + ripple))))
    return tuple(out)


def _repartitions() -> tuple[Repartition, ...]:
    """infer-day at 07:00 and disabled at 19:00, one SU at a time, for 7 days: 42 events."""
    out = []
    for day in range(7):
        for hour, mig in ((7, "infer-day"), (19, "disabled")):
            for su in range(3):
                at = day * DAY + hour * 3600 + su * 1500
                out.append(
                    Repartition(at, "infer", f"su{su + 1}", mig, 20, 900.0, 180.0, su, su * 1.5)
                )
    return tuple(out)


def sample_result(**changes: object) -> SimResult:
    """A week on 10,000 GPUs; keyword arguments replace fields."""
    tenants = {
        "research": Delays(41_200, 1_310.0, 240.0, 5_400.0, 21_600.0),
        "prod-inference": Delays(88_000, 4.2, 0.0, 12.0, 45.0),
        "training": Delays(9_850, 9_000.0, 2_700.0, 43_200.0, 172_800.0),
    }
    sizes = {
        "<1 GPU": Delays(90_000, 30.0, 0.0, 60.0, 300.0),
        "1 GPU": Delays(30_000, 600.0, 120.0, 3_600.0, 7_200.0),
        "2-8 GPUs": Delays(15_000, 1_800.0, 600.0, 7_200.0, 14_400.0),
        "9-256 GPUs": Delays(3_900, 7_200.0, 3_000.0, 28_800.0, 86_400.0),
        ">256 GPUs": Delays(150, 36_000.0, 21_600.0, 172_800.0, 259_200.0),
    }
    never = tuple(
        NeverRan(f"job-{i}", 100 + i, reason)
        for i, reason in enumerate(
            ["asks for 16,384 GPUs; the cluster has 10,000"] * 4
            + ["GPU model h200 is not in the cluster"] * 9
            + ["asks for 3g.40gb; no MIG layout has it"]
        )
    )
    result = SimResult(
        trace=TraceSummary(
            "traces/week.csv", "railplan", 140_000, 139_064, {"no GPU": 880, "zero duration": 56}
        ),
        gpus=GPUS,
        horizon_s=7 * DAY,
        window_s=7 * DAY,
        allocation_mean=0.6134,
        allocation_p50=0.6071,
        allocation_p95=0.8622,
        allocation_by_group={"train": 0.701, "infer": 0.452},
        allocation_by_tenant={"research": 0.21, "prod-inference": 0.17, "training": 0.2334},
        queueing=tenants,
        queueing_by_size=sizes,
        fragmentation=0.0412,
        preemptions=1_234,
        reclaims=87,
        lost_gpu_hours=5_678.9,
        repartitions=_repartitions(),
        never_ran=never,
        series=_series(),
        profile_24h=tuple(
            0.62 + 0.22 * math.sin(2 * math.pi * (h + 0.5 - 9) / 24) for h in range(24)
        ),
        energy_kwh=1_234_567.0,
        energy_saved_kwh=45_678.0,
        notes=("time 0 is midnight UTC: the trace states relative times",),
    )
    return replace(result, **changes)  # type: ignore[arg-type]


def _cells(html: str, header: str) -> list[str]:
    """The cells of the table row headed ``header`` (escaped as on the page)."""
    match = re.search(rf'<tr><th scope="row">{re.escape(header)}</th>(.*?)</tr>', html)
    assert match, header
    return re.findall(r"<td[^>]*>(.*?)</td>", match.group(1))


@pytest.fixture(scope="module")
def section() -> str:
    return simulation_section(sample_result())


def test_the_summary_states_the_figures(section: str) -> None:
    parse(section)
    assert _cells(section, "allocation") == ["mean 61.3%, p50 60.7%, p95 86.2%"]
    assert _cells(section, "rows") == ["140,000: 139,064 used, 936 skipped"]
    assert _cells(section, "skipped") == ["no GPU: 880; zero duration: 56"]
    assert _cells(section, "cluster") == ["10,000 GPUs over 7 d 0 h"]
    assert _cells(section, "fragmentation")[0].startswith("4.1%")
    assert _cells(section, "preemptions") == ["1,234 preemptions, 87 reclaims"]
    assert _cells(section, "lost GPU-hours") == ["5,678.9; repartitions: 63.0"]
    assert _cells(section, "energy")[0].startswith("1,234,567 kWh used; 45,678 kWh saved (3.6%")
    assert _cells(section, "by tenant") == [
        "prod-inference: 17.0%, research: 21.0%, training: 23.3%"
    ]
    assert "time 0 is midnight UTC" in section


def test_a_span_just_short_of_whole_days_rounds_to_them() -> None:
    # 2 days less 10 s read "1 d 24 h" before the hours were rounded ahead of the split
    result = sample_result(horizon_s=2 * DAY - 10, window_s=2 * DAY - 10)
    section = simulation_section(result)
    assert _cells(section, "cluster") == ["10,000 GPUs over 2 d 0 h"]
    assert _cells(section, "trace window (the shares)") == ["2 d 0 h"]


def test_queueing_per_tenant_and_size_by_value(section: str) -> None:
    assert _cells(section, "research") == ["41,200", "21.8 min", "4 min", "1.5 h", "6 h"]
    assert _cells(section, "training") == ["9,850", "2.5 h", "45 min", "12 h", "2 d"]
    assert _cells(section, "prod-inference") == ["88,000", "4.2 s", "0 s", "12 s", "45 s"]
    assert _cells(section, "&gt;256 GPUs") == ["150", "10 h", "6 h", "2 d", "3 d"]
    rows = re.findall(r'<tr><th scope="row">([^<]*)</th><td class="num">[\d,]+</td>', section)
    assert rows[:3] == ["prod-inference", "research", "training"]  # tenants by name
    assert rows[3:] == ["&lt;1 GPU", "1 GPU", "2-8 GPUs", "9-256 GPUs", "&gt;256 GPUs"]


def test_the_queueing_plot_has_three_bars_per_tenant_on_a_log_scale(section: str) -> None:
    page = parse(section)
    (chart,) = [e for e in page.all("svg") if "Queueing delay" in e.attrs["aria-label"]]
    bars = [
        e for e in page.all("rect") if chart in e.parents and e.attrs.get("class", "")[:1] == "q"
    ]
    assert [b.attrs["class"] for b in bars] == ["q50", "q95", "q99"] * 3
    assert "research: p95 1.5 h over 41,200 jobs" in page.texts
    research = [float(b.attrs["width"]) for b in bars[3:6]]
    assert research == sorted(research) and research[0] > 0
    assert float(bars[1].attrs["width"]) < float(bars[4].attrs["width"])  # 12 s < 1.5 h
    assert float(bars[0].attrs["width"]) == 0  # p50 of 0 s: no bar, its label stays
    for label in ("1 s", "1 min", "1 h", "1 d", "7 d"):
        assert label in page.texts, label
    assert "30 d" not in page.texts  # the axis ends at the first tick past the longest p99


def test_the_allocation_plot_has_the_series_the_cluster_and_the_repartitions(section: str) -> None:
    page = parse(section)
    (curve,) = page.all("polyline", **{"class": "sim-alloc"})
    points = [tuple(map(float, p.split(","))) for p in curve.attrs["points"].split()]
    assert len(points) == 400 and [x for x, _ in points] == sorted(x for x, _ in points)
    capacity, _legend = page.all("line", **{"class": "sim-capacity"})
    assert float(capacity.attrs["y1"]) == float(capacity.attrs["y2"])  # across the plot
    peak = min(y for _, y in points)  # SVG y grows downwards: the peak is the smallest y
    assert float(capacity.attrs["y1"]) < peak  # 10,000 GPUs sit above every sample
    assert "cluster: 10,000 GPUs" in page.texts
    marks = page.all("path", **{"class": "repart"})
    assert len(marks) == 14 + 1  # 14 flips of 3 SUs each 25 min apart, and the legend
    assert any(t.startswith("3 MIG repartitions, day 2 07:00 to day 2 07:50") for t in page.texts)
    for day in range(1, 8):
        assert f"day {day}" in page.texts


def test_the_24h_profile_has_a_bar_per_hour_by_value(section: str) -> None:
    page = parse(section)
    hours = page.all("rect", **{"class": "hour"})
    assert len(hours) == 24
    share = 0.62 + 0.22 * math.sin(2 * math.pi * (14 + 0.5 - 9) / 24)
    assert f"14:00-15:00: {share:.1%} of GPUs allocated" in page.texts
    heights = [float(h.attrs["height"]) for h in hours]
    assert heights.index(max(heights)) == 14 and heights.index(min(heights)) == 2
    assert "mean 61.3%" in page.texts


def test_repartitions_show_the_first_rows_and_count_the_rest(section: str) -> None:
    table = section.split('<table class="repartitions">')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td", table)
    assert len(rows) == REPARTITION_ROWS == 20
    assert "The first 20 of 42 repartitions; 22 more" in section
    first = re.findall(r"<td[^>]*>(.*?)</td>", table.split("<tbody>")[1].split("</tr>")[0])
    assert first == ["day 1 07:00", "infer", "su1", "<code>infer-day</code>", "20", "15 min",
                     "3 min", "0", "0.0"]  # fmt: skip


def test_never_ran_is_grouped_by_reason_most_frequent_first(section: str) -> None:
    table = section.split('<table class="never-ran">')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td>(.*?)</td><td class=\"num\">(.*?)</td><td>(.*?)</td></tr>", table)
    assert [(r, n) for r, n, _ in rows] == [
        ("GPU model h200 is not in the cluster", "9"),
        ("asks for 16,384 GPUs; the cluster has 10,000", "4"),
        ("asks for 3g.40gb; no MIG layout has it", "1"),
    ]
    assert rows[0][2] == "job-4 (line 104), job-5 (line 105), job-6 (line 106), …"
    assert rows[2][2] == "job-13 (line 113)"


def test_names_from_user_files_are_escaped() -> None:
    hostile = sample_result(
        trace=TraceSummary(HOSTILE, "railplan", 10, 9, {HOSTILE: 1}),
        queueing={HOSTILE: Delays(9, 60.0, 60.0, 60.0, 60.0)},
        allocation_by_tenant={HOSTILE: 0.5},
        never_ran=(NeverRan(HOSTILE, 3, HOSTILE),),
        repartitions=(Repartition(3600.0, HOSTILE, HOSTILE, HOSTILE, 1, 1.0, 1.0, 0, 0.0),),
        notes=(HOSTILE,),
    )
    html = simulation_section(hostile, title=HOSTILE)
    assert "<script" not in html and '"quoted"' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;quoted&#34;" in html
    page = parse(html)
    assert not page.all("script")
    assert sum(HOSTILE in t for t in page.texts) >= 8  # each place shows it, as text


def test_the_same_result_gives_the_same_bytes(section: str) -> None:
    assert simulation_section(sample_result()) == section
    reordered = sample_result(queueing=dict(reversed(sample_result().queueing.items())))
    assert simulation_section(reordered) == section  # tenants are listed by name


def test_an_empty_replay_renders_and_says_so() -> None:
    empty = sample_result(
        trace=TraceSummary("empty.csv", "railplan", 3, 0, {"GPU model the cluster lacks": 3}),
        horizon_s=0.0,
        window_s=0.0,
        allocation_mean=math.nan,
        allocation_p50=math.nan,
        allocation_p95=math.nan,
        allocation_by_group={},
        allocation_by_tenant={},
        queueing={},
        queueing_by_size={},
        fragmentation=0.0,
        preemptions=0,
        reclaims=0,
        lost_gpu_hours=0.0,
        repartitions=(),
        never_ran=(),
        series=(),
        profile_24h=(),
        energy_kwh=0.0,
        energy_saved_kwh=0.0,
        notes=(),
    )
    html = simulation_section(empty)
    page = parse(html)
    assert "No job of the trace ran on this cluster" in html
    assert not page.all("svg") and not re.search(r"\bnan\b", html, re.IGNORECASE)
    assert _cells(html, "allocation") == ["mean —, p50 —, p95 —"]
    assert "No MIG repartition happened" in html and "Every job of the trace could run" in html


def test_unknown_figures_show_as_a_dash_never_nan() -> None:
    profile = (math.nan, *sample_result().profile_24h[1:])
    tenants = {"idle": Delays(0, math.nan, math.nan, math.nan, math.nan)}
    html = simulation_section(sample_result(profile_24h=profile, queueing_by_size=tenants))
    assert not re.search(r"\bnan\b", html, re.IGNORECASE)
    assert _cells(html, "idle") == ["0", "—", "—", "—", "—"]
    assert "00:00-01:00: no figure" in parse(html).texts


def test_a_short_replay_ticks_hours_not_days() -> None:
    short = sample_result(
        horizon_s=12 * 3600.0,
        window_s=12 * 3600.0,
        series=tuple((t * 600.0, 5_000 + t * 10) for t in range(73)),
        repartitions=(),
    )
    page = parse(simulation_section(short))
    assert {"day 1", "03:00", "06:00", "09:00", "12:00"} <= set(page.texts)
    assert not page.all("path", **{"class": "repart"})


def test_the_report_has_the_section_before_lint_only_when_given(catalog: Catalog) -> None:
    loaded = load_spec(str(LAB))
    plan = expand(loaded.spec, catalog)
    findings = lint_loaded(loaded, catalog)
    without = report_html(loaded.spec, catalog, plan, findings)
    html = report_html(loaded.spec, catalog, plan, findings, simulation=sample_result())
    page = parse(html)
    ids = [e.attrs["id"] for e in page.all("section")]
    assert ids[-2:] == ["simulation", "lint"]
    assert [e.attrs["href"][1:] for e in page.all("a")] == ids
    assert simulation_section(sample_result()) in html
    assert 'id="simulation"' not in without and 'href="#simulation"' not in without


# --- in a real browser --------------------------------------------------------------------


def test_the_section_renders_in_chromium(catalog: Catalog, tmp_path: Path) -> None:
    """The lab's report with the week's replay, in Debian's Chromium (as test_report_browser)."""
    from .test_report_browser import (
        _MEASURE,
        A4_CSS_PX,
        _gray_variance,
        _require_browser,
        _shots_dir,
        opened,
    )

    _require_browser()
    loaded = load_spec(str(LAB))
    plan = expand(loaded.spec, catalog)
    findings = lint_loaded(loaded, catalog)
    html = tmp_path / "simulation.html"
    declared = sample_result()
    variants = MigComparison(
        {
            "no MIG": sample_result(allocation_mean=0.655, repartitions=()),
            "static MIG": sample_result(allocation_mean=0.679, repartitions=()),
            "day/night MIG": declared,
        },
        ("infer",),
    )
    html.write_text(
        report_html(loaded.spec, catalog, plan, findings, simulation=declared, variants=variants)
    )
    shots = _shots_dir(tmp_path)
    svg_count = html.read_text().count("<svg ")
    with opened(html) as (page, browser, console, requests):
        section = page.locator("section#simulation")
        shot = section.screenshot(path=str(shots / "simulation-section.png"))
        page.locator("table.variants").screenshot(path=str(shots / "mig-variants.png"))
        plots = page.evaluate(_SIM_PLOTS)
        screen = page.evaluate(_MEASURE)
        table = page.evaluate(_VARIANTS_TABLE)
        page.emulate_media(media="print")
        page.set_viewport_size({"width": A4_CSS_PX, "height": 1123})
        printed = page.evaluate(_MEASURE)
        printed_table = page.evaluate(_VARIANTS_TABLE)
        pdf = page.pdf(path=str(shots / "simulation.pdf"), format="A4")
        variance = _gray_variance(browser, shot)
    print(f"screenshot and PDF of the simulation section: {shots}")
    assert console == []
    assert requests == [html.as_uri()]
    assert variance > 100, f"the section is blank (gray variance {variance:.1f})"
    assert len(screen["svgs"]) == svg_count > 0
    assert all(w > 10 and h > 10 for w, h in screen["svgs"]), screen["svgs"]
    assert screen["sections"][-2:] == ["simulation", "lint"]
    assert len(plots) == 3, plots
    for label, width, height, drawn in plots:
        assert width > 300 and height > 150 and drawn > 0, (label, width, height, drawn)
    assert printed["widest"] <= A4_CSS_PX, "an SVG is wider than the printed page"
    # the MIG comparison: a label and three variant columns, not wider than the section
    for measured in (table, printed_table):
        assert measured["columns"] == 4, measured
        assert measured["right"] <= measured["section"] + 0.5, measured
    assert pdf.startswith(b"%PDF")


# Each plot of the section: its label, its size on screen, and how many of its bars, curves
# and markers have a visible size (an empty or collapsed plot would have none).
_SIM_PLOTS = """() => [...document.querySelectorAll('section#simulation svg')].map((s) => {
  const r = s.getBoundingClientRect();
  const drawn = [...s.querySelectorAll('polyline, rect.hour, rect.q95, path.repart')].filter(
    (e) => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; });
  return [s.getAttribute('aria-label'), r.width, r.height, drawn.length];
})"""


# The MIG comparison table: its columns, and its right edge against the section's.
_VARIANTS_TABLE = """() => {
  const t = document.querySelector('table.variants');
  return {
    columns: t.querySelectorAll('thead th').length,
    right: t.getBoundingClientRect().right,
    section: document.querySelector('section#simulation').getBoundingClientRect().right,
  };
}"""


# --- railplan report --trace ----------------------------------------------------------------


@dataclass
class FakeEngine:
    """Stands in for `infra.simulate.engine`: records the calls the report makes.

    The trace is read for real and the fake returns the week's result with the trace's own
    summary, so the section's figures are known; the real engine's figures are checked
    against `railplan simulate` in `test_report_and_simulate_print_the_same_replay`.
    """

    calls: list[tuple[tuple[object, ...], dict[str, object]]] = field(default_factory=list)

    def simulate(self, *args: object, **kwargs: object) -> SimResult:
        self.calls.append((args, kwargs))
        trace = args[3]
        assert isinstance(trace, Trace)
        summary = TraceSummary(trace.source, trace.format, trace.rows, trace.used, trace.skipped)
        return sample_result(trace=summary)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    fake = FakeEngine()
    module = types.ModuleType("infra.simulate.engine")
    module.simulate = fake.simulate  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "infra.simulate.engine", module)
    return fake


TRACE = """id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model
a,0,3600,8,1000,research,normal,
b,60,600,1,250,prod-inference,high,
c,120,60,0,1000,research,low,
"""


def test_report_trace_adds_the_replay(engine: FakeEngine, tmp_path: Path) -> None:
    trace, out = tmp_path / "week.csv", tmp_path / "lab.html"
    trace.write_text(TRACE)
    result = railplan("report", str(LAB), "-o", str(out), "--trace", str(trace))
    assert result.returncode == 0, result.stderr
    # the lab splits its infer group statically: replayed without MIG, then as declared
    assert len(engine.calls) == 2
    migs = []
    for args, kwargs in engine.calls:
        spec, plan, catalog, jobs = args
        assert isinstance(spec, Spec) and isinstance(plan, Plan) and isinstance(catalog, Catalog)
        assert isinstance(jobs, Trace) and [j.id for j in jobs.jobs] == ["a", "b"]
        assert isinstance(kwargs["policy"], SimPolicy) and callable(kwargs["progress"])
        migs.append({g.name: g.mig for g in spec.node_groups})
    assert migs[0] == {"train": "disabled", "infer": "disabled"}
    assert migs[1] == {g.name: g.mig for g in load_spec(str(LAB)).spec.node_groups}
    html = out.read_text()
    assert "<h3>MIG variants on the same trace</h3>" in html
    assert "as declared (static MIG)" in html
    assert 'href="#simulation"' in html
    assert _cells(html, "rows") == ["3: 2 used, 1 skipped"] and _cells(html, "skipped") == [
        "no GPU: 1"
    ]
    assert f"{trace} (railplan-csv)" in html


def test_report_without_a_trace_runs_no_replay(engine: FakeEngine, tmp_path: Path) -> None:
    out = tmp_path / "lab.html"
    assert railplan("report", str(LAB), "-o", str(out)).returncode == 0
    assert engine.calls == [] and 'id="simulation"' not in out.read_text()


def test_report_with_a_bad_trace_exits_2_and_writes_nothing(
    engine: FakeEngine, tmp_path: Path
) -> None:
    trace, out = tmp_path / "bad.csv", tmp_path / "lab.html"
    trace.write_text(TRACE.replace("b,60,600", "b,sixty,600"))
    result = railplan("report", str(LAB), "-o", str(out), "--trace", str(trace))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"{trace}:3" in result.stderr, result.stderr
    assert not out.exists() and engine.calls == []
    same = railplan("report", str(LAB), "-o", str(trace), "--trace", str(trace))
    assert same.returncode == 2 and "same file as input" in same.stderr


def test_report_and_simulate_print_the_same_replay(tmp_path: Path) -> None:
    # The real engine, on a spec with a checkpoint budget (which sets the replay's
    # checkpoint write time): the report's section and `railplan simulate` agree.
    spec = ROOT / "examples" / "k8s-tenants.yaml"
    trace, out = tmp_path / "day.csv", tmp_path / "tenants.html"
    trace.write_text(TRACE.replace("prod-inference", "serving"))
    result = railplan("report", str(spec), "-o", str(out), "--trace", str(trace))
    assert result.returncode == 0, result.stderr
    replayed = railplan("simulate", str(spec), "--trace", str(trace), "--format", "json")
    doc = json.loads(replayed.stdout)
    mean = doc["allocation"]["mean"]
    assert 0 < mean < 1
    (allocation,) = _cells(out.read_text(), "allocation")
    assert allocation.startswith(f"mean {mean:.1%}")
