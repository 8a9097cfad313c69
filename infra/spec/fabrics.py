"""The spec's fabrics: the compute (GPU) InfiniBand fabric, storage and management networks.

The compute fabric is the rail-optimised fat tree the topology stage builds (its switch, tiers,
spines, SHARP, subnet manager and routing engine, HCA GUIDs a user recorded); storage and
management say how servers reach the file system and each other out of band. Bounds here keep
a typo from planning a billion switches; what needs the catalog is a lint rule.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from infra.spec.base import StrictModel

# Every spine of a two-tier plane takes a link from every leaf, so spines <= a leaf's uplinks
# <= its ports; 2,048 is far above any InfiniBand switch's radix (the catalog's largest is 64)
# and keeps a typo like 1000000000 from planning a billion switches (GBs of memory).
MAX_SPINES = 2_048
# An InfiniBand GUID as `ibstat -p` / `ibswitches` print it: 64 bits in hex, 0x-prefixed.
IB_GUID = r"^0x[0-9a-fA-F]{1,16}$"
# A switch or server name of the plan (a guids key); lint checks it names one (RP083).
GUID_OWNER = r"^[a-z0-9][a-z0-9-]{0,62}$"

# --- fabrics --------------------------------------------------------------------------------


class ComputeFabric(StrictModel):
    """The GPU (east-west) InfiniBand fabric."""

    switch: str = Field(description="Catalog switch id of every fabric switch, e.g. `qm9700`.")
    su_size: int = Field(32, ge=1, le=1024, description="Servers per scalable unit (SU).")
    rail_optimized: bool = Field(
        True, description="NIC r of every server in an SU goes to leaf r of that SU."
    )
    oversubscription: float = Field(
        1.0, ge=1.0, le=16.0, description="Leaf down:up port ratio; 1 = non-blocking."
    )
    sharp: bool = Field(False, description="Enable SHARP in-network aggregation (NCCL CollNet).")
    subnet_manager: Literal["ufm", "opensm", "nvidia-opensm", "switch"] = Field(
        "ufm",
        description="Where the subnet manager runs: UFM appliance/host; `opensm`, the "
        "upstream linux-rdma OpenSM of the distribution (Debian/Ubuntu/RHEL opensm 3.3: no "
        "`ar_*` routing engines, no SHARP); `nvidia-opensm`, NVIDIA's OpenSM from DOCA-Host/"
        "MLNX_OFED (adaptive routing engines, SHARP); or embedded in a managed switch.",
    )
    routing_engine: Literal[
        "auto", "updn", "ar_updn", "ftree", "ar_ftree", "minhop", "dor", "lash", "dfsssp", "dfp"
    ] = Field(
        "auto",
        description="OpenSM routing engine of the compute fabric: `auto` picks ar_updn for "
        "UFM and NVIDIA's OpenSM when every compute switch supports adaptive routing, else "
        "updn (both fat-tree engines SHARP supports); `ar_*` engines need adaptive-routing "
        "switches and NVIDIA's SM (UFM or `nvidia-opensm`): upstream OpenSM has none.",
    )
    guids: dict[
        Annotated[str, Field(pattern=GUID_OWNER)],
        Annotated[list[Annotated[str, Field(pattern=IB_GUID)]], Field(min_length=1, max_length=64)],
    ] = Field(
        default_factory=dict,
        description="GUIDs read on site after cabling, by plan name: a compute switch's node "
        "GUID (`ibswitches`) as `[guid]`, a server's compute-HCA port GUIDs in rail order "
        "(`ibstat -p`). With them the subnet-manager files get a root GUID file (top-tier "
        "switches), partition members (servers) and each SM host's pinned port (its first "
        "GUID); without them OpenSM detects the roots itself and the partitions hold only "
        "the SM's port.",
    )
    planes: int = Field(
        1,
        ge=1,
        le=16,
        description="Independent fat trees, each carrying rails/planes of every server "
        "(multi-plane builds beyond one three-tier fabric).",
    )
    spines: int | None = Field(
        None,
        ge=1,
        le=MAX_SPINES,
        description="Spine switches per plane when fixed in advance (two-tier only); "
        "default: the fewest that keep leaf-spine wiring balanced. At most "
        f"{MAX_SPINES:,}: every spine takes a link from every leaf, so it cannot outnumber "
        "a leaf's ports.",
    )
    max_sus: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="Scalable units the spines and cores are built and wired for: growing "
        "the cluster up to this many SUs adds servers, leaves and (three tiers) pods with "
        "their cables but never moves a cable already planned. Default: the SUs planned "
        "(the fewest switches; growing past a spine step then recables, as NVIDIA's "
        "SuperPOD tables do).",
    )


class StorageFabric(StrictModel):
    """The storage (north-south) fabric."""

    switch: str = Field(description="Catalog switch id, e.g. `qm9700`.")
    oversubscription: float = Field(
        1.33, ge=1.0, le=16.0, description="Node-side down:up ratio (NVIDIA RA: about 4:3)."
    )
    storage_ports: int = Field(
        0, ge=0, le=100_000, description="Storage-system ports on the fabric (attached 1:1)."
    )
    filesystem_gbps: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Aggregate write throughput of the parallel filesystem, GB/s (vendor "
        "figure); without it only the fabric limits checkpoint speed.",
    )
    client_GBps: float | None = Field(
        None,
        gt=0,
        le=10_000,
        description="Write throughput one client node reaches on the filesystem, GB/s (the "
        "vendor's per-client figure); without it a node writes at its storage NICs' rate.",
    )


class ManagementFabric(StrictModel):
    """In-band and out-of-band Ethernet management networks."""

    inband_switch: str = Field("sn4600c", description="Catalog id of in-band switches.")
    oob_switch: str = Field("sn2201", description="Catalog id of out-of-band (BMC) switches.")


class Fabrics(StrictModel):
    """The cluster's networks; a missing fabric is not planned (e.g. cloud instances)."""

    compute: ComputeFabric | None = Field(None, description="GPU compute fabric.")
    storage: StorageFabric | None = Field(None, description="Storage fabric.")
    management: ManagementFabric | None = Field(None, description="Management networks.")

    def switch_references(self) -> list[tuple[str, str, str]]:
        """``(spec path, switch id, switch kind it must be)`` for every switch named."""
        refs = []
        if self.compute:
            refs.append(("fabrics.compute.switch", self.compute.switch, "infiniband"))
        if self.storage:
            refs.append(("fabrics.storage.switch", self.storage.switch, "infiniband"))
        if self.management:
            m = self.management
            refs.append(("fabrics.management.inband_switch", m.inband_switch, "ethernet"))
            refs.append(("fabrics.management.oob_switch", m.oob_switch, "ethernet"))
        return refs
