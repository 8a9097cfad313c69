"""Servers and scalable units: hostnames, group indices and SU slots.

`list_servers` expands node groups into server seeds in spec order. A server's identity is
its group and its index in the group's hostname pattern; its scalable unit follows from
the same two facts: every node group fills its own SUs (``<group>-su01``, ``-su02``, ...),
``su_size`` servers each, so the n-th server of a group sits in SU ``n // su_size + 1``,
slot ``n % su_size + 1``. Growing a group appends servers (and SUs) to that group only;
appending a group appends SUs. Nothing already planned moves. A server's MIG layout per GPU
is its group's current state (`infra.topology.groups`, which owns MIG).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.facts_model import GroupMig
from infra.topology.model import PlanError

__all__ = ["ServerSeed", "list_servers", "su_name"]


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
    su_number: int | None = None  # the SU's number in its group (1-based), as data


def su_name(group: str, number: int) -> str:
    """Name of a group's ``number``-th SU (DNS-safe: ``_`` becomes ``-``)."""
    return f"{group.replace('_', '-')}-su{number:02d}"


def list_servers(spec: Spec, catalog: Catalog, migs: Sequence[GroupMig]) -> list[ServerSeed]:
    """Every server of the spec, groups in spec order; hostnames must be unique.

    ``migs`` is each group's MIG in spec order (`infra.topology.groups.group_migs`); a
    server takes its group's current state.

    Servers get an SU and slot only when the spec has a compute fabric and their node has
    compute HCAs (cloud instances and CPU nodes do not).
    """
    seeds: list[ServerSeed] = []
    seen: dict[str, str] = {}
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 0
    for group, group_mig in zip(spec.node_groups, migs, strict=True):
        node = catalog.nodes[group.node]
        mig = group_mig.now.per_gpu
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
            number = n // su_size + 1 if on_fabric else None
            su = su_name(group.name, number) if number is not None else None
            slot = n % su_size + 1 if on_fabric else None
            seeds.append(
                ServerSeed(
                    name, group.name, group.node, group.first_index + n, n, su, slot, mig, number
                )
            )
    return seeds
