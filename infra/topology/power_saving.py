"""Which planned servers Slurm power saving may power off, and why each other one stays on.

Never powered off: the control hosts (`infra.topology.control`): the Slurm controller, the
plan's first server, which runs slurmctld and so the power programs, and with OpenSM the
master and standby subnet managers, since a powered-off standby is no standby; the node
groups the spec lists in ``scheduler.power_saving.exclude_groups``; servers without a
planned BMC address, which no program could power on again; and cloud instances (no rack),
whose BMC is the provider's: the plan gives them addresses from ``site.bmc_cidr`` like any
server, but nothing answers IPMI there. The planner stores the answer on the plan
(``plan.facts.control``, `infra.topology.facts`); the renderer, lint and the simulator read
it there, so the rendered ``SuspendExcNodes`` and the simulator cannot disagree.
"""

from __future__ import annotations

from infra.spec import Spec
from infra.topology.control import Placed, control_hosts, controller_host
from infra.topology.facts_model import KeptReason
from infra.topology.model import Server

__all__ = ["KeptReason", "kept_powered", "kept_reasons", "suspendable"]


def kept_reasons(plan: Placed, spec: Spec) -> dict[str, KeptReason]:
    """Every server never powered off, with the first reason that keeps it on, in plan order."""
    saving = spec.scheduler.power_saving
    groups = set(saving.exclude_groups) if saving else set()
    control = set(control_hosts(plan, spec))
    controller = controller_host(plan) if plan.servers and spec.scheduler.kind == "slurm" else None
    kept: dict[str, KeptReason] = {}
    for s in plan.servers:
        if s.name in control:
            kept[s.name] = "slurm controller" if s.name == controller else "subnet manager"
        elif s.group in groups:
            kept[s.name] = "excluded group"
        elif s.bmc_ip is None:
            kept[s.name] = "no BMC address"
        elif s.rack is None:
            kept[s.name] = "cloud instance"
    return kept


def kept_powered(plan: Placed, spec: Spec) -> list[Server]:
    """Servers never powered off, in plan order (module docstring)."""
    kept = kept_reasons(plan, spec)
    return [s for s in plan.servers if s.name in kept]


def suspendable(plan: Placed, spec: Spec) -> list[Server]:
    """Servers Slurm may power off, in plan order (none without power saving)."""
    if spec.scheduler.power_saving is None:
        return []
    kept = kept_reasons(plan, spec)
    return [s for s in plan.servers if s.name not in kept]
