"""Side-by-side accuracy of the training model and a peer model on the same published runs.

A peer (Calculon, Isaev et al. SC23) cannot be installed here (PyPI's ``calculon`` is an
unrelated package), so ``tests/data/training-measurements.yaml`` records its figures under
``peers`` with the command and commit that printed them, and this module sets railplan's
predictions for the same rows beside them (through `train_accuracy.compare`, as the rest of
the harness does) to print the "### Against a peer" parts of docs/accuracy.md. An entry with
``measured_s`` compares iteration time with that measurement; one without compares on its
row's own metrics, a TFLOP/s figure being railplan's FLOPs over the peer's step time.
Errors are predicted / measured - 1; "closer" is the smaller |error|.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from infra.budget import train_layout
from infra.catalog import Catalog
from tools.accuracy.train_accuracy import TrainComparison, compare, row_job

__all__ = ["PeerRow", "peer_markdown", "peer_rows"]


@dataclass(frozen=True)
class PeerRow:
    """One run and metric: measured, railplan's and the peer's value, railplan's half."""

    row_id: str
    metric: str
    measured: float
    railplan: float
    peer: float
    held_out: bool

    @property
    def railplan_error(self) -> float:
        """The predicted / measured - 1 of railplan's step model."""
        return self.railplan / self.measured - 1

    @property
    def peer_error(self) -> float:
        """The peer's predicted / measured - 1."""
        return self.peer / self.measured - 1


def _step_s(data: dict[str, Any], catalog: Catalog, row: dict[str, Any]) -> float:
    job, layout = row_job(row, catalog, data.get("sources"))
    return train_layout.step(job, layout).step_s


def _own_metrics(
    entry: dict[str, Any], step_s: float, mine: list[TrainComparison]
) -> list[PeerRow]:
    """The peer's step time set against each metric the row reports."""
    out = []
    for c in mine:
        peer = (
            entry["peer_s"] if c.metric == "iteration s" else c.predicted * step_s / entry["peer_s"]
        )
        out.append(PeerRow(c.row_id, c.metric, c.measured, c.predicted, peer, c.held_out))
    return out


def peer_rows(data: dict[str, Any], catalog: Catalog, peer: str) -> list[PeerRow]:
    """The peer's recorded rows beside railplan's predictions for the same runs."""
    by_id = {r["id"]: r for r in data["measurements"]}
    ours: dict[str, list[TrainComparison]] = {}
    for c in compare(data, catalog):
        if c.metric != "scaling":
            ours.setdefault(c.row_id, []).append(c)
    out = []
    for entry in data["peers"][peer]["rows"]:
        row = by_id[entry["row"]]
        step_s = _step_s(data, catalog, row)
        if "measured_s" not in entry:
            out += _own_metrics(entry, step_s, ours[row["id"]])
            continue
        held = ours[row["id"]][0].held_out
        measured, peer_s = float(entry["measured_s"]), float(entry["peer_s"])
        out.append(PeerRow(row["id"], "iteration s", measured, step_s, peer_s, held))
    return out


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1%}" if values else "n/a"


def _table(rows: list[PeerRow], name: str) -> list[str]:
    lines = [
        (
            f"| row | half | metric | measured | railplan | railplan error | {name} | "
            f"{name} error | closer |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        who = "railplan" if abs(r.railplan_error) < abs(r.peer_error) else name
        lines.append(
            f"| `{r.row_id}` | {'held out' if r.held_out else 'fit'} | {r.metric} | "
            f"{r.measured:.4g} | {r.railplan:.4g} | {r.railplan_error:+.1%} | {r.peer:.4g} | "
            f"{r.peer_error:+.1%} | {who} |"
        )
    return lines


def peer_markdown(data: dict[str, Any], catalog: Catalog) -> list[str]:
    """The "### Against a peer" lines: one table per recorded peer, with its source."""
    lines: list[str] = []
    for name, peer in data.get("peers", {}).items():
        rows = peer_rows(data, catalog, name)
        closer = sum(abs(r.railplan_error) < abs(r.peer_error) for r in rows)
        held = [r for r in rows if r.held_out]
        held_closer = sum(abs(r.railplan_error) < abs(r.peer_error) for r in held)
        lines += [
            f"### Against a peer: {name}",
            "",
            (
                f"{peer['title']} — {peer['url']}; {peer['how']} ({peer['source_url']}). "
                "The `half` column says whether railplan fitted a row. railplan is closer on "
                f"{closer} of {len(rows)} rows; median |error| railplan "
                f"{_median([abs(r.railplan_error) for r in rows])}, {name} "
                f"{_median([abs(r.peer_error) for r in rows])}; on the rows railplan held out, "
                f"closer on {held_closer} of {len(held)}."
            ),
            "",
            *_table(rows, name),
            "",
        ]
    return lines
