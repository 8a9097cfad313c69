"""Per-job outcomes of a replay: what happened to each job, its JCT, and the CSV of them.

Each job of the trace ends the replay in one outcome: ``finished``; ``unfinished`` (started,
still running when the replay stopped at its horizon); ``not_started`` (waited until the
replay stopped); ``never_ran`` (the cluster could never hold it, decided before the replay,
with the reason). A finished job's completion time (JCT) is its finish less its submission;
its queueing delay its first start less its submission. `JobTable` keeps the replay's
per-job columns (no object per job until asked: a million-job replay stays small) and gives
`railplan simulate --jobs-csv` its rows.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from infra.errors import escape_controls, spreadsheet_safe
from infra.simulate.jobs import Job

__all__ = ["CSV_COLUMNS", "OUTCOMES", "JobTable"]

OUTCOMES = ("finished", "unfinished", "not_started", "never_ran")

CSV_COLUMNS = [
    "id",
    "line",
    "tenant",
    "priority",
    "gpus",
    "gpu_milli",
    "flag",
    "outcome",
    "submit_s",
    "start_s",
    "end_s",
    "queue_s",
    "jct_s",
    "evictions",
    "reason",
]


@dataclass(frozen=True, slots=True)
class JobTable:
    """The replayed jobs' columns, and the never-ran jobs with their reasons."""

    jobs: Sequence[Job]
    first_start: Sequence[float | None]
    end_at: Sequence[float | None]
    evictions: Sequence[int]
    never: Sequence[tuple[Job, str]]

    def outcome(self, index: int) -> str:
        """The outcome of replayed job ``index``."""
        if self.end_at[index] is not None:
            return "finished"
        return "unfinished" if self.first_start[index] is not None else "not_started"

    def counts(self) -> dict[str, int]:
        """Jobs per outcome (every outcome listed, in `OUTCOMES` order)."""
        out = dict.fromkeys(OUTCOMES, 0)
        for index in range(len(self.jobs)):
            out[self.outcome(index)] += 1
        out["never_ran"] = len(self.never)
        return out

    def completion_times(self) -> list[float]:
        """JCT (finish less submit, seconds) of every finished job."""
        return [
            end - job.submit_s
            for job, end in zip(self.jobs, self.end_at, strict=True)
            if end is not None
        ]

    def makespan_s(self) -> float:
        """First submission to last finish (0 when nothing finished)."""
        ends = [end for end in self.end_at if end is not None]
        if not ends:
            return 0.0
        return max(ends) - min(job.submit_s for job in self.jobs)

    def rows(self) -> Iterator[list[str]]:
        """One CSV row per job of the trace, replayed ones first (trace order), then never-ran."""
        for index, job in enumerate(self.jobs):
            start, end = self.first_start[index], self.end_at[index]
            yield [
                *_head(job),
                self.outcome(index),
                _num(job.submit_s),
                _num(start),
                _num(end),
                _num(None if start is None else start - job.submit_s),
                _num(None if end is None else end - job.submit_s),
                str(self.evictions[index]),
                "",
            ]
        for job, reason in self.never:
            yield [*_head(job), "never_ran", _num(job.submit_s), "", "", "", "", "0", _text(reason)]

    def csv(self) -> str:
        """The rows as CSV text with a header."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        writer.writerows(self.rows())
        return out.getvalue()


def _head(job: Job) -> list[str]:
    return [
        _text(job.id),
        str(job.line),
        _text(job.tenant),
        _text(job.priority),
        str(job.gpus),
        str(job.milli),
        _text(job.flag),
    ]


def _text(cell: str) -> str:
    """A text cell, shown as text and never run as a formula, with no raw control character.

    It may hold what the trace file held (an id, a tenant, or a never-ran reason naming the
    trace's GPU model), and a terminal that `cat`s the file would run an escape in it.
    """
    return spreadsheet_safe(escape_controls(cell))


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}".rstrip("0").rstrip(".")
