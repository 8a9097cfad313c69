"""Rules about MIG: profiles on the GPU, layouts that fit, scheduler strategy, MIG schedules."""

from __future__ import annotations

from collections.abc import Iterator

from infra.catalog import Gpu
from infra.catalog.mig import check_layout, parse_profile
from infra.errors import spelling_hint
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import MigUse, group_path, known_mig_uses, mig_uses
from infra.spec import MigValue, join_path
from infra.spec.cron import closest_firings, dst_shift_minutes
from infra.topology.facts_model import MigState
from infra.topology.groups import BATCH_MARGIN_S, MIG_TIMEOUT_S, assignment_gpus, mig_batches
from infra.topology.model import GroupPlan
from infra.wording import plural


def _gi_name(profile: str) -> str:
    """GPU-instance profile of a possibly compute-instance-prefixed name (`1c.3g.20gb`)."""
    parsed = parse_profile(profile)
    return parsed.gi_name if parsed else profile


def _layout_path(name: str, field: str = "") -> str:
    path = join_path("mig_layouts", name)
    return join_path(path, field) if field else path


def _used_layouts(ctx: LintContext) -> Iterator[tuple[MigUse, Gpu, str]]:
    """(first use, GPU, layout name) for each defined layout a node group uses.

    A group's `mig` and every change of its `mig_schedule` count; a layout a group uses in
    several values is reported at its first use only.
    """
    layouts = ctx.loaded.spec.mig_layouts
    seen: set[tuple[int, str]] = set()
    for use, _, gpu in known_mig_uses(ctx):
        for name in sorted(set(use.layouts.values())):
            if name in layouts and (use.group_index, name) not in seen:
                seen.add((use.group_index, name))
                yield use, gpu, name


@rule(
    "RP010",
    "mig-profile-unknown",
    Severity.ERROR,
    "A MIG layout uses a profile the node's GPU does not have.",
)
def mig_profile_unknown(ctx: LintContext) -> Iterator[Violation]:
    """Every profile in a layout must be a MIG profile of every GPU the layout is applied to.

    Why: profile names carry the GPU's memory size (`1g.5gb` on A100-40GB is `1g.10gb` on
    A100-80GB and H100-80GB, `1g.18gb` on H200); mig-parted fails on a name the GPU lacks and
    the node is left without its MIG devices.
    Fix: use the profile names of the node's GPU (the hint lists them), or a separate layout
    per GPU model.
    """
    for use, gpu, name in _used_layouts(ctx):
        valid = [p.name for p in gpu.mig.profiles] if gpu.mig else []
        for profile in ctx.loaded.spec.mig_layouts[name].profiles:
            if _gi_name(profile) not in valid:
                yield Violation(
                    join_path(_layout_path(name, "profiles"), profile),
                    f"profile {profile} is not a MIG profile of {gpu.name} "
                    f"(used by {use.label}, node {use.group.node})",
                    _same_slice_hint(ctx, gpu, _gi_name(profile))
                    or spelling_hint(_gi_name(profile), valid),
                )


def _same_slice_hint(ctx: LintContext, gpu: Gpu, profile: str) -> str | None:
    """Name the profile with the same GI profile id on ``gpu`` (1g.5gb -> 1g.10gb)."""
    for other in ctx.catalog.gpus.values():
        known = other.mig.profile(profile) if other.mig else None
        if known is not None and gpu.mig is not None:
            match = next(
                (p for p in gpu.mig.profiles if p.gi_profile_id == known.gi_profile_id), None
            )
            if match is not None:
                return (
                    f"{profile} is the {other.name} name; on {gpu.name} the same slice is "
                    f"{match.name}"
                )
    return None


@rule(
    "RP011",
    "mig-layout-does-not-fit",
    Severity.ERROR,
    "A MIG layout does not fit on the GPU (counts, instances or placement).",
)
def mig_layout_does_not_fit(ctx: LintContext) -> Iterator[Violation]:
    """A layout's instances must have a non-overlapping placement on the GPU.

    Why: MIG places each GPU instance on fixed memory-slice ranges (`nvidia-smi mig -lgipp`);
    a layout within the slice count can still have no placement (4g + 4g), exceed a profile's
    maximum (3 × 3g) or need a newer driver (4g + 3g before R510). mig-parted then fails on
    the node at apply time. railplan searches every placement, as mig-parted does.
    Fix: change the counts; the message names the rule the layout breaks.
    """
    driver_branch = ctx.loaded.spec.software.driver_branch
    for use, gpu, name in _used_layouts(ctx):
        profiles = ctx.loaded.spec.mig_layouts[name].profiles
        if gpu.mig is None or any(gpu.mig.profile(_gi_name(p)) is None for p in profiles):
            continue  # RP010 reports unknown profiles
        result = check_layout(gpu, profiles, driver_branch)
        for problem in result.problems:
            yield Violation(
                _layout_path(name, "profiles"),
                f"layout {name!r} on {gpu.name} ({use.label}): {problem}",
            )


def _single_strategy_problem(layouts: dict[int, str], ctx: LintContext) -> str | None:
    if "disabled" in layouts.values():
        return "some GPUs of the node are MIG-disabled"
    profiles = {
        p
        for name in set(layouts.values())
        for p, n in ctx.loaded.spec.mig_layouts[name].profiles.items()
        if n
    }
    if len(profiles) > 1:
        return f"the node would expose {len(profiles)} profiles ({', '.join(sorted(profiles))})"
    return None


@rule(
    "RP012",
    "mig-strategy-single-mixed",
    Severity.ERROR,
    "mig_strategy single with more than one MIG profile, or MIG-disabled GPUs, on a node.",
)
def mig_strategy_single_mixed(ctx: LintContext) -> Iterator[Violation]:
    """With `scheduler.mig_strategy: single`, every GPU of a MIG node must carry one profile.

    This holds for a group's `mig` and for every value its `mig_schedule` changes to: each is
    what the device plugin sees after the change, and is reported at that change.

    Why: the NVIDIA device plugin's `single` strategy advertises MIG devices as plain
    `nvidia.com/gpu` and requires all GPUs on the node to be MIG-enabled with the same profile;
    otherwise it advertises nothing useful and pods stay pending.
    Fix: use `mig_strategy: mixed` (resources `nvidia.com/mig-<profile>`), or give the group
    a layout with a single profile on every GPU.
    """
    if ctx.loaded.spec.scheduler.mig_strategy != "single":
        return
    for use, _, _ in known_mig_uses(ctx):
        layouts = use.layouts
        names = set(layouts.values())
        if names == {"disabled"} or not names - {"disabled"} <= set(ctx.loaded.spec.mig_layouts):
            continue  # no MIG here, or RP003 reports the undefined layout
        problem = _single_strategy_problem(layouts, ctx)
        if problem:
            yield Violation(
                use.path,
                f"mig_strategy single needs one MIG profile on every GPU, but in "
                f"{use.label} {problem}",
                "set scheduler.mig_strategy: mixed, or use one profile per node",
            )


@rule(
    "RP013",
    "mig-without-strategy",
    Severity.ERROR,
    "MIG layouts are used on Kubernetes but scheduler.mig_strategy is none.",
)
def mig_without_strategy(ctx: LintContext) -> Iterator[Violation]:
    """Using MIG on Kubernetes needs a device-plugin MIG strategy (`single` or `mixed`).

    Why: with strategy `none` the NVIDIA device plugin ignores MIG devices, so the MIG
    instances the layout creates are never offered to pods. The strategy is a device-plugin
    (and GPU feature discovery) setting only: Slurm finds MIG devices through gres.conf
    (`AutoDetect=nvml`), so the rule does not apply to `scheduler.kind: slurm`.
    Fix: set `scheduler.mig_strategy: mixed` (or `single` when each node has one profile).
    """
    scheduler = ctx.loaded.spec.scheduler
    if scheduler.kind != "kubernetes" or scheduler.mig_strategy != "none":
        return
    for use in mig_uses(ctx):
        if use.state.splits:
            yield Violation(
                use.path,
                f"{use.label} uses MIG but scheduler.mig_strategy is none",
                "set scheduler.mig_strategy: mixed",
            )


@rule(
    "RP014",
    "mig-gpu-index",
    Severity.ERROR,
    "A MIG assignment names a GPU index the node lacks, or one GPU twice.",
)
def mig_gpu_index(ctx: LintContext) -> Iterator[Violation]:
    """Per-GPU MIG assignments must name existing GPUs, each at most once.

    Why: mig-parted `devices` lists are GPU indices on the node; an index past the last GPU
    or a GPU in two entries makes the config ambiguous or fail.
    Fix: use indices 0..N-1 for an N-GPU node, each in one assignment.
    """
    for use, node, _ in known_mig_uses(ctx):
        if isinstance(use.value, str):
            continue
        seen: set[int] = set()
        for j, assignment in enumerate(use.value):
            indices = assignment_gpus(assignment, node.gpus)
            for index in indices:
                path = use.assignment_path(j, "gpus")
                if index >= node.gpus:
                    yield Violation(
                        path,
                        f"GPU index {index} does not exist on {node.name} "
                        f"({plural(node.gpus, 'GPU')}: 0-{node.gpus - 1})",
                    )
                elif index in seen:
                    yield Violation(path, f"GPU {index} is assigned more than one MIG layout")
                seen.add(index)


@rule("RP015", "mig-layout-unused", Severity.WARNING, "A MIG layout no node group uses.")
def mig_layout_unused(ctx: LintContext) -> Iterator[Violation]:
    """Every layout in `mig_layouts` should be used by some node group.

    A layout counts as used when a group's `mig` or any change of its `mig_schedule` names it.

    Why: an unused layout is usually a typo in a group's `mig` or a leftover; it is still
    rendered into the mig-parted config, where nobody checks it on real hardware.
    Fix: reference it from a node group, or delete it.
    """
    used = {a.layout for use in mig_uses(ctx) for a in use.assignments}
    for name in ctx.loaded.spec.mig_layouts:
        if name not in used:
            yield Violation(
                _layout_path(name), f"MIG layout {name!r} is not used by any node group"
            )


@rule(
    "RP016",
    "mig-schedule-needs-kubernetes",
    Severity.ERROR,
    "A node group has a mig_schedule but scheduler.kind is slurm.",
)
def mig_schedule_needs_kubernetes(ctx: LintContext) -> Iterator[Violation]:
    """A MIG schedule needs Kubernetes.

    Why: railplan builds a schedule as CronJobs that relabel the nodes for the GPU Operator's
    MIG manager, which drains GPU pods and re-partitions the GPUs. On Slurm, re-partitioning
    needs node drains and a gres.conf change that railplan does not build, so the schedule
    would silently never happen.
    Fix: set `scheduler.kind: kubernetes`, or remove the group's `mig_schedule` and keep one
    `mig` value (re-partition Slurm nodes by hand in a maintenance window).
    """
    if ctx.loaded.spec.scheduler.kind != "slurm":
        return
    for i, (group, mig) in enumerate(zip(ctx.loaded.spec.node_groups, ctx.migs, strict=True)):
        if mig.schedule is not None:
            yield Violation(
                group_path(i, "mig_schedule"),
                f"node group {group.name!r} has a MIG schedule, which needs Kubernetes: "
                "railplan builds CronJobs for the GPU Operator's MIG manager; on Slurm "
                "re-partitioning needs node drains and a gres.conf change railplan does not build",
                "set scheduler.kind: kubernetes, or remove mig_schedule",
            )


@rule(
    "RP017",
    "mig-schedule-no-change",
    Severity.WARNING,
    "A mig_schedule never changes the MIG layout, or a change repeats the one before it.",
)
def mig_schedule_no_change(ctx: LintContext) -> Iterator[Violation]:
    """Every change of a `mig_schedule` should change the group's MIG layout.

    Values are compared per GPU, so `layout: x` and `[{gpus: all, layout: x}]` are equal. A
    schedule whose every change equals `mig` is reported once at `mig_schedule`; otherwise
    each change equal to the one listed before it is reported at that change.

    Why: each change drains the group's GPU pods (up to `drain_timeout`) and re-partitions the
    GPUs; a change to the layout they already have costs that disruption for nothing, and
    usually means a typo or a change that was meant to be different.
    Fix: give the change the layout you meant, or delete it (and the whole `mig_schedule` if
    nothing changes). Changes are read in the order listed; list them in time order.
    """
    for i, (group, mig) in enumerate(zip(ctx.loaded.spec.node_groups, ctx.migs, strict=True)):
        if mig.schedule is None:
            continue
        known = group.node in ctx.catalog.nodes
        key = [_mig_key(state, known) for state in mig.states]
        if all(k == key[0] for k in key[1:]):
            yield Violation(
                group_path(i, "mig_schedule"),
                f"the MIG schedule of node group {group.name!r} never changes anything: "
                f"every change sets the group's mig ({_describe(mig.now.value)})",
                "remove mig_schedule, or give a change a different layout",
            )
            continue
        for j, change in enumerate(mig.changes[1:], start=1):
            if key[j + 1] == key[j]:
                yield Violation(
                    change.path,
                    f"in node group {group.name!r}, MIG schedule change {j + 1} "
                    f"(at {change.at!r}) repeats change {j} "
                    f"({_describe(change.value)}): it changes nothing",
                    "give it the layout you meant, or delete it",
                )


def _mig_key(state: MigState, known_node: bool) -> object:
    """A MIG state in a form equal values share: the per-GPU layouts (raw if node unknown)."""
    if known_node:
        return state.per_gpu
    return [(a.gpus, a.layout) for a in state.assignments]


def _describe(value: MigValue) -> str:
    return value if isinstance(value, str) else "a per-GPU list"


@rule(
    "RP019",
    "mig-schedule-overlap",
    Severity.ERROR,
    "Two changes of a MIG schedule can fire while the other's Job still runs.",
    needs_plan=True,
)
def mig_schedule_overlap(ctx: LintContext) -> Iterator[Violation]:
    """Changes of one group must fire at least one change Job's run time apart.

    The run time is the Job's activeDeadlineSeconds: per batch of the group's SUs
    (`rolling_batch_sus` at a time, default 1), in turn, the
    `drain_timeout`, the MIG manager's reconfiguration time (`MIG_TIMEOUT_S`, 15 min with a
    node reboot) and 10 min of margin; plus the time zone's daylight-saving shift, which can
    bring two wall-clock times that much closer. Every calendar day is checked, so `0 8 * * *`
    and `0 9 * * 1` are 1 h apart on Mondays.

    Why: each change is its own CronJob, and `concurrencyPolicy: Forbid` only keeps a CronJob
    from overlapping itself: two changes a minute apart run at once on the same nodes, each
    cordoning, draining and relabelling them for a different config.
    Fix: move the changes further apart, shorten `drain_timeout`, or raise
    `rolling_batch_sus` (fewer, larger batches).
    """
    plan = ctx.plan
    if plan is None:
        return
    for group in plan.groups.values():
        schedule, changes = group.mig.schedule, group.mig.changes
        if schedule is None or group.job_deadline_s is None or len(changes) < 2:
            continue
        needed_min = -(-group.job_deadline_s // 60) + dst_shift_minutes(schedule.timezone)
        closest = closest_firings([c.at or "" for c in changes])
        if closest is None or closest[0] >= needed_min:
            continue
        minutes, a, b = closest
        first, second = sorted((a, b))
        yield Violation(
            group_path(group.index, f"mig_schedule.changes[{second}].at"),
            f"in node group {group.name!r}, MIG schedule changes {first + 1} and {second + 1} "
            f"can fire {_minutes(minutes)} apart, but need {_minutes(needed_min)} "
            f"({_run_time(group)}): both Jobs would cordon, "
            "drain and relabel the same nodes at once",
            f"keep the changes at least {_minutes(needed_min)} apart on every day",
        )


def _minutes(n: int) -> str:
    hours, minutes = divmod(n, 60)
    parts = [f"{hours} h"] if hours else []
    return " ".join([*parts, f"{minutes} min"] if minutes or not hours else parts)


def _run_time(group: GroupPlan) -> str:
    """Why changes must be that far apart: one Job's run time, and the time zone's DST shift."""
    schedule = group.mig.schedule
    assert schedule is not None
    timezone = schedule.timezone
    per_su = (
        f"drain_timeout {schedule.drain_timeout} + {MIG_TIMEOUT_S // 60} min MIG "
        f"reconfiguration + {BATCH_MARGIN_S // 60} min margin"
    )
    batches = mig_batches(schedule, len(group.sus))
    unit = (
        plural(batches, "SU")
        if schedule.rolling_batch_sus == 1
        else f"{plural(batches, 'batch', 'batches')} of {schedule.rolling_batch_sus} SUs"
    )
    text = f"one change's Job may run {unit} x ({per_su})"
    shift = dst_shift_minutes(timezone)
    return (
        f"{text}, and {timezone}'s daylight-saving switch moves times {shift} min"
        if shift
        else text
    )
