"""Error bands and calibration flags: how far a prediction can be off, and whether it is in range.

Every figure railplan predicts carries an interval taken from the held-out half of the
published rows (``tests/data/*measurements*.yaml``) in its regime (`band_regimes`): the range
of their ratios ``predicted / measured`` (for a figure where higher is better; a time's ratio
is ``measured / predicted``), widened to contain 1, turned into the interval the true value
lay in for those rows. A regime with fewer than `MIN_ROWS` held-out rows falls back to a
coarser one. The band is the observed range, not a statistical interval: a new row may fall
outside it.

A prediction is ``calibrated`` when the published rows cover it (same GPU generation and kind
of setup, and its size within their span: `collective_fit`, `training_fit`), otherwise
``extrapolated``, with the nearest published row and how far it is. The table behind both is
``infra/budget/data/bands.json``, generated from the data files by `tools.accuracy.band_table`
(`make accuracy`); a test checks it is current.

>>> ratios = Ratios(0.9, 1.25, "example", 4)
>>> higher_band(100.0, ratios).low, higher_band(100.0, ratios).high
(80.0, 111.1)
>>> lower_band(10.0, ratios).low, lower_band(10.0, ratios).high
(9.0, 12.5)
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from infra.budget.band_regimes import collective_levels, fabric_of
from infra.budget.communicator import CommTopology

__all__ = [
    "MIN_ROWS",
    "Band",
    "CollectiveBands",
    "Fit",
    "Ratios",
    "collective_bands",
    "collective_fit",
    "higher_band",
    "layout_fit",
    "lower_band",
    "ratios_for",
    "table",
    "training_fit",
]

MIN_ROWS = 3
"""Fewest held-out rows a regime needs before its own range is used (else a coarser one)."""
Status = Literal["calibrated", "extrapolated"]


@dataclass(frozen=True)
class Ratios:
    """The held-out ``predicted / measured`` range of one regime (higher-is-better figures)."""

    low: float
    high: float
    regime: str
    rows: int


@dataclass(frozen=True)
class Band:
    """The interval a predicted figure's true value lay in for its regime's held-out rows."""

    low: float
    high: float
    regime: str
    rows: int

    def as_json(self, digits: int = 4) -> dict[str, Any]:
        """``{"low", "high", "regime", "rows"}`` for the JSON outputs."""
        return {
            "low": _round(self.low, digits),
            "high": _round(self.high, digits),
            "regime": self.regime,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class Fit:
    """Whether published rows cover a prediction: ``calibrated``, or ``extrapolated`` and how far.

    ``nearest`` names the closest published row (always set); ``gap`` says how the prediction
    differs from it (empty when calibrated).
    """

    status: Status
    nearest: str
    gap: str = ""

    def as_json(self) -> dict[str, str]:
        """``{"status", "nearest", "gap"}`` for the JSON outputs."""
        return {"status": self.status, "nearest": self.nearest, "gap": self.gap}

    @property
    def flag(self) -> str:
        """The short text flag: ``calibrated`` or ``EXTRAPOLATED``."""
        return self.status if self.status == "calibrated" else "EXTRAPOLATED"


def _round(value: float, digits: int) -> float:
    return round(value, digits) if math.isfinite(value) else value


@functools.cache
def table() -> dict[str, Any]:
    """The generated band table (``infra/budget/data/bands.json``)."""
    text = resources.files("infra.budget").joinpath("data/bands.json").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def ratios_for(kind: str, levels: list[str]) -> Ratios:
    """The first regime of ``levels`` with `MIN_ROWS` held-out rows (the last one regardless)."""
    return _ratios(kind, tuple(levels))


@functools.cache
def _ratios(kind: str, levels: tuple[str, ...]) -> Ratios:
    found = table()[kind]["ratios"]
    for regime in levels:
        entry = found.get(regime)
        if entry and (entry[2] >= MIN_ROWS or regime == levels[-1]):
            return Ratios(float(entry[0]), float(entry[1]), regime, int(entry[2]))
    return Ratios(1.0, 1.0, levels[-1], 0)


def higher_band(value: float, ratios: Ratios, digits: int = 1) -> Band:
    """The band of a figure where higher is better (bandwidth, TFLOP/s): ``value / ratio``."""
    high_ratio, low_ratio = max(ratios.high, 1.0), min(ratios.low, 1.0)
    return Band(
        round(value / high_ratio, digits),
        round(value / low_ratio, digits),
        ratios.regime,
        ratios.rows,
    )


def lower_band(value: float, ratios: Ratios, digits: int = 1) -> Band:
    """The band of a figure where lower is better (a time): ``value x ratio``."""
    high_ratio, low_ratio = max(ratios.high, 1.0), min(ratios.low, 1.0)
    return Band(
        round(value * low_ratio, digits),
        round(value * high_ratio, digits),
        ratios.regime,
        ratios.rows,
    )


def _log_gap(value: float, other: float) -> float:
    return abs(math.log2(max(value, 1e-12) / max(other, 1e-12)))


def _times(value: float, other: float, what: str) -> str:
    ratio = value / other
    return f"{ratio:.1f}x the {what}" if ratio >= 1 else f"1/{1 / ratio:.1f} the {what}"


@functools.cache
def collective_fit(arch: str, fabric: str, collective: str, nodes: int, nbytes: int) -> Fit:
    """Whether a collective prediction lies inside the published rows of its kind.

    Calibrated: rows of the same GPU generation, fabric and collective family span its node
    count and its message size. Otherwise the nearest row (by generation, fabric, family,
    then log distance in nodes and in size) and how far.
    """
    family = "all_reduce" if collective == "all_reduce" else "other"
    rows = table()["collective"]["envelope"]
    mine = [r for r in rows if (r[1], r[2], r[3]) == (arch, fabric, family)]
    if mine and _inside(nodes, [r[4] for r in mine]) and _inside(nbytes, [r[5] for r in mine]):
        return Fit("calibrated", _nearest_collective(mine, nodes, nbytes)[0])
    label, row = _nearest_collective(rows, nodes, nbytes, (arch, fabric, family))
    wanted = (("GPU", arch), ("fabric", fabric), ("collective", family))
    gaps = [f"{k} {v} (row: {row[i]})" for i, (k, v) in enumerate(wanted, 1) if row[i] != v]
    if row[4] != nodes:
        gaps.append(_times(nodes, row[4], "nodes"))
    if row[5] != nbytes:
        gaps.append(_times(nbytes, row[5], "bytes"))
    return Fit("extrapolated", label, "; ".join(gaps))


def _inside(value: float, span: list[float]) -> bool:
    return min(span) <= value <= max(span)


def _nearest_collective(
    rows: list[list[Any]], nodes: int, nbytes: int, want: tuple[str, str, str] | None = None
) -> tuple[str, list[Any]]:
    def distance(r: list[Any]) -> tuple[float, str]:
        kind = 0.0
        if want is not None:
            kind = 8 * (r[1] != want[0]) + 4 * (r[2] != want[1]) + (r[3] != want[2])
        return kind + _log_gap(nodes, r[4]) + _log_gap(nbytes, r[5]) / 4, r[0]

    best = min(rows, key=distance)
    return str(best[0]), best


@dataclass(frozen=True)
class TrainingPoint:
    """What the training envelope compares: one layout of one model on one GPU generation."""

    arch: str
    family: str
    zero: str
    tp: int
    pipelined: bool
    context: bool
    recompute: str
    fused_attention: bool
    gpus: int
    params: float
    micro_batch: int
    virtual: int

    def cell(self) -> tuple[Any, ...]:
        """The fields a published row must share to cover this point."""
        return (*self.layout_cell(), self.fused_attention)

    def layout_cell(self) -> tuple[Any, ...]:
        """`cell` without the stack's own switches: what the layout search can choose.

        Whether attention is fused is the software stack's switch, the same for every layout
        a search compares, so it cannot be what a search exploits (`layout_fit`).
        """
        return (
            self.arch,
            self.family,
            self.zero,
            self.tp,
            self.pipelined,
            self.context,
            self.recompute,
        )


_CELL_NAMES = ("GPU", "stack", "", "TP", "PP", "CP", "recompute", "fused attention")


def _point(row: list[Any]) -> TrainingPoint:
    return TrainingPoint(*row[1:])


@functools.cache
def training_fit(point: TrainingPoint) -> Fit:
    """Whether a training layout, run by its stack, lies inside the published rows.

    Calibrated: some rows share its cell (GPU generation, stack family, ZeRO group, TP size,
    pipelined or not, context-parallel or not, recompute mode, fused attention or not), and
    its GPU count and model size are within a factor of two of their span, its micro-batch
    and interleaving within it. Otherwise the nearest row and what differs: among the rows
    that cover the layout if some do (so the gap names the stack switch), else among all.
    """
    rows = table()["training"]["envelope"]
    layout_rows = _covering(rows, point, lambda q: q.layout_cell())
    mine = _covering(layout_rows, point, lambda q: q.cell())
    if mine:
        return Fit("calibrated", _nearest_training(mine, point)[0])
    label, row = _nearest_training(layout_rows or rows, point)
    return Fit("extrapolated", label, _training_gap(_point(row), point))


@functools.cache
def layout_fit(point: TrainingPoint) -> Fit:
    """`training_fit` of the layout alone: the stack's own switches (`layout_cell`) aside.

    The layout search prefers layouts calibrated by this measure. A stack switch no published
    row of the GPU generation ran (fused attention on A100: every A100 row ran Megatron-LM
    2021's unfused kernels) puts every candidate outside the envelope alike; ranking them
    all as extrapolated would hand the choice to whichever borrowed band is narrowest.
    """
    rows = table()["training"]["envelope"]
    mine = _covering(rows, point, lambda q: q.layout_cell())
    if mine:
        return Fit("calibrated", _nearest_training(mine, point)[0])
    label, row = _nearest_training(rows, point)
    return Fit("extrapolated", label, _training_gap(_point(row), point))


def _covering(
    rows: list[list[Any]], point: TrainingPoint, key: Callable[[TrainingPoint], tuple[Any, ...]]
) -> list[list[Any]]:
    """The rows sharing ``point``'s ``key`` cell, if together they cover it (else none)."""
    mine = [r for r in rows if key(_point(r)) == key(point)]
    return mine if mine and _covers([_point(r) for r in mine], point) else []


def _covers(rows: list[TrainingPoint], p: TrainingPoint) -> bool:
    def within(value: float, values: list[float], slack: float) -> bool:
        return min(values) / slack <= value <= max(values) * slack

    return (
        within(p.gpus, [r.gpus for r in rows], 2)
        and within(p.params, [r.params for r in rows], 2)
        and within(p.micro_batch, [r.micro_batch for r in rows], 1)
        and within(p.virtual, [r.virtual for r in rows], 1)
    )


def _nearest_training(rows: list[list[Any]], p: TrainingPoint) -> tuple[str, list[Any]]:
    weights = (8.0, 2.0, 4.0, 0.0, 2.0, 2.0, 1.0, 1.0)

    def distance(r: list[Any]) -> tuple[float, str]:
        q = _point(r)
        kind = sum(w * (a != b) for w, a, b in zip(weights, q.cell(), p.cell(), strict=True))
        size = _log_gap(p.tp, q.tp) + _log_gap(p.gpus, q.gpus) + _log_gap(p.params, q.params)
        shape = (_log_gap(p.micro_batch, q.micro_batch) + _log_gap(p.virtual, q.virtual)) / 2
        return kind + size + shape, str(r[0])

    best = min(rows, key=distance)
    return str(best[0]), best


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _training_gap(row: TrainingPoint, p: TrainingPoint) -> str:
    """What differs between a published row and the layout, in words."""
    gaps = []
    for name, theirs, ours in zip(_CELL_NAMES, row.cell(), p.cell(), strict=True):
        if theirs != ours:
            label = f"{name} " if name else ""
            gaps.append(f"{label}{_shown(ours)} (row: {_shown(theirs)})")
    for name, ours, theirs in (
        ("GPUs", p.gpus, row.gpus),
        ("parameters", p.params, row.params),
    ):
        if not 0.5 <= ours / theirs <= 2:
            gaps.append(_times(ours, theirs, name))
    for name, ours_i, theirs_i in (
        ("micro-batch", p.micro_batch, row.micro_batch),
        ("interleaving", p.virtual, row.virtual),
    ):
        if ours_i != theirs_i:
            gaps.append(f"{name} {ours_i} (row: {theirs_i})")
    return "; ".join(gaps)


@dataclass(frozen=True)
class CollectiveBands:
    """The bands of one predicted collective row (busbw and time) and its calibration."""

    busbw: Band
    time: Band
    fit: Fit


def collective_bands(
    t: CommTopology, collective: str, nbytes: int, busbw: float, time_us: float
) -> CollectiveBands:
    """Bands and calibration flag of a predicted nccl-tests row on ``t``."""
    fabric = fabric_of(t.nodes, t.sharp, t.efa)
    ratios = ratios_for("collective", collective_levels(collective, nbytes, t.nodes, fabric))
    return CollectiveBands(
        higher_band(busbw, ratios, 2),
        lower_band(time_us, ratios, 2),
        collective_fit(t.arch, fabric, collective, t.nodes, nbytes),
    )
