"""MIG for the HTML report: each node group's per-GPU layout and its day/night schedule.

A node's GPUs are drawn side by side, each as a column of its memory slices (8 on A100 and
H100) with every MIG instance at the placement `infra.catalog.mig.check_layout` finds, so
what a reviewer sees is a layout that exists. Everything about a group's MIG is the plan's
(`Plan.groups`, owned by `infra.topology.groups`): the layout per GPU of its `mig` and of
each change of its ``mig_schedule`` (each gets its own drawing), whether it is MIG-split at
all, and the parsed cron times: a schedule whose changes each fire once a day at a fixed
time is also drawn on a 24-hour strip. A layout that does not fit (lint reports why) is
drawn as a hatched "no placement" column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from infra.catalog import Catalog, Gpu
from infra.catalog.mig import check_layout
from infra.report.svg import rect, svg, text
from infra.spec import MigValue, Spec
from infra.topology.facts_model import MigState
from infra.topology.model import GroupPlan, Plan

__all__ = ["MigDrawing", "MigGroup", "mig_groups"]

_COL_W, _COL_GAP, _SLICE_H, _TOP = 74, 8, 15, 18
_STRIP_W, _STRIP_H = 720, 58


@dataclass(frozen=True)
class MigDrawing:
    """One distinct MIG state of a group as drawn: when it applies, layout per GPU, drawing."""

    when: str
    per_gpu: tuple[str, ...]
    drawing: Markup


@dataclass(frozen=True)
class MigGroup:
    """A node group's MIG: its states (the initial one, then one per scheduled change)."""

    name: str
    node: str
    gpu: str
    servers: int
    states: tuple[MigDrawing, ...]
    layouts: tuple[tuple[str, str, str], ...]  # name, profiles, description
    timezone: str
    drain_timeout: str
    timeline: Markup | None


def _names(state: MigState) -> tuple[str, ...]:
    """A state's layout name per GPU, ``disabled`` for whole GPUs (as the drawing labels them)."""
    return tuple(layout or "disabled" for layout in state.per_gpu)


def _instances(spec: Spec, gpu: Gpu, layout: str) -> list[tuple[str, int, int]] | None:
    """(profile, first slice, slices) of each instance of ``layout``, or None if it cannot fit."""
    known = spec.mig_layouts.get(layout)
    if known is None or gpu.mig is None:
        return None
    fit = check_layout(gpu, known.profiles)
    if not fit.ok:
        return None
    out = []
    for name, start in fit.placement:
        profile = gpu.mig.profile(name)
        out.append((name, start, profile.memory_slices if profile else 1))
    return out


def _block(
    x: float, y: float, h: float, label: str, tip: str, css: str, **data: object
) -> list[Markup]:
    """A box across a GPU column with its label centred in it."""
    return [
        rect(x, y, _COL_W, h, tip, class_=css, **data),
        text(x + _COL_W / 2, y + h / 2 + 4, label, class_="mig-label", text_anchor="middle"),
    ]


def _gpu_column(spec: Spec, gpu: Gpu, index: int, layout: str, x: float) -> list[Markup]:
    """One GPU: its memory slices top to bottom, each MIG instance at its placement."""
    height = (gpu.mig.memory_slots if gpu.mig else 8) * _SLICE_H
    parts = [text(x + _COL_W / 2, 12, f"GPU {index}", class_="gpu-label", text_anchor="middle")]
    data = {"data_gpu": index, "data_layout": layout}
    if layout == "disabled":
        tip = f"GPU {index}: whole GPU (MIG disabled)"
        return parts + _block(x, _TOP, height, "whole GPU", tip, "mig-whole", **data)
    instances = _instances(spec, gpu, layout)
    if instances is None:
        tip = f"GPU {index}: layout {layout} has no placement"
        return parts + _block(x, _TOP, height, "no placement", tip, "mig-bad", **data)
    parts.append(rect(x, _TOP, _COL_W, height, class_="mig-free", **data))
    for name, start, slices in instances:
        tip = f"GPU {index}, layout {layout}: {name} on memory slices {start}-{start + slices - 1}"
        y, h = _TOP + start * _SLICE_H, slices * _SLICE_H
        parts.append(rect(x + 2, y + 1, _COL_W - 4, h - 2, tip, class_="mig-inst"))
        parts.append(
            text(x + _COL_W / 2, y + h / 2 + 4, name, class_="mig-label", text_anchor="middle")
        )
    return parts


def _drawing(spec: Spec, gpu: Gpu, per_gpu: Sequence[str], label: str) -> Markup:
    parts: list[Markup] = []
    for i, layout in enumerate(per_gpu):
        parts += _gpu_column(spec, gpu, i, layout, 4 + i * (_COL_W + _COL_GAP))
    slots = gpu.mig.memory_slots if gpu.mig else 8
    width = 8 + len(per_gpu) * (_COL_W + _COL_GAP)
    return svg(width, _TOP + slots * _SLICE_H + 6, parts, label, class_="mig")


def _describe(value: MigValue) -> str:
    if isinstance(value, str):
        return value
    return ", ".join(
        f"GPUs {'all' if a.gpus == 'all' else ','.join(map(str, a.gpus))}: {a.layout}"
        for a in value
    )


def _timeline(group: GroupPlan) -> Markup | None:
    """A 24-hour strip of a schedule whose changes each fire once a day at a fixed minute."""
    changes = group.mig.changes
    if not changes or any(c.daily_minute is None for c in changes):
        return None
    marks = sorted((c.daily_minute or 0, _describe(c.value)) for c in changes)
    scale = (_STRIP_W - 20) / 1440
    parts: list[Markup] = []
    for i, (start, what) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else 1440
        css = "mig-whole" if what == "disabled" else "mig-inst"
        spans = [(start, end)] + ([(0, marks[0][0])] if i + 1 == len(marks) else [])
        tip = f"{what} from {start // 60:02d}:{start % 60:02d}"
        for a, b in spans:
            parts.append(rect(10 + a * scale, 6, (b - a) * scale, 22, tip, class_=css))
        parts.append(text(10 + start * scale + 3, 21, what, class_="mig-label"))
    for hour in range(0, 25, 3):
        x = 10 + hour * 60 * scale
        parts.append(text(x, 44, f"{hour:02d}:00", class_="tick", text_anchor="middle"))
    return svg(
        _STRIP_W, _STRIP_H, parts, f"MIG schedule of {group.name} over a day", class_="mig-day"
    )


def _states(spec: Spec, gpu: Gpu, group: GroupPlan) -> list[MigDrawing]:
    """The group's distinct MIG states; times that give the same layout share one drawing."""
    mig = group.mig
    initial = "until the first change" if mig.schedule else "always"
    whens: dict[tuple[str, ...], list[str]] = {_names(mig.now): [initial]}
    for change in mig.changes:
        whens.setdefault(_names(change), []).append(f"from {change.at}")
    states = []
    for per_gpu, when in whens.items():
        label = "; ".join(when)
        drawing = _drawing(spec, gpu, per_gpu, f"MIG of {group.name}: {label}")
        states.append(MigDrawing(label, per_gpu, drawing))
    return states


def _layouts(spec: Spec, states: Sequence[MigDrawing]) -> tuple[tuple[str, str, str], ...]:
    """The named layouts the states use: name, profiles and the spec's description."""
    names = dict.fromkeys(x for s in states for x in s.per_gpu if x != "disabled")
    out = []
    for name in names:
        known = spec.mig_layouts.get(name)
        profiles = (
            ", ".join(f"{n} × {p}" for p, n in known.profiles.items()) if known else "unknown"
        )
        out.append((name, profiles, known.description if known else ""))
    return tuple(out)


def mig_groups(spec: Spec, catalog: Catalog, plan: Plan) -> list[MigGroup]:
    """Every node group whose GPUs support MIG and that is MIG-split now or by schedule."""
    out = []
    for group in plan.groups.values():
        gpu = catalog.gpus[catalog.nodes[group.node].gpu]
        if gpu.mig is None or not group.servers or not group.mig_split:
            continue
        schedule = group.mig.schedule
        states = _states(spec, gpu, group)
        out.append(
            MigGroup(
                group.name,
                group.node,
                gpu.name,
                group.servers,
                tuple(states),
                _layouts(spec, states),
                schedule.timezone if schedule else "",
                schedule.drain_timeout if schedule else "",
                _timeline(group),
            )
        )
    return out
