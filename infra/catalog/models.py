"""Typed models of the hardware catalog: GPUs, MIG profiles, nodes, switches and sources.

The catalog is data (``infra/catalog/data/*.yaml``); these models are its schema. Every record
carries a ``sources`` map from field name to a reference id defined in ``references.yaml``, and
every reference states its confidence (``primary`` for NVIDIA/AWS documents and repositories,
``secondary`` for third-party copies, ``inferred`` for values derived by us). A test checks
that no numeric field is left without a source.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infra.spec.base import Precision
from infra.spec.models import NodeShape, Spec

__all__ = [
    "Catalog",
    "Gpu",
    "Host",
    "MigProfile",
    "MigSpec",
    "Node",
    "Precision",
    "Reference",
    "Switch",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Reference(_Strict):
    """Where a catalog number comes from."""

    title: str = Field(description="Document, repository file or page title.")
    url: str = Field(description="URL, or `owner/repo@commit:path` for a repository file.")
    confidence: Literal["primary", "secondary", "inferred"] = Field(
        description="primary: vendor document or repo; secondary: third-party copy; "
        "inferred: derived by us from other sourced facts."
    )
    note: str = Field(default="", description="Caveats, conflicts between sources.")


class MigProfile(_Strict):
    """One MIG GPU-instance profile on one GPU model (as `nvidia-smi mig -lgip` lists it)."""

    name: str = Field(description="Profile name, e.g. `3g.20gb`; `+me` marks media extensions.")
    gi_profile_id: int = Field(ge=0, description="nvidia-smi GPU-instance profile id.")
    memory_slices: int = Field(ge=1, le=8, description="Memory slices a placement occupies.")
    compute_slices: int = Field(ge=1, le=7, description="SM slices (the `Ng` in the name).")
    max_count: int = Field(ge=1, le=7, description="Most instances of this profile per GPU.")
    placements: tuple[int, ...] = Field(
        min_length=1, description="Valid start memory-slice indices (`nvidia-smi mig -lgipp`)."
    )
    memory_gib: float = Field(gt=0, description="Usable memory per instance (lgip), GiB.")
    sms: int | None = Field(default=None, ge=1, description="SMs per instance (lgip).")


class MigSpec(_Strict):
    """A GPU's MIG geometry: slots and the profiles that can be placed in them."""

    memory_slots: int = Field(ge=1, description="Memory slices on the GPU (8 on A100/H100).")
    max_instances: int = Field(ge=1, description="Most GPU instances at once (7).")
    min_driver_branch: int = Field(description="First driver branch with MIG on this GPU.")
    min_driver: str | None = Field(
        None,
        pattern=r"^[0-9]+(\.[0-9]+){1,3}$",
        description="First driver version with MIG on this GPU (MIG user guide), e.g. "
        "`525.85.12` for H100: within the first branch, earlier drivers lack it.",
    )
    profiles: tuple[MigProfile, ...] = Field(min_length=1)

    def profile(self, name: str) -> MigProfile | None:
        """Return the profile called ``name``, or ``None``."""
        return next((p for p in self.profiles if p.name == name), None)


class Gpu(_Strict):
    """A data-center GPU model."""

    name: str = Field(description="Marketing name as nvidia-smi prints it.")
    architecture: Literal["ampere", "hopper"]
    compute_capability: str
    pci_device_id: int = Field(description="PCI device id (vendor 0x10DE), e.g. 0x20B0.")
    memory_gb: float = Field(gt=0)
    memory_type: str
    hbm_bandwidth_gbs: float = Field(gt=0, description="HBM bandwidth, GB/s.")
    sms: int = Field(gt=0)
    nvlink_generation: int = Field(ge=1)
    nvlink_links: int = Field(ge=1)
    nvlink_bandwidth_gbs: float = Field(
        gt=0, description="Total NVLink bandwidth per GPU, both directions, GB/s."
    )
    pcie_generation: int = Field(ge=3)
    open_kernel_modules: Literal["required", "recommended", "supported"] = Field(
        description="NVIDIA's open GPU kernel modules on this GPU: `required` (the proprietary "
        "flavour cannot drive it), `recommended` (use them), `supported` (they work; the "
        "proprietary flavour stays the default before R560). See `infra.catalog.drivers`."
    )
    tdp_w: float = Field(gt=0)
    dense_tflops: dict[Precision, float] = Field(
        description="Dense (no sparsity) peak per precision; tensor cores where they apply, "
        "but `fp64` is plain FP64 on the CUDA cores."
    )
    fp64_tensor_tflops: float | None = Field(
        None, gt=0, description="FP64 Tensor Core peak (DGEMM-style work), when the GPU has it."
    )
    mig: MigSpec | None = None
    sources: dict[str, str]

    def supports(self, precision: Precision) -> bool:
        """Whether the GPU has hardware support for ``precision``."""
        return precision in self.dense_tflops

    @property
    def first_driver_branch(self) -> int | None:
        """The first production driver branch for this GPU (R450 A100, R525 H100, R550 H200).

        The catalog records it with MIG (`mig-driver-branches`: "the first production
        branches that shipped each GPU"), so a GPU without MIG data has none.
        """
        return self.mig.min_driver_branch if self.mig else None

    @property
    def mig_device_filter(self) -> str:
        """The mig-parted device-filter id (`0x<device><vendor>`), e.g. ``0x20B010DE``."""
        return f"0x{self.pci_device_id:04X}10DE"


class Host(_Strict):
    """The host side of a GPU server: CPUs and memory, as Slurm's node lines need them."""

    sockets: int = Field(ge=1, le=16)
    cores_per_socket: int = Field(ge=1, le=1024, description="Physical cores per socket.")
    threads_per_core: int = Field(ge=1, le=8, description="Hardware threads per core (SMT).")
    numa_nodes: int = Field(ge=1, le=64, description="NUMA nodes the OS sees (DGX A100: NPS4).")
    memory_gib: int = Field(
        ge=1,
        description='Installed memory, GiB (DGX "2 TB" is 2048 GiB of DIMMs); the OS sees a '
        "little less, so Slurm's RealMemory takes a share of it.",
    )

    @property
    def cores(self) -> int:
        """Physical cores of all sockets."""
        return self.sockets * self.cores_per_socket

    @property
    def cpus(self) -> int:
        """Logical CPUs (hardware threads), Slurm's ``CPUs=``."""
        return self.cores * self.threads_per_core


class Node(_Strict):
    """A GPU server or cloud instance type."""

    name: str
    kind: Literal["dgx", "hgx", "cloud", "generic"] = Field(
        description="`generic`: a spec's `shape` (`Catalog.with_shapes`), no catalog facts."
    )
    gpu: str = Field(description="Catalog GPU id (a generic shape's: its label).")
    gpus: int = Field(ge=1)
    nvswitches: int = Field(ge=0, description="NVSwitch chips on the baseboard; 0 = none.")
    compute_nics: int = Field(ge=0, description="Compute-fabric ports (rails).")
    compute_nic_gbps: float = Field(ge=0)
    compute_nic_model: str
    cpu: Literal["intel", "amd"] = Field(
        description="Host CPU vendor; NCCL's multi-node LL caps and network overhead use it."
    )
    compute_hcas: tuple[str, ...] = Field(
        (), description="RDMA device per rail (`mlx5_N`), rail order; NCCL_IB_HCA uses them."
    )
    storage_nic_ports: int = Field(ge=0)
    storage_nic_gbps: float = Field(ge=0)
    max_power_kw: float = Field(ge=0, description="Max system power, kW; 0 for cloud instances.")
    typical_power_kw: float | None = Field(
        None,
        gt=0,
        description="Typical system power, kW; None where no source states one (power "
        "budgets' band then starts at the maximum unless the spec overrides it).",
    )
    rack_units: int = Field(ge=0, description="Rack units; 0 for cloud instances.")
    psus: int | None = Field(None, ge=1, description="Power supplies; None when not sourced.")
    psu_kw: float | None = Field(None, gt=0, description="Rating of one power supply, kW.")
    psus_needed: int | None = Field(
        None,
        ge=1,
        description="Power supplies that carry the node at full load: N of its N+M "
        "redundancy (4 of 6 on DGX H100, 3 of 6 on DGX A100).",
    )
    host: Host = Field(description="Host CPUs and memory (Slurm node lines).")
    gpu_cores: tuple[
        Annotated[str, Field(pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")], ...
    ] = Field(
        (),
        description="Per GPU, in GPU index order, the physical cores local to it, as Slurm's "
        "gres.conf `Cores=` numbers them (socket-major core index, no SMT siblings); empty "
        "when not sourced (OEM servers, cloud instances).",
    )
    cloud: Literal["aws"] | None = None
    instance_type: str | None = None
    fsx_client_gbps: float | None = Field(
        None,
        gt=0,
        description="Rate one instance reaches on an FSx for Lustre file system that is not "
        "EFA-enabled (Lustre over TCP through the instance's ENA interface), Gbit/s; None "
        "for servers that are not AWS instances.",
    )
    sources: dict[str, str]

    @model_validator(mode="after")
    def _one_core_set_per_gpu(self) -> Node:
        if self.gpu_cores and len(self.gpu_cores) != self.gpus:
            raise ValueError(
                f"gpu_cores lists {len(self.gpu_cores)} GPUs, the node has {self.gpus}"
            )
        return self


class Switch(_Strict):
    """A fabric or management switch."""

    name: str
    kind: Literal["infiniband", "ethernet"]
    generation: str = Field(description="Link generation: hdr, ndr, 1gbe, 100gbe, ...")
    ports: int = Field(ge=1, description="Logical ports at full rate (radix).")
    port_gbps: float = Field(gt=0)
    managed: bool = Field(description="Runs its own management (and can host a subnet manager).")
    sharp: bool = Field(description="Supports SHARP in-network aggregation.")
    sharp_flows: int = Field(
        ge=0, description="Streaming aggregation flows one switch carries at once."
    )
    adaptive_routing: bool = Field(
        False,
        description="InfiniBand adaptive routing the subnet manager can configure (opensm "
        "routing engines ar_updn / ar_ftree); false for Ethernet switches.",
    )
    rack_units: int = Field(ge=1)
    max_power_w: float = Field(gt=0)
    power_basis: Literal["max", "typical", "psu_rating"] = Field(
        "max",
        description="What max_power_w is: a sourced maximum draw, a typical draw (the maximum "
        "is higher), or a PSU rating (an upper bound; the plan reports it as such).",
    )
    typical_power_w: float | None = Field(
        None,
        gt=0,
        description="Typical draw (datasheet, passive cables); None where not sourced. Power "
        "budgets' band runs from it to max_power_w (`infra.budget.power_bounds`).",
    )
    cages: int | None = Field(
        None, ge=1, description="Front-panel cages (QSFP56, OSFP); None where not sourced."
    )
    ports_per_cage: int | None = Field(
        None, ge=1, description="Logical ports one cage carries (2 on twin-port OSFP cages)."
    )
    cage_form: str | None = Field(None, description="Cage form factor: QSFP56, OSFP, ...")
    sources: dict[str, str]

    def port_label(self, port: int) -> str:
        """Front-panel label of logical port ``port``: ``n``, or ``cage/k`` on split cages.

        Logical ports 2c-1 and 2c share cage c on twin-port cages (the catalog's
        ``port_map`` source says how sure that is).
        """
        per = self.ports_per_cage or 1
        if per == 1:
            return str(port)
        return f"{(port - 1) // per + 1}/{(port - 1) % per + 1}"


class Catalog(_Strict):
    """All hardware railplan knows, keyed by catalog id."""

    references: dict[str, Reference]
    gpus: dict[str, Gpu]
    nodes: dict[str, Node]
    switches: dict[str, Switch]
    site: dict[str, float] = Field(description="Site-level limits (air-cooling kW per rack).")
    site_sources: dict[str, str]

    def node_gpu(self, node_id: str) -> Gpu:
        """Return the GPU model of catalog node ``node_id`` (which must exist)."""
        return self.gpus[self.nodes[node_id].gpu]

    def with_shapes(self, spec: Spec) -> Catalog:
        """This catalog plus a `generic` node for each distinct `shape` of ``spec``.

        A shape's numbers are the spec's, not sourced facts: the node has its GPUs, CPUs and
        memory and nothing else (no NICs, rack units or power: planned like a cloud
        instance, unracked). Without shapes, this catalog itself.
        """
        shapes = {g.shape.node_id: g.shape for g in spec.node_groups if g.shape is not None}
        if not shapes:
            return self
        nodes = dict(self.nodes)
        for node_id, shape in shapes.items():
            nodes[node_id] = generic_node(shape)
        return self.model_copy(update={"nodes": nodes})


def generic_node(shape: NodeShape) -> Node:
    """The catalog view of a spec's generic server `shape` (`Catalog.with_shapes`)."""
    return Node(
        name=f"generic server, {shape.gpus} x {shape.gpu}",
        kind="generic",
        gpu=shape.gpu,
        gpus=shape.gpus,
        nvswitches=0,
        compute_nics=0,
        compute_nic_gbps=0,
        compute_nic_model="",
        cpu="intel",  # unknown; only the performance model reads it, and refuses generic
        storage_nic_ports=0,
        storage_nic_gbps=0,
        max_power_kw=0,
        rack_units=0,
        host=Host(
            sockets=1,
            cores_per_socket=shape.cpus,
            threads_per_core=1,
            numa_nodes=1,
            memory_gib=shape.memory_gib,
        ),
        sources={},
    )
