"""`railplan report`: one self-contained HTML page, the human view of a plan.

`report_html` is pure: spec, catalog, plan and lint findings in, the page's text out, the
same bytes for the same input (no timestamps, stable order). The page has no script and
no external reference: CSS and SVG are inline, so it opens offline, reads on a laptop and
prints on A4 or Letter (each section starts a page; no SVG is split).

Sections: summary (servers, GPUs, racks, power and its bound, fabrics), bill of materials
(`infra.render.sheets.bom_rows`), rack elevations by row (`racks`), the compute
fabric (`fabric`), MIG per node group and schedule (`mig`), budgets
(`infra.budget.evaluate`), predicted nccl-tests busbw per collective against the NIC and
NVLink ceilings, the training step of each `scaling_efficiency` budget, the replay of a job
trace when one is given (`simulation`), lint findings.
The template, ``templates/report/report.html.j2``, renders with autoescape; the SVG comes
from `svg`, which escapes every string it is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from infra.budget.bands import collective_bands
from infra.budget.cluster import BudgetError, comm_topology, main_group
from infra.budget.collectives import COLLECTIVES, CommTopology, Prediction, predict_table
from infra.budget.evaluate import BudgetResult, evaluate_budgets, scaling_answer, scaling_step
from infra.budget.train_layout import Breakdown
from infra.budget.train_plan import TrainAnswer
from infra.budget.training import StepEstimate
from infra.catalog import Catalog
from infra.lint.finding import Finding, Severity
from infra.render.sheets import BOM_COLUMNS, bom_rows
from infra.render.templating import render_html
from infra.report.fabric import DETAIL_MAX_SERVERS, fabric_diagram, tier_label
from infra.report.mig import mig_groups
from infra.report.racks import rack_rows
from infra.report.simulation import simulation_section
from infra.report.svg import Ceiling, Series, line_chart, rect, svg, text
from infra.simulate.compare import MigComparison
from infra.simulate.result import SimResult
from infra.spec import Spec
from infra.spec.budgets import ScalingEfficiencyBudget, ScalingEfficiencyEntry
from infra.topology.model import FabricSummary, Plan

__all__ = ["report_html"]

MIN_BYTES, MAX_BYTES = 8, 8 * 2**30  # nccl-tests -b 8 -e 8G -f 2


@dataclass(frozen=True)
class _Budget:
    path: str
    kind: str
    predicted: str
    limit: str
    verdict: str
    headroom: str
    detail: str


@dataclass(frozen=True)
class _Step:
    path: str
    gpus: int
    error: str
    drawing: Markup | None
    summary: str
    what: str
    legend: tuple[tuple[str, str], ...] = ()  # (css class, label) of the drawing's colours


@dataclass(frozen=True)
class _Collectives:
    caption: str
    chart: Markup | None
    rows: tuple[tuple[str, str, str, str], ...]
    error: str


def _value(value: float, unit: str) -> str:
    return f"{value:.3f}" if unit == "" else f"{value:,.2f} {unit}"


def _budget_row(r: BudgetResult) -> _Budget:
    if r.error:
        return _Budget(r.path, r.kind, "", "", "error", "", r.error_text)
    op = "≤" if r.better == "lower" else "≥"
    predicted = _value(r.predicted, r.unit)
    if r.has_band:  # the error band, and the edge of it the verdict tests
        predicted += f" (band {_value(r.band_low, r.unit)} – {_value(r.band_high, r.unit)})"
    flag = r.fit.flag if r.fit else "arithmetic"
    detail = f"tests the {r.bound_label} ({_value(r.tested, r.unit)}), {flag}; {r.detail}"
    return _Budget(
        r.path,
        r.kind,
        predicted,
        f"{op} {_value(r.limit, r.unit)}",
        r.verdict,
        "" if math.isnan(r.margin) else f"{r.margin:+.1%}",
        f"{detail} (claim: {r.claim})" if r.claim else detail,
    )


FABRIC_KEYS = (
    ("switch", "switch"),
    ("shape", "shape"),
    ("switches", "switches"),
    ("bound", "total"),
    ("cables", "cables"),
    ("oversubscription", "oversubscription"),
    ("injection", "injection"),
    ("bisection", "bisection"),
    ("ports", "port use per tier"),
)


def _rate(gbps: float) -> str:
    return f"{gbps / 1000:,.1f} Tb/s" if gbps >= 1000 else f"{gbps:,.1f} Gb/s"


def _fabric_rows(plan: Plan) -> list[dict[str, str | list[str]]]:
    def row(name: str, f: FabricSummary) -> dict[str, str | list[str]]:
        switches = " + ".join(
            f"{n:,} {t}" for t, n in (("leaf", f.leaf), ("spine", f.spine), ("core", f.core)) if n
        )
        shape = f"{f.tiers}-tier" + (f", {f.planes} planes" if f.planes > 1 else "")
        shape += f", {f.sus} SUs" if f.sus else ""
        shape += f", {f.pods} pods" if f.pods > 1 else ""
        return {
            "name": name,
            "switch": f.switch,
            "shape": shape,
            "switches": switches,
            "bound": f"{f.switches:,} (lower bound {f.lower_bound:,})",
            "cables": ", ".join(f"{n:,} {t.replace('_', '-')}" for t, n in f.cables.items() if n),
            "oversubscription": f"{f.oversubscription:g}:1",
            "injection": _rate(f.injection_gbps),
            "bisection": _rate(f.bisection_gbps),
            "ports": [tier_label(u) for u in f.port_use if u.ports_total],
        }

    return [row(name, f) for name, f in plan.fabrics.items()]


def _summary(spec: Spec, plan: Plan) -> list[tuple[str, str]]:
    compute = sum(1 for r in plan.racks if r.kind == "compute")
    power = f"{plan.power_kw:,.1f} kW at maximum draw"
    if plan.power_bound_kw:
        power += f"; {plan.power_bound_kw:,.1f} kW of it PSU ratings, an upper bound"
    if plan.power_typical_kw:
        power += f"; {plan.power_typical_kw:,.1f} kW typical draw, the maximum is higher"
    groups = ", ".join(f"{g.name}: {g.count:,} × {g.node}" for g in spec.node_groups)
    racks = f"{len(plan.racks):,} ({compute:,} compute, {len(plan.racks) - compute:,} network)"
    sw = spec.software
    return [
        ("cluster", plan.name),
        ("node groups", groups),
        ("servers", f"{len(plan.servers):,}"),
        ("GPUs", f"{plan.gpus:,}"),
        ("racks", racks),
        ("power", power),
        ("software", f"{sw.os}, driver {sw.driver}, CUDA {sw.cuda}, NCCL {sw.nccl}"),
        ("scheduler", spec.scheduler.kind),
    ]


def _ceilings(t: CommTopology) -> list[Ceiling]:
    nvlink = f"NVLink {t.nvlink_links} × {t.intra_gbs / t.nvlink_links:g} = {t.intra_gbs:g} GB/s"
    out = [Ceiling(nvlink, t.intra_gbs, "nvlink")]
    if t.nodes > 1:
        over = (
            f" ÷ {t.oversubscription:g} uplinks"
            if t.spans_leaf_groups and t.oversubscription > 1
            else ""
        )
        nic = f"NICs {t.nics} × {t.nic_gbs:g}{over} = {t.inter_gbs:g} GB/s"
        out.append(Ceiling(nic, t.inter_gbs, "nic"))
    return out


def _largest(rows: Sequence[Prediction]) -> Prediction:
    return max(rows, key=lambda r: (r.busbw_GBps, -r.bytes))


def _collectives(spec: Spec, catalog: Catalog) -> _Collectives:
    try:
        group, node = main_group(spec, catalog)
        gpus = group.count * node.gpus
        if gpus < 2:
            raise BudgetError(f"node group {group.name!r} has a single GPU")
        topo = comm_topology(spec, catalog, gpus, group=group.name)
    except BudgetError as exc:
        return _Collectives("", None, (), exc.message)
    tables = {c: predict_table(topo, c, MIN_BYTES, MAX_BYTES) for c in COLLECTIVES}
    series = [
        Series(c, [(r.bytes, r.busbw_GBps) for r in rows], f"c{i}")
        for i, (c, rows) in enumerate(tables.items())
    ]
    chart = line_chart(
        series,
        _ceilings(topo),
        x_label="message size",
        y_label="busbw (GB/s)",
        label=f"Predicted busbw per collective on {gpus:,} GPUs",
    )
    peaks = {c: _largest(t) for c, t in tables.items()}
    rows = tuple(
        (
            c,
            _with_band(topo, c, p),
            f"{p.algorithm}/{p.protocol}",
            f"{t[-1].time_us / 1000:,.2f} ms",
        )
        for (c, p), t in zip(peaks.items(), tables.values(), strict=True)
    )
    caption = (
        f"{gpus:,} GPUs of node group {group.name} ({topo.nodes:,} × {node.name}), "
        f"SHARP {'usable' if topo.sharp else 'not used'}; 8 B to 8 GiB, ×2 per step"
    )
    return _Collectives(caption, chart, rows, "")


def _with_band(topo: CommTopology, collective: str, p: Prediction) -> str:
    """``busbw (band low-high, flag)``: the peak with its error band."""
    b = collective_bands(topo, collective, p.bytes, p.busbw_GBps, p.time_us)
    return f"{p.busbw_GBps:,.1f} ({b.busbw.low:,.1f}–{b.busbw.high:,.1f}, {b.fit.flag})"


def _step_drawing(step: StepEstimate) -> Markup:
    """Two bars on one time scale: the step (compute + exposed) and the all-reduce."""
    left, bar_w = 90, 520
    scale = bar_w / max(step.step_s, step.allreduce_s, 1e-12)
    hidden = step.allreduce_s - step.exposed_s
    compute, exposed = step.compute_s * scale, step.exposed_s * scale
    exposed_tip = f"exposed all-reduce {step.exposed_s:.3f} s"
    parts = [
        text(0, 18, "step", class_="axis"),
        rect(left, 4, compute, 20, f"compute {step.compute_s:.3f} s", class_="st-compute"),
        rect(left + compute, 4, exposed, 20, exposed_tip, class_="st-exposed"),
        text(left + compute + exposed + 6, 18, f"{step.step_s:.3f} s", class_="legend"),
        text(0, 50, "all-reduce", class_="axis"),
        rect(left, 36, hidden * scale, 20, f"hidden {hidden:.3f} s", class_="st-hidden"),
        rect(left + hidden * scale, 36, exposed, 20, exposed_tip, class_="st-exposed"),
        text(left + step.allreduce_s * scale + 6, 50, f"{step.allreduce_s:.3f} s", class_="legend"),
    ]
    return svg(left + bar_w + 90, 62, parts, "Training step breakdown", class_="step")


def _step_summary(step: StepEstimate) -> str:
    return (
        f"Step {step.step_s:.3f} s = compute {step.compute_s:.3f} s + exposed gradient "
        f"all-reduce {step.exposed_s:.3f} s; the all-reduce takes {step.allreduce_s:.3f} s "
        f"({step.allreduce_algorithm}), {step.allreduce_s - step.exposed_s:.3f} s of it hidden "
        f"behind the backward pass. Scaling efficiency {step.efficiency:.1%}."
    )


_DP_LEGEND = (
    ("st-compute", "compute (6·P·tokens)"),
    ("st-hidden", "all-reduce hidden behind backward"),
    ("st-exposed", "all-reduce exposed"),
)
# Breakdown field, label, colour class: the training model's step, left to right.
_TRAIN_PARTS = (
    ("compute_s", "compute", "st-compute"),
    ("recompute_s", "recompute", "st-recompute"),
    ("tp_comm_s", "TP communication", "st-tp"),
    ("cp_comm_s", "CP communication", "st-cp"),
    ("pp_comm_s", "pipeline sends", "st-pp"),
    ("pp_bubble_s", "pipeline bubble", "st-bubble"),
    ("dp_comm_exposed_s", "DP communication exposed", "st-exposed"),
    ("optimizer_s", "optimizer", "st-optimizer"),
)


def _train_drawing(breakdown: Breakdown) -> Markup:
    """One bar: the step of the training model, split by component on one time scale."""
    left, bar_w = 90, 520
    scale = bar_w / max(breakdown.step_s, 1e-12)
    parts, x = [text(0, 18, "step", class_="axis")], float(left)
    for field, label, css in _TRAIN_PARTS:
        seconds = getattr(breakdown, field)
        parts.append(rect(x, 4, seconds * scale, 20, f"{label} {seconds:.3f} s", class_=css))
        x += seconds * scale
    parts.append(text(x + 6, 18, f"{breakdown.step_s:.3f} s", class_="legend"))
    return svg(left + bar_w + 90, 30, parts, "Training step breakdown", class_="step")


def _train_summary(answer: TrainAnswer) -> str:
    res, lay = answer.result, answer.result.layout
    shares = ", ".join(
        f"{label} {getattr(res.breakdown, field) / res.step_s:.0%}"
        for field, label, _ in _TRAIN_PARTS
        if getattr(res.breakdown, field) / res.step_s >= 0.005
    )
    return (
        f"TP {lay.tp}{lay.cp_label('×')} × PP {lay.pp} (×{lay.virtual}) × DP {lay.dp}, "
        f"{res.micro_batches} micro-batches of {lay.micro_batch}: step {res.step_s:.3f} s "
        f"({shares}); MFU {res.tflops_per_gpu(False) / res.peak_tflops:.1%}. Scaling efficiency "
        f"{answer.scaling_efficiency:.1%} against one replica (DP 1, same layout)."
    )


def _train_step(b: ScalingEfficiencyBudget, spec: Spec, catalog: Catalog, path: str) -> _Step:
    model = b.model or f"a {b.layers}-layer model of hidden size {b.hidden}"
    layout = (
        "the layout given"
        if b.tp or b.pp
        else "the layout the search ranks first (conservative bound, calibrated first)"
    )
    what = f"{model} on the training model (Megatron FLOPs, TP/CP/PP/DP, ZeRO), {layout}"
    try:
        answer = scaling_answer(b, spec, catalog, path)
    except BudgetError as exc:
        return _Step(path, b.gpus, exc.message, None, "", what)
    legend = tuple((css, label) for _, label, css in _TRAIN_PARTS)
    drawing = _train_drawing(answer.result.breakdown)
    return _Step(path, b.gpus, "", drawing, _train_summary(answer), what, legend)


def _dp_step(b: ScalingEfficiencyBudget, spec: Spec, catalog: Catalog, path: str) -> _Step:
    what = (
        f"{b.model or 'model'} of {b.model_params / 1e9:,.1f} B parameters, "
        f"{b.tokens_per_gpu:,} tokens per GPU per step, {b.precision} at MFU {b.mfu:.0%}, "
        f"{b.overlap:.0%} of compute overlapping the gradient all-reduce"
    )
    try:
        step = scaling_step(b, spec, catalog, path)
    except BudgetError as exc:
        return _Step(path, b.gpus, exc.message, None, "", what)
    return _Step(path, b.gpus, "", _step_drawing(step), _step_summary(step), what, _DP_LEGEND)


def _steps(spec: Spec, catalog: Catalog) -> list[_Step]:
    out = []
    for i, budget in enumerate(spec.budgets):
        if not isinstance(budget, ScalingEfficiencyEntry):
            continue
        b = budget.scaling_efficiency
        path = f"budgets[{i}].scaling_efficiency"
        steps = _train_step if b.uses_train_model else _dp_step
        out.append(steps(b, spec, catalog, path))
    return out


def _lint_counts(findings: Sequence[Finding]) -> dict[str, int]:
    return {str(s): sum(f.severity is s for f in findings) for s in Severity}


def report_html(
    spec: Spec,
    catalog: Catalog,
    plan: Plan,
    findings: Sequence[Finding],
    budgets: Sequence[BudgetResult] | None = None,
    simulation: SimResult | None = None,
    variants: MigComparison | None = None,
) -> str:
    """The report page of a planned spec, with its lint ``findings``.

    ``budgets``: the spec's budgets already evaluated on ``plan`` (lint's), else evaluated here.
    ``simulation``: a trace replayed on ``plan`` (`railplan report --trace`), its own section;
    ``variants``: the same trace on the spec's MIG variants, a table in that section.
    """
    evaluated = evaluate_budgets(spec, catalog, plan) if budgets is None else budgets
    rows = [_budget_row(r) for r in evaluated]
    return render_html(
        "report/report.html.j2",
        name=plan.name,
        summary=_summary(spec, plan),
        fabrics=_fabric_rows(plan),
        fabric_keys=FABRIC_KEYS,
        warnings=plan.warnings,
        bom_columns=BOM_COLUMNS,
        bom=bom_rows(plan, catalog),
        rows=rack_rows(plan, catalog),
        fabric=fabric_diagram(plan),
        collapsed=len(plan.servers) > DETAIL_MAX_SERVERS,
        detail_max=DETAIL_MAX_SERVERS,
        mig=mig_groups(spec, catalog, plan),
        budgets=rows,
        passed=sum(b.verdict == "pass" for b in rows),
        collectives=_collectives(spec, catalog),
        steps=_steps(spec, catalog),
        # built by an autoescaped template from escaped SVG: safe to insert as it is
        simulation=None
        if simulation is None
        else Markup(simulation_section(simulation, variants=variants)),
        findings=findings,
        lint_counts=_lint_counts(findings),
    )
