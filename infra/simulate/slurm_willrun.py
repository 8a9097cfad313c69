"""Where and when backfill plans a job: its node-space map and `select/cons_tres`'s will-run test.

Ported from Slurm 22.05 (`src/plugins/sched/backfill/backfill.c`, `_attempt_backfill`'s
`TRY_LATER` loop, `_add_reservation`, `_test_resv_overlap`; `src/plugins/select/cons_common/
cons_common.c`, `_will_run_test`), in whole seconds of the wall clock as slurmctld keeps them.
A cycle's node-space map starts as one record, from the cycle's start to `bf_window` later,
with every node available; each job planned in the future takes its nodes out from its start
to the end of its time limit, both rounded down to `bf_resolution`. To plan a job, backfill
takes the partition's nodes available over the job's whole time from `start_res` (now, at
first), notes `later_start`, the first map boundary after which a node it lost comes back,
and asks the will-run test on those nodes; an estimate past `later_start`, or whose nodes
overlap a reservation the test did not see, is tried again from there (`TRY_LATER`). The
will-run test knows running jobs only: it removes those on the usable nodes in batches, in
order of their end (start plus time limit), the first batch up to a barrier aligned on 30 s
past the first such end plus a 30 s window, the window doubling for each next batch until it
reaches the next end; the start is the batch's last end once the job fits. Not modelled: the
test's 2 s wall-time cap, and `bf_window_linear`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

__all__ = [
    "KILL_WAIT_S",
    "WILL_RUN_WINDOW_S",
    "NodeSpace",
    "RunningEnd",
    "Wanted",
    "floor_to",
    "mask_of",
    "nodes_of",
    "place",
    "will_run",
]

WILL_RUN_WINDOW_S = 30
"""`_will_run_test`'s first window and barrier alignment, seconds (`time_window = 30`)."""

KILL_WAIT_S = 30
"""Slurm's `KillWait` default (the rendered slurm.conf sets none): the will-run test takes a
running job past its time limit's end to end this long after it, never now (`_guess_job_end`)."""

BATCH_REMOVALS = 202
"""Running jobs removed in one batch after which, with more in the window, the test skips its
try and goes on removing (`if (rm_job_cnt++ > 200) goto timer_check`)."""

RunningEnd = tuple[int, tuple[tuple[int, int], ...], int]
"""A running job as the will-run test sees it: its end (start plus time limit, wall seconds),
its (node, whole GPUs) on the partition, and those nodes as a bit mask; sorted by end."""


def mask_of(nodes: Iterable[int]) -> int:
    """Node indices as a bit mask (Slurm's node bitmaps; Python's ints keep them exact)."""
    out = 0
    for node in nodes:
        out |= 1 << node
    return out


def nodes_of(mask: int) -> Iterator[int]:
    """The node indices set in ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True)
class Wanted:
    """What a job asks of the will-run test: whole GPUs, a node's GPUs, and node choice."""

    gpus: int
    per_node: int
    placement: str


class NodeSpace:
    """Backfill's map of nodes reserved for planned jobs over `[begin, end)`, wall seconds.

    Records as Slurm keeps them: ``begins[i]`` to the next begin (the last to ``end``), with
    the nodes in bit mask ``held[i]`` reserved.
    """

    def __init__(self, begin: int, end: int, resolution: int) -> None:
        self.end = end
        self.resolution = resolution
        self.begins = [begin]
        self.held = [0]

    def reserve(self, start: int, until: int, nodes: Iterable[int]) -> None:
        """Take ``nodes`` out from ``start`` to ``until`` (rounded), as `_add_reservation` does.

        The hold starts no earlier than the map and lasts at least one `bf_resolution`.
        Records are split where the hold begins and ends, and then the first two neighbours
        with the same nodes held from the record before the hold to the one after it are
        merged (one pair only, as Slurm does): which records exist decides `later_start`.
        """
        start = max(start, self.begins[0])
        until = max(until, start + self.resolution)
        at, before = self._begin_at(start)
        after = self._hold(at, until, mask_of(nodes)) if at is not None else None
        self._merge_one(before, after)

    @property
    def begin(self) -> int:
        """The map's first second: the cycle's start."""
        return self.begins[0]

    def _end(self, i: int) -> int:
        return self.begins[i + 1] if i + 1 < len(self.begins) else self.end

    def _split(self, i: int, t: int) -> None:
        """Record ``i`` ends at ``t``; a new record with its nodes runs from ``t`` to its end."""
        self.begins.insert(i + 1, t)
        self.held.insert(i + 1, self.held[i])

    def _begin_at(self, start: int) -> tuple[int | None, int]:
        """Where a hold from ``start`` begins: its first record's index, and the record before.

        The index is None past the map; the record before is the last ending before
        ``start`` (0 if none). A hold from the map's first second splits the first record
        there too, leaving it empty, as Slurm does.
        """
        before = 0
        for i in range(len(self.begins)):
            end = self._end(i)
            if end > start:
                self._split(i, start)
                return i + 1, before
            if end == start:
                return i + 1, before
            before = i
        return None, before

    def _hold(self, at: int, until: int, taken: int) -> int | None:
        """Hold ``taken`` in records from ``at`` to ``until``; the record after the hold."""
        i = at
        while i < len(self.begins):
            if until < self._end(i):
                self._split(i, until)
            self.held[i] = self.held[i] | taken
            if until == self._end(i):
                return i + 1 if i + 1 < len(self.begins) else None
            i += 1
        return None

    def _merge_one(self, before: int, after: int | None) -> None:
        i = before
        while i != after and i + 1 < len(self.begins):
            if self.held[i] != self.held[i + 1]:
                i += 1
                continue
            del self.begins[i + 1], self.held[i + 1]
            return

    def records(self) -> list[tuple[int, int, frozenset[int]]]:
        """The map's records in time order: (begin, end, nodes reserved)."""
        ends = [*self.begins[1:], self.end]
        held = [frozenset(nodes_of(h)) for h in self.held]
        return list(zip(self.begins, ends, held, strict=True))

    @property
    def reserved(self) -> int:
        """Every node some record holds, as a bit mask."""
        out = 0
        for held in self.held:
            out |= held
        return out

    def usable(self, part: int, start_res: int, end_time: int) -> tuple[int, int]:
        """The partition's nodes free of reservations over the job's time, and `later_start`.

        Node sets are bit masks. A record counts when it ends after ``start_res`` and begins
        no later than ``end_time`` (Slurm's test is inclusive). `later_start` (0 if none) is
        the end of the first record after which a node the job lost so far comes back,
        looked for before the walk stops at the first record past the job's end.
        """
        avail, later = part, 0
        begins, held, count = self.begins, self.held, len(self.begins)
        for i in range(count):
            end = begins[i + 1] if i + 1 < count else self.end
            if end <= start_res:
                continue
            if not later and i + 1 < count and part & ~held[i + 1] & ~(avail & ~held[i]):
                later = end
            if begins[i] > end_time:
                break
            avail &= ~held[i]
        return avail, later

    def overlaps(self, nodes: int, start: int, until: int) -> bool:
        """Whether the nodes of mask ``nodes`` are reserved in ``[start, until)``.

        Slurm's `_test_resv_overlap`.
        """
        begins, count = self.begins, len(self.begins)
        for i, held in enumerate(self.held):
            end = begins[i + 1] if i + 1 < count else self.end
            if end > start and begins[i] < until and nodes & held:
                return True
        return False


def will_run(
    want: Wanted,
    free: dict[int, int],
    ends: Sequence[RunningEnd],
    usable: int,
    now: int,
) -> tuple[int, list[int]] | None:
    """When and where the job starts on the ``usable`` nodes (a mask) as running jobs end.

    None if it never does. ``free`` is each node's free whole GPUs now (left as it was).
    """
    nodes = place(want, free, usable)
    if nodes is not None:
        return now, nodes
    batch = _Batch(ends, usable, dict(free))
    for last in batch.tried():
        nodes = batch.place(want)
        if nodes is not None:
            return (last if last > now else _guess_end(last, now)), nodes
    return None


class _Batch:
    """The will-run test's walk through running jobs in order of their end."""

    def __init__(self, ends: Sequence[RunningEnd], usable: int, left: dict[int, int]):
        self.ends, self.usable, self.left = ends, usable, left
        self.i = 0
        self.barrier = 0  # aligned on the first job with a usable node, once
        self.next_end: int | None = None
        self.touched = 0  # nodes the last tried batch gave GPUs back to (mask)

    def tried(self) -> Iterator[int]:
        """Remove running jobs batch by batch; yield the last end of each batch to try.

        The window doubles after each until it reaches the next end. A batch cut at
        `BATCH_REMOVALS` is not tried: Slurm goes on removing.
        """
        window = WILL_RUN_WINDOW_S
        while self.i < len(self.ends):
            self.touched = 0
            last, full = self.remove(window)
            while full:
                last, full = self.remove(window)
            if last is None:
                return
            window *= 2
            while self.next_end is not None and self.next_end > self.barrier + window:
                window *= 2
            yield last

    def remove(self, window: int) -> tuple[int | None, bool]:
        """Remove the next batch; its last end (None: none left) and whether it was cut short.

        A batch is cut short at `BATCH_REMOVALS`. A job with no usable node is skipped, not
        a batch boundary, though it is the next end a batch compares with its window.
        """
        last, removed, self.next_end = None, 0, None
        while self.i < len(self.ends):
            end, parts, mask = self.ends[self.i]
            self.i += 1
            if not mask & self.usable:
                continue
            if not self.barrier:
                self.barrier = end + (WILL_RUN_WINDOW_S - end % WILL_RUN_WINDOW_S)
            for node, whole in parts:
                self.left[node] = self.left.get(node, 0) + whole
            self.touched |= mask
            last, removed = end, removed + 1
            self.next_end = self.ends[self.i][0] if self.i < len(self.ends) else None
            if self.next_end is None or self.next_end > self.barrier + window:
                return last, False
            if removed == BATCH_REMOVALS:
                return last, True
        return last, False

    def place(self, want: Wanted) -> list[int] | None:
        """Where the job fits once the tried batch is gone.

        Nothing fitted before, so one node can only be one the batch gave GPUs back to.
        """
        if want.gpus > want.per_node:
            return place(want, self.left, self.usable)
        touched = {n: self.left[n] for n in nodes_of(self.touched & self.usable)}
        return place(want, touched, self.usable)


def _guess_end(end: int, now: int) -> int:
    """A job past its time limit's end still runs: it ends KillWait later, never now."""
    return max(end + KILL_WAIT_S, now + 1)


def place(want: Wanted, free: dict[int, int], usable: int) -> list[int] | None:
    """Nodes for the job's whole GPUs among ``usable`` (a mask), given nodes' free GPUs.

    One node: the lowest-numbered that holds them (first fit, Slurm's), or the tightest
    (best fit). More: wholly free nodes in plan order, and the rest on one more node chosen
    the same way. ``free`` lists nodes in plan order.
    """
    gpus = want.gpus
    if gpus <= want.per_node:
        if want.placement == "first-fit":
            return next(([n] for n, f in free.items() if f >= gpus and usable >> n & 1), None)
        fits = [(f, n) for n, f in free.items() if f >= gpus and usable >> n & 1]
        return [min(fits)[1]] if fits else None
    whole, rest = divmod(gpus, want.per_node)
    full = sorted(n for n, f in free.items() if f >= want.per_node and usable >> n & 1)
    if len(full) < whole:
        return None
    chosen = full[:whole]
    if not rest:
        return chosen
    extra = place(replace(want, gpus=rest), free, usable & ~mask_of(chosen))
    return [*chosen, *extra] if extra else None


def floor_to(t: float, step: int) -> int:
    """``t`` rounded down to a multiple of ``step`` (whole seconds)."""
    return math.floor(t / step + 1e-9) * step
