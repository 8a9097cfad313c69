"""Rules about the workload scheduler: tenants' quotas, borrowing, autoscaling, batch scheduler."""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.namespaces import (
    DEPENDENCY_NAMESPACES,
    KUBERNETES_NAMESPACES,
    RAILPLAN_NAMESPACES,
    SYSTEM_PRIORITY_PREFIX,
    priority_class_name,
    reserved_namespace,
    reserved_priority_class,
    reserved_queue,
)
from infra.spec.scheduling import Tenant
from infra.topology.facts_model import MigState
from infra.wording import plural


def _cluster_gpus(ctx: LintContext) -> tuple[int, int] | None:
    """(GPUs in the cluster, GPUs in groups that use MIG at some time); None if unknown.

    None when some group's node is not in the catalog (RP001 reports it): a partial count
    would report quotas against a cluster smaller than the one meant.
    """
    nodes = ctx.catalog.nodes
    groups = ctx.loaded.spec.node_groups
    if any(g.node not in nodes for g in groups):
        return None
    total = sum(g.count * nodes[g.node].gpus for g in groups)
    mig = sum(
        g.count * nodes[g.node].gpus for g, m in zip(groups, ctx.migs, strict=True) if m.split
    )
    return total, mig


def _mig_note(mig_gpus: int) -> str:
    if not mig_gpus:
        return ""
    return (
        f"; {mig_gpus:,} of them are in node groups that use MIG, and a quota counts whole "
        "GPUs, not MIG instances"
    )


@rule(
    "RP070",
    "tenant-quota-exceeds-cluster",
    Severity.ERROR,
    "A tenant's GPU quota is larger than the cluster's GPUs.",
)
def tenant_quota_exceeds_cluster(ctx: LintContext) -> Iterator[Violation]:
    """No single tenant's `gpus` quota may exceed the GPUs the cluster has.

    GPUs are counted over all node groups (servers × GPUs per node), MIG-partitioned or not.

    Why: a quota no cluster can fill is a typo (a missing digit, servers instead of GPUs) or
    a spec of a different cluster; the tenant's largest jobs would queue forever.
    Fix: set the tenant's `gpus` to at most the cluster's GPUs (the message names both).
    """
    counted = _cluster_gpus(ctx)
    if counted is None:
        return
    total, mig = counted
    for k, tenant in enumerate(ctx.loaded.spec.scheduler.tenants):
        if tenant.gpus > total:
            yield Violation(
                f"scheduler.tenants[{k}].gpus",
                f"tenant {tenant.name!r} has a quota of {plural(tenant.gpus, 'GPU')}, but the "
                f"cluster has {plural(total, 'GPU')}{_mig_note(mig)}",
                f"set gpus to at most {total:,}",
            )


@rule(
    "RP071",
    "tenant-quotas-overcommitted",
    Severity.WARNING,
    "The tenants' GPU quotas sum to more than the cluster's GPUs.",
)
def tenant_quotas_overcommitted(ctx: LintContext) -> Iterator[Violation]:
    """The sum of the tenants' `gpus` quotas should not exceed the cluster's GPUs.

    Not reported when a single tenant already exceeds the cluster (RP070).

    Why: over-committed quotas mean tenants cannot all use their quota at once; the batch
    scheduler's borrowing and priority preemption then decide who waits. That is often
    deliberate (idle quota is lent out), so this is a warning; it names the totals so the
    over-commit is a decision rather than an accident.
    Fix: lower the quotas to fit the cluster, or keep the over-commit on purpose and rely on
    priorities (`railplan lint --ignore RP071`).
    """
    counted = _cluster_gpus(ctx)
    tenants = ctx.loaded.spec.scheduler.tenants
    if counted is None or not tenants:
        return
    total, mig = counted
    asked = sum(t.gpus for t in tenants)
    if asked > total and all(t.gpus <= total for t in tenants):
        parts = " + ".join(f"{t.name} {t.gpus:,}" for t in tenants)
        yield Violation(
            "scheduler.tenants",
            f"tenants' GPU quotas sum to {asked:,} GPUs ({parts}), {asked / total:.2f}× the "
            f"cluster's {plural(total, 'GPU')}{_mig_note(mig)}",
            "if the over-commit is deliberate, make sure priorities say who is preempted",
        )


@rule(
    "RP072",
    "tenants-without-batch-scheduler",
    Severity.WARNING,
    "Tenants are declared but scheduler.batch is none.",
)
def tenants_without_batch_scheduler(ctx: LintContext) -> Iterator[Violation]:
    """Tenants' quotas and priorities want a batch scheduler (`volcano` or `kueue`).

    Why: with `batch: none` each tenant gets only a namespace ResourceQuota: pods above the
    quota are rejected at admission instead of queued, idle quota cannot be lent to another
    tenant, and nothing gang-schedules a multi-pod job, so two half-placed distributed jobs
    can hold GPUs while neither runs. A warning, not info: the spec asks for tenants sharing
    the cluster, and without a queue that sharing mostly does not happen.
    Fix: set `scheduler.batch: kueue` (queues and borrowing) or `volcano` (gang scheduling and
    queues); keep `none` only if plain hard quotas are what you want.
    """
    scheduler = ctx.loaded.spec.scheduler
    if scheduler.tenants and scheduler.batch == "none":
        yield Violation(
            "scheduler.tenants",
            f"{plural(len(scheduler.tenants), 'tenant')} but scheduler.batch is none: no queue "
            "enforces the quotas beyond a ResourceQuota, and no gang scheduling",
            "set scheduler.batch: kueue or volcano",
        )


@rule(
    "RP073",
    "batch-without-compute-fabric",
    Severity.WARNING,
    "A batch scheduler is set but the spec has no compute fabric.",
)
def batch_without_compute_fabric(ctx: LintContext) -> Iterator[Violation]:
    """Volcano and Kueue are set up for topology-aware placement over the compute fabric.

    Why: topology-aware placement (Volcano HyperNodes, Kueue Topology levels) groups nodes by
    the compute fabric's scalable units and leaves; with no `fabrics.compute` there are no
    SUs, so it has nothing to work with and jobs are placed without regard to the network.
    Gang scheduling and queues still work.
    Fix: declare `fabrics.compute`, or, when the cluster really has no compute fabric (cloud
    instances), accept placement without topology (`railplan lint --ignore RP073`).
    """
    scheduler = ctx.loaded.spec.scheduler
    if scheduler.batch != "none" and ctx.loaded.spec.fabrics.compute is None:
        yield Violation(
            "scheduler.batch",
            f"scheduler.batch is {scheduler.batch} but the spec has no compute fabric: "
            "no SUs, so topology-aware placement has nothing to work with",
            "declare fabrics.compute, or set scheduler.batch: none",
        )


def _volcano_evicts(ctx: LintContext) -> list[str]:
    """The rendered volcano-scheduler actions that evict running pods (`preempt`, `reclaim`)."""
    by_hypernode = ctx.plan is not None and bool(ctx.plan.sus)
    preemption = ctx.loaded.spec.scheduler.preemption_in_effect(by_hypernode=by_hypernode)
    return preemption.volcano_evictions()


@rule(
    "RP074",
    "tenant-namespace-reserved",
    Severity.ERROR,
    "A tenant on Kubernetes is named like a namespace railplan or Kubernetes uses itself.",
)
def tenant_namespace_reserved(ctx: LintContext) -> Iterator[Violation]:
    """A tenant's name is its namespace: it must not be one railplan or Kubernetes uses.

    Refused: the namespaces railplan renders into or relies on (`infra.namespaces`: gpu-operator,
    rdma-device-plugin, monitoring, volcano-system, railplan-system), those of the controllers
    the rendered objects need (kueue-system for Kueue, keda for KEDA, ingress-nginx where an
    autoscaled tenant's clients come from by default), the namespaces every
    cluster has (default, kube-system, kube-public, kube-node-lease), any name starting
    `kube-`, which Kubernetes reserves, and with Volcano its own queues `root` and `default`
    (a tenant's Queue takes the tenant's name). Not refused: namespaces of software railplan
    neither installs nor relies on (cert-manager, istio-system, Volcano's
    optional volcano-monitoring, OpenShift's nvidia-gpu-operator; node-feature-discovery,
    as the GPU Operator runs NFD in gpu-operator): keep clear of those a cluster runs.
    Why: railplan gives each tenant's namespace a default-deny NetworkPolicy and a GPU
    ResourceQuota. In kube-system that cuts cluster DNS and the control-plane add-ons off the
    network; in gpu-operator, monitoring, kueue-system or keda it stops the GPU stack,
    Prometheus, admission or scaling, and the quota caps their GPUs at the tenant's. A Queue
    named `root` would replace the parent of every Volcano queue.
    Fix: rename the tenant (e.g. `research`, `serving`).
    """
    spec = ctx.loaded.spec
    if spec.scheduler.kind != "kubernetes":
        return  # tenants become namespaces on Kubernetes only
    reserved = ", ".join(
        sorted({*RAILPLAN_NAMESPACES, *DEPENDENCY_NAMESPACES, *KUBERNETES_NAMESPACES})
    )
    for k, tenant in enumerate(spec.scheduler.tenants):
        why = reserved_namespace(tenant.name)
        if why is not None:
            yield Violation(
                f"scheduler.tenants[{k}].name",
                f"tenant {tenant.name!r} would get namespace {tenant.name!r}, but {why}: the "
                "tenant's default-deny NetworkPolicy and GPU quota would land on those services",
                f"rename the tenant; reserved: {reserved} and kube-*",
            )
            continue
        queue = reserved_queue(tenant.name, spec.scheduler.batch)
        if queue is not None:
            yield Violation(
                f"scheduler.tenants[{k}].name",
                f"tenant {tenant.name!r} would get Volcano Queue {tenant.name!r}, but {queue}: "
                "the tenant's Queue would replace it",
                "rename the tenant; Volcano's own queues are root and default",
            )


@rule(
    "RP075",
    "priority-class-reserved",
    Severity.ERROR,
    "A tenant priority's PriorityClass would get a name Kubernetes reserves (system-*).",
)
def priority_class_reserved(ctx: LintContext) -> Iterator[Violation]:
    """Each tenant priority becomes a cluster-wide PriorityClass named `<cluster>-<priority>`.

    Why: Kubernetes keeps PriorityClass names starting `system-` for its own
    (system-cluster-critical, system-node-critical) and its API server refuses to create any
    other: a cluster named `system` (or `system-...`) with tenants renders PriorityClasses
    `system-high`, `system-low`, ... that no cluster accepts, and the tenants' pods, which
    name them, are never admitted.
    Fix: rename the cluster (`name:`), e.g. `gpu-system` or `prod`.
    """
    spec = ctx.loaded.spec
    if spec.scheduler.kind != "kubernetes":
        return
    for priority in sorted({t.priority for t in spec.scheduler.tenants}):
        why = reserved_priority_class(spec.name, priority)
        if why is not None:
            yield Violation(
                "name",
                f"cluster {spec.name!r} would render PriorityClass "
                f"{priority_class_name(spec.name, priority)!r} for its tenants' priority "
                f"{priority!r}, but {why}: the API server refuses it",
                f"rename the cluster so that its name does not start {SYSTEM_PRIORITY_PREFIX!r}",
            )
            return  # one finding: every priority's class starts the same way


@rule(
    "RP076",
    "volcano-topology-with-preemption",
    Severity.WARNING,
    "Volcano network-topology-aware scheduling is combined with preempt or reclaim.",
)
def volcano_topology_with_preemption(ctx: LintContext) -> Iterator[Violation]:
    """Volcano's preempt and reclaim actions do not respect HyperNode placement.

    railplan renders HyperNodes and enables the `network-topology-aware` plugin when the
    plan has SUs; with tenants it also renders the volcano-scheduler configuration, whose
    actions include `preempt` unless `scheduler.preemption.within_tenant` is `never` and
    `reclaim` unless `scheduler.preemption.reclaim` is `never`.

    Why: Volcano's network-topology-aware scheduling does not support preemption or
    reclaim: neither considers which HyperNode a node belongs to, so after evictions a
    job's pods can land in different HyperNodes, across spines (volcano-sh/volcano#4374,
    open; a maintainer in #4533: "we currently don't support network topology aware
    preemption"); the preempt action skips jobs with a network topology altogether, so
    such jobs wait instead of preempting. A warning: preemption still works for jobs
    without a topology constraint.
    Fix: set `scheduler.preemption: {reclaim: never, within_tenant: never}` (tenants then
    borrow only idle quota that comes back when the borrower's jobs end), or use Kueue,
    whose preemption and topology-aware scheduling work together.
    """
    spec = ctx.loaded.spec
    scheduler = spec.scheduler
    if scheduler.batch != "volcano" or not scheduler.tenants:
        return
    plan = ctx.plan
    evicting = _volcano_evicts(ctx)
    if plan is None or not plan.sus or not evicting:
        return
    yield Violation(
        "scheduler.batch",
        f"Volcano places jobs by HyperNode (the plan has {plural(len(plan.sus), 'SU')}) but "
        f"its {' and '.join(evicting)} action{'s' if len(evicting) > 1 else ''} ignore"
        f"{'' if len(evicting) > 1 else 's'} HyperNodes: evictions can split a job across "
        "SUs (volcano-sh/volcano#4374)",
        "set scheduler.preemption: {reclaim: never, within_tenant: never}, or batch: kueue",
    )


@rule(
    "RP077",
    "autoscale-unknown-group",
    Severity.ERROR,
    "A tenant's autoscale.group names no node group.",
)
def autoscale_unknown_group(ctx: LintContext) -> Iterator[Violation]:
    """`scheduler.tenants[].autoscale.group` must name a node group of the spec.

    Why: the group decides the metric the tenant's KEDA ScaledObject scales on
    (`DCGM_FI_PROF_GR_ENGINE_ACTIVE` on MIG groups, `DCGM_FI_DEV_GPU_UTIL` on whole GPUs);
    with no such group no ScaledObject is rendered and the Deployment never scales.
    Fix: set `group` to the node group the tenant's pods run on.
    """
    groups = [g.name for g in ctx.loaded.spec.node_groups]
    for k, tenant in enumerate(ctx.loaded.spec.scheduler.tenants):
        if tenant.autoscale is not None and tenant.autoscale.group not in groups:
            yield Violation(
                f"scheduler.tenants[{k}].autoscale.group",
                f"tenant {tenant.name!r} autoscales on node group "
                f"{tenant.autoscale.group!r}, which the spec does not have",
                f"use one of: {', '.join(groups)}",
            )


def _lendable(tenant: Tenant) -> int:
    return tenant.gpus if tenant.lending_limit is None else tenant.lending_limit


@rule(
    "RP078",
    "borrowing-without-lender",
    Severity.WARNING,
    "A tenant may borrow, but no other tenant lends any GPUs.",
)
def borrowing_without_lender(ctx: LintContext) -> Iterator[Violation]:
    """A borrowing tenant needs another tenant whose quota it can borrow.

    A tenant borrows when its `borrowing_limit` is not 0; the others lend their `gpus`, or
    their `lending_limit` when stated.

    Why: borrowing uses other tenants' idle quota only (a Kueue cohort, Volcano's capacity
    plugin). With no other tenant, or every other one lending 0, there is nothing to
    borrow: the setting only raises the namespace's ResourceQuota and puts the queues in
    a cohort, and the tenant never gets more than its own `gpus`.
    Fix: let another tenant lend (`lending_limit` above 0, or unset for all), or set the
    tenant's `borrowing_limit: 0`.
    """
    listed = ctx.loaded.spec.scheduler.tenants
    for k, tenant in enumerate(listed):
        if not tenant.borrows:
            continue
        lent = sum(_lendable(t) for t in listed if t is not tenant)
        if lent == 0:
            yield Violation(
                f"scheduler.tenants[{k}].borrowing_limit",
                f"tenant {tenant.name!r} may borrow GPUs, but "
                + (
                    "it is the only tenant"
                    if len(listed) == 1
                    else "every other tenant has lending_limit: 0"
                ),
                "let another tenant lend, or set borrowing_limit: 0",
            )


@rule(
    "RP079",
    "autoscale-from-zero-on-gpu-load",
    Severity.WARNING,
    "A tenant autoscales on GPU load with min_replicas: 0.",
)
def autoscale_from_zero_on_gpu_load(ctx: LintContext) -> Iterator[Violation]:
    """A Deployment scaled on GPU load cannot scale up from zero replicas.

    Why: the KEDA ScaledObject's trigger reads the GPU activity of the Deployment's own pods
    (`DCGM_FI_PROF_GR_ENGINE_ACTIVE` or `DCGM_FI_DEV_GPU_UTIL`). At zero replicas there
    are no pods and no series: KEDA's Prometheus scaler reads the empty result as 0, the
    trigger is never active, and the Deployment stays at zero whatever the demand.
    Fix: set `min_replicas` to 1 or more, or scale from zero on a request signal (a queue
    length, requests per second) with a ScaledObject of your own.
    """
    for k, tenant in enumerate(ctx.loaded.spec.scheduler.tenants):
        if tenant.autoscale is not None and tenant.autoscale.min_replicas == 0:
            yield Violation(
                f"scheduler.tenants[{k}].autoscale.min_replicas",
                f"tenant {tenant.name!r} scales {tenant.autoscale.deployment!r} on GPU load "
                "from 0 replicas: with no pods there is no load, so it never scales up",
                "set min_replicas: 1",
            )


def _profiles(ctx: LintContext, state: MigState) -> frozenset[str]:
    """The MIG profiles some GPU of a server has in ``state`` (unknown layouts: RP010's)."""
    layouts = ctx.loaded.spec.mig_layouts
    return frozenset(
        profile
        for name in state.per_gpu
        if name is not None and name in layouts
        for profile, count in layouts[name].profiles.items()
        if count
    )


@rule(
    "RP107",
    "autoscale-on-mig-some-hours",
    Severity.WARNING,
    "A tenant autoscales on a node group whose mig_schedule leaves it without MIG slices "
    "at some hours.",
)
def autoscale_on_mig_some_hours(ctx: LintContext) -> Iterator[Violation]:
    """An autoscaled Deployment on a MIG group needs a MIG slice that exists at every hour.

    Applies with `mig_strategy: mixed`, where each MIG profile is a resource of its own
    (`nvidia.com/mig-<profile>`) and whole GPUs are `nvidia.com/gpu`. The group's scheduled
    changes repeat; the rule looks for a profile that every change's layout has.

    Why: the KEDA ScaledObject wants `min_replicas` to `max_replicas` pods of the
    Deployment around the clock, and on a group that is MIG-split at some time it scales on
    the MIG-safe metric: its pods run on MIG slices. A change to a layout without their
    profile (e.g. `mig: disabled` every night) drains the group's nodes, evicting the pods,
    and then offers no slice they can ask for: every replica sits Pending until the next
    change back to MIG, and the service is down those hours (weekends too, with a
    weekday-only change back).
    Fix: keep some GPUs MIG-split in every change (a per-GPU `mig` list, e.g.
    `[{gpus: [0], layout: <day layout>}]` at night), or autoscale on a group that is
    always MIG-split.
    """
    spec = ctx.loaded.spec
    if spec.scheduler.mig_strategy != "mixed":
        return
    index = {g.name: i for i, g in enumerate(spec.node_groups)}
    for k, tenant in enumerate(spec.scheduler.tenants):
        autoscale = tenant.autoscale
        if autoscale is None or autoscale.group not in index:
            continue  # RP077 reports an unknown group
        changes = ctx.migs[index[autoscale.group]].changes
        profiles = [_profiles(ctx, state) for state in changes]
        if not any(profiles) or frozenset.intersection(*profiles):
            continue
        when = "no profile is in every scheduled layout"
        for state, found in zip(changes, profiles, strict=True):
            if not found:
                when = f"from {state.at!r} ({state.path}) it has none"
                break
        yield Violation(
            f"scheduler.tenants[{k}].autoscale.group",
            f"tenant {tenant.name!r} autoscales {autoscale.deployment!r} on node group "
            f"{autoscale.group!r}, whose MIG slices its pods ask for are gone at some hours: "
            f"{when}, and its pods sit Pending until a change back to MIG",
            "keep some GPUs MIG-split in every change (a per-GPU mig list), or autoscale on "
            "a group that is always MIG-split",
        )
