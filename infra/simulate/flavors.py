"""Where each tenant's jobs may run under Kueue: its ClusterQueue's flavors, in their order.

railplan renders one ResourceFlavor per node group and gives each tenant's ClusterQueue a
quota on every flavor (`infra.topology.tenant_quota.shares`): its nominal quota, what it may borrow
there and what it lends. Kueue assigns a workload the first flavor, in the ClusterQueue's
order (the groups' order in the spec), whose quota and nodes hold it; it never assigns a
flavor where the tenant has no nominal quota and can borrow nothing (no borrowing limit
left there, or nobody lends there). So a replay of a Kueue spec places a tenant's jobs on
those groups only, trying them in that order (`infra.simulate.place.find`'s ``order``):
serving's quota on the inference group keeps its jobs off the training nodes, and research
fills its own training group before it borrows inference GPUs. How much each tenant may
hold stays the cohort in aggregate (`infra.simulate.tenants`). Volcano's queues are not per
node group: a Volcano spec (and one without tenants) places on every group, best fit.
"""

from __future__ import annotations

from infra.spec import Spec
from infra.topology import Plan
from infra.topology.tenant_quota import group_sizes, shares

__all__ = ["kueue_flavors"]


def kueue_flavors(spec: Spec, plan: Plan) -> dict[str, tuple[str, ...]]:
    """Spec tenant -> the node groups its rendered ClusterQueue may admit it on, in order.

    Empty unless the spec renders Kueue ClusterQueues (Kubernetes, ``batch: kueue``, tenants).
    """
    sched = spec.scheduler
    if sched.kind != "kubernetes" or sched.batch != "kueue" or not sched.tenants:
        return {}
    groups = group_sizes(plan)
    parts = shares(spec, groups)
    lends = {
        name: [p.nominal if p.lend is None else p.lend for p in share]
        for name, share in parts.items()
    }
    out = {}
    for name, share in parts.items():
        others = [
            sum(lent[i] for who, lent in lends.items() if who != name) for i in range(len(groups))
        ]
        out[name] = tuple(
            g.name
            for g, part, lent in zip(groups, share, others, strict=True)
            if part.nominal > 0 or (lent > 0 and (part.borrow is None or part.borrow > 0))
        )
    return out
