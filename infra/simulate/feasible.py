"""Jobs the cluster can never hold, and why, decided before the replay starts.

A job never runs when: it asks for a GPU model no node group has; it asks for more GPUs than
every group it may use has in total (whole GPUs: no GPU of any state of the group split);
a fraction on a group whose GPUs are never split is fine (it takes a whole GPU, or replicas
of a shared one); it asks one node for more CPUs or memory than any node it may use has (a
CPU-only job: any node); or its tenant can never hold that much: its quota plus what it may
borrow (its borrowing limit, at most what the other tenants lend) is smaller than the least
the job holds. One sentence per job.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from infra.catalog import Catalog
from infra.simulate.build import CPU_MILLI, MIB_PER_GIB, node_layout
from infra.simulate.cluster import least_held, slices_needed
from infra.simulate.jobs import Job
from infra.spec import Spec
from infra.topology.model import Plan

__all__ = ["never_reasons", "quota_limits"]


def never_reasons(spec: Spec, plan: Plan, catalog: Catalog, jobs: Iterable[Job]) -> dict[int, str]:
    """Position in ``jobs`` -> why that job can never run, for the jobs that cannot.

    Keyed by position, not id: a trace's ids need not be unique (`infra.simulate.traces`
    renames repeats, but a caller may pass any jobs), and each job gets its own verdict.
    """
    groups = []  # (model, GPUs per node, servers, most unsplit GPUs per node in any state)
    largest: dict[str, int] = {}  # model -> largest MIG slice (compute slices) in any state
    for group in plan.groups.values():
        layouts = [node_layout(state, spec) for state in group.mig.states]
        model = catalog.nodes[group.node].gpu
        groups.append((model, group.gpus, group.servers, max(w for w, _ in layouts)))
        sizes = [size for _, slices in layouts for size in slices]
        largest[model] = max([largest.get(model, 0), *sizes])
    models = sorted({g[0] for g in groups})
    limits = quota_limits(spec) if spec.scheduler.kind != "slurm" else {}  # Slurm: no quotas
    hosts = _hosts(plan, catalog)
    replicas = sorted({g.sharing.replicas for g in spec.node_groups if g.sharing is not None})
    out = {}
    seen: dict[tuple[object, ...], str] = {}  # a job's verdict reads only these fields
    for at, job in enumerate(jobs):
        key = (
            job.gpus,
            job.milli,
            job.tenant,
            job.gpu_model,
            job.gpu_models,
            job.cpu_milli,
            job.memory_mib,
        )
        reason = seen.get(key)
        if reason is None:
            reason = _too_big(job, hosts) or _reason(job, groups, models, limits, replicas)
            reason = seen[key] = reason or _no_slice(job, groups, largest)
        if reason:
            out[at] = reason
    return out


def _hosts(plan: Plan, catalog: Catalog) -> list[tuple[str, int, int, int]]:
    """Per group: (GPU model, GPUs, thousandths of a CPU, MiB) of one node."""
    out = []
    for group in plan.groups.values():
        node = catalog.nodes[group.node]
        cpu, mem = node.host.cpus * CPU_MILLI, node.host.memory_gib * MIB_PER_GIB
        out.append((node.gpu, group.gpus, cpu, mem))
    return out


def _too_big(job: Job, hosts: list[tuple[str, int, int, int]]) -> str:
    """A one-node job's CPUs or memory that no node it may use has."""
    if not job.cpu_milli and not job.memory_mib:
        return ""
    mine = [h for h in hosts if job.gpus == 0 or (job.accepts(h[0]) and job.gpus <= h[1])]
    if not mine or any(job.cpu_milli <= cpu and job.memory_mib <= mem for _, _, cpu, mem in mine):
        return ""
    cpus = max(cpu for _, _, cpu, _ in mine) / CPU_MILLI
    gib = max(mem for _, _, _, mem in mine) / MIB_PER_GIB
    return (
        f"asks one node for {job.cpu_milli / CPU_MILLI:g} CPUs and "
        f"{job.memory_mib / MIB_PER_GIB:g} GiB; the nodes it may use have at most "
        f"{cpus:g} CPUs and {gib:g} GiB"
    )


def _reason(
    job: Job,
    groups: list[tuple[str, int, int, int]],
    models: list[str],
    limits: dict[str, float],
    replicas: list[int],
) -> str:
    if job.gpus == 0:
        return ""
    mine = [g for g in groups if job.accepts(g[0])]
    if not mine:
        wanted = "|".join(job.gpu_models) or job.gpu_model
        return f"GPU model {wanted} is not in the cluster (it has {', '.join(models)})"
    least = least_held(job, replicas)
    if job.tenant in limits and least > limits[job.tenant] + 1e-9:
        asked = f"{job.gpus} GPUs" if not job.fractional else f"{least:.3g} of a GPU"
        return (
            f"asks for {asked}; tenant {job.tenant} may hold at most {limits[job.tenant]:g}"
            " (its quota plus what it may borrow: its borrowing limit, at most what the"
            " other tenants lend)"
        )
    if job.fractional:
        if any(job.gpus <= per_node for _, per_node, _, _ in mine):
            return ""
        return f"asks for {job.gpus} GPU fractions on one node; nodes have at most {max(g[1] for g in mine)} GPUs"
    if any(_holds(job.gpus, g) for g in mine):
        return ""
    total = sum(g[2] * g[3] for g in mine)
    largest = max(g[2] * g[3] for g in mine)
    if job.gpus > total:
        return f"asks for {job.gpus} GPUs; the cluster has {total} whole GPUs it could use"
    return f"asks for {job.gpus} GPUs; the largest node group it may use has {largest} whole GPUs"


def quota_limits(spec: Spec) -> dict[str, float]:
    """The most each spec tenant can ever hold: quota plus borrowing, bounded by the cohort.

    A tenant borrows only what the others lend (`infra.simulate.tenants.Book`: each lends up
    to ``lending_limit`` of its quota, all of it when unset), at most its own
    ``borrowing_limit``.
    """
    tenants = spec.scheduler.tenants
    lend = {
        t.name: t.gpus if t.lending_limit is None else min(t.lending_limit, t.gpus) for t in tenants
    }
    total = sum(lend.values())
    out = {}
    for t in tenants:
        others = total - lend[t.name]
        borrow = others if t.borrowing_limit is None else min(t.borrowing_limit, others)
        out[t.name] = float(t.gpus + borrow)
    return out


def _no_slice(job: Job, groups: list[tuple[str, int, int, int]], largest: dict[str, int]) -> str:
    """A fraction no slice of any state covers, on groups never whole enough for it."""
    if not job.fractional:
        return ""
    mine = [g for g in groups if job.accepts(g[0])]
    if any(job.gpus <= whole for _, _, _, whole in mine):
        return ""
    if any(slices_needed(job.milli) <= largest.get(g[0], 0) for g in mine):
        return ""
    return (
        f"asks for {job.milli / 1000:g} of a GPU; no MIG slice of the cluster's layouts is that "
        "large and its GPUs are never whole"
    )


def _holds(gpus: int, group: tuple[str, int, int, int]) -> bool:
    _, per_node, servers, whole = group
    if gpus <= per_node:
        return gpus <= whole
    return whole == per_node and math.ceil(gpus / per_node) <= servers
