"""`railplan report`: properties of the HTML page, not snapshots.

Every rack, server, switch and PDU of a plan is on the page at its rack unit; every budget
has its row and verdict; the page parses as balanced HTML with no script and no external
reference; the same spec gives the same bytes; free text from the spec is escaped; the
command's exit codes follow the contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from infra.budget.evaluate import evaluate_budgets
from infra.catalog import Catalog
from infra.lint import lint_loaded
from infra.report.fabric import DETAIL_MAX_SERVERS
from infra.report.racks import unit_y
from infra.report.report import report_html
from infra.spec import LoadedSpec, load_spec, load_spec_text
from infra.topology import Plan, expand

from .conftest import ROOT, TESTS
from .test_cli import railplan

LAB = ROOT / "examples" / "a100-lab-mig.yaml"
SKETCH = TESTS / "data" / "design-sketch.yaml"  # air and liquid racks, a MIG schedule, budgets
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "area", "base", "col", "source"}
SVG_EMPTY = {"rect", "line", "polyline", "path", "circle"}  # may be written <x/>: we never do


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parents: tuple[Element, ...]


@dataclass
class Page(HTMLParser):
    """A strict parse: every element closed in order, every attribute and text kept."""

    elements: list[Element] = field(default_factory=list)
    stack: list[Element] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, tuple(self.stack))
        self.elements.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise AssertionError(f"self-closing <{tag}/>: write it out")

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"</{tag}> closes nothing"
        opened = self.stack.pop()
        assert opened.tag == tag, f"</{tag}> closes <{opened.tag}>"

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def all(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag and all(e.attrs.get(k) == v for k, v in attrs.items())
        ]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    assert not page.stack, f"unclosed: {[e.tag for e in page.stack]}"
    return page


@dataclass(frozen=True)
class Report:
    loaded: LoadedSpec
    plan: Plan
    html: str
    page: Page


def build(loaded: LoadedSpec, catalog: Catalog) -> Report:
    plan = expand(loaded.spec, catalog)
    html = report_html(loaded.spec, catalog, plan, lint_loaded(loaded, catalog))
    return Report(loaded, plan, html, parse(html))


@pytest.fixture(scope="module", params=[LAB, SKETCH], ids=["lab", "sketch"])
def report(request: pytest.FixtureRequest, catalog: Catalog) -> Report:
    return build(load_spec(str(request.param)), catalog)


def _rack_groups(page: Page) -> dict[str, Element]:
    return {e.attrs["data-rack"]: e for e in page.all("g") if "data-rack" in e.attrs}


def _devices(page: Page) -> dict[str, Element]:
    return {e.attrs["data-name"]: e for e in page.all("rect") if "data-u" in e.attrs}


def test_every_rack_is_drawn_with_its_cooling(report: Report) -> None:
    racks = _rack_groups(report.page)
    assert set(racks) == {r.name for r in report.plan.racks}
    for rack in report.plan.racks:
        classes = racks[rack.name].attrs["class"].split()
        assert rack.cooling in classes and int(racks[rack.name].attrs["data-units"]) == rack.units
        assert f"{rack.power_kw:g}" in {
            e.attrs.get("data-power-kw")
            for e in report.page.all("text")
            if racks[rack.name] in e.parents
        }


def test_every_racked_device_stands_at_its_rack_unit(report: Report, catalog: Catalog) -> None:
    racks, devices = _rack_groups(report.page), _devices(report.page)
    placed = [
        (s.name, s.rack, s.rack_unit, catalog.nodes[s.node].rack_units) for s in report.plan.servers
    ]
    placed += [(w.name, w.rack, w.rack_unit, w.units) for w in report.plan.switches]
    assert {name for name, *_ in placed} <= set(devices)
    for name, rack_name, unit, units in placed:
        device, rack = devices[name], report.plan.rack(str(rack_name))
        group = racks[rack.name]
        assert group in device.parents, f"{name} drawn outside rack {rack.name}"
        assert (int(device.attrs["data-u"]), int(device.attrs["data-units"])) == (unit, units)
        top = float(group.attrs["data-top"])
        assert float(device.attrs["y"]) == pytest.approx(unit_y(top, rack.units, int(unit), units))


def test_every_pdu_stands_in_its_rack(report: Report) -> None:
    racks = _rack_groups(report.page)
    drawn = {e.attrs["data-name"]: e for e in report.page.all("rect") if "data-feed" in e.attrs}
    assert set(drawn) == {p.name for p in report.plan.pdus}
    for pdu in report.plan.pdus:
        assert racks[pdu.rack] in drawn[pdu.name].parents
        assert drawn[pdu.name].attrs["data-feed"] == pdu.feed


def test_air_and_liquid_racks_are_told_apart() -> None:
    css = (ROOT / "templates" / "report" / "report.css").read_text()
    assert re.search(r"\.rack\.liquid \.rack-body \{[^}]*fill", css)
    assert re.search(r"\.rack \.rack-body \{[^}]*fill", css)


def test_the_sketch_has_both_kinds_of_rack(catalog: Catalog) -> None:
    report = build(load_spec(str(SKETCH)), catalog)
    kinds = {e.attrs["class"].split()[1] for e in _rack_groups(report.page).values()}
    assert kinds == {"air", "liquid"}
    assert "liquid · 43/48U" in report.html  # the words say it too, for a black-and-white print


def test_the_page_is_self_contained(report: Report) -> None:
    tags = {e.tag for e in report.page.elements}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    for e in report.page.elements:
        assert "src" not in e.attrs and not any(k.startswith("on") for k in e.attrs)
        assert "xmlns" not in e.attrs
        for value in e.attrs.values():
            assert not re.match(r"\s*(https?:|//|javascript:|data:)", value, re.IGNORECASE), value
        if "href" in e.attrs:
            assert e.attrs["href"].startswith("#")
    for text in ("http:", "https:", "//", "url(", "@import", "<script"):
        assert text not in report.html.lower(), text


def test_the_sections_are_there(report: Report) -> None:
    ids = [e.attrs["id"] for e in report.page.all("section")]
    assert ids == [
        "summary", "bom", "racks", "fabric", "mig", "budgets", "collectives", "training", "lint",
    ]  # fmt: skip
    anchors = [e.attrs["href"][1:] for e in report.page.all("a")]
    assert anchors == ids


def test_every_budget_has_its_verdict_and_headroom(catalog: Catalog) -> None:
    text = SKETCH.read_text().replace("max_ms: 15", "max_ms: 0.5").replace("max_s: 240", "max_s: 1")
    loaded = load_spec_text(text, "sketch.yaml")
    report = build(loaded, catalog)
    results = evaluate_budgets(loaded.spec, catalog, report.plan)
    assert {r.passed for r in results} == {True, False}
    rows = {e.attrs["data-path"]: e for e in report.page.all("tr") if "data-path" in e.attrs}
    assert set(rows) == {r.path for r in results}
    for r in results:
        assert rows[r.path].attrs["class"] == ("pass" if r.passed else "fail")
        assert f"{r.margin:+.1%}" in report.html


def test_the_training_step_of_a_scaling_budget(catalog: Catalog) -> None:
    report = build(load_spec(str(SKETCH)), catalog)
    assert "budgets[1].scaling_efficiency" in report.html
    assert report.page.all("svg", **{"class": "step"})
    lab = build(load_spec(str(LAB)), catalog)
    assert not lab.page.all("svg", **{"class": "step"})
    assert "declares no" in lab.html


def test_a_model_scaling_budget_draws_the_training_model_step(catalog: Catalog) -> None:
    # the same numbers as the budget: the page must not fall back to the data-parallel model
    loaded = load_spec(str(SKETCH))
    report = build(loaded, catalog)
    results = evaluate_budgets(loaded.spec, catalog, report.plan)
    (result,) = [r for r in results if r.kind == "scaling_efficiency"]
    assert loaded.spec.budgets[1].scaling_efficiency.uses_train_model  # type: ignore[union-attr]
    (bar,) = report.page.all("svg", **{"class": "step"})
    tips = {e.attrs["class"] for e in report.page.all("rect") if bar in e.parents}
    assert {"st-compute", "st-tp", "st-bubble", "st-exposed"} <= tips
    assert f"Scaling efficiency {result.predicted:.1%} against one replica" in report.html


def test_busbw_curves_for_every_collective_with_ceilings(report: Report) -> None:
    (chart,) = report.page.all("svg", **{"class": "chart"})
    curves = [e for e in report.page.all("polyline") if chart in e.parents]
    assert len(curves) == 5
    for curve in curves:
        points = [tuple(map(float, p.split(","))) for p in curve.attrs["points"].split()]
        assert len(points) == 31 and [x for x, _ in points] == sorted(x for x, _ in points)
    labels = " ".join(report.page.texts)
    assert "NVLink 12 × 20 = 240 GB/s" in labels and "NICs 8 × 24 = 192 GB/s" in labels
    for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"):
        assert name in labels


def test_mig_layout_per_gpu_and_schedule(catalog: Catalog) -> None:
    lab = build(load_spec(str(LAB)), catalog)
    columns = [e.attrs["data-layout"] for e in lab.page.all("rect") if "data-gpu" in e.attrs]
    assert columns == list(lab.plan.servers_in("infer")[0].mig)
    sketch = build(load_spec(str(SKETCH)), catalog)
    assert "Asia/Shanghai" in sketch.html
    assert sketch.page.all("svg", **{"class": "mig-day"})  # daily changes: a 24-hour strip
    drawn = {e.attrs["data-layout"] for e in sketch.page.all("rect") if "data-gpu" in e.attrs}
    assert drawn == {"infer-day", "disabled"}


def test_the_fabric_shows_every_device_of_a_small_plan(report: Report) -> None:
    names = {e.attrs["data-name"] for e in report.page.all("rect") if "data-name" in e.attrs}
    fabric = {s.name for s in report.plan.switches_in("compute") if s.plane == 0}
    assert fabric | {s.name for s in report.plan.servers} <= names
    for use in report.plan.fabrics["compute"].port_use:
        assert f"{use.ports_used:,}/{use.ports_total:,} ports" in report.html


def test_a_large_fabric_collapses_to_pods_and_sus(catalog: Catalog) -> None:
    servers = DETAIL_MAX_SERVERS + 44
    text = f"""name: big
site: {{management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups: [{{name: gpu, node: dgx-a100-640gb, count: {servers}}}]
fabrics: {{compute: {{switch: qm8790, su_size: 20}}}}
"""
    report = build(load_spec_text(text, "big.yaml"), catalog)
    (fabric,) = report.page.all("svg", **{"class": "fabric"})
    inside = [e for e in report.page.elements if fabric in e.parents]
    assert {e.attrs.get("data-su") for e in inside} >= {su.name for su in report.plan.sus}
    assert (
        len({e.attrs["data-pod"] for e in inside if "data-pod" in e.attrs})
        == report.plan.fabrics["compute"].pods
    )
    assert not any("data-name" in e.attrs for e in inside)


def test_the_bill_of_materials_is_the_bom_sheet(report: Report, catalog: Catalog) -> None:
    from infra.render.sheets import bom_rows

    for category, _, item, detail, quantity in bom_rows(report.plan, catalog):
        assert f"<td>{category}</td>" in report.html
        assert f"{quantity:,}" in report.html and item in report.html and detail in report.html


def test_the_same_spec_gives_the_same_bytes(report: Report, catalog: Catalog) -> None:
    again = build(report.loaded, catalog)
    assert again.html == report.html


def test_free_text_from_the_spec_is_escaped(catalog: Catalog) -> None:
    evil = '<script>alert(1)</script> & "quoted" <b>bold</b>'
    text = LAB.read_text().replace(
        "description: Seven small instances for 7B-class inference.", f"description: '{evil}'"
    )
    assert evil in text
    report = build(load_spec_text(text, "evil.yaml"), catalog)
    assert "<script" not in report.html and "<b>" not in report.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;quoted&#34;" in report.html
    assert evil in "".join(report.page.texts)


def test_lint_findings_are_listed(catalog: Catalog) -> None:
    text = SKETCH.read_text().replace("max_ms: 15", "max_ms: 0.5")
    loaded = load_spec_text(text, "sketch.yaml")
    findings = lint_loaded(loaded, catalog)
    report = build(loaded, catalog)
    rows = [
        e for e in report.page.all("tr") if e.attrs.get("class") in {"error", "warning", "info"}
    ]
    assert len(rows) == len(findings) and any(f.rule == "RP060" for f in findings)


# --- the command ------------------------------------------------------------------------


def test_report_writes_the_page_and_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "lab.html"
    result = railplan("report", str(LAB), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{out}: report of a100-lab")
    first = out.read_bytes()
    assert railplan("report", str(LAB), "--output", str(out)).returncode == 0
    assert out.read_bytes() == first
    assert not [p for p in tmp_path.iterdir() if p.name != "lab.html"]  # no temporary left


def test_a_bad_spec_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: lab\nnode_groups:\n  - {name: gpu, node: dgx-a100-640gb, cont: 2}\n")
    out = tmp_path / "bad.html"
    result = railplan("report", str(spec), "-o", str(out))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "did you mean 'count'" in result.stderr
    assert not out.exists()
    missing = railplan("report", str(tmp_path / "nope.yaml"), "-o", str(out))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_lint_errors_still_write_the_report_and_exit_1(tmp_path: Path) -> None:
    spec = tmp_path / "missed.yaml"
    spec.write_text(SKETCH.read_text().replace("max_ms: 15", "max_ms: 0.5"))
    out = tmp_path / "missed.html"
    result = railplan("report", str(spec), "-o", str(out))
    assert result.returncode == 1 and "1 lint error" in result.stdout
    assert 'class="verdict fail"' in out.read_text()


def test_an_unwritable_output_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir.html"
    result = railplan("report", str(LAB), "-o", str(out))
    assert result.returncode == 2 and result.stderr.startswith(f"{out}: error: cannot write")


def test_report_needs_an_output() -> None:
    result = railplan("report", str(LAB))
    assert result.returncode == 2 and "--output" in result.stderr
