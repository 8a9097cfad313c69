"""Running jobs as backfill's will-run test sees them, kept in step with the replay.

Every job backfill plans reads, for its partition, each open node's free whole GPUs, every
running job in order of its end (start plus time limit, wall seconds) with its GPUs on the
partition, and the nodes running a job in its epilog (`infra.simulate.slurm`). Worked out
afresh for each plan, that walk over every running job was most of a large Slurm replay's
time. This index keeps each running job's end and parts from the moment it is first seen to
its end, and per partition the free GPUs and the ends in order, changed by insertion and
deletion as jobs start and end. It learns what ended by comparing the replay's running jobs
with the ones it holds, and what started from the replay's count of starts (a job gets a
new `Run`, last in the running jobs, each time it starts), so no path that starts, ends or
evicts a job has to tell it. Nodes closed or reopened for a MIG
change (`Cluster.layout`) rebuild the partitions' lists. The view is the one a walk from
scratch gives, to the bit: the same integers, in the same order.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from itertools import islice

from infra.simulate.cluster import Cluster, GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.slurm_willrun import RunningEnd, mask_of
from infra.simulate.state import Run

__all__ = ["RunningIndex", "RunningView"]

RunningView = tuple[dict[int, int], list[RunningEnd], frozenset[int]]
"""Free whole GPUs per open node of a partition (plan order), the running jobs that are not
in their epilog in order of their end, and the nodes running a job in its epilog."""

Parts = tuple[tuple[int, int], ...]
Sorted = tuple[int, int, RunningEnd]  # (end, job index, the job as the test sees it)


class _Partition:
    """One partition's free GPUs and running ends, as if no job were in its epilog."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.free = {n.index: n.whole_total for n in cluster.nodes if n.group == group and n.open}
        self.ends: list[Sorted] = []
        self.entry: dict[int, Sorted] = {}

    def add(self, index: int, end: int, parts: Parts) -> None:
        """A job started: its parts on this partition's open nodes leave their GPUs."""
        free = self.free
        mine = tuple((node, whole) for node, whole in parts if node in free)
        item = (end, index, (end, mine, mask_of(node for node, _ in mine)))
        bisect.insort(self.ends, item)
        self.entry[index] = item
        for node, whole in mine:
            free[node] -= whole

    def drop(self, index: int) -> None:
        """A job ended (or is seen again with a new run): its GPUs come back."""
        item = self.entry.pop(index)
        del self.ends[bisect.bisect_left(self.ends, item)]
        for node, whole in item[2][1]:
            self.free[node] += whole


class RunningIndex:
    """Every running job's end and parts, and each partition's view of them (module doc)."""

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        running: dict[int, Run],
        end_of: Callable[[Job, Run], int],
        starts: Callable[[], int],
    ) -> None:
        self.cluster, self.jobs, self.running, self.end_of = cluster, jobs, running, end_of
        self.starts, self.seen = starts, 0  # the replay's count of starts, and as last seen
        self.known: dict[int, tuple[Run, int, Parts]] = {}  # job -> (its run, end, parts)
        self.epilog_at: dict[int, float] = {}  # job -> when its epilog begins (epilogs only)
        self.parts: dict[str, _Partition] = {}
        self.layout = cluster.layout

    def view(self, group: GroupIndex, now: float) -> RunningView:
        """The will-run test's view of ``group`` at ``now`` (`RunningView`)."""
        self._sync()
        part = self.parts.get(group.name)
        if part is None:
            part = self.parts[group.name] = self._partition(group.name)
        free = dict(part.free)
        done = [i for i, at in self.epilog_at.items() if at <= now]
        if not done:
            return free, [running for _, _, running in part.ends], frozenset()
        completing: set[int] = set()
        for index in done:  # in its epilog: slurmctld released its GPUs as it ended
            for node, whole in part.entry[index][2][1]:
                free[node] += whole
                completing.add(node)
        skip = set(done)
        ends = [running for _, index, running in part.ends if index not in skip]
        return free, ends, frozenset(completing)

    def _partition(self, group: str) -> _Partition:
        part = _Partition(self.cluster, group)
        for index, (_, end, parts) in self.known.items():
            part.add(index, end, parts)
        return part

    def _sync(self) -> None:
        """Take in the jobs that started and ended since the last view.

        A job that starts goes last in the replay's running jobs (it left them, if it ran
        before, when it ended or was evicted), so the jobs started since the last view are
        among as many last ones as there were starts.
        """
        if self.cluster.layout != self.layout:  # nodes closed or reopened: rebuild
            self.layout, self.parts = self.cluster.layout, {}
        known, running = self.known, self.running
        for index in known.keys() - running.keys():
            self._drop(index)
        starts = self.starts()
        new, self.seen = starts - self.seen, starts
        for index, run in islice(reversed(running.items()), new):
            held = known.get(index)
            if held is None or held[0] is not run:
                if held is not None:
                    self._drop(index)
                self._add(index, run)

    def _add(self, index: int, run: Run) -> None:
        job = self.jobs[index]
        end = self.end_of(job, run)
        parts = tuple((part.node, part.whole) for part in run.alloc)
        self.known[index] = (run, end, parts)
        if job.epilog_s:  # the same sum, in the same order, as the test from scratch made
            self.epilog_at[index] = run.work_from_s + job.duration_s - job.epilog_s
        for part in self.parts.values():
            part.add(index, end, parts)

    def _drop(self, index: int) -> None:
        del self.known[index]
        self.epilog_at.pop(index, None)
        for part in self.parts.values():
            part.drop(index)
