"""Node groups on the plan: SUs, rolling batch, and MIG per GPU now and at each scheduled change.

This module owns every MIG fact of a node group. `mig_per_gpu` is the one place a `mig`
value becomes a layout per GPU; `group_mig` turns a group's `mig` and each change of its
`mig_schedule` into `MigState` records (per-GPU layout, mig-parted config name, parsed cron
time), so "is this group MIG-split" has one answer, `GroupMig.split`: true when any state,
now or scheduled, splits a GPU. Planning builds these once (`Plan.groups`, by `plan_groups`);
lint, render, k8s and the report read them there. A caller that has no plan (the budget's
`predict`, lint on a spec that cannot be planned) calls `group_migs` here rather than
expanding the spec itself. A scheduled change's Job runs over the group's SUs in turn, so
its deadline (`job_deadline_s`) is a plan fact too; lint RP019 and the k8s CronJob read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from infra.catalog import Catalog
from infra.errors import spelling_hint
from infra.spec import MigAssignment, NodeGroup, Spec, assignments_of
from infra.spec.cron import daily_minute
from infra.spec.scheduling import duration_seconds
from infra.topology.facts_model import GroupMig, MigState, MigTimes
from infra.topology.migconfig import mig_config_name
from infra.topology.model import GroupPlan, PlanError

if TYPE_CHECKING:
    from infra.topology.servers import ServerSeed

__all__ = [
    "BATCH_MARGIN_S",
    "MIG_TIMEOUT_S",
    "assignment_gpus",
    "group_mig",
    "group_migs",
    "job_deadline_s",
    "mig_batches",
    "mig_per_gpu",
    "plan_groups",
]

MIG_TIMEOUT_S = 900  # how long the MIG manager gets per batch (includes a node reboot)
BATCH_MARGIN_S = 600  # per batch: listing, cordon, labels, polling slack


def assignment_gpus(assignment: MigAssignment, gpus: int) -> Sequence[int]:
    """The GPU indices an assignment names on a ``gpus``-GPU node, as written (``all`` expanded).

    Indices beyond the node stay in, so lint RP014 can report them.
    """
    return range(gpus) if assignment.gpus == "all" else assignment.gpus


def mig_per_gpu(assignments: Sequence[MigAssignment], gpus: int) -> tuple[str | None, ...]:
    """The layout of each GPU of a ``gpus``-GPU node (None = MIG disabled).

    Later assignments win; indices beyond the node are left out (lint RP014 reports them).
    """
    layouts: list[str | None] = [None] * gpus
    for assignment in assignments:
        indices = assignment_gpus(assignment, gpus)
        layout = None if assignment.layout == "disabled" else assignment.layout
        for i in indices:
            if 0 <= i < gpus:
                layouts[i] = layout
    return tuple(layouts)


def group_mig(group: NodeGroup, gpus: int, index: int) -> GroupMig:
    """A node group's MIG states (``index``: its position in ``node_groups``, for paths)."""
    base = f"node_groups[{index}]"
    states: list[MigState] = []
    for k, (suffix, value) in enumerate(group.mig_values()):
        change = None if k == 0 else k - 1
        at = None if change is None else _at(group, change)
        assignments = tuple(assignments_of(value))
        states.append(
            MigState(
                f"{base}.{suffix}",
                at,
                None if at is None else daily_minute(at),
                mig_config_name(group, change),
                mig_per_gpu(assignments, gpus),
                value,
                assignments,
            )
        )
    schedule = group.mig_schedule
    times = (
        MigTimes(
            schedule.timezone,
            schedule.drain_timeout,
            duration_seconds(schedule.drain_timeout),
            schedule.rolling_batch_sus,
        )
        if schedule is not None
        else None
    )
    return GroupMig(tuple(states), times)


def _at(group: NodeGroup, change: int) -> str:
    assert group.mig_schedule is not None
    return group.mig_schedule.changes[change].at


def group_migs(spec: Spec, catalog: Catalog) -> tuple[GroupMig, ...]:
    """`group_mig` of every node group, in spec order.

    A node the catalog does not know has no GPUs to lay out (lint RP001 reports it; planning
    refuses it): its states keep their values and config names, with no layout per GPU.
    """
    return tuple(
        group_mig(g, catalog.nodes[g.node].gpus if g.node in catalog.nodes else 0, i)
        for i, g in enumerate(spec.node_groups)
    )


def mig_batches(times: MigTimes, sus: int) -> int:
    """How many batches one scheduled change runs: the SUs, `rolling_batch_sus` at a time."""
    return -(-max(sus, 1) // times.rolling_batch_sus)


def job_deadline_s(times: MigTimes, sus: int) -> int:
    """How long one scheduled change's Job may run (its activeDeadlineSeconds): every batch in turn.

    Kubernetes stops the Job then, so two changes of a group this far apart never run at
    once (lint RP019 holds the schedule to it).
    """
    return mig_batches(times, sus) * (times.drain_s + MIG_TIMEOUT_S + BATCH_MARGIN_S)


def plan_groups(
    spec: Spec, migs: Sequence[GroupMig], seeds: Sequence[ServerSeed], catalog: Catalog
) -> dict[str, GroupPlan]:
    """Every node group as the plan carries it: SUs in plan order, rolling batch, MIG.

    The rolling batch is one SU (``su_size`` servers, the whole group if smaller); without a
    compute fabric there are no SUs and a batch is the whole group.
    """
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else None
    sus: dict[str, dict[str, None]] = {g.name: {} for g in spec.node_groups}
    for seed in seeds:
        if seed.su is not None:
            sus[seed.group][seed.su] = None
    out: dict[str, GroupPlan] = {}
    for i, g in enumerate(spec.node_groups):
        mig = migs[i]
        names = tuple(sus[g.name])
        deadline = job_deadline_s(mig.schedule, len(names)) if mig.schedule else None
        batch = min(su_size or g.count, g.count)
        gpus = catalog.nodes[g.node].gpus
        out[g.name] = GroupPlan(g.name, i, g.node, gpus, g.count, names, batch, mig, deadline)
    return out


def check_nodes(spec: Spec, catalog: Catalog) -> None:
    """PlanError, located, for a node group whose server is not in the catalog."""
    for i, group in enumerate(spec.node_groups):
        if group.node not in catalog.nodes:
            raise PlanError(
                f"unknown node {group.node!r}",
                path=f"node_groups[{i}].node",
                hint=spelling_hint(group.node, catalog.nodes),
            )
