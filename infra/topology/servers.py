"""Servers and scalable units: hostnames, group indices, SU slots and MIG layout per GPU.

`list_servers` expands node groups into server seeds in spec order. A server's identity is
its group and its index in the group's hostname pattern; its scalable unit follows from
the same two facts: every node group fills its own SUs (``<group>-su01``, ``-su02``, ...),
``su_size`` servers each, so the n-th server of a group sits in SU ``n // su_size + 1``,
slot ``n % su_size + 1``. Growing a group appends servers (and SUs) to that group only;
appending a group appends SUs. Nothing already planned moves.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec import NodeGroup, Spec
from infra.topology.model import PlanError

__all__ = ["ServerSeed", "list_servers", "mig_per_gpu", "su_name"]


@dataclass(frozen=True, slots=True)
class ServerSeed:
    """A server before placement: identity, catalog node, SU position and MIG per GPU."""

    name: str
    group: str
    node: str
    index: int  # the hostname pattern's index
    ordinal: int  # 0-based position in its group
    su: str | None
    slot: int | None
    mig: tuple[str | None, ...]


def su_name(group: str, number: int) -> str:
    """Name of a group's ``number``-th SU (DNS-safe: ``_`` becomes ``-``)."""
    return f"{group.replace('_', '-')}-su{number:02d}"


def mig_per_gpu(group: NodeGroup, gpus: int) -> tuple[str | None, ...]:
    """The MIG layout of each GPU of a group's nodes (None = MIG disabled)."""
    layouts: list[str | None] = [None] * gpus
    for assignment in group.assignments():
        indices = range(gpus) if assignment.gpus == "all" else assignment.gpus
        layout = None if assignment.layout == "disabled" else assignment.layout
        for i in indices:
            if i < gpus:  # lint RP016-style checks report indices beyond the node
                layouts[i] = layout
    return tuple(layouts)


def list_servers(spec: Spec, catalog: Catalog) -> list[ServerSeed]:
    """Every server of the spec, groups in spec order; hostnames must be unique.

    Servers get an SU and slot only when the spec has a compute fabric and their node has
    compute HCAs (cloud instances and CPU nodes do not).
    """
    seeds: list[ServerSeed] = []
    seen: dict[str, str] = {}
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 0
    for group in spec.node_groups:
        node = catalog.nodes[group.node]
        mig = mig_per_gpu(group, node.gpus)
        on_fabric = bool(su_size and node.compute_hcas)
        pattern = group.hostname_pattern
        for n in range(group.count):
            name = pattern.format(index=group.first_index + n)
            if name in seen:
                raise PlanError(
                    f"hostname {name} is produced by node groups {seen[name]!r} and {group.name!r}",
                    path="node_groups",
                    hint="use distinct hostname patterns or disjoint first_index ranges",
                )
            seen[name] = group.name
            su, slot = (
                (su_name(group.name, n // su_size + 1), n % su_size + 1)
                if on_fabric
                else (
                    None,
                    None,
                )
            )
            seeds.append(
                ServerSeed(name, group.name, group.node, group.first_index + n, n, su, slot, mig)
            )
    return seeds
