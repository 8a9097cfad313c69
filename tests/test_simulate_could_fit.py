"""`could_fit`, preemption's cheap test: the same answer as counting every candidate, lazily.

Preemption asks it once per waiting head per retry, with every lower-priority running job as
a candidate; it used to total what each candidate frees before looking at anything. It now
looks at what is free first and reads the candidates' parts only as far as it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.build import build_cluster
from infra.simulate.cluster import Cluster, Part, slices_needed
from infra.simulate.jobs import Job
from infra.simulate.place import could_fit, find
from infra.topology import expand
from tests.sim_helpers import catalog, group_spec, job

MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'


def _cluster(nodes: int, split: bool) -> Cluster:
    extra = "scheduler: {mig_strategy: mixed}\n" + MIX if split else ""
    group = ", mig: [{gpus: [0, 1, 2, 3], layout: mix}]" if split else ""
    spec = group_spec(nodes, extra, group)
    return build_cluster(spec, expand(spec, catalog()), catalog())


def _reference(cluster: Cluster, wanted: Job, freed: Mapping[int, tuple[int, int]]) -> bool:
    """The former `could_fit`: everything freed totalled per node first."""
    groups = {g.name: g for g in cluster.groups.values() if wanted.accepts(g.gpu_model)}
    opened = [(cluster.nodes[n], k, s) for n, (k, s) in freed.items()]
    opened = [(node, k, s) for node, k, s in opened if node.open and node.group in groups]
    if wanted.fractional:
        need = slices_needed(wanted.milli)
        if any(s >= need for _, _, s in opened) or any(
            s >= need and nodes for g in groups.values() for s, nodes in g.by_slice.items()
        ):
            return True
    for g in groups.values():
        touched = [(node, k) for node, k, _ in opened if node.group == g.name]
        if wanted.gpus <= g.per_node:
            if any(g.by_free[k] for k in range(wanted.gpus, g.per_node + 1)) or any(
                wanted.gpus <= node.whole_free + k for node, k in touched
            ):
                return True
            continue
        full = sum(len(nodes) for nodes in g.su_full.values())
        full += sum(1 for node, k in touched if node.whole_free < node.gpus == node.whole_free + k)
        if full >= wanted.gpus // g.per_node:
            return True
    return False


def _totals(parts: Iterable[Part]) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for part in parts:
        had, largest = out.get(part.node, (0, 0))
        out[part.node] = (had + part.whole, max(largest, part.slice))
    return out


class Counted:
    """Parts, counting how many were read."""

    def __init__(self, parts: list[Part]) -> None:
        self.parts, self.read = parts, 0

    def __iter__(self) -> Iterator[Part]:
        for part in self.parts:
            self.read += 1
            yield part


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4),
    st.booleans(),
    st.lists(st.tuples(st.integers(1, 16), st.integers(0, 2)), max_size=12),
    st.integers(1, 32),
    st.sampled_from((1000, 100, 300, 600)),
    st.integers(0, 8),
)
def test_could_fit_answers_as_the_totals_did(
    nodes: int, split: bool, running: list[tuple[int, int]], gpus: int, milli: int, lift: int
) -> None:
    cluster = _cluster(nodes, split)
    taken = []
    for size, kind in running:  # fill the cluster with jobs found where they fit
        ask = job("r", 0, 1, 1 if kind == 2 else size, milli=300 if kind == 2 else 1000)
        alloc = find(cluster, ask)
        if alloc is not None:
            cluster.take(alloc)
            taken.append(alloc)
    wanted = job("w", 0, 1, 1 if milli < 1000 else gpus, milli=milli)
    parts = [part for alloc in taken[:lift] for part in alloc]
    assert could_fit(cluster, wanted, iter(parts)) == _reference(cluster, wanted, _totals(parts))


def test_a_job_free_gpus_already_hold_reads_no_candidate() -> None:
    cluster = _cluster(2, False)
    busy = find(cluster, job("a", 0, 1, 8))
    assert busy is not None
    cluster.take(busy)
    victims = Counted(list(busy) * 500)
    assert could_fit(cluster, job("w", 0, 1, 4), victims)  # the other node is free
    assert victims.read == 0


def test_a_gang_stops_reading_candidates_once_enough_nodes_would_be_free() -> None:
    cluster = _cluster(3, False)
    allocs = [find(cluster, job(f"a{i}", 0, 1, 8)) for i in range(1)]
    for alloc in allocs:
        assert alloc is not None
        cluster.take(alloc)
    rest = [find(cluster, job("b", 0, 1, 16))]
    assert rest[0] is not None
    cluster.take(rest[0])
    parts = [part for alloc in [*allocs, *rest] for part in alloc if alloc is not None]
    victims = Counted(parts * 100)
    assert could_fit(cluster, job("w", 0, 1, 16), victims)
    assert victims.read == 2  # the first two nodes freed: 16 GPUs
