"""GPU fragmentation as FGD defines it, kept up to date as nodes change.

Weng et al. ("Beware of Fragmentation", USENIX ATC '23, section 3; their simulator's
``pkg/utils/frag.go``) measure a node's fragmentation against the workload: for each typical
task shape ``m`` with its share ``p_m`` of the trace's tasks, the free GPU capacity of node
``n`` that ``m`` cannot use is ``F_n(m)``: all of the node's free GPU capacity when ``m``
does not fit on it at all, else the free capacity of the GPUs (here: unsplit GPUs and free MIG
slices) each too small for ``m``. The node's fragmentation is ``sum_m p_m F_n(m)``, the
cluster's the sum over nodes. railplan's shapes are the trace's one-node jobs by (GPUs,
thousandths), weighted by count (FGD's default takes the most popular shapes; a job larger
than one node has no per-node fragment). GPU models are not told apart (FGD's ``no_access``
case), nor CPU and memory (railplan has no such dimension yet). A free slice of ``g`` compute
slices offers ``g/7`` of a GPU. Draining (closed) nodes count no fragment.

`FgdMeter` keeps every open node's value (memoised by the node's free state) and the cluster's
total, which the engine integrates over time like the allocation. A change only marks its
node; `flush` re-values the marked nodes when time advances, so the many tentative changes
of one instant (preemption lifts and puts back its candidates) cost one look-up per node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from infra.simulate.cluster import COMPUTE_SLICES, Node
from infra.simulate.jobs import MILLI_WHOLE, Job

__all__ = ["FgdMeter", "typical_shapes"]

Shape = tuple[int, int]
"""(GPUs, thousandths of each) of a task."""

State = tuple[int, tuple[tuple[int, int], ...]]
"""A node's free unsplit GPUs and its free slices as (compute size, count)."""


def typical_shapes(jobs: Iterable[Job], per_node: int) -> list[tuple[Shape, float]]:
    """The shapes of the trace's one-node jobs with their share of them, most common first."""
    counts = Counter((job.gpus, job.milli) for job in jobs if job.gpus <= per_node)
    total = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [(shape, count / total) for shape, count in ordered]


def node_fragment(state: State, shapes: list[tuple[Shape, float]]) -> float:
    """GPUs of a node in ``state`` that the workload's shapes cannot use, expected (FGD)."""
    whole, slices = state
    free = whole + sum(size * count for size, count in slices) / COMPUTE_SLICES
    if free <= 0:
        return 0.0
    out = 0.0
    for (gpus, milli), share in shapes:
        if milli < MILLI_WHOLE:  # a fraction of one GPU: an unsplit GPU or a slice as large
            need = milli * COMPUTE_SLICES / MILLI_WHOLE
            fits = whole > 0 or any(size >= need for size, count in slices if count)
            small = sum(size * count for size, count in slices if size < need) / COMPUTE_SLICES
        else:  # whole GPUs: unsplit ones only, every slice is too small
            fits = whole >= gpus
            small = free - whole
        out += share * (small if fits else free)
    return out


class FgdMeter:
    """Each open node's FGD fragmentation and the cluster's total, in GPUs."""

    def __init__(self, nodes: list[Node], shapes: list[tuple[Shape, float]]) -> None:
        self.shapes = shapes
        self.memo: dict[State, float] = {}
        self.nodes = nodes
        self.value = [0.0] * len(nodes)
        self.total = 0.0
        self.dirty: dict[int, None] = {}
        for node in nodes:
            self.update(node)

    def mark(self, node: Node) -> None:
        """``node`` changed (a take, a give, closed or re-laid out): re-value it at `flush`."""
        self.dirty[node.index] = None

    def flush(self) -> float:
        """Re-value the nodes changed since the last flush; the cluster's total."""
        if self.dirty:
            for index in self.dirty:
                self.update(self.nodes[index])
            self.dirty.clear()
        return self.total

    def update(self, node: Node) -> None:
        """Take ``node``'s value now."""
        value = 0.0
        if node.open and self.shapes:
            state = (node.whole_free, tuple((g, f) for g, f in node.slices_free.items() if f))
            found = self.memo.get(state)
            if found is None:
                found = self.memo[state] = node_fragment(state, self.shapes)
            value = found
        self.total += value - self.value[node.index]
        self.value[node.index] = value
