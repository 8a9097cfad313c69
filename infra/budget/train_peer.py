"""Side-by-side accuracy of the training model and a peer model on the same published runs.

A peer (Calculon, Isaev et al. SC23) cannot be installed here (PyPI's ``calculon`` is an
unrelated package), so ``tests/data/training-measurements.yaml`` records its figures under
``peers`` with the command and commit that printed them, and this module times the same
rows with `train_layout.step` (through `train_accuracy.row_job`, as the rest of the harness
does) to print the "### Against a peer" part of docs/accuracy.md. Errors are predicted /
measured - 1 on iteration time; "closer" is the smaller |error|.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from infra.budget import train_layout
from infra.budget.train_accuracy import row_job, split
from infra.catalog import Catalog

__all__ = ["PeerRow", "peer_markdown", "peer_rows"]


@dataclass(frozen=True)
class PeerRow:
    """One run: measured iteration time, railplan's and the peer's, and railplan's half."""

    row_id: str
    measured_s: float
    railplan_s: float
    peer_s: float
    held_out: bool

    @property
    def railplan_error(self) -> float:
        """The predicted / measured - 1 of railplan's step model."""
        return self.railplan_s / self.measured_s - 1

    @property
    def peer_error(self) -> float:
        """The peer's predicted / measured - 1."""
        return self.peer_s / self.measured_s - 1


def peer_rows(data: dict[str, Any], catalog: Catalog, peer: str) -> list[PeerRow]:
    """The peer's recorded rows, each timed by railplan on the measurement row it names."""
    by_id = {r["id"]: r for r in data["measurements"]}
    held = {r["id"] for r in split(data["measurements"])[1]}
    out = []
    for entry in data["peers"][peer]["rows"]:
        row = by_id[entry["row"]]
        job, layout = row_job(row, catalog, data.get("sources"))
        out.append(
            PeerRow(
                row["id"],
                float(entry["measured_s"]),
                train_layout.step(job, layout).step_s,
                float(entry["peer_s"]),
                row["id"] in held,
            )
        )
    return out


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1%}" if values else "n/a"


def peer_markdown(data: dict[str, Any], catalog: Catalog) -> list[str]:
    """The "### Against a peer" lines: one table per recorded peer, with its source."""
    lines: list[str] = []
    for name, peer in data.get("peers", {}).items():
        rows = peer_rows(data, catalog, name)
        closer = sum(abs(r.railplan_error) < abs(r.peer_error) for r in rows)
        lines += [
            f"### Against a peer: {name}",
            "",
            (
                f"Iteration time of the runs both tools can express. {name}'s figures: "
                f"{peer['title']} — {peer['url']}; printed by {peer['how']} "
                f"({peer['source_url']}). These runs are {name}'s own validation set; for "
                "railplan the `half` column says whether a row was fitted. railplan is "
                f"closer on {closer} of {len(rows)} rows; median |error| railplan "
                f"{_median([abs(r.railplan_error) for r in rows])}, {name} "
                f"{_median([abs(r.peer_error) for r in rows])}."
            ),
            "",
            (
                f"| row | half | measured s | railplan s | railplan error | {name} s | "
                f"{name} error | closer |"
            ),
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            who = "railplan" if abs(r.railplan_error) < abs(r.peer_error) else name
            lines.append(
                f"| `{r.row_id}` | {'held out' if r.held_out else 'fit'} | {r.measured_s:.4g} | "
                f"{r.railplan_s:.4g} | {r.railplan_error:+.1%} | {r.peer_s:.4g} | "
                f"{r.peer_error:+.1%} | {who} |"
            )
        lines.append("")
    return lines
