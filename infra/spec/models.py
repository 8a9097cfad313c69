"""Pydantic models of the railplan cluster spec: the one YAML file a cluster is described in.

These models (with `scheduling` for the scheduler section and `budgets` for the budgets) are
the single place defaults live and the source of the JSON Schema (`railplan schema`). They check what can be checked from the spec alone: types, ranges, names
that reach a shell, a path or YAML (cluster and group names, hostnames, versions, profile
names) and references inside the spec. Facts that need the hardware catalog (is this node id
known, does this MIG layout fit) are lint rules, so one run reports all of them at once.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from infra.errors import HintedValueError, shorten, spelling_hint
from infra.spec.base import (
    CLUSTER_NAME,
    GROUP_NAME,
    LAYOUT_NAME,
    StrictModel,
)
from infra.spec.budgets import MAX_BUDGETS, Budget
from infra.spec.cloud import Aws
from infra.spec.fabrics import Fabrics
from infra.spec.mig import (
    MIG_OFF,
    RESERVED_LAYOUT_HINT,
    MigLayout,
    MigSchedule,
    MigValue,
    reserved_layout,
)
from infra.spec.scheduling import Scheduler
from infra.spec.site import Site
from infra.spec.yamlpos import join_path

MAX_SERVERS = 32_768  # keeps planning a spec within seconds and a few GB (make bench)
VERSION = r"^[0-9]{1,8}(\.[0-9]{1,8}){1,3}$"
# Versions are compared as tuples of ints: at most 8 digits a part holds any real one and keeps
# a 5,000-digit part away from int() and its 4,300-digit limit.
MAX_VERSION = 32  # characters of a version given on the command line (`mig check --driver`)
# Hostnames carry the index in full: ten digits keep a label well within RFC 1123's 63.
MAX_FIRST_INDEX = 10**9
# Routing engines of the distributions' OpenSM (linux-rdma 3.3.23, opensm(8) "-R"); NVIDIA's
# OpenSM adds ar_updn, ar_ftree, ... and dfp (RP081).
UPSTREAM_ENGINES = (
    "minhop",
    "updn",
    "dnup",
    "file",
    "ftree",
    "lash",
    "dor",
    "torus-2QoS",
    "nue",
    "dfsssp",
    "sssp",
)
OFED_VERSION = r"^[0-9]{1,8}\.[0-9]{1,8}(-[0-9]{1,8}(\.[0-9]{1,8}){0,6})?$"
_HOSTNAME_FIELD = re.compile(r"\{index(?::0?[1-9]d)?\}")
_HOSTNAME_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
_HOSTNAME_HINT = (
    'write a short lowercase prefix and one index field, e.g. hostname: "gpu{index:03d}" '
    "(gpu001, gpu002, ...)"
)


# --- node groups ----------------------------------------------------------------------------


GPU_LABEL = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
"""A generic shape's GPU model: a catalog GPU id or another lowercase label."""
# The device plugin refuses fewer than 2 replicas (k8s-device-plugin api/config/v1/
# replicas.go: "number of replicas must be >= 2"); the upper bound is railplan's own.
MAX_REPLICAS = 1000


class NodeShape(StrictModel):
    """A server the catalog does not list, as a scheduler sees it: GPUs, CPUs, memory.

    For replaying a published cluster (1-, 2-, 4- and 8-GPU servers of older or undisclosed
    GPU models) on `railplan simulate`; the catalog has no facts for it, so such a group
    has no compute fabric rails, rack units, power or performance model.
    """

    gpus: int = Field(ge=1, le=16, description="GPUs per server.")
    gpu: str = Field(
        pattern=GPU_LABEL,
        description="GPU model: a catalog GPU id or any other lowercase label (a trace's "
        "GPU models are matched against it, after `--map-gpu`).",
    )
    cpus: int = Field(
        ge=1, le=1024, description="Logical CPUs (hardware threads), as Kubernetes counts them."
    )
    memory_gib: int = Field(ge=1, le=65_536, description="Memory, GiB (2^30 bytes).")

    @property
    def node_id(self) -> str:
        """The id the group's servers take in the catalog view (`Catalog.with_shapes`)."""
        return f"generic:{self.gpus}x{self.gpu}:{self.cpus}cpu:{self.memory_gib}gib"


class GpuSharing(StrictModel):
    """GPU sharing by the NVIDIA device plugin: every GPU of the group as `replicas`.

    Rendered into the GPU Operator's device-plugin config (`sharing.timeSlicing` or
    `sharing.mps`); `railplan simulate` places a fraction of a GPU on the replicas of one
    GPU that cover it (docs/simulate.md, "GPU sharing").
    """

    strategy: Literal["time-slicing", "mps"] = Field(
        description="`time-slicing`: replicas interleave in time, no memory or fault "
        "isolation; `mps`: CUDA MPS, each replica a 1/replicas share of memory and compute "
        "(the device plugin allows 48 on Volta and later)."
    )
    replicas: int = Field(
        ge=2, le=MAX_REPLICAS, description="Replicas each GPU is advertised as (at least 2)."
    )


class ComputeNics(StrictModel):
    """A server's compute-fabric NICs when the catalog entry does not match the real server."""

    count: int = Field(ge=1, le=16, description="Compute-fabric NICs per server.")
    gbps: float = Field(gt=0, le=3200, description="Line rate of each NIC, Gb/s.")


class NodeGroup(StrictModel):
    """A group of identical servers (one Ansible group, one scheduler partition/pool)."""

    name: str = Field(pattern=GROUP_NAME, description="Group name: lowercase, digits, `_`.")
    node: str = Field(
        "",
        description="Catalog node id, e.g. `dgx-h100` (see `railplan catalog`); leave it out "
        "when `shape` describes the server.",
    )
    shape: NodeShape | None = Field(
        None,
        description="A server the catalog lacks (GPUs, GPU model, CPUs, memory), in place of "
        "`node`: for `railplan simulate` of a published cluster; no rails, racks or power.",
    )
    sharing: GpuSharing | None = Field(
        None,
        description="Share each GPU among pods (Kubernetes: time-slicing or MPS replicas of "
        "the device plugin); not with MIG in the same group.",
    )
    count: int = Field(ge=1, le=16_384, description="Number of servers in the group.")
    hostname: str | None = Field(
        None,
        description="Hostname pattern with an `{index}` or `{index:03d}` field; "
        "default `<name>{index:03d}`.",
    )
    first_index: int = Field(
        1, ge=0, le=MAX_FIRST_INDEX, description="Index of the first server in the pattern."
    )
    max_count: int | None = Field(
        None,
        ge=1,
        le=16_384,
        description="Servers the group may grow to without moving anything else: the "
        "compute, storage and in-band fabrics keep the group's leaves, ports and rack units "
        "for this many, so growing it up to here (or growing a group after it) moves no "
        "cable, switch or address. Default: `count` (growing the group then recables the "
        "groups after it). Needs `fabrics.compute.max_sus` to cover every group's maximum.",
    )
    rack_class: str | None = Field(
        None, description="A key of `site.rack_classes`; default the default class `site.rack`."
    )
    mig: MigValue = Field(
        "disabled",
        description="MIG for every GPU: a key of `mig_layouts`, `disabled`, or a list of "
        "per-GPU assignments.",
    )
    mig_schedule: MigSchedule | None = Field(
        None,
        description="Re-partition the group's GPUs on a schedule (Kubernetes); `mig` is the "
        "layout until the first change.",
    )
    compute_nics: ComputeNics | None = Field(
        None,
        description="Compute NICs per server (`count`, `gbps`) as `predict`, budgets and "
        "`train` see them, for a server the catalog lacks (e.g. a 4-NIC A100 server on "
        "`dgx-a100`). Default: the catalog node's. The fabric plan still cables the catalog "
        "node's rails.",
    )

    @model_validator(mode="before")
    @classmethod
    def _node_from_shape(cls, data: object) -> object:
        """A group with a `shape` and no `node` takes the shape's id as its node."""
        if isinstance(data, dict) and "node" not in data and isinstance(data.get("shape"), dict):
            shape = data["shape"]
            try:
                return {**data, "node": NodeShape.model_validate(shape).node_id}
            except ValueError:
                return data  # the shape's own errors are reported where they are
        return data

    @model_validator(mode="after")
    def _node_or_shape(self) -> NodeGroup:
        if self.shape is not None and self.node != self.shape.node_id:
            raise ValueError("give either `node` (a catalog server) or `shape`, not both")
        if self.shape is None and not self.node:
            raise ValueError("give `node` (a catalog node id) or a generic `shape`")
        if self.sharing is not None and (self.mig != "disabled" or self.mig_schedule):
            raise ValueError(
                "GPU `sharing` and MIG in one group are not supported: share unsplit GPUs "
                "(`mig: disabled`, no `mig_schedule`) or split them with MIG"
            )
        return self

    @field_validator("hostname")
    @classmethod
    def _valid_hostname_pattern(cls, v: str | None) -> str | None:
        if v is None:
            return v
        fields = _HOSTNAME_FIELD.findall(v)
        if len(fields) != 1:
            raise HintedValueError(
                "hostname pattern needs exactly one {index} or {index:0Nd} field",
                hint=_HOSTNAME_HINT,
            )
        sample = _HOSTNAME_FIELD.sub("0", v)
        if not _HOSTNAME_LABEL.match(sample):
            raise HintedValueError(
                f"hostname pattern {shorten(v, 60)!r} does not give a valid hostname (lowercase "
                "letters, digits and '-', not starting or ending with '-', at most 63 characters)",
                hint=_HOSTNAME_HINT,
            )
        return v

    @model_validator(mode="after")
    def _valid_hostnames(self) -> NodeGroup:
        """Every rendered hostname is an RFC 1123 label, not only the pattern with 0 in it."""
        for name in self.hostname_range():
            if name.isdigit():  # glibc's resolver reads "01" as the address 0.0.0.1
                raise HintedValueError(
                    f"hostname pattern {self.hostname_pattern!r} gives {name[:80]!r}, a name of "
                    "digits alone, which resolvers read as an IPv4 address (01 is 0.0.0.1)",
                    hint=_HOSTNAME_HINT,
                )
            if not _HOSTNAME_LABEL.match(name):
                raise HintedValueError(
                    f"hostname pattern {self.hostname_pattern!r} gives {name[:80]!r} for "
                    f"servers {self.first_index}..{self.first_index + self.count - 1}, not a "
                    "valid hostname (RFC 1123: lowercase letters, digits and '-', not "
                    "starting or ending with '-', at most 63 characters)",
                    hint=_HOSTNAME_HINT,
                )
        return self

    @model_validator(mode="after")
    def _max_count_covers_count(self) -> NodeGroup:
        if self.max_count is not None and self.max_count < self.count:
            raise ValueError(
                f"max_count {self.max_count} is below count {self.count}: raise max_count "
                "(growing past it recables the groups after this one)"
            )
        return self

    @property
    def reserved(self) -> int:
        """Servers the fabrics keep room for: ``max_count``, or ``count`` without it."""
        return max(self.count, self.max_count or 0)

    def hostname_range(self) -> tuple[str, str]:
        """The hostnames of the first and last server: the shortest and longest index.

        Digits are the only characters an index adds, so these two bound every name
        between them (padding spaces and length show at one end or the other).
        """
        last = self.first_index + self.count - 1
        return (
            self.hostname_pattern.format(index=self.first_index),
            self.hostname_pattern.format(index=last),
        )

    @property
    def hostname_pattern(self) -> str:
        """The hostname pattern with its default filled in."""
        return self.hostname or f"{self.name.replace('_', '-')}{{index:03d}}"

    def mig_values(self) -> list[tuple[str, MigValue]]:
        """``(spec path, value)`` of every `mig` the group takes: `mig`, then each change's."""
        values: list[tuple[str, MigValue]] = [("mig", self.mig)]
        if self.mig_schedule is not None:
            values += [
                (f"mig_schedule.changes[{i}].mig", c.mig)
                for i, c in enumerate(self.mig_schedule.changes)
            ]
        return values


# --- software -------------------------------------------------------------------------------


class Software(StrictModel):
    """Versions of the node software stack.

    Each reaches package names, so the schema accepts only dotted versions; lint compares
    the driver, CUDA and NCCL with the releases they need (`railplan rules`: RP018, RP03x).
    """

    os: Literal["ubuntu-20.04", "ubuntu-22.04", "ubuntu-24.04", "rhel-8", "rhel-9"] = Field(
        "ubuntu-22.04", description="Node operating system."
    )
    driver: str = Field("550.90.07", pattern=VERSION, description="NVIDIA driver version.")
    gpu_kernel_modules: Literal["auto", "open", "proprietary"] = Field(
        "auto",
        description="NVIDIA kernel-module flavour: `open` (open GPU kernel modules, needed "
        "for DMA-BUF GPUDirect RDMA), `proprietary`, or `auto` (NVIDIA's recommendation for "
        "each node group's GPU and the driver branch: open on Hopper, and from R560 on every "
        "GPU; proprietary on A100 below R560). Lint RP035 checks an explicit choice.",
    )
    fabric_manager: str = Field(
        "auto",
        pattern=r"^(auto|disabled|[0-9]{1,8}(\.[0-9]{1,8}){1,3})$",
        description="Fabric Manager version: `auto` (same as the driver), `disabled`, or a "
        "version, which must equal the driver's.",
    )
    cuda: str = Field("12.4", pattern=VERSION, description="CUDA toolkit version.")
    nccl: str = Field("2.21.5", pattern=VERSION, description="NCCL version.")
    dcgm: str = Field("3.3.6", pattern=VERSION, description="DCGM version.")
    doca: str | None = Field("2.7.0", pattern=VERSION, description="DOCA-Host (OFED) version.")
    ofed: str | None = Field(
        None,
        pattern=OFED_VERSION,
        description="Legacy MLNX_OFED version, instead of DOCA.",
    )

    @property
    def driver_branch(self) -> int:
        """The driver branch (``550`` for ``550.90.07``)."""
        return int(self.driver.split(".")[0])


# --- the spec -------------------------------------------------------------------------------


class Spec(StrictModel):
    """A railplan cluster spec."""

    model_config = ConfigDict(
        title="railplan cluster spec",
        json_schema_extra={"$id": "https://railplan.dev/schema/spec.json"},
    )

    name: str = Field(
        pattern=CLUSTER_NAME,
        description="Cluster name: lowercase DNS label; names the inventory and playbook.",
    )
    site: Site = Field(default_factory=Site, description="Racks and address space.")
    node_groups: list[NodeGroup] = Field(min_length=1, description="Groups of servers.")
    fabrics: Fabrics = Field(default_factory=Fabrics, description="Networks.")
    software: Software = Field(default_factory=Software, description="Node software versions.")
    scheduler: Scheduler = Field(default_factory=Scheduler, description="Workload scheduler.")
    mig_layouts: dict[Annotated[str, Field(pattern=LAYOUT_NAME)], MigLayout] = Field(
        default_factory=dict, description="Named MIG layouts node groups refer to."
    )
    budgets: list[Budget] = Field(
        default_factory=list,
        max_length=MAX_BUDGETS,
        description=f"Targets the planned cluster must meet (at most {MAX_BUDGETS}).",
    )
    aws: Aws = Field(
        default_factory=Aws,
        description="Settings of the AWS target that predictions depend on (the checkpoint "
        "file system); read for node groups of AWS instance types only.",
    )

    @field_validator("node_groups")
    @classmethod
    def _cluster_size_limit(cls, groups: list[NodeGroup]) -> list[NodeGroup]:
        total = sum(g.count for g in groups)
        if total > MAX_SERVERS:
            raise ValueError(
                f"{total:,} servers exceed railplan's limit of {MAX_SERVERS:,} per spec "
                "(262,144 GPUs on 8-GPU nodes); split the cluster into several specs"
            )
        return groups

    @model_validator(mode="after")
    def _sharing_is_kubernetes(self) -> Spec:
        shared = [g.name for g in self.node_groups if g.sharing is not None]
        if shared and self.scheduler.kind == "slurm":
            raise ValueError(
                f"node group {shared[0]!r}: GPU `sharing` is the Kubernetes device plugin's; "
                "with `scheduler.kind: slurm` leave it out"
            )
        return self

    def name_clashes(self) -> list[tuple[str, str, str]]:
        """``(path, message, hint)`` of each MIG layout named like a config railplan makes.

        The loader reports each at its key, as `unresolved_references`.
        """
        return [
            (
                join_path("mig_layouts", name),
                f"MIG layout name {name!r} means MIG off wherever a group names it"
                if name == MIG_OFF
                else f"MIG layout name {name!r} is a mig-parted config name railplan makes itself",
                RESERVED_LAYOUT_HINT,
            )
            for name in self.mig_layouts
            if reserved_layout(name)
        ]

    def unresolved_references(self) -> list[tuple[str, str, str]]:
        """``(path, message, hint)`` of each reference inside the spec that names nothing.

        Today a node group's `rack_class` (``site.network_rack_class`` is `Site`'s own
        check). A model validator would see these too, but its error is located at the top
        of the file; the loader reports each at its key instead, so every command refuses
        the spec the same way (exit 2) before a stage looks the name up (lint, render and
        report once raised KeyError where plan and budget, which check references before
        planning, said "did you mean").
        """
        classes = ["default", *self.site.rack_classes]
        return [
            (
                f"node_groups[{i}].rack_class",
                f"unknown rack class {group.rack_class!r}",
                spelling_hint(group.rack_class, classes, "rack classes (site.rack_classes)"),
            )
            for i, group in enumerate(self.node_groups)
            if group.rack_class is not None and group.rack_class not in classes
        ]

    @property
    def gpu_servers(self) -> int:
        """Total servers over all node groups."""
        return sum(g.count for g in self.node_groups)
