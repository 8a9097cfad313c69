"""The entry playbook, `playbooks/<name>.yml`: which roles run where, and in what batches.

This module owns the rollout the rendered tree runs (`infra.render.ansible` writes it):
one rolling play per node group, one SU at a time (``serial``), importing only the roles
the group needs (Fabric Manager, MIG); the control hosts (`infra.topology.control`) last,
one host at a time, in a play of their own; then what runs everywhere at once, and the
read-only acceptance tests. The overview lines at its top say the same in words.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.render.templating import render_template
from infra.spec import Spec
from infra.topology.control import control_roll_order, uses_opensm
from infra.topology.model import Plan
from infra.wording import plural

__all__ = ["playbook"]

MAX_FAIL_PERCENTAGE = 10


@dataclass(frozen=True)
class _GroupPlay:
    """What the entry playbook needs to know of one node group."""

    name: str
    batches: list[int]  # servers per batch in inventory order, the control hosts left out
    fabric_manager: bool
    mig: str | None
    by_su: bool  # batches are SUs (else plain batches: no compute fabric, no SUs)

    @property
    def batch(self) -> int | list[int]:
        """``serial``: one size, or a list where the control hosts make SUs differ.

        Ansible repeats a list's last size and gives the last batch what remains, so the
        list stops where the sizes stop changing (a cluster of 32 SUs keeps a short line).
        """
        sizes = list(self.batches)
        if len(sizes) > 1 and sizes[-1] <= sizes[-2]:
            sizes.pop()  # the last SU: the remainder Ansible leaves for the last batch
        while len(sizes) > 1 and sizes[-1] == sizes[-2]:
            sizes.pop()
        return sizes[0] if len(sizes) == 1 else sizes

    @property
    def batch_text(self) -> str:
        sizes = sorted(set(self.batches))
        servers = (
            plural(sizes[0], "server") if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]} servers"
        )
        return f"one SU ({servers})" if self.by_su else servers

    @property
    def post_reboot(self) -> bool:
        return self.fabric_manager or self.mig is not None


@dataclass(frozen=True)
class _ControlPlay:
    """The control hosts' own rolling play (`infra.topology.control`), last, one at a time.

    Who they are, and which of them need Fabric Manager or MIG.
    """

    hosts: list[str]
    fabric_manager_groups: list[str]
    mig_groups: list[str]


def playbook(spec: Spec, catalog: Catalog, plan: Plan) -> str:
    """The entry playbook of the cluster: its rolling plays, the control play, the overview."""
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else None
    control = control_roll_order(plan, spec)
    plays = [
        _GroupPlay(
            name=g.name,
            batches=_batches(plan, g.name, g.rolling_batch, set(control), su_size is not None),
            fabric_manager=_fabric_manager(spec, catalog, g.node),
            mig=g.mig.now.config if g.mig_split else None,
            by_su=su_size is not None,
        )
        for g in plan.groups.values()
    ]
    plays = [p for p in plays if p.batches]
    sharp = plan.facts.sharp() == "usable"
    control_play = _control_play(spec, catalog, plan, control) if control else None
    overview = _overview(plays, sharp, control_play)
    if spec.scheduler.kind == "slurm":
        overview.insert(
            -1, "gpu_servers: slurm (munge, slurmd; slurmctld on slurm_controllers) — all at once"
        )
    return render_template(
        "ansible/playbook.yml.j2",
        name=spec.name,
        scheduler=spec.scheduler.kind,
        groups=plays,
        sharp=sharp,
        control_play=control_play,
        control_note=_control_note(control_play, spec),
        opensm=uses_opensm(spec),
        slurm_play=spec.scheduler.kind == "slurm",
        max_fail_percentage=MAX_FAIL_PERCENTAGE,
        overview=overview,
    )


def _control_note(control: _ControlPlay | None, spec: Spec) -> list[str]:
    """The header paragraph on the control hosts' play, wrapped like the rest."""
    if control is None:
        return []
    slurm, opensm = spec.scheduler.kind == "slurm", uses_opensm(spec)
    what = ["the Slurm controller"] * slurm + ["the OpenSM master and standby"] * opensm
    why = ["the first batch is ordinary compute"]
    why += ["slurmctld stays up to drain every other batch"] * slurm
    why += ["the two subnet managers are never down together"] * opensm
    text = (
        f"The control hosts ({', '.join(control.hosts)}: {' and '.join(what)}) roll last, "
        f"one host at a time, in a play of their own, so {', '.join(why[:-1])}"
        f"{' and ' if len(why) > 1 else ''}{why[-1]}. The node-group plays leave them out."
    )
    return textwrap.wrap(text, width=92)


def _batches(plan: Plan, group: str, batch: int, control: set[str], by_su: bool) -> list[int]:
    """The group's rolling batches without the control hosts, in inventory order.

    One per SU (Ansible's ``serial`` list; the last size repeats), or ``batch`` servers.
    """
    servers = [s for s in plan.servers_in(group) if s.name not in control]
    if not by_su:
        return [min(batch, len(servers))] if servers else []
    sizes: dict[str, int] = {}
    for server in servers:
        sizes[server.su or ""] = sizes.get(server.su or "", 0) + 1
    return list(sizes.values())


def _fabric_manager(spec: Spec, catalog: Catalog, node: str) -> bool:
    return catalog.nodes[node].nvswitches > 0 and spec.software.fabric_manager != "disabled"


def _control_play(spec: Spec, catalog: Catalog, plan: Plan, control: list[str]) -> _ControlPlay:
    """The control hosts are GPU servers of some node group: they get that group's FM and MIG."""
    groups = {s.group for s in plan.servers if s.name in set(control)}
    ours = [g for g in plan.groups.values() if g.name in groups]
    return _ControlPlay(
        hosts=control,
        fabric_manager_groups=[g.name for g in ours if _fabric_manager(spec, catalog, g.node)],
        mig_groups=[g.name for g in ours if g.mig_split],
    )


def _overview(plays: list[_GroupPlay], sharp: bool, control: _ControlPlay | None) -> list[str]:
    lines = []
    for play in plays:
        extra = [r for r, on in (("fabric_manager", play.fabric_manager), ("mig", play.mig)) if on]
        roles = ", ".join(["drain", "os_tuning", "nvidia_driver", "rdma", *extra, "resume"])
        hosts = f"{play.name} (without control_hosts)" if control else play.name
        lines.append(f"{hosts}: {roles} — {play.batch_text} per batch")
    if control is not None:
        # fabric_manager and mig run only on the hosts whose node group has them
        extra = ["fabric_manager"] if control.fabric_manager_groups else []
        extra += ["mig"] if control.mig_groups else []
        roles = ", ".join(
            ["drain", "os_tuning", "nvidia_driver", "rdma", *(["sharp"] if sharp else []), *extra]
        )
        order = ", ".join(control.hosts)
        lines.append(f"control_hosts ({order}), last: {roles}, resume — one host per batch")
    common = ", ".join(["nccl", *(["sharp"] if sharp else []), "dcgm", "topology_labels"])
    lines.append(f"gpu_servers: {common} — all at once (no reboot)")
    lines.append("gpu_servers: acceptance (tag `acceptance`) — host by host in step, read-only")
    return lines
