"""Rules about the budgets a spec declares, evaluated on the planned cluster."""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.spec import NodeGroup
from infra.topology.facts_model import GroupMig


@rule(
    "RP060",
    "budget-not-met",
    Severity.ERROR,
    "A declared budget is not met by the planned cluster.",
    needs_plan=True,
)
def budget_not_met(ctx: LintContext) -> Iterator[Violation]:
    """Every declared budget must hold for the planned cluster; met ones report headroom.

    Why: budgets are the targets the cluster is bought for (all-reduce time, scaling
    efficiency, checkpoint time, power, cost, model fit); finding a miss in a spec costs
    an edit, finding it after cabling costs a redesign. A met budget is reported as info with
    its headroom, so a shrinking margin is visible in review.
    A budget with a `claim` tests someone else's number (a vendor article's "0.89 scaling at
    8,000 GPUs") rather than a target of this cluster: a missed claim is a warning, so a spec
    can keep the claims it was sold on and say which ones its plan does not meet.
    Fix: change the spec (fabric, SHARP, storage throughput, racks) or the budget; `railplan
    budget SPEC` shows the predicted value, the limit and what limits it.
    """
    for r in ctx.budgets:
        if r.error:
            continue  # RP061
        op = "<=" if r.better == "lower" else ">="
        unit = f" {r.unit}" if r.unit else ""
        text = f"{r.kind}: predicted {_num(r.predicted)}{unit}"
        if r.has_band:  # the verdict tests the band edge the budget asks for, not the centre
            text += f", {r.bound} bound {_num(r.tested)}{unit}"
        text += f", limit {op} {_num(r.limit)}{unit}"
        claim = f" ({r.claim})" if r.claim else ""
        if r.passed:
            text = f"{text}, headroom {r.margin:+.1%}{claim}"
            yield Violation(r.path, text, r.detail, Severity.INFO)
        elif r.claim:
            text = f"{text}, missed by {-r.margin:.1%}: the claim does not hold here{claim}"
            yield Violation(r.path, text, r.detail, Severity.WARNING)
        else:
            yield Violation(r.path, f"{text}, missed by {-r.margin:.1%}", r.detail)


@rule(
    "RP061",
    "budget-unevaluable",
    Severity.ERROR,
    "A declared budget cannot be evaluated on this spec.",
    needs_plan=True,
)
def budget_unevaluable(ctx: LintContext) -> Iterator[Violation]:
    """A budget must be answerable from the spec.

    Why: a budget over more GPUs than the cluster has, a checkpoint budget with nowhere to
    write (no storage fabric, and servers that are not AWS instances) or a precision the GPUs
    lack cannot be checked, so it silently protects nothing. AWS instances need no storage
    fabric: their checkpoints go to the FSx for Lustre file system railplan provisions (the
    spec's `aws.fsx`, else sized from the checkpoint budgets), and the budget is evaluated
    against it.
    Fix: follow the hint (GPU count, `fabrics.storage`, precision).
    """
    for r in ctx.budgets:
        if r.error:
            yield Violation(r.path, f"{r.kind}: cannot evaluate: {r.error}", r.error_hint)


@rule(
    "RP062",
    "budget-on-mig-group",
    Severity.ERROR,
    "A budget that spans several GPUs names a MIG-partitioned node group.",
)
def budget_on_mig_group(ctx: LintContext) -> Iterator[Violation]:
    """A multi-GPU budget (collective, scaling, SHARP gain, model fit) needs whole GPUs.

    Why: MIG instances have no NVLink, no peer-to-peer and no CUDA IPC between them: "the
    lack of support for CUDA Inter-Process Communication (IPC) ... When using MIG, NVLink and
    NVSwitch are thus completely unavailable" (RAPIDS deployment guide, Multi-Instance GPU;
    the NVIDIA MIG user guide's application considerations list no GPU-to-GPU P2P, PCIe or
    NVLink, paraphrased here). A collective over the GPUs of a MIG-partitioned group is no
    NVLink domain, and the budget's prediction would describe a job that cannot run. A
    group counts as MIG-partitioned when its `mig` or any change of its `mig_schedule`
    splits a GPU: whole GPUs by night do not make it a training partition by day.
    Fix: point the budget's `group` at a node group without MIG (or leave `group` out: the
    default is the largest group without MIG), or give that group `mig: disabled` and no
    MIG schedule.
    """
    groups = {g.name: g for g in ctx.loaded.spec.node_groups}
    migs = {g.name: m for g, m in zip(ctx.loaded.spec.node_groups, ctx.migs, strict=True)}
    whole = [g.name for g in ctx.loaded.spec.node_groups if not migs[g.name].split]
    for i, budget in enumerate(ctx.loaded.spec.budgets):
        kind = budget.kind
        target = getattr(budget, kind)
        name = getattr(target, "group", None)
        group = groups.get(name) if name is not None else None
        if group is None or not migs[group.name].split or not _spans_gpus(ctx, target, group):
            continue
        how = _mig_how(group, migs[group.name])
        yield Violation(
            f"budgets[{i}].{kind}.group",
            f"budget {kind} (budgets[{i}]) spans several GPUs of node group {group.name!r}, "
            f"which is MIG-partitioned ({how}): MIG instances have no NVLink, "
            "P2P or CUDA IPC between them",
            f"target a group without MIG (group: {whole[0]})"
            if whole
            else "target a group without MIG, or give this one mig: disabled and no mig_schedule",
        )


def _spans_gpus(ctx: LintContext, budget: object, group: NodeGroup) -> bool:
    """Whether the budget runs on more than one GPU (a model fit may ask for one)."""
    gpus = getattr(budget, "gpus", None)
    if gpus is None:  # model_fits default: the group's GPUs
        node = ctx.catalog.nodes.get(group.node)
        return node is not None and node.gpus * group.count > 1
    return bool(gpus > 1)


def _mig_how(group: NodeGroup, mig: GroupMig) -> str:
    """``mig: <layout>`` when the group's `mig` splits GPUs, else its schedule does."""
    if not mig.now.splits:
        return "by its mig_schedule"
    return f"mig: {group.mig}" if isinstance(group.mig, str) else "by its per-GPU mig list"


def _num(value: float) -> str:
    """Thousands with separators, smaller values with 4 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
