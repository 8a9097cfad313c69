"""Slurm power saving: the slurm.conf lines and the host-to-BMC map the power programs read.

With ``scheduler.power_saving`` set, slurmctld powers a server off through its BMC after it
has been idle for ``suspend_time`` and on again when work needs it (slurm.conf(5), SuspendTime
and ResumeProgram). Never suspended (``SuspendExcNodes``): the servers
the plan keeps on (``plan.facts.control.kept_on``: the controller, the subnet managers,
``exclude_groups``, servers without a BMC address). ResumeRate is bounded to one rack's servers a minute unless the spec
says otherwise: slurm.conf(5) gives it "to prevent power surges" when a large job starts, and
Slurm picks a job's nodes close together, so the servers it resumes in one minute are
usually those of the same SU. A bound of one rack's worth keeps a minute's power-on within
what one rack's feeds carry (``site.rack.power_kw``), wherever those servers stand; one per
rack a minute would still let a whole SU (32 DGX H100 in 8 racks) power on at once. The programs
are static files of the slurm role (``railplan-power.sh``); this module renders only what
differs per cluster, ``bmc-hosts``: one ``<server> <BMC address>`` line per suspendable server.
"""

from __future__ import annotations

from infra.catalog.distro_slurm import has_suspend_exc_states
from infra.render.slurm import hostlist
from infra.spec import Spec
from infra.spec.scheduling import duration_seconds
from infra.topology.model import Plan, Server

__all__ = [
    "BMC_HOSTS",
    "RESUME_FAIL_PROGRAM",
    "RESUME_PROGRAM",
    "SUSPEND_PROGRAM",
    "bmc_hosts",
    "power_saving_lines",
    "resume_rate",
]

# Installed by the slurm role on the controller: one script under three names (it reads its
# action from the name it was called by), and the map below beside slurm.conf.
SUSPEND_PROGRAM = "/etc/slurm/railplan-suspend.sh"
RESUME_PROGRAM = "/etc/slurm/railplan-resume.sh"
RESUME_FAIL_PROGRAM = "/etc/slurm/railplan-resume-fail.sh"
BMC_HOSTS = "bmc-hosts"  # the rendered file's name under files/slurm/ and /etc/slurm/


def resume_rate(plan: Plan, spec: Spec) -> int:
    """ResumeRate: the spec's, else the most suspendable servers one rack holds (at least 1)."""
    saving = spec.scheduler.power_saving
    if saving is not None and saving.resume_rate is not None:
        return saving.resume_rate
    per_rack: dict[str, int] = {}
    for server in _may_power_off(plan):
        if server.rack is not None:
            per_rack[server.rack] = per_rack.get(server.rack, 0) + 1
    return max(per_rack.values(), default=1)


def power_saving_lines(plan: Plan, spec: Spec) -> list[str]:
    """slurm.conf's power-saving lines; none when the spec sets no power saving.

    Times are seconds (slurm.conf(5)). SlurmctldParameters=idle_on_node_suspend is left out
    on purpose: it would mark drained nodes idle on suspend, hiding the GPU health drain.
    """
    saving = spec.scheduler.power_saving
    if saving is None:
        return []
    lines = [
        "# Power saving: idle servers are powered off through their BMC (slurm role,",
        "# railplan-power.sh); the controller and the servers listed here never are.",
        f"SuspendTime={duration_seconds(saving.suspend_time)}",
        f"SuspendTimeout={duration_seconds(saving.suspend_timeout)}",
        f"ResumeTimeout={duration_seconds(saving.resume_timeout)}",
        f"SuspendProgram={SUSPEND_PROGRAM}",
        f"ResumeProgram={RESUME_PROGRAM}",
        f"ResumeFailProgram={RESUME_FAIL_PROGRAM}",
        f"SuspendRate={saving.suspend_rate}",
        f"ResumeRate={resume_rate(plan, spec)}",
    ]
    kept = [plan.server(name) for name, _ in plan.facts.control.kept_on]
    if kept:
        lines.append(f"SuspendExcNodes={hostlist(kept)}")
    if has_suspend_exc_states(spec.software.os):
        # a drained node (a rolling update's, the GPU health check's) stays on; Slurm 21.08
        # has no such setting: railplan-suspend.sh refuses the roll-out's nodes instead
        lines.append("SuspendExcStates=DRAIN")
    return lines


def bmc_hosts(plan: Plan, spec: Spec) -> str:
    """The power programs' map: ``<server> <BMC address>`` per suspendable server."""
    lines = [
        f"# {plan.name}: the BMC of each server Slurm may power off (railplan; do not edit).",
        *(f"{s.name} {s.bmc_ip}" for s in _may_power_off(plan)),
    ]
    return "\n".join(lines) + "\n"


def _may_power_off(plan: Plan) -> list[Server]:
    """The servers Slurm may power off, in plan order (the plan's facts)."""
    return [plan.server(name) for name in plan.facts.control.may_power_off]
