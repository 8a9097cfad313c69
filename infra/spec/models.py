"""Pydantic models of the railplan cluster spec: the one YAML file a cluster is described in.

These models (with `scheduling` for the scheduler section and `budgets` for the budgets) are
the single place defaults live and the source of the JSON Schema (`railplan schema`). They check what can be checked from the spec alone: types, ranges, names
that reach a shell, a path or YAML (cluster and group names, hostnames, versions, profile
names) and references inside the spec. Facts that need the hardware catalog (is this node id
known, does this MIG layout fit) are lint rules, so one run reports all of them at once.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from infra.errors import spelling_hint
from infra.spec.base import (
    ONE_LINE,
    ONE_LINE_OR_EMPTY,
    StrictModel,
    TextRule,
    name_pattern,
    repeated,
)
from infra.spec.budgets import MAX_BUDGETS, Budget
from infra.spec.cloud import Aws
from infra.spec.scheduling import Duration, Scheduler, cron_fields_valid, duration_seconds

MAX_SERVERS = 32_768  # keeps planning a spec within seconds and a few GB (make bench)
# Every spine of a two-tier plane takes a link from every leaf, so spines <= a leaf's uplinks
# <= its ports; 2,048 is far above any InfiniBand switch's radix (the catalog's largest is 64)
# and keeps a typo like 1000000000 from planning a billion switches (GBs of memory).
MAX_SPINES = 2_048
# Names other tools take (label values, hostnames, Slurm, Ansible, files): see name_pattern.
CLUSTER_NAME = name_pattern("a-z0-9-")  # a DNS label (and a label value)
GROUP_NAME = name_pattern("a-z0-9_", max_length=32)  # an Ansible group: no '-'
LAYOUT_NAME = name_pattern("a-z0-9._-", first="a-z0-9")  # a mig-parted config name
VERSION = r"^[0-9]{1,8}(\.[0-9]{1,8}){1,3}$"
# Versions are compared as tuples of ints: at most 8 digits a part holds any real one and keeps
# a 5,000-digit part away from int() and its 4,300-digit limit.
MAX_VERSION = 32  # characters of a version given on the command line (`mig check --driver`)
# Hostnames carry the index in full: ten digits keep a label well within RFC 1123's 63.
MAX_FIRST_INDEX = 10**9
# A MIG change's drain timeout: the bound mig-change.sh checks DRAIN_TIMEOUT against.
MAX_DRAIN_S = 86_400
# mig-change.sh refuses a ROLLING_BATCH_SUS above this before it cordons anything
MAX_ROLLING_BATCH_SUS = 1024
# An InfiniBand GUID as `ibstat -p` / `ibswitches` print it: 64 bits in hex, 0x-prefixed.
IB_GUID = r"^0x[0-9a-fA-F]{1,16}$"
# A switch or server name of the plan (a guids key); lint checks it names one (RP083).
GUID_OWNER = r"^[a-z0-9][a-z0-9-]{0,62}$"
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
MIG_PROFILE = r"^([1-7]c\.)?[1-7]g\.[0-9]+gb(\+me|\+me\.all|\+gfx|-me)?$"
_HOSTNAME_FIELD = re.compile(r"\{index(?::0?[1-9]d)?\}")
_HOSTNAME_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


# Ranges no host can be addressed from (RFC 6890 special-purpose registry): "this network",
# loopback, link-local, multicast, and reserved up to the limited broadcast address.
_UNADDRESSABLE = {
    IPv4Network("0.0.0.0/8"): "'this network' (RFC 1122)",
    IPv4Network("127.0.0.0/8"): "loopback",
    IPv4Network("169.254.0.0/16"): "link-local (RFC 3927)",
    IPv4Network("224.0.0.0/4"): "multicast",
    IPv4Network("240.0.0.0/4"): "reserved or broadcast (RFC 1112, RFC 919)",
}


def _parse_cidr(value: object) -> IPv4Network:
    """Accept only ``a.b.c.d/N`` strings of host-addressable ranges.

    YAML ints and booleans are not networks; multicast, broadcast, loopback, link-local and
    reserved ranges cannot address servers or BMCs.
    """
    if not isinstance(value, str) or "/" not in value:
        raise ValueError(f"expected a CIDR such as 10.10.0.0/16, got {value!r}")
    try:
        network = IPv4Network(value)
    except ValueError as exc:
        try:  # the common slip: a host address instead of the network address
            hint = f"; did you mean {IPv4Network(value, strict=False)}?"
        except ValueError:
            hint = ""
        raise ValueError(f"{value!r} is not a valid IPv4 network ({exc}){hint}") from None
    for special, what in _UNADDRESSABLE.items():
        if network.overlaps(special):
            raise ValueError(
                f"{network} overlaps {special}, {what}: no host can be addressed there; "
                "use a private range such as 10.10.0.0/16"
            )
    return network


Cidr = Annotated[
    IPv4Network,
    BeforeValidator(_parse_cidr),
    WithJsonSchema({"type": "string", "format": "ipv4-network", "pattern": r"^[0-9.]+/[0-9]+$"}),
]


# --- site -----------------------------------------------------------------------------------


class Rack(StrictModel):
    """The racks servers are placed in."""

    power_kw: float = Field(44.0, gt=0, le=500, description="Power budget per rack, kW.")
    units: int = Field(48, ge=4, le=60, description="Usable rack units per rack.")
    cooling: Literal["air", "liquid"] = Field("air", description="How racks are cooled.")
    pdus: int | None = Field(
        None, ge=0, le=8, description="PDUs per rack (BMC ports); default from the catalog."
    )
    air_cooling_limit_kw: float | None = Field(
        None,
        gt=0,
        le=200,
        description="Most heat one air-cooled rack can reject, kW; default from the catalog "
        "(site.air_cooling_limit_kw). Raise it if your hall is rated higher (rear-door HX).",
    )


class Layout(StrictModel):
    """Hall geometry for cable-length estimates (rack pitch, row spacing, slack)."""

    rack_width_m: float = Field(
        0.6, gt=0, le=2, description="Centre-to-centre distance of racks in a row, metres."
    )
    row_pitch_m: float = Field(
        2.4,
        gt=0,
        le=20,
        description="Centre-to-centre distance of rows, metres (rack depth plus one aisle).",
    )
    tray_rise_m: float = Field(
        0.5, ge=0, le=5, description="Run from a rack's top to the overhead tray, metres."
    )
    slack_m: float = Field(
        1.0, ge=0, le=10, description="Service loop and routing slack per cable, metres."
    )
    racks_per_row: int = Field(
        20,
        ge=2,
        le=100,
        description="Most racks in one row of the hall; the shared network racks wrap after it.",
    )


class DevicePower(StrictModel):
    """A device's measured or contracted power, replacing the catalog's for the power budgets."""

    typical_kw: float | None = Field(
        None, gt=0, le=1000, description="Typical draw, kW (the band's low edge)."
    )
    max_kw: float | None = Field(
        None, gt=0, le=1000, description="Maximum draw, kW (what the conservative bound tests)."
    )
    source: Annotated[str, TextRule] | None = Field(
        None,
        min_length=1,
        max_length=200,
        pattern=ONE_LINE,  # free text, shown wherever the figures are
        description="Where the figures come from (a datasheet, a metered reading).",
    )

    @model_validator(mode="after")
    def _typical_within_max(self) -> DevicePower:
        if self.typical_kw is None and self.max_kw is None:
            raise ValueError("give typical_kw, max_kw or both")
        if self.typical_kw and self.max_kw and self.typical_kw > self.max_kw:
            raise ValueError(f"typical_kw {self.typical_kw} exceeds max_kw {self.max_kw}")
        return self


class Site(StrictModel):
    """The data-center site: rack classes, hall layout and address space."""

    rack: Rack = Field(
        default_factory=Rack,
        description="The default rack class (class name `default`): power, space, cooling.",
    )
    rack_classes: dict[Annotated[str, Field(pattern=GROUP_NAME)], Rack] = Field(
        default_factory=dict,
        description="Further rack classes by name; a node group picks one with `rack_class`.",
    )
    network_rack_class: str | None = Field(
        None, description="Rack class of network racks; default the default class."
    )
    layout: Layout = Field(default_factory=Layout, description="Hall geometry.")
    device_power: dict[
        Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{0,63}$")], DevicePower
    ] = Field(
        default_factory=dict,
        description="Per catalog node or switch id (e.g. `qm8790`, `dgx-a100-640gb`), power "
        "figures the power and cost budgets use instead of the catalog's: its typical and "
        "maximum draw. Rack placement keeps the catalog's maximum.",
    )
    management_cidr: Cidr = Field(
        IPv4Network("10.10.0.0/16"), description="In-band management network (host addresses)."
    )
    bmc_cidr: Cidr = Field(
        IPv4Network("10.11.0.0/16"), description="Out-of-band network for BMCs, switches, PDUs."
    )
    address_block_bits: int = Field(
        4,
        ge=1,
        le=12,
        description="Each CIDR is split into 2^bits equal blocks: block 0 for shared "
        "infrastructure, then one block per node group in spec order (stable addresses).",
    )

    @model_validator(mode="after")
    def _default_class_is_reserved(self) -> Site:
        if "default" in self.rack_classes:
            raise ValueError("rack class name 'default' is reserved for site.rack")
        if self.network_rack_class not in (None, "default", *self.rack_classes):
            raise ValueError(
                f"network_rack_class {self.network_rack_class!r} is not a key of site.rack_classes"
            )
        return self

    def rack_class(self, name: str | None) -> Rack:
        """The rack class called ``name`` (None and ``default`` are `rack`)."""
        return self.rack if name in (None, "default") else self.rack_classes[name or ""]


# --- node groups ----------------------------------------------------------------------------


class MigAssignment(StrictModel):
    """One MIG layout applied to some GPUs of every node in a group."""

    gpus: Literal["all"] | list[Annotated[int, Field(ge=0, le=15)]] = Field(
        "all", description="GPU indices on the node, or `all`."
    )
    layout: str = Field(
        description="A key of `mig_layouts`, or `disabled` to leave these GPUs MIG-disabled."
    )

    @field_validator("gpus")
    @classmethod
    def _unique_gpus(cls, v: Literal["all"] | list[int]) -> Literal["all"] | list[int]:
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("GPU indices must be unique")
        return v


MigValue = str | list[MigAssignment]


class MigChange(StrictModel):
    """One change of a MIG schedule: at a cron time, the group's GPUs take a new `mig` value."""

    at: str = Field(
        max_length=100,
        description='Cron schedule (five fields, or a macro such as `@daily`), e.g. `"0 8 * * *"`.',
    )
    mig: MigValue = Field(
        description="MIG from then on: a key of `mig_layouts`, `disabled`, or per-GPU list."
    )

    @field_validator("at")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        if not cron_fields_valid(v):
            raise ValueError(
                f"{v!r} is not a cron schedule: five fields (minute hour day-of-month month "
                'day-of-week), e.g. "0 20 * * *", or a macro such as @daily'
            )
        return v


class MigSchedule(StrictModel):
    """Time-based re-partitioning of a group's GPUs (Kubernetes: one CronJob per change)."""

    timezone: str = Field(
        "Etc/UTC",
        max_length=64,
        description="IANA time zone the cron times are in, e.g. `Europe/Berlin`.",
    )
    drain_timeout: Duration = Field(
        "30m", description="How long GPU pods get to finish before a change goes ahead."
    )
    changes: list[MigChange] = Field(
        min_length=1, max_length=48, description="The changes, each at its own time."
    )
    rolling_batch_sus: int = Field(
        1,
        ge=1,
        le=MAX_ROLLING_BATCH_SUS,
        description="How many of the group's SUs one change drains and re-partitions at once, "
        "in plan order (default 1: one SU's jobs and leaf domain down at a time). A change "
        "of n SUs runs ceil(n / rolling_batch_sus) batches of drain_timeout + 15 min MIG "
        "reconfiguration + 10 min margin each.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        if v not in _time_zones():
            raise ValueError(f"{v!r} is not an IANA time zone name (e.g. Europe/Berlin, Etc/UTC)")
        return v

    @field_validator("drain_timeout")
    @classmethod
    def _drain_within_a_day(cls, v: str) -> str:
        # mig-change.sh refuses DRAIN_TIMEOUT above 86400 s before it cordons anything
        if duration_seconds(v) > MAX_DRAIN_S:
            raise ValueError(f"drain_timeout {v} is longer than {MAX_DRAIN_S // 3600}h")
        return v

    @field_validator("changes")
    @classmethod
    def _distinct_times(cls, changes: list[MigChange]) -> list[MigChange]:
        times = [" ".join(c.at.split()) for c in changes]
        twice = repeated(times)
        if twice:
            raise ValueError(f"two changes at the same time: {', '.join(twice)}")
        return changes


@functools.cache
def _time_zones() -> frozenset[str]:
    # `localtime` and `posixrules` are files of a host's zoneinfo directory, not IANA zones:
    # a CronJob's timeZone is read from Go's own database, which has neither, and lint would
    # judge daylight saving by the host running it.
    return frozenset(zoneinfo.available_timezones()) - {"localtime", "posixrules"}


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
            raise ValueError("hostname pattern needs exactly one {index} or {index:0Nd} field")
        sample = _HOSTNAME_FIELD.sub("0", v)
        if not _HOSTNAME_LABEL.match(sample):
            raise ValueError(
                f"hostname pattern {v!r} does not give a valid hostname (lowercase letters, "
                "digits and '-', not starting or ending with '-', at most 63 characters)"
            )
        return v

    @model_validator(mode="after")
    def _valid_hostnames(self) -> NodeGroup:
        """Every rendered hostname is an RFC 1123 label, not only the pattern with 0 in it."""
        for name in self.hostname_range():
            if not _HOSTNAME_LABEL.match(name):
                raise ValueError(
                    f"hostname pattern {self.hostname_pattern!r} gives {name[:80]!r} for "
                    f"servers {self.first_index}..{self.first_index + self.count - 1}, not a "
                    "valid hostname (RFC 1123: lowercase letters, digits and '-', not "
                    "starting or ending with '-', at most 63 characters)"
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


def assignments_of(value: MigValue) -> list[MigAssignment]:
    """A `mig` value as a list of assignments (a plain name covers all GPUs)."""
    if isinstance(value, str):
        return [MigAssignment(gpus="all", layout=value)]
    return list(value)


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


# --- MIG layouts ----------------------------------------------------------------------------


class MigLayout(StrictModel):
    """A set of MIG instances created on one GPU (becomes a mig-parted config)."""

    profiles: dict[
        Annotated[str, Field(pattern=MIG_PROFILE)], Annotated[int, Field(ge=0, le=64)]
    ] = Field(description='MIG profile name -> instances per GPU, e.g. `{"1g.10gb": 7}`.')
    description: Annotated[str, TextRule] = Field(
        "",
        max_length=200,
        pattern=ONE_LINE_OR_EMPTY,  # it reaches the HTML report and diff's output
        description="Free text for reviewers: one line, no control characters.",
    )

    @field_validator("profiles")
    @classmethod
    def _some_instance(cls, v: dict[str, int]) -> dict[str, int]:
        if not any(v.values()):
            raise ValueError("a MIG layout needs at least one profile with a count above 0")
        return v


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
