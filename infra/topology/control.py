"""The servers that run the cluster's control services, and the order a roll-out takes them.

railplan plans no management servers, so two services run on GPU servers: the Slurm
controller (``slurmctld``) on the plan's first server, and, with OpenSM, the master and
standby subnet managers on the first server of the first two SUs (two failure domains, as
NVIDIA's OpenSM deployments on small clusters do). These are the *control hosts*. A rolling
change takes them last and one at a time (`control_roll_order`: the standby subnet
managers first, the controller last), so the first batch, the canary, is ordinary compute,
slurmctld stays up to drain every other batch, and the master and standby subnet managers
are never down together. Power saving never powers them off (`topology.power_saving`).
"""

from __future__ import annotations

from typing import Protocol

from infra.spec import Spec
from infra.topology.model import ScalableUnit, Server

__all__ = [
    "Placed",
    "control_hosts",
    "control_roll_order",
    "controller_host",
    "subnet_manager_hosts",
    "uses_opensm",
]


class Placed(Protocol):
    """What the control rules read: the planned servers and SUs (a `Plan` has both)."""

    @property
    def servers(self) -> tuple[Server, ...]:
        """The planned servers, in plan order."""
        ...

    @property
    def sus(self) -> tuple[ScalableUnit, ...]:
        """The planned scalable units, in plan order."""
        ...


def controller_host(plan: Placed) -> str:
    """The slurmctld host: the plan's first server."""
    return plan.servers[0].name


def uses_opensm(spec: Spec) -> bool:
    """Whether the compute fabric's subnet manager is an OpenSM on GPU servers."""
    compute = spec.fabrics.compute
    return compute is not None and compute.subnet_manager in ("opensm", "nvidia-opensm")


def subnet_manager_hosts(plan: Placed) -> list[str]:
    """Master then standby OpenSM: the first server of the first two SUs.

    A plan with fewer than two SUs takes its first two servers.
    """
    firsts = [su.servers[0] for su in plan.sus if su.servers][:2]
    if len(firsts) < 2:
        firsts = [s.name for s in plan.servers[:2]]
    return firsts


def control_hosts(plan: Placed, spec: Spec) -> list[str]:
    """The Slurm controller and the OpenSM hosts this spec runs, in plan order."""
    names = set(subnet_manager_hosts(plan)) if uses_opensm(spec) else set()
    if spec.scheduler.kind == "slurm" and plan.servers:
        names.add(controller_host(plan))
    return [s.name for s in plan.servers if s.name in names]


def control_roll_order(plan: Placed, spec: Spec) -> list[str]:
    """The control hosts in the order a rolling change takes them, the controller last.

    Before it the others in plan order, the standby subnet manager before the master, so
    the fabric keeps a master while the standby is down.
    """
    hosts = control_hosts(plan, spec)
    controller = controller_host(plan) if spec.scheduler.kind == "slurm" else None
    others = [h for h in hosts if h != controller]
    sms = subnet_manager_hosts(plan) if uses_opensm(spec) else []
    others.sort(key=lambda h: (0 if h in sms[1:] else 1, hosts.index(h)))
    return others + ([controller] if controller in hosts else [])
