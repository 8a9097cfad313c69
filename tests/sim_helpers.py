"""Small clusters and traces for the simulator's tests, built in the test (no file needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache

from infra.catalog import Catalog, load_catalog
from infra.progress import quiet
from infra.simulate.engine import Replay
from infra.simulate.jobs import Job, Trace
from infra.simulate.policy import SimPolicy
from infra.simulate.result import SimResult
from infra.simulate.summary import summarise
from infra.spec import Spec, load_spec_text
from infra.topology import expand

HEAD = "site: {management_cidr: 10.0.0.0/24, bmc_cidr: 10.1.0.0/24}\n"


@cache
def catalog() -> Catalog:
    """The catalog, loaded once."""
    return load_catalog()


def spec_of(body: str, name: str = "sim") -> Spec:
    """A spec from YAML lines after the name and site."""
    return load_spec_text(f"name: {name}\n{HEAD}{body}").spec


def group_spec(nodes: int, extra: str = "", group: str = "") -> Spec:
    """``nodes`` DGX A100 in one group (``group``: more of that group's keys)."""
    return spec_of(
        f"node_groups: [{{name: gpu, node: dgx-a100-640gb, count: {nodes}, "
        f'hostname: "n{{index:02d}}"{group}}}]\n{extra}'
    )


def job(
    id: str,
    submit: float,
    duration: float,
    gpus: int,
    *,
    milli: int = 1000,
    tenant: str = "t",
    priority: str = "normal",
    model: str | None = None,
    line: int = 0,
) -> Job:
    """A job; ``line`` defaults to its place in the trace (set by `trace_of`)."""
    return Job(id, submit, duration, gpus, milli, tenant, priority, model, line)


def trace_of(jobs: Sequence[Job], origin: float | None = None) -> Trace:
    """A trace of ``jobs`` in submit order, each with its 1-based row."""
    numbered = [replace(j, line=i + 2) for i, j in enumerate(jobs)]
    ordered = tuple(sorted(numbered, key=lambda j: (j.submit_s, j.line)))
    return Trace("test.csv", "railplan-csv", len(jobs), ordered, {}, origin)


def replay(
    spec: Spec,
    jobs: Sequence[Job],
    policy: SimPolicy | None = None,
    cls: type[Replay] = Replay,
    origin: float | None = None,
) -> tuple[Replay, SimResult]:
    """Run ``jobs`` on ``spec``'s plan; the finished replay and its result."""
    cat = catalog().with_shapes(spec)  # a spec's generic server shapes as catalog nodes
    plan = expand(spec, cat)
    run = cls(spec, plan, cat, trace_of(jobs, origin), policy or SimPolicy())
    run.run(quiet)
    return run, summarise(run)


def starts(run: Replay) -> dict[str, float | None]:
    """Job id -> when its work first started."""
    return {j.id: run.first_start[i] for i, j in enumerate(run.jobs)}
