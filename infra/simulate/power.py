"""Slurm power saving during a replay, and the energy the cluster draws.

With `scheduler.power_saving` (Slurm) a node idle for `suspend_time` is powered off, if the
plan lets Slurm power it off (``plan.facts.control.may_power_off``, which the rendered
`SuspendExcNodes` and ``bmc-hosts`` read too: never the Slurm controller or a subnet
manager, the groups of `exclude_groups`, servers without a BMC address or a rack); a job
placed on powered-off nodes holds them at once but starts
its work `resume_timeout` later (Slurm waits that long for the node to boot and register).
Energy: a node draws ``idle`` kW whenever it is on, plus ``(max - idle) x share of its GPUs
allocated``; off, nothing (BMC standby is left out). ``max`` is the catalog node's
`max_power_kw` (sourced in `infra/catalog/data/nodes.yaml`); ``idle`` is
`SimPolicy.idle_power_share` of it, an assumption the catalog does not source. The saving is
the idle energy of the hours nodes spent off, against the same replay without power saving
(queueing effects of the resume delay are in the replay's delays, not in the saving).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from infra.simulate.cluster import Cluster
from infra.simulate.policy import SimPolicy
from infra.simulate.state import POWER, Events
from infra.spec import Spec
from infra.spec.scheduling import duration_seconds
from infra.topology.model import Plan

__all__ = ["PowerHost", "PowerSaver"]


class PowerHost(Protocol):
    """What power saving reads of the replay (`infra.simulate.engine.Replay`)."""

    spec: Spec
    plan: Plan
    policy: SimPolicy
    cluster: Cluster
    events: Events
    now: float


class PowerSaver:
    """Powers idle nodes off and on, and counts node-seconds off per node group."""

    def __init__(self, replay: PowerHost) -> None:
        self.replay = replay
        settings = replay.spec.scheduler.power_saving
        self.enabled = (
            settings is not None
            and replay.spec.scheduler.kind == "slurm"
            and replay.policy.power_saving
        )
        self.suspend_s = duration_seconds(settings.suspend_time) if settings else 0
        self.resume_s = duration_seconds(settings.resume_timeout) if settings else 0
        may = set(replay.plan.facts.control.may_power_off) if self.enabled else set()
        nodes = replay.cluster.nodes
        self.eligible = [n.name in may for n in nodes]
        self.off_since: dict[int, float] = {}  # node -> when it went off
        self.stamp = [0] * len(nodes)
        self.off_s: dict[str, float] = {}  # group -> node-seconds off

    def start(self, t0: float) -> None:
        """Every node starts on and idle."""
        for node in range(len(self.stamp)):
            self.idle(node, at=t0)

    def idle(self, node: int, at: float | None = None) -> None:
        """``node`` has nothing running from now: it powers off after `suspend_time` idle."""
        if not self.eligible[node]:
            return
        self.stamp[node] += 1
        when = self.replay.now if at is None else at
        self.replay.events.push(when + self.suspend_s, POWER, node, self.stamp[node])

    def handle(self, payload: tuple[int, ...]) -> None:
        """A node's idle timer ran out: power it off if it is still idle and open."""
        node, stamp = payload
        state = self.replay.cluster.nodes[node]
        if stamp == self.stamp[node] and state.empty and state.open and node not in self.off_since:
            self.off_since[node] = self.replay.now

    def wake(self, nodes: Iterable[int], *, free: bool = False) -> float:
        """Power ``nodes`` on; the delay before work can start on them (0 if all were on)."""
        delay = 0.0
        for node in sorted(nodes):
            self.stamp[node] += 1  # a job (or a MIG change) took it: no pending power-off
            since = self.off_since.pop(node, None)
            if since is not None:
                self._count(node, self.replay.now - since)
                delay = 0.0 if free else float(self.resume_s)
        return delay

    def _count(self, node: int, seconds: float) -> None:
        group = self.replay.cluster.nodes[node].group
        self.off_s[group] = self.off_s.get(group, 0.0) + seconds

    def close(self, end: float) -> dict[str, float]:
        """Node-seconds off per group up to ``end``."""
        for node, since in sorted(self.off_since.items()):
            self._count(node, max(0.0, end - since))
        self.off_since.clear()
        return dict(sorted(self.off_s.items()))
