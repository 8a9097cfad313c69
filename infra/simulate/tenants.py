"""Tenant quotas as the rendered Kueue cohort applies them: nominal quota, borrowing, reclaim.

Each spec tenant has a nominal quota (`gpus`), may borrow up to `borrowing_limit` beyond it
from other tenants' idle, lendable quota (`lending_limit`, all of it when unset), and gets
borrowed GPUs back by preemption (`scheduler.preemption.reclaim`). Usage counts GPUs, a MIG
slice as its share of a GPU. The cohort is modelled in aggregate: a tenant may borrow what
the others leave idle and lendable, less what the others already borrow. Tenants of the
trace that the spec does not name have no quota (they are never held back) and count as
borrowing everything they use (reclaim takes it back first), with `normal` priority; a spec
with no tenants at all holds nobody back and preempts nobody (railplan renders no queues or
priority classes then).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.spec.scheduling import PRIORITIES, PreemptionInEffect, Tenant

__all__ = ["PRIORITY_RANK", "Book"]

PRIORITY_RANK = {name: rank for rank, name in enumerate(PRIORITIES)}
"""low 0, normal 1, high 2, critical 3."""


@dataclass(frozen=True, slots=True)
class _Quota:
    gpus: float
    borrow: float | None  # None: no limit
    lend: float


class Book:
    """GPUs in use per tenant and what each may take next."""

    def __init__(self, tenants: list[Tenant], preemption: PreemptionInEffect) -> None:
        self.managed = bool(tenants)
        self.preemption = preemption
        self.quota = {t.name: _quota(t) for t in tenants}
        self.rank = {t.name: PRIORITY_RANK[t.priority] for t in tenants}
        self.usage: dict[str, float] = {t.name: 0.0 for t in tenants}
        self.lendable: dict[str, float] = {}  # per borrower, while usage stays as it is

    def tenant_rank(self, tenant: str, job_priority: str) -> int:
        """A job's cross-tenant priority: its tenant's in the spec, else the job's own."""
        if not self.managed:
            return PRIORITY_RANK.get(job_priority, 1)
        return self.rank.get(tenant, PRIORITY_RANK["normal"])

    def add(self, tenant: str, share: float) -> None:
        """``tenant`` now uses ``share`` more GPUs (negative: fewer)."""
        self.usage[tenant] = self.usage.get(tenant, 0.0) + share
        self.lendable.clear()

    def admits(self, tenant: str, share: float) -> bool:
        """Whether quota and borrowing let ``tenant`` take ``share`` more GPUs now."""
        quota = self.quota.get(tenant)
        if quota is None:
            return True
        over = self.usage[tenant] + share - quota.gpus
        if over <= 1e-9:
            return True
        if quota.borrow is not None and over > quota.borrow + 1e-9:
            return False
        lendable = self.lendable.get(tenant)
        if lendable is None:
            lendable = self.lendable[tenant] = self._lendable(tenant)
        return over <= lendable + 1e-9

    def _lendable(self, borrower: str) -> float:
        idle = borrowed = 0.0
        for name, used in self.usage.items():
            if name == borrower:
                continue
            quota = self.quota.get(name)
            if quota is None:
                continue  # unmanaged tenants run on capacity nobody lends
            idle += min(quota.lend, max(0.0, quota.gpus - used))
            borrowed += max(0.0, used - quota.gpus)
        return max(0.0, idle - borrowed)

    def within_quota(self, tenant: str, share: float) -> bool:
        """Whether ``tenant`` taking ``share`` stays within its nominal quota (may reclaim)."""
        quota = self.quota.get(tenant)
        return quota is not None and self.usage[tenant] + share <= quota.gpus + 1e-9

    def borrowing(self, tenant: str) -> bool:
        """Whether ``tenant`` uses more than its nominal quota (unmanaged ones always do)."""
        quota = self.quota.get(tenant)
        return quota is None or self.usage.get(tenant, 0.0) > quota.gpus + 1e-9

    def may_evict(
        self,
        tenant: str,
        rank: tuple[int, int],
        victim: str,
        v_rank: tuple[int, int],
        reclaiming: bool,
    ) -> bool:
        """Whether a job of ``tenant`` (priority ``rank``) may evict one of ``victim``."""
        if not self.managed:
            return False
        if victim == tenant:
            return self.preemption.within_tenant == "lower_priority" and v_rank < rank
        if not reclaiming or not self.borrowing(victim):
            return False
        if self.preemption.reclaim == "any":
            return True
        return self.preemption.reclaim == "lower_priority" and v_rank[0] < rank[0]


def _quota(tenant: Tenant) -> _Quota:
    lend = tenant.gpus if tenant.lending_limit is None else tenant.lending_limit
    borrow = None if tenant.borrowing_limit is None else float(tenant.borrowing_limit)
    return _Quota(float(tenant.gpus), borrow, float(lend))
