"""The compute fabric diagram of the HTML report: every device, or SUs and pods when large.

Up to `DETAIL_MAX_SERVERS` servers the diagram shows every server, leaf, spine and core of
plane 0, a line per connected pair of devices (thicker for more cables), laid out by pod
and scalable unit: an SU's servers stand under its leaves, a pod's spines over its SUs and
the cores over everything. Past that a device diagram is a hairball, so it collapses to
one card per pod listing its spines and SUs (servers and leaves each), under a band for
the top tier. Either way each tier is labelled with its switches and port use
(`FabricSummary.port_use`). Everything comes from the plan's typed views (SUs, switches by
tier, pod and SU, cables by tier); no name is parsed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from infra.report.svg import el, line, rect, svg, text
from infra.topology.model import FabricSummary, Plan, ScalableUnit, SwitchTier, TierUse

__all__ = ["DETAIL_MAX_SERVERS", "fabric_diagram", "tier_label"]

DETAIL_MAX_SERVERS = 256
_LEFT, _SRV, _LEAF, _SU_GAP, _POD_GAP = 150, 6, 12, 14, 26
_ROW_Y = {"core": 34, "spine": 124, "leaf": 214, "server": 304}
_CARD_W, _CARD_GAP, _CARDS_PER_ROW, _CHIP_H = 176, 14, 5, 17


def tier_label(use: TierUse) -> str:
    """``leaf 2,240/2,240 ports (100%)``."""
    share = use.ports_used / use.ports_total if use.ports_total else 0.0
    return f"{use.tier} {use.ports_used:,}/{use.ports_total:,} ports ({share:.0%})"


@dataclass
class _Layout:
    """Where each device of the detailed diagram stands: name -> (x centre, tier row)."""

    at: dict[str, tuple[float, str]] = field(default_factory=dict)
    su_spans: list[tuple[ScalableUnit, float, float]] = field(default_factory=list)
    pod_spans: list[tuple[int, float, float]] = field(default_factory=list)
    width: float = 0.0


def _pods(plan: Plan) -> dict[int, list[ScalableUnit]]:
    pods: dict[int, list[ScalableUnit]] = {}
    for su in plan.sus:
        pods.setdefault(su.pod or 1, []).append(su)
    return pods


def _spread(names: Sequence[str], start: float, end: float, row: str, layout: _Layout) -> None:
    step = (end - start) / max(len(names), 1)
    for i, name in enumerate(names):
        layout.at[name] = (start + step * (i + 0.5), row)


def _place_sus(plan: Plan, layout: _Layout) -> None:
    """Servers and leaves by SU, SUs by pod; a leaf several SUs share goes over all of them."""
    shared = {leaf for leaf, n in Counter(x for su in plan.sus for x in su.leaves).items() if n > 1}
    x = float(_LEFT)
    for pod, sus in _pods(plan).items():
        pod_start = x
        for su in sus:
            own = [leaf for leaf in su.leaves if leaf not in shared]
            width = max(len(su.servers) * _SRV, len(own) * _LEAF, 60)
            _spread(su.servers, x, x + width, "server", layout)
            _spread(own, x, x + width, "leaf", layout)
            layout.su_spans.append((su, x, x + width))
            x += width + _SU_GAP
        layout.pod_spans.append((pod, pod_start, x - _SU_GAP))
        x += _POD_GAP
    layout.width = x
    _spread(sorted(shared), _LEFT, x - _POD_GAP, "leaf", layout)


def _detail_layout(plan: Plan) -> _Layout:
    layout = _Layout()
    _place_sus(plan, layout)
    spines = [s for s in plan.switches_in("compute", "spine") if s.plane == 0]
    for pod, start, end in layout.pod_spans:
        in_pod = [s.name for s in spines if s.pod == pod]
        _spread(in_pod, start, end, "spine", layout)
    _spread(
        [s.name for s in spines if s.pod is None], _LEFT, layout.width - _POD_GAP, "spine", layout
    )
    cores = [s.name for s in plan.switches_in("compute", "core") if s.plane == 0]
    _spread(cores, _LEFT, layout.width - _POD_GAP, "core", layout)
    return layout


def _links(plan: Plan, layout: _Layout) -> list[Markup]:
    pairs = Counter((c.a, c.b) for c in plan.cables_in("compute"))
    parts = []
    for (a, b), count in sorted(pairs.items()):
        if a in layout.at and b in layout.at:
            (xa, ra), (xb, rb) = layout.at[a], layout.at[b]
            width = min(0.6 + 0.4 * count, 3.0)
            parts.append(
                line(xa, _ROW_Y[ra] + 6, xb, _ROW_Y[rb] + 6, class_="link", stroke_width=width)
            )
    return parts


def _nodes(plan: Plan, layout: _Layout) -> list[Markup]:
    parts = []
    for name, (x, row) in layout.at.items():
        w, h = (4.0, 16.0) if row == "server" else (8.0, 12.0)
        parts.append(rect(x - w / 2, _ROW_Y[row], w, h, name, class_=f"node {row}", data_name=name))
    return parts


def _tier_labels(f: FabricSummary, rows: Sequence[str], servers: int) -> list[Markup]:
    use = {u.tier: u for u in f.port_use}
    parts = []
    for row in rows:
        y = _ROW_Y[row]
        if row == "server":
            parts.append(text(6, y + 12, f"servers × {servers:,}", class_="tier-name"))
            continue
        count = {"leaf": f.leaf, "spine": f.spine, "core": f.core}[row] // max(f.planes, 1)
        parts.append(text(6, y + 4, f"{row} × {count:,}", class_="tier-name"))
        tier: SwitchTier = row  # type: ignore[assignment]
        if tier in use:
            parts.append(text(6, y + 17, tier_label(use[tier]), class_="tier-use"))
    return parts


def _span_labels(layout: _Layout) -> list[Markup]:
    parts = []
    for su, start, end in layout.su_spans:
        parts.append(
            text(
                (start + end) / 2,
                _ROW_Y["server"] + 30,
                su.name,
                class_="su-label",
                text_anchor="middle",
                data_su=su.name,
            )
        )
    if len(layout.pod_spans) > 1:
        for pod, start, end in layout.pod_spans:
            parts.append(
                rect(start - 4, _ROW_Y["spine"] - 24, end - start + 8, 232, class_="pod-box")
            )
            parts.append(text(start, _ROW_Y["spine"] - 11, f"pod {pod}", class_="pod-label"))
    return parts


def _rows(f: FabricSummary) -> list[str]:
    return [*(["core"] if f.core else []), *(["spine"] if f.spine else []), "leaf", "server"]


def _detail(plan: Plan, f: FabricSummary) -> Markup:
    layout = _detail_layout(plan)
    rows = _rows(f)
    parts = _span_labels(layout) + _links(plan, layout) + _nodes(plan, layout)
    parts += _tier_labels(f, rows, len(plan.servers))
    top = _ROW_Y[rows[0]] - 30
    body = el("g", Markup("").join(parts), transform=f"translate(0 {-top})")
    height = _ROW_Y["server"] + 40 - top
    return svg(layout.width, height, [body], f"Compute fabric of {plan.name}", class_="fabric")


def _card(plan: Plan, pod: int, sus: Sequence[ScalableUnit], x: float, y: float) -> list[Markup]:
    spines = [s for s in plan.switches_in("compute", "spine") if s.plane == 0 and s.pod == pod]
    height = 40 + len(sus) * _CHIP_H
    parts = [
        rect(x, y, _CARD_W, height, class_="pod-card", data_pod=pod),
        text(x + 6, y + 14, f"pod {pod}", class_="pod-label"),
        text(x + 6, y + 28, f"{len(spines)} spines · {len(sus)} SUs", class_="tier-use"),
    ]
    for i, su in enumerate(sus):
        cy = y + 34 + i * _CHIP_H
        tip = f"{su.name}: {len(su.servers)} servers, {len(su.leaves)} leaves, racks "
        tip += ", ".join(su.racks)
        parts.append(
            rect(x + 6, cy, _CARD_W - 12, _CHIP_H - 3, tip, class_="su-chip", data_su=su.name)
        )
        label = f"{su.name} · {len(su.servers)} srv · {len(su.leaves)} leaves"
        parts.append(text(x + 10, cy + 10, label, class_="chip-label"))
    return parts


def _band(f: FabricSummary, width: float) -> list[Markup]:
    top: SwitchTier = "core" if f.core else "spine" if f.spine else "leaf"
    use = next((u for u in f.port_use if u.tier == top), None)
    count = {"leaf": f.leaf, "spine": f.spine, "core": f.core}[top]
    label = f"{count:,} {top} switches" + (f" · {tier_label(use)}" if use else "")
    others = " · ".join(tier_label(u) for u in f.port_use if u.tier != top)
    return [
        rect(6, 6, width - 12, 40, class_="tier-band"),
        text(14, 22, label, class_="tier-name"),
        text(14, 38, others, class_="tier-use"),
    ]


def _collapsed(plan: Plan, f: FabricSummary) -> Markup:
    pods = list(_pods(plan).items())
    columns = min(_CARDS_PER_ROW, len(pods))
    width = 12 + columns * (_CARD_W + _CARD_GAP)
    card_h = 40 + max(len(sus) for _, sus in pods) * _CHIP_H
    parts = _band(f, width)
    for i, (pod, sus) in enumerate(pods):
        x = 6 + (i % columns) * (_CARD_W + _CARD_GAP)
        y = 60 + (i // columns) * (card_h + _CARD_GAP)
        parts += _card(plan, pod, sus, x, y)
    rows = -(-len(pods) // columns)
    height = 60 + rows * (card_h + _CARD_GAP)
    return svg(
        width, height, parts, f"Compute fabric of {plan.name} by pod and SU", class_="fabric"
    )


def fabric_diagram(plan: Plan) -> Markup | None:
    """The compute fabric diagram, or None when the plan has no compute fabric or SUs."""
    f = plan.fabrics.get("compute")
    if f is None or not plan.sus:
        return None
    return _detail(plan, f) if len(plan.servers) <= DETAIL_MAX_SERVERS else _collapsed(plan, f)
