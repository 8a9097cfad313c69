"""Rules about Slurm power saving (`scheduler.power_saving`): what it keeps up, and its times."""

from __future__ import annotations

from collections.abc import Iterator

from infra.catalog.distro_slurm import distro_slurm, has_suspend_exc_states
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.spec.scheduling import duration_seconds
from infra.wording import plural


@rule(
    "RP090",
    "power-saving-unknown-group",
    Severity.ERROR,
    "power_saving.exclude_groups names a node group the spec does not have.",
)
def power_saving_unknown_group(ctx: LintContext) -> Iterator[Violation]:
    """Every group in `scheduler.power_saving.exclude_groups` must be one of `node_groups`.

    Why: a misspelt group is kept up by nobody: the group meant to stay powered (inference
    nodes that must answer at once, nodes whose boot is slow) is powered off like any other,
    and the typo itself is silent in slurm.conf.
    Fix: use a name from `node_groups` (the message lists them), or remove the entry.
    """
    spec = ctx.loaded.spec
    saving = spec.scheduler.power_saving
    if saving is None:
        return
    names = [g.name for g in spec.node_groups]
    for k, group in enumerate(saving.exclude_groups):
        if group not in names:
            yield Violation(
                f"scheduler.power_saving.exclude_groups[{k}]",
                f"power_saving.exclude_groups names {group!r}, which is not a node group",
                f"use one of: {', '.join(names)}",
            )


@rule(
    "RP091",
    "power-saving-flaps",
    Severity.WARNING,
    "power_saving.suspend_time is shorter than a power cycle (suspend_timeout + resume_timeout).",
)
def power_saving_flaps(ctx: LintContext) -> Iterator[Violation]:
    """A node should stay idle at least as long as powering it off and on again may take.

    A power cycle may take `suspend_timeout` + `resume_timeout` (slurm.conf's SuspendTimeout
    and ResumeTimeout: the node is unusable for that long).
    Why: with a shorter `suspend_time`, a node is powered off after a gap shorter than the
    time it then takes to come back, so a workload with short pauses between jobs spends more
    time booting than it saves, nodes flap between off and on, and each job behind a flapping
    node waits up to a whole boot. BMC power cycles also wear PSUs and fans.
    Fix: set `suspend_time` to at least `suspend_timeout + resume_timeout` (the message says
    how much that is); longer still if jobs arrive in bursts.
    """
    saving = ctx.loaded.spec.scheduler.power_saving
    if saving is None:
        return
    idle = duration_seconds(saving.suspend_time)
    cycle = duration_seconds(saving.suspend_timeout) + duration_seconds(saving.resume_timeout)
    if idle < cycle:
        yield Violation(
            "scheduler.power_saving.suspend_time",
            f"suspend_time {saving.suspend_time} ({idle:,} s) is shorter than a power cycle: "
            f"suspend_timeout {saving.suspend_timeout} + resume_timeout "
            f"{saving.resume_timeout} = {cycle:,} s; nodes would flap off and on",
            f"set suspend_time to at least {-(-cycle // 60)}m",
        )


@rule(
    "RP092",
    "power-saving-suspends-nothing",
    Severity.WARNING,
    "Power saving is on but no planned server could be powered off.",
    needs_plan=True,
)
def power_saving_suspends_nothing(ctx: LintContext) -> Iterator[Violation]:
    """With `power_saving` set, at least one planned server should be one Slurm may power off.

    Never powered off: the Slurm controller (the first server), the groups in
    `exclude_groups`, servers without a planned BMC address (a `site.bmc_cidr` too small for
    every server), which no program could power on again, and cloud instances, whose BMC is
    the provider's (scale them with the provider's API instead).
    Why: then slurm.conf's power saving does nothing while the spec says it saves power, and
    the Ansible role still asks for BMC credentials.
    Fix: drop groups from `exclude_groups`, give the servers BMC addresses (a larger
    `site.bmc_cidr`), or remove `power_saving`.
    """
    spec, plan = ctx.loaded.spec, ctx.plan
    if spec.scheduler.power_saving is None or plan is None or plan.facts.control.may_power_off:
        return
    kept = [why for _, why in plan.facts.control.kept_on]
    excluded = kept.count("excluded group")
    no_bmc = kept.count("no BMC address") + kept.count("cloud instance")
    control = len(kept) - excluded - no_bmc
    yield Violation(
        "scheduler.power_saving",
        f"power saving is on but all {plural(len(kept), 'server')} stay powered: the "
        f"{'controller' if control == 1 else 'control hosts'}, {excluded:,} in exclude_groups "
        f"and {no_bmc:,} cloud instances or servers without a BMC address",
        "shorten exclude_groups, widen site.bmc_cidr, or remove power_saving",
    )


@rule(
    "RP093",
    "power-saving-no-run-hold",
    Severity.INFO,
    "The OS's Slurm cannot hold a playbook run's hosts off power saving (before 23.02).",
    needs_plan=True,
)
def power_saving_no_run_hold(ctx: LintContext) -> Iterator[Violation]:
    """Power saving on an OS whose Slurm predates 23.02 can power hosts off under a playbook run.

    Each play of the rendered playbook holds its hosts off power saving until the run's last
    play gives them back, with `scontrol update SuspendExcNodes+=` (Slurm 23.02 and later).
    Slurm 21.08 (Ubuntu 22.04's) reads SuspendExcNodes only from slurm.conf.
    Why: a host left idle for `suspend_time` while the run configures it is powered off
    through its BMC mid-task and drops out of the run (the cluster twin's SU on Ubuntu 22.04
    lost 20 hosts 30 minutes into a re-run). Drained hosts are safe: the suspend program
    leaves a host the roll-out drained on.
    Fix: an OS with Slurm 23.02 or later (ubuntu-24.04), or turn power saving off for long
    runs (SuspendTime=-1 in slurm.conf, `scontrol reconfigure`, and back after).
    """
    spec, plan = ctx.loaded.spec, ctx.plan
    saving = spec.scheduler.power_saving
    slurm = distro_slurm(spec.software.os)
    if saving is None or slurm is None or has_suspend_exc_states(spec.software.os):
        return
    if plan is None or not plan.facts.control.may_power_off:
        return  # nothing is ever powered off (RP092 says so)
    yield Violation(
        "scheduler.power_saving",
        f"{spec.software.os}'s Slurm {slurm.version} cannot hold a playbook run's hosts off "
        f"power saving (scontrol update SuspendExcNodes needs 23.02): a host idle for "
        f"suspend_time {saving.suspend_time} during a run may be powered off under it",
        "use ubuntu-24.04 (Slurm 23.11), or switch power saving off for runs longer than "
        "suspend_time (SuspendTime=-1, scontrol reconfigure)",
    )
