"""What a work order adds to a finding: each port's front-panel label and the cable to fetch.

A switch port is labelled as the catalog's `Switch.port_label` labels it (``12`` on a QM8790,
``9/1`` for logical port 17 on a QM97xx's twin-port OSFP cages; the catalog cites the map and
how sure it is). The catalog holds no rear-panel cage map for any server, so a server port
keeps its device name (``mlx5_3``) and the row says the label is not in the catalog. The cable
length is the planned cable's (``length_m`` of ``cabling.csv``), for a finding on a planned
cable. Pure: built once from the plan and catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.catalog.models import Catalog
from infra.digits import ascii_digits
from infra.topology.model import Cable, Plan
from infra.verify.findings import Finding, Place
from infra.verify.seen import NamedEnd

__all__ = ["NO_CAGE_LABEL", "Sheet", "sheet"]

NO_CAGE_LABEL = "no cage label in the catalog"


@dataclass(frozen=True)
class Sheet:
    """Port labellers of the planned switches and the planned compute cables by end."""

    labels: dict[str, Callable[[int], str]]  # switch -> its catalog entry's port labeller
    cables: dict[NamedEnd, Cable]
    servers: frozenset[str]

    def label(self, place: Place) -> str:
        """``9/1``; ``mlx5_3 (no cage label in the catalog)`` on a server; else ""."""
        port = place.port
        if place.device in self.labels and ascii_digits(port) and len(port) < 4:
            return self.labels[place.device](int(port))
        if place.device in self.servers and port:
            return f"{port} ({NO_CAGE_LABEL})"
        return ""

    def length(self, finding: Finding) -> str:
        """The planned cable's length in metres (``9``), or "" where no planned cable is."""
        for place in (finding.a, finding.z):
            cable = self.cables.get(NamedEnd(place.device, place.port))
            if cable is not None and cable.length_m is not None:
                return f"{cable.length_m:g}"
        return ""


def sheet(plan: Plan, catalog: Catalog) -> Sheet:
    """The work-order additions of ``plan``'s compute fabric."""
    switches = plan.switches_in("compute")
    cables: dict[NamedEnd, Cable] = {}
    for cable in plan.cables_in("compute"):
        cables[NamedEnd(cable.a, cable.a_port)] = cable
        cables[NamedEnd(cable.b, cable.b_port)] = cable
    return Sheet(
        {s.name: catalog.switches[s.model].port_label for s in switches},
        cables,
        frozenset(s.name for s in plan.servers),
    )
