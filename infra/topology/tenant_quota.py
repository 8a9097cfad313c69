"""Tenants' GPU quotas placed on the node groups: what each tenant's `gpus` means per group.

A tenant's `gpus` (and its borrowing and lending limits) is one number; Kueue counts quota
per flavor (one per node group), and a replay of a Kueue spec places a tenant's jobs only on
the groups its queue has quota on. `shares` is the one owner of that placement: a tenant that
autoscales on a group gets its quota there first (the serving tenant's quota lands on the
inference group it serves from), the rest is split over the capacity left in proportion to
it (`split_quota`, exact and stable). `infra.k8s.quota` turns a share into each group's
resources; `infra.simulate.flavors` reads which groups a tenant may run on. A pure function
of the spec's tenants and the groups' sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from infra.spec import Spec
from infra.spec.scheduling import Tenant
from infra.topology.model import Plan

__all__ = ["GroupSize", "Share", "group_sizes", "shares", "split_quota"]


class GroupSize(Protocol):
    """A node group as quota placement sees it: its name and its GPUs."""

    @property
    def name(self) -> str:
        """The node group's name."""

    @property
    def gpus(self) -> int:
        """Its GPUs: servers x GPUs per server."""


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    gpus: int


def group_sizes(plan: Plan) -> list[GroupSize]:
    """Every node group of the plan with its GPUs (servers x GPUs per server), in spec order."""
    return [_Group(name, group.servers * group.gpus) for name, group in plan.groups.items()]


def split_quota(total: int, capacities: list[int]) -> list[int]:
    """Split ``total`` over flavors in proportion to their GPUs; the parts add up to ``total``.

    Largest remainder (ties to the earlier flavor), so the split is exact and stable.
    """
    whole = sum(capacities)
    if whole == 0:
        return [total, *([0] * (len(capacities) - 1))] if capacities else []
    parts = [total * c // whole for c in capacities]
    by_remainder = sorted(
        range(len(capacities)), key=lambda i: (-(total * capacities[i] % whole), i)
    )
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


@dataclass(frozen=True, slots=True)
class Share:
    """A tenant's GPUs on one node group: quota, and the limits (None: no limit)."""

    nominal: int
    borrow: int | None
    lend: int | None

    @property
    def kept(self) -> int:
        """GPUs of the quota never lent (all of it with no lending limit stated: none)."""
        return 0 if self.lend is None else self.nominal - self.lend


def shares(spec: Spec, groups: Sequence[GroupSize]) -> dict[str, list[Share]]:
    """Each tenant's `Share` per group (in ``groups`` order); the parts add up to the spec's.

    Quota first: an autoscaling tenant's goes to its `autoscale.group` as far as the group's
    GPUs reach (in tenant order); what is left of every tenant's is split over the GPUs no
    autoscaling tenant took, in proportion (over all GPUs if they took them all). A lending
    limit splits like the tenant's quota; a borrowing limit over what the other tenants may
    lend on each group (their lending limit, else their quota), so it is usable where it lies.
    """
    listed = spec.scheduler.tenants
    nominal = _place(listed, groups)
    lend = [
        None if t.lending_limit is None else split_quota(t.lending_limit, nominal[t.name])
        for t in listed
    ]
    lendable = [
        nominal[t.name] if lent is None else lent for t, lent in zip(listed, lend, strict=True)
    ]
    result = {}
    for k, tenant in enumerate(listed):
        borrow: list[int | None] = [None] * len(groups)
        if tenant.borrowing_limit is not None:
            others = [sum(col) for col in zip(*(lendable[:k] + lendable[k + 1 :]), strict=True)]
            borrow = [*split_quota(tenant.borrowing_limit, others or [0] * len(groups))]
        lent = lend[k]
        result[tenant.name] = [
            Share(n, b, None if lent is None else lent[i])
            for i, (n, b) in enumerate(zip(nominal[tenant.name], borrow, strict=True))
        ]
    return result


def _place(listed: Sequence[Tenant], groups: Sequence[GroupSize]) -> dict[str, list[int]]:
    index = {g.name: i for i, g in enumerate(groups)}
    free = [g.gpus for g in groups]
    placed = {t.name: [0] * len(groups) for t in listed}
    for tenant in listed:
        home = index.get(tenant.autoscale.group) if tenant.autoscale is not None else None
        if home is not None:
            placed[tenant.name][home] = taken = min(tenant.gpus, free[home])
            free[home] -= taken
    base = free if sum(free) else [g.gpus for g in groups]
    for tenant in listed:
        rest = tenant.gpus - sum(placed[tenant.name])
        for i, part in enumerate(split_quota(rest, base)):
            placed[tenant.name][i] += part
    return placed
