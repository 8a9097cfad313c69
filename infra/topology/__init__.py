"""Topology: expand a spec into racks, NVSwitch domains and fat-tree fabrics (`expand`).

One module per family, like networkx's generators: `servers` (hostnames, SUs), `groups`
(each node group's SUs, rolling batch and MIG over time: the one owner of MIG facts),
`fat_tree` (tier sizing and wiring), `compute` (the rail-optimized compute fabric),
`networks` (storage, in-band, out-of-band), `racks` (placement), `addressing` (IPs, pkeys),
`geometry` (cable lengths and media), `finish` (the frozen records), `facts` (what the
spec means, built once and carried as ``plan.facts``; its records are `facts_model`), `plan`
(the orchestration), `graph` (the networkx view, on demand), `model` (the typed plan) and
`plan_output` (`railplan plan`'s JSON and text).
"""

from infra.topology.facts_model import GroupMig, MigState
from infra.topology.graph import plan_graph
from infra.topology.model import (
    Cable,
    FabricSummary,
    GroupPlan,
    Host,
    Pdu,
    Plan,
    PlanError,
    PlanWarning,
    Rack,
    ScalableUnit,
    Server,
    Switch,
)
from infra.topology.plan import expand

__all__ = [
    "Cable",
    "FabricSummary",
    "GroupMig",
    "GroupPlan",
    "Host",
    "MigState",
    "Pdu",
    "Plan",
    "PlanError",
    "PlanWarning",
    "Rack",
    "ScalableUnit",
    "Server",
    "Switch",
    "expand",
    "plan_graph",
]
