"""SVG building blocks for the HTML report: escaped elements, a log-x line chart, bars.

Every function returns SVG source as `markupsafe.Markup`, with every text and attribute
value escaped, so spec strings can never open a tag. Numbers are written with at most one
decimal (`num`), so the same input always gives the same bytes. The SVGs carry no
``xmlns`` (inline SVG in HTML needs none) and no script, link or external reference: a
report opens offline. Sizes are in CSS pixels through ``viewBox``; the page's CSS scales
each SVG to its column (``width: 100%``), which is what keeps them whole when printed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup
from markupsafe import escape as _html_escape

from infra.errors import escape_controls

__all__ = [
    "Ceiling",
    "Series",
    "el",
    "line",
    "line_chart",
    "nice_step",
    "num",
    "rect",
    "svg",
    "text",
    "title",
]

_CHART_W, _CHART_H = 760, 380
_MARGIN_L, _MARGIN_R, _MARGIN_T, _MARGIN_B = 56, 150, 16, 44


def escape(value: object) -> Markup:
    r"""HTML-escaped, and a control or bidirectional character shown as its escape (``\x1b``).

    A trace's tenant or job id may hold ESC or U+202E: raw in the page they are an HTML parse
    error, make the SVG invalid XML, and act on a terminal that shows the file (``cat``).
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        value = escape_controls(value)
    return _html_escape(value)


def num(value: float) -> str:
    """A coordinate or size: one decimal at most, no trailing zeros, no ``-0``."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _attrs(attributes: dict[str, object]) -> str:
    parts = []
    for key, value in attributes.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        shown = num(value) if isinstance(value, float) else value
        parts.append(f' {name}="{escape(shown)}"')
    return "".join(parts)


def el(tag: str, content: str = "", /, **attributes: object) -> Markup:
    """``<tag attributes>content</tag>``; plain-str content is escaped, Markup kept."""
    return Markup(f"<{tag}{_attrs(attributes)}>{escape(content)}</{tag}>")


def title(label: str) -> Markup:
    """A tooltip (and accessible name) for the enclosing element."""
    return el("title", label)


def rect(x: float, y: float, w: float, h: float, tip: str = "", /, **attributes: object) -> Markup:
    """A rectangle, with an optional tooltip."""
    inner = title(tip) if tip else Markup("")
    return el("rect", inner, x=float(x), y=float(y), width=float(w), height=float(h), **attributes)


def text(x: float, y: float, label: str, **attributes: object) -> Markup:
    """A text label at (x, y) (baseline)."""
    return el("text", label, x=float(x), y=float(y), **attributes)


def line(x1: float, y1: float, x2: float, y2: float, **attributes: object) -> Markup:
    """A straight line."""
    return el("line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2), **attributes)


def svg(
    width: float, height: float, body: Iterable[str], label: str, **attributes: object
) -> Markup:
    """An inline ``<svg>`` of the given size (scaled by CSS), with an accessible label."""
    inner = Markup("").join(Markup(part) for part in body)
    return el(
        "svg",
        Markup(title(label)) + inner,
        viewBox=f"0 0 {num(width)} {num(height)}",
        width=float(width),
        height=float(height),
        role="img",
        aria_label=label,
        **attributes,
    )


@dataclass(frozen=True)
class Series:
    """One curve of a line chart: (x, y) points, a legend label and a style class."""

    label: str
    points: Sequence[tuple[float, float]]
    css: str


@dataclass(frozen=True)
class Ceiling:
    """A horizontal limit line of a chart (e.g. the NIC ceiling)."""

    label: str
    y: float
    css: str


def nice_step(span: float) -> float:
    """A 1-2-5 tick step that gives about five ticks over ``span``."""
    raw = span / 5 if span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def _size_label(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def _x_ticks(low: float, high: float) -> list[float]:
    """Powers of 2**10 (and 2**5 between) inside [low, high]."""
    ticks = []
    exponent = math.ceil(math.log2(low) / 5) * 5
    while 2.0**exponent <= high:
        ticks.append(2.0**exponent)
        exponent += 5
    return ticks


@dataclass(frozen=True)
class _Frame:
    x_low: float
    x_high: float
    y_high: float

    def x(self, value: float) -> float:
        span = math.log2(self.x_high) - math.log2(self.x_low) or 1.0
        fraction = (math.log2(value) - math.log2(self.x_low)) / span
        return _MARGIN_L + fraction * (_CHART_W - _MARGIN_L - _MARGIN_R)

    def y(self, value: float) -> float:
        plot = _CHART_H - _MARGIN_T - _MARGIN_B
        return _CHART_H - _MARGIN_B - value / self.y_high * plot


def _axes(frame: _Frame, x_label: str, y_label: str, step: float) -> list[Markup]:
    bottom, right = _CHART_H - _MARGIN_B, _CHART_W - _MARGIN_R
    parts = [rect(_MARGIN_L, _MARGIN_T, right - _MARGIN_L, bottom - _MARGIN_T, class_="plot")]
    value = 0.0
    while value <= frame.y_high + 1e-9:
        y = frame.y(value)
        parts.append(line(_MARGIN_L, y, right, y, class_="grid"))
        parts.append(text(_MARGIN_L - 6, y + 4, f"{value:g}", class_="tick", text_anchor="end"))
        value += step
    for tick in _x_ticks(frame.x_low, frame.x_high):
        x = frame.x(tick)
        parts.append(line(x, _MARGIN_T, x, bottom, class_="grid"))
        parts.append(text(x, bottom + 16, _size_label(tick), class_="tick", text_anchor="middle"))
    parts.append(
        text((_MARGIN_L + right) / 2, _CHART_H - 6, x_label, class_="axis", text_anchor="middle")
    )
    mid = (_MARGIN_T + bottom) / 2
    parts.append(
        text(
            14,
            mid,
            y_label,
            class_="axis",
            text_anchor="middle",
            transform=f"rotate(-90 14 {num(mid)})",
        )
    )
    return parts


def _ceiling_parts(frame: _Frame, ceilings: Sequence[Ceiling]) -> tuple[list[Markup], float]:
    """Dashed limit lines, labels right of the plot pushed apart so they never overlap.

    Returns the parts and the baseline of the lowest label.
    """
    parts: list[Markup] = []
    right, last_y = _CHART_W - _MARGIN_R, float(_MARGIN_T)
    for c in sorted(ceilings, key=lambda c: -c.y):
        y = frame.y(c.y)
        parts.append(line(_MARGIN_L, y, right, y, class_=f"ceiling {c.css}"))
        label_y = max(y + 4, last_y + 13)
        parts.append(text(right + 6, label_y, c.label, class_=f"ceiling-label {c.css}"))
        last_y = label_y
    return parts, last_y


def _legend(series: Sequence[Series], top: float) -> list[Markup]:
    parts: list[Markup] = []
    x = _CHART_W - _MARGIN_R + 6
    for i, s in enumerate(series):
        y = top + 14 * i
        parts.append(line(x, y - 4, x + 18, y - 4, class_=f"curve {s.css}"))
        parts.append(text(x + 22, y, s.label, class_="legend"))
    return parts


def line_chart(
    series: Sequence[Series],
    ceilings: Sequence[Ceiling],
    *,
    x_label: str,
    y_label: str,
    label: str,
) -> Markup:
    """A chart of ``series`` on a log2 x axis (bytes) and a linear y axis from 0."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + [c.y for c in ceilings]
    step = nice_step(max(ys, default=1.0) * 1.08)
    frame = _Frame(
        min(xs, default=1.0), max(xs, default=2.0), step * math.ceil(max(ys) * 1.08 / step)
    )
    parts = _axes(frame, x_label, y_label, step)
    for s in series:
        points = " ".join(f"{num(frame.x(x))},{num(frame.y(y))}" for x, y in s.points)
        parts.append(el("polyline", title(s.label), points=points, class_=f"curve {s.css}"))
    limits, lowest = _ceiling_parts(frame, ceilings)
    parts += limits
    bottom = _CHART_H - _MARGIN_B
    parts += _legend(series, max(lowest + 24, bottom - 14 * (len(series) - 1)))
    return svg(_CHART_W, _CHART_H, parts, label, class_="chart")
