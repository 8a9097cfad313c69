"""The simulation's plots for the HTML report: allocation over time, queueing, a 24 h profile.

Built from `svg`'s escaped elements, so tenant names and MIG layouts from user files
cannot open a tag; no ``<defs>`` or ``id`` either, so the same plots can appear twice on one
page (several replays side by side). Times are seconds from the trace's start, which the
replay takes as midnight (UTC, or the MIG schedule's zone), so ticks read "day 2 06:00".
Queueing delays are drawn on a log scale from one second: a delay under a second draws no
bar but keeps its label. The functions are pure: the same figures give the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from infra.report.svg import el, line, nice_step, num, rect, svg, text, title
from infra.simulate.result import Delays, Repartition

__all__ = ["allocation_chart", "clock", "duration", "hourly_chart", "queueing_chart"]

_W = 760
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 160, 16, 44
_DAY = 86400.0
_MARK_W = 10.0  # a repartition marker's width: closer events share one marker
# Time-axis steps (seconds) and the log-axis ticks of queueing delays, with their labels.
_TIME_STEPS = (3600, 3 * 3600, 6 * 3600, 12 * 3600, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY)
_DELAY_TICKS = (
    (1.0, "1 s"),
    (10.0, "10 s"),
    (60.0, "1 min"),
    (600.0, "10 min"),
    (3600.0, "1 h"),
    (6 * 3600.0, "6 h"),
    (_DAY, "1 d"),
    (7 * _DAY, "7 d"),
    (30 * _DAY, "30 d"),
)
_PERCENTILES = (("p50", "p50_s"), ("p95", "p95_s"), ("p99", "p99_s"))


def duration(seconds: float) -> str:
    """A delay as a reader says it: ``42 s``, ``3.5 min``, ``1.5 h``, ``2.1 d`` (``—`` if unknown)."""
    if math.isnan(seconds):
        return "—"
    for unit, scale in (("d", _DAY), ("h", 3600.0), ("min", 60.0)):
        if seconds >= scale:
            return f"{round(seconds / scale, 1):g} {unit}"
    return f"{round(seconds, 1):g} s"


def clock(seconds: float) -> str:
    """A time from the trace's start as ``day 2 06:30`` (day 1 begins at the start)."""
    day, rest = divmod(int(seconds), 86400)
    return f"day {day + 1} {rest // 3600:02d}:{rest % 3600 // 60:02d}"


@dataclass(frozen=True)
class _Frame:
    """A plot in an SVG of ``height``: linear axes from (0, 0) to (x_high, y_high)."""

    height: float
    x_high: float
    y_high: float

    @property
    def right(self) -> float:
        return _W - _RIGHT

    @property
    def bottom(self) -> float:
        return self.height - _BOTTOM

    def x(self, value: float) -> float:
        return _LEFT + value / (self.x_high or 1.0) * (self.right - _LEFT)

    def y(self, value: float) -> float:
        return self.bottom - value / (self.y_high or 1.0) * (self.bottom - _TOP)


def _y_axis(frame: _Frame, step: float, label: str, fmt: str = "{:,.0f}") -> list[Markup]:
    parts = [rect(_LEFT, _TOP, frame.right - _LEFT, frame.bottom - _TOP, class_="plot")]
    for i in range(round(frame.y_high / step) + 1):
        y = frame.y(i * step)
        parts.append(line(_LEFT, y, frame.right, y, class_="grid"))
        parts.append(text(_LEFT - 6, y + 4, fmt.format(i * step), class_="tick", text_anchor="end"))
    mid = (_TOP + frame.bottom) / 2
    rotate = f"rotate(-90 14 {num(mid)})"
    parts.append(text(14, mid, label, class_="axis", text_anchor="middle", transform=rotate))
    return parts


def _time_axis(frame: _Frame) -> list[Markup]:
    step = next((s for s in _TIME_STEPS if frame.x_high / s <= 8), _TIME_STEPS[-1])
    parts: list[Markup] = []
    for i in range(int(frame.x_high // step) + 1):
        t = i * step
        x = frame.x(t)
        label = f"day {int(t // _DAY) + 1}" if t % _DAY == 0 else clock(t)[-5:]
        parts.append(line(x, _TOP, x, frame.bottom, class_="grid"))
        parts.append(text(x, frame.bottom + 16, label, class_="tick", text_anchor="middle"))
    middle = (_LEFT + frame.right) / 2
    parts.append(
        text(
            middle,
            frame.height - 6,
            "time from the trace's start",
            class_="axis",
            text_anchor="middle",
        )
    )
    return parts


def _legend_row(y: float, css: str, label: str, *, marker: bool = False) -> list[Markup]:
    x = _W - _RIGHT + 10
    key = _marker(x + 9, y - 8, css) if marker else line(x, y - 4, x + 18, y - 4, class_=css)
    return [key, text(x + 24, y, label, class_="legend")]


def _marker(x: float, y: float, css: str, tip: str = "") -> Markup:
    """A small downward triangle whose tip is at (x, y + 8)."""
    d = f"M{num(x - _MARK_W / 2)} {num(y)}h{num(_MARK_W)}l{num(-_MARK_W / 2)} 8z"
    return el("path", title(tip) if tip else Markup(""), d=d, class_=css)


def _clusters(frame: _Frame, events: Sequence[Repartition]) -> list[list[Repartition]]:
    """Events in time order, grouped while each stays within a marker's width of the first."""
    out: list[list[Repartition]] = []
    for event in sorted(events, key=lambda r: (r.at_s, r.group, r.su)):
        if out and frame.x(event.at_s) - frame.x(out[-1][0].at_s) < _MARK_W:
            out[-1].append(event)
        else:
            out.append([event])
    return out


def _repartition_marks(frame: _Frame, events: Sequence[Repartition]) -> list[Markup]:
    """A marker at the plot's top per cluster of events; its tooltip lists what changed."""
    parts: list[Markup] = []
    for here in _clusters(frame, events):
        what = ", ".join(dict.fromkeys(f"{r.group}/{r.su} → {r.mig}" for r in here))
        span = clock(here[0].at_s) + (f" to {clock(here[-1].at_s)}" if len(here) > 1 else "")
        tip = f"{len(here)} MIG repartition{'s' if len(here) > 1 else ''}, {span}: {what}"
        parts.append(_marker(frame.x(here[0].at_s), _TOP + 1, "repart", tip))
    return parts


def allocation_chart(
    series: Sequence[tuple[float, int]],
    gpus: int,
    horizon_s: float,
    repartitions: Sequence[Repartition],
) -> Markup:
    """Allocated GPUs over time, the cluster's GPUs as a dashed line, repartitions as markers."""
    height = 320.0
    top_value = max([gpus, *(g for _, g in series)]) * 1.08 or 1.0
    step = nice_step(top_value / 2)  # about ten grid lines: GPUs are read off this axis
    x_high = max([horizon_s, *(t for t, _ in series)]) or 1.0
    frame = _Frame(height, x_high, step * math.ceil(top_value / step))
    parts = _y_axis(frame, step, "allocated GPUs") + _time_axis(frame)
    points = [(frame.x(t), frame.y(g)) for t, g in series]
    if points:
        outline = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        base = f"{num(points[-1][0])},{num(frame.bottom)} {num(points[0][0])},{num(frame.bottom)}"
        parts.append(el("polygon", points=f"{outline} {base}", class_="sim-area"))
        parts.append(el("polyline", title("allocated GPUs"), points=outline, class_="sim-alloc"))
    capacity = frame.y(gpus)
    parts.append(line(_LEFT, capacity, frame.right, capacity, class_="sim-capacity"))
    parts += _repartition_marks(frame, repartitions)
    legend_top = _TOP + 12
    parts += _legend_row(legend_top, "curve sim-alloc", "allocated GPUs")
    parts += _legend_row(legend_top + 16, "sim-capacity", f"cluster: {gpus:,} GPUs")
    if repartitions:
        parts += _legend_row(legend_top + 32, "repart", "MIG repartition", marker=True)
    return svg(_W, height, parts, "Allocated GPUs over time", class_="chart sim")


def _delay_x(value: float, high: float, left: float, right: float) -> float:
    """Where ``value`` seconds falls on a log axis from 1 s to ``high`` s (below 1 s: the left)."""
    if value <= 1.0 or math.isnan(value):
        return left
    return left + math.log10(value) / math.log10(high) * (right - left)


def queueing_chart(delays: dict[str, Delays]) -> Markup:
    """p50, p95 and p99 queueing delay per tenant: three bars each on a log scale of seconds."""
    left, right, row_h, top = 150.0, _W - 80.0, 36.0, 12.0
    longest = max((d.p99_s for d in delays.values() if not math.isnan(d.p99_s)), default=0.0)
    high = next((t for t, _ in _DELAY_TICKS if t >= max(longest, 60.0)), _DELAY_TICKS[-1][0])
    ticks = [t for t in _DELAY_TICKS if t[0] <= high]
    bottom = top + row_h * len(delays)
    parts = [rect(left, top, right - left, bottom - top, class_="plot")]
    for value, label in ticks:
        x = _delay_x(value, high, left, right)
        parts.append(line(x, top, x, bottom, class_="grid"))
        parts.append(text(x, bottom + 14, label, class_="tick", text_anchor="middle"))
    for i, (tenant, d) in enumerate(delays.items()):
        y = top + i * row_h + 6
        shown = tenant if len(tenant) <= 20 else tenant[:19] + "…"
        name = title(tenant) + el("tspan", shown)
        parts.append(el("text", name, x=left - 8, y=y + 14, class_="tenant", text_anchor="end"))
        for j, (label, field) in enumerate(_PERCENTILES):
            value = getattr(d, field)
            end = _delay_x(value, high, left, right)
            tip = f"{tenant}: {label} {duration(value)} over {d.jobs:,} jobs"
            bar_y = y + j * 8
            parts.append(rect(left, bar_y, end - left, 7, tip, class_=f"q{label[1:]}"))
            parts.append(text(end + 4, bar_y + 7, duration(value), class_="bar-label"))
    axis_y = bottom + 32
    parts.append(
        text(
            (left + right) / 2,
            axis_y,
            "queueing delay (log scale)",
            class_="axis",
            text_anchor="middle",
        )
    )
    return svg(
        _W, axis_y + 6, parts, "Queueing delay per tenant: p50, p95 and p99", class_="chart sim"
    )


def hourly_chart(profile: Sequence[float], mean: float) -> Markup:
    """The mean allocated share per hour of the day: 24 bars, the overall mean dashed."""
    height = 260.0
    frame = _Frame(height, 24.0, 1.0)
    parts = _y_axis(frame, 0.25, "allocated share", "{:.0%}")
    slot = (frame.right - _LEFT) / 24
    for hour, share in enumerate(profile):
        y = frame.y(0.0 if math.isnan(share) else share)
        shown = "no figure" if math.isnan(share) else f"{share:.1%} of GPUs allocated"
        tip = f"{hour:02d}:00-{(hour + 1) % 24:02d}:00: {shown}"
        parts.append(rect(frame.x(hour) + 2, y, slot - 4, frame.bottom - y, tip, class_="hour"))
    for hour in range(0, 25, 3):
        label = f"{hour % 24:02d}:00"
        parts.append(
            text(frame.x(hour), frame.bottom + 16, label, class_="tick", text_anchor="middle")
        )
    middle = (_LEFT + frame.right) / 2
    parts.append(text(middle, height - 6, "hour of day", class_="axis", text_anchor="middle"))
    if not math.isnan(mean):
        y = frame.y(mean)
        parts.append(line(_LEFT, y, frame.right, y, class_="sim-mean"))
        parts.append(text(frame.right + 6, y + 4, f"mean {mean:.1%}", class_="legend"))
    return svg(_W, height, parts, "Allocated share by hour of the day", class_="chart sim")
