"""GPU fragmentation as FGD defines it: of one node, of a node after a placement, over time.

Weng et al. ("Beware of Fragmentation", USENIX ATC '23, section 3; their simulator's
``pkg/utils/frag.go``) measure a node's fragmentation against the workload's typical tasks:
the task shapes (CPUs, GPUs, thousandths of each, GPU models) of the trace, most common
first, until they cover 95 % of its tasks (their ``podPopularityThreshold``), each with its
share ``p_m`` of those. For a shape ``m`` the node's free GPU capacity it cannot use is
``F_n(m)``: all of it when ``m`` does not fit there at all (too few GPUs with room, too few
CPUs, a GPU model it does not accept, or no GPU asked: a CPU-only task uses no GPU), else
the free capacity of the GPUs each too small for ``m`` (unsplit GPUs, free replicas of a
shared GPU, free MIG slices). The node's fragmentation is ``sum_m p_m F_n(m)``, in GPUs;
the cluster's the sum over its open nodes. Memory is not looked at (neither does FGD). A
job larger than every node has no per-node shape.

The FGD placement (`infra.simulate.score`) compares a node's fragmentation before and after
a placement; `FgdMeter` keeps every open node's value (memoised by the node's free state)
and the cluster's total, which the engine integrates over time like the allocation. A
change only marks its node; `flush` re-values the marked nodes when time advances.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from infra.simulate.cluster import COMPUTE_SLICES, Node, Part, units_needed
from infra.simulate.jobs import MILLI_WHOLE, Job

__all__ = [
    "POPULARITY",
    "FgdMeter",
    "Shape",
    "State",
    "after",
    "fragment",
    "node_state",
    "typical_shapes",
]

POPULARITY = 0.95
"""Typical shapes cover this share of the trace's tasks (FGD's podPopularityThreshold 95)."""

Shape = tuple[int, int, int, tuple[str, ...]]
"""(thousandths of a CPU, thousandths of each GPU, GPUs, GPU models accepted or ()) of a
task: the FGD simulator's typical-pod key, in its order (CPU, GPU milli, GPU count, type)."""

State = tuple[str, int, int, int, tuple[int, ...], tuple[tuple[int, int], ...]]
"""A node's free state: GPU model, replicas per GPU, free CPU thousandths, wholly free GPUs,
free replicas of each partly used shared GPU (sorted), free MIG slices (size, count)."""


def typical_shapes(jobs: Iterable[Job], largest: int) -> list[tuple[Shape, float]]:
    """The trace's most common task shapes and their shares (summing to 1), most common first.

    Jobs of more than ``largest`` GPUs (no node holds them) are left out; ties in count go
    to the larger shape, as the FGD simulator sorts them.
    """
    counts = Counter(
        (job.cpu_milli, job.milli if job.gpus else 0, job.gpus, _models(job))
        for job in jobs
        if job.gpus <= largest
    )
    total = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
    out: list[tuple[Shape, int]] = []
    covered = 0
    for shape, count in ordered:
        if covered >= POPULARITY * total:
            break
        out.append((shape, count))
        covered += count
    return [(shape, count / covered) for shape, count in out]


def _models(job: Job) -> tuple[str, ...]:
    if job.gpu_model is None:
        return ()
    return tuple(sorted({job.gpu_model, *job.gpu_models}))


def node_state(node: Node, model: str) -> State:
    """``node``'s free state now (`State`)."""
    partial = _partial(node) if node.shared else ()
    slices = tuple((g, f) for g, f in node.slices_free.items() if f) if node.slices_free else ()
    return (model, node.replicas, node.cpu_free, node.whole_free, partial, slices)


def _partial(node: Node) -> tuple[int, ...]:
    """The free replicas of a sharing node's partly used GPUs, in order."""
    return tuple(sorted(u for u in node.shared if 0 < u < node.replicas))


def after(state: State, part: Part, shared_free: int) -> State:
    """``state`` once ``part`` is taken (``shared_free``: its shared GPU's free replicas)."""
    model, replicas, cpu, whole, partial, slices = state
    cpu -= part.cpu
    if part.units:
        rest = list(partial)
        if shared_free == replicas:
            whole -= 1
        else:
            rest.remove(shared_free)
        if shared_free > part.units:
            rest.append(shared_free - part.units)
        partial = tuple(sorted(rest))
    else:
        whole -= part.whole
    if part.slice:
        slices = tuple((g, f - 1 if g == part.slice else f) for g, f in slices)
        slices = tuple((g, f) for g, f in slices if f)
    return (model, replicas, cpu, whole, partial, slices)


def fragment(state: State, shapes: list[tuple[Shape, float]]) -> float:
    """GPUs of a node in ``state`` that the workload's shapes cannot use, expected (FGD)."""
    model, replicas, cpu_free, whole, partial, slices = state
    sliced = sum(size * count for size, count in slices) / COMPUTE_SLICES
    free = whole + sum(partial) / replicas + sliced
    if free <= 0:
        return 0.0
    out = 0.0
    for (cpu, milli, gpus, models), share in shapes:
        if gpus == 0 or (models and model not in models):
            out += share * free
            continue
        if milli >= MILLI_WHOLE:  # whole GPUs: wholly free ones only
            fit, small = whole, free - whole
        else:
            fit, small = _fraction_fit(milli, replicas, whole, partial, slices)
        out += share * (small if fit >= gpus and cpu_free >= cpu else free)
    return out


def _fraction_fit(
    milli: int,
    replicas: int,
    whole: int,
    partial: tuple[int, ...],
    slices: tuple[tuple[int, int], ...],
) -> tuple[int, float]:
    """(GPUs or slices that hold a fraction of ``milli``, free capacity too small for it)."""
    need = milli * COMPUTE_SLICES / MILLI_WHOLE
    fit = whole + sum(count for size, count in slices if size >= need)
    small = sum(size * count for size, count in slices if size < need) / COMPUTE_SLICES
    if partial:
        units = units_needed(milli, replicas)
        fit += sum(1 for u in partial if u >= units)
        small += sum(u for u in partial if u < units) / replicas
    return fit, small


class FgdMeter:
    """Each open node's FGD fragmentation and the cluster's total, in GPUs."""

    def __init__(
        self, nodes: list[Node], models: dict[str, str], shapes: list[tuple[Shape, float]]
    ) -> None:
        self.shapes = shapes
        self.models = models  # group -> GPU model
        self.memo: dict[State, float] = {}
        # a node sharing no GPU and without MIG slices: (group, free CPU thousandths,
        # wholly free GPUs) fix its `State` (the group its GPU model and replicas)
        self.plain: dict[tuple[str, int, int], float] = {}
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
            nodes, models, memo, values = self.nodes, self.models, self.memo, self.value
            total = self.total
            plain = self.plain
            for index in self.dirty:  # `update` of each, inline
                node = nodes[index]
                value = 0.0
                if not node.open or not self.shapes:
                    pass
                elif not node.shared and not node.slices_free:  # its state: 3 numbers
                    key = (node.group, node.cpu_free, node.whole_free)
                    found = plain.get(key)
                    if found is None:
                        found = plain[key] = self.of(node_state(node, models[node.group]))
                    value = found
                else:
                    state = (  # `node_state`, inline
                        models[node.group],
                        node.replicas,
                        node.cpu_free,
                        node.whole_free,
                        _partial(node) if node.shared else (),
                        tuple((g, f) for g, f in node.slices_free.items() if f)
                        if node.slices_free
                        else (),
                    )
                    found = memo.get(state)
                    value = self.of(state) if found is None else found
                total += value - values[index]
                values[index] = value
            self.total = total
            self.dirty.clear()
        return self.total

    def of(self, state: State) -> float:
        """`fragment` of ``state``, memoised."""
        found = self.memo.get(state)
        if found is None:
            found = self.memo[state] = fragment(state, self.shapes)
        return found

    def update(self, node: Node) -> None:
        """Take ``node``'s value now."""
        value = 0.0
        if node.open and self.shapes:
            value = self.of(node_state(node, self.models[node.group]))
        self.total += value - self.value[node.index]
        self.value[node.index] = value
