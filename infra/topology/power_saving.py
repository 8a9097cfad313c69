"""Which planned servers Slurm power saving may power off, read by the renderer and by lint.

Never powered off: the control hosts (`infra.topology.control`): the Slurm controller, the
plan's first server, which runs slurmctld and so the power programs, and with OpenSM the
master and standby subnet managers, since a powered-off standby is no standby; the node groups the spec lists in ``scheduler.power_saving.exclude_groups``;
servers without a planned BMC address, which no program could power on again; and cloud
instances (no rack), whose BMC is the provider's: the plan gives them addresses from
``site.bmc_cidr`` like any server, but nothing answers IPMI there.
"""

from __future__ import annotations

from infra.spec import Spec
from infra.topology.control import control_hosts
from infra.topology.model import Plan, Server

__all__ = ["kept_powered", "suspendable"]


def kept_powered(plan: Plan, spec: Spec) -> list[Server]:
    """Servers never powered off, in plan order (module docstring)."""
    saving = spec.scheduler.power_saving
    groups = set(saving.exclude_groups) if saving else set()
    control = set(control_hosts(plan, spec))
    return [
        s
        for s in plan.servers
        if s.name in control or s.group in groups or s.bmc_ip is None or s.rack is None
    ]


def suspendable(plan: Plan, spec: Spec) -> list[Server]:
    """Servers Slurm may power off, in plan order (none without power saving)."""
    if spec.scheduler.power_saving is None:
        return []
    kept = {s.name for s in kept_powered(plan, spec)}
    return [s for s in plan.servers if s.name not in kept]
