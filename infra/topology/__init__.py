"""Topology: expand a spec into racks, NVSwitch domains and fat-tree fabrics (`expand`).

One module per family, like networkx's generators: `servers` (hostnames, NVSwitch domains),
`fat_tree` (tier sizing and wiring), `compute` (the rail-optimized compute fabric),
`networks` (storage, in-band, out-of-band), `racks` (placement), `addressing` (IPs, pkeys),
`plan` (the orchestration and graph schema) and `model` (the typed views).
"""

from infra.topology.model import Cable, FabricSummary, Plan, PlanError, Rack, Server, Switch
from infra.topology.plan import expand

__all__ = ["Cable", "FabricSummary", "Plan", "PlanError", "Rack", "Server", "Switch", "expand"]
