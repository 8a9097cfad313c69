"""How long one scheduled MIG change runs on the plan, one SU at a time.

A group's SUs, in plan order, and the deadline of the Job that re-partitions them. The rendered CronJob (`infra.k8s.mig_schedule`) sets its Job's ``activeDeadlineSeconds`` to
`job_deadline_s`, and lint RP019 keeps two changes of one group at least that far apart, so
both read the one formula here. Pure; planning facts only.
"""

from __future__ import annotations

from infra.spec import NodeGroup
from infra.spec.scheduling import duration_seconds
from infra.topology.model import Plan

__all__ = ["BATCH_MARGIN_S", "MIG_TIMEOUT_S", "group_sus", "job_deadline_s"]

MIG_TIMEOUT_S = 900  # how long the MIG manager gets per batch (includes a node reboot)
BATCH_MARGIN_S = 600  # per batch: listing, cordon, labels, polling slack


def job_deadline_s(group: NodeGroup, sus: list[str]) -> int:
    """How long one change's Job may run (its activeDeadlineSeconds): every SU in turn.

    Kubernetes stops the Job then, so two changes of a group this far apart never run at
    once (lint RP019 holds the schedule to it).
    """
    assert group.mig_schedule is not None
    drain_s = duration_seconds(group.mig_schedule.drain_timeout)
    return max(len(sus), 1) * (drain_s + MIG_TIMEOUT_S + BATCH_MARGIN_S)


def group_sus(plan: Plan, group: NodeGroup) -> list[str]:
    """The group's SUs in plan order; empty when its servers sit in no SU (no compute fabric)."""
    used = {s.su for s in plan.servers if s.group == group.name and s.su is not None}
    return [su.name for su in plan.sus if su.name in used]
