"""Spec models of the workload scheduler and what runs on it, with their duration and cron types.

The scheduler's kind and MIG strategy, the batch scheduler, tenants, monitoring thresholds
and checkpoint storage. Everything here reaches Kubernetes objects (names, quotas, cron schedules, alert rules), so
each value is checked to be something the API server and Prometheus accept: tenant names are
DNS labels, durations are Prometheus/Go durations in s, m or h, cron expressions have five
fields in range (or a macro), and CSI parameters are one line of text each.
"""

from __future__ import annotations

import contextlib
from ipaddress import ip_network
from typing import Annotated, Literal, NamedTuple

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.errors import HintedValueError
from infra.namespaces import INGRESS_NAMESPACE
from infra.spec.base import DNS_LABEL, ONE_LINE_OR_EMPTY, StrictModel, TextRule, repeated

__all__ = [
    "Backfill",
    "CheckpointStorage",
    "Duration",
    "Monitoring",
    "PowerSaving",
    "Preemption",
    "PreemptionInEffect",
    "Scheduler",
    "Tenant",
    "TenantAutoscale",
    "TenantClients",
    "duration_seconds",
]

Duration = Annotated[
    str,
    Field(
        pattern=r"^[1-9][0-9]{0,5}[smh]$",
        description="A duration such as `90s`, `30m` or `2h`.",
    ),
]
_UNIT_S = {"s": 1, "m": 60, "h": 3600}
PRIORITIES = ("low", "normal", "high", "critical")


def duration_seconds(value: str) -> int:
    """Seconds in a `Duration` string (``30m`` -> 1800)."""
    return int(value[:-1]) * _UNIT_S[value[-1]]


class TenantAutoscale(StrictModel):
    """An inference tenant's Deployment, scaled by KEDA on the load of the GPUs it runs on."""

    deployment: str = Field(
        pattern=DNS_LABEL, description="Deployment (in the tenant's namespace) KEDA scales."
    )
    group: str = Field(
        description="Node group its pods run on: a MIG group scales on "
        "`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, a whole-GPU group on `DCGM_FI_DEV_GPU_UTIL`."
    )
    min_replicas: int = Field(1, ge=0, le=100_000, description="Fewest replicas (0 idles it).")
    max_replicas: int = Field(ge=1, le=100_000, description="Most replicas.")
    target_pct: float = Field(
        70.0, gt=0, le=100, description="Mean GPU activity, percent, that KEDA scales towards."
    )

    @model_validator(mode="after")
    def _replicas_ordered(self) -> TenantAutoscale:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) exceeds max_replicas ({self.max_replicas})"
            )
        return self


def _network(text: str) -> str:
    if "%" in text:  # Python takes an IPv6 zone (fe80::%eth0/64); Kubernetes' ipBlock does not
        raise HintedValueError(
            f"{text!r} is not a network address in CIDR form (an IPv6 zone such as "
            "%eth0 names an interface of one host)",
            hint=f"write {text.split('%', 1)[0]}/{text.rpartition('/')[2]}"
            if "/" in text
            else "write the network without the zone",
        )
    try:
        return str(ip_network(text, strict=True))
    except ValueError as exc:
        hint = "write an address and a prefix length, e.g. 10.0.0.0/8 or fd00::/64"
        with contextlib.suppress(ValueError):  # host bits set: the network it lies in
            hint = f"did you mean {ip_network(text, strict=False)}?"
        raise HintedValueError(
            f"{text!r} is not a network address in CIDR form ({exc})", hint=hint
        ) from None


# Helm v3 release names (pkg/chartutil/validate_name.go: validName, maxReleaseNameLen 53): the chart
# selects its ServiceMonitors and rules by `release: <its release name>`.
HELM_RELEASE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class TenantClients(StrictModel):
    """Where a tenant's clients connect from: let through the tenant's default-deny policy.

    Peers are namespaces (every pod in them, e.g. the ingress controller's) and networks
    (clients outside the cluster reaching pods directly, e.g. through a LoadBalancer that
    keeps their source address).
    """

    namespaces: list[Annotated[str, Field(pattern=DNS_LABEL)]] = Field(
        default_factory=lambda: [INGRESS_NAMESPACE],
        description="Namespaces whose pods may connect (default: `ingress-nginx`, where the "
        "ingress-nginx controller runs); `[]` for none.",
    )
    cidrs: list[Annotated[str, AfterValidator(_network)]] = Field(
        default_factory=list,
        description="Networks (CIDR, IPv4 or IPv6) whose addresses may connect directly.",
    )
    ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        default_factory=list,
        description="TCP ports clients may reach on the tenant's pods; `[]` for every port.",
    )


class Tenant(StrictModel):
    """A team sharing the cluster: one namespace, one queue and a GPU quota."""

    name: str = Field(
        pattern=DNS_LABEL,
        description="Tenant name: a DNS label (names its namespace, queue and priority class).",
    )
    gpus: int = Field(ge=0, le=10_000_000, description="GPUs the tenant may use at once.")
    priority: Literal["low", "normal", "high", "critical"] = Field(
        "normal",
        description="Preemption order: a tenant's jobs may preempt those of lower priority.",
    )
    borrowing_limit: int | None = Field(
        0,
        ge=0,
        le=10_000_000,
        description="GPUs beyond its quota the tenant may borrow from other tenants' idle "
        "quota (Kueue `borrowingLimit`, Volcano `capability`); `null` for no limit, 0 for none. "
        "Borrowed GPUs are reclaimed when their owner needs them (see `scheduler.preemption`).",
    )
    lending_limit: int | None = Field(
        None,
        ge=0,
        le=10_000_000,
        description="GPUs of its quota others may borrow while idle (Kueue `lendingLimit`); "
        "`null` for all of it. The rest is guaranteed (Volcano `guarantee`).",
    )
    autoscale: TenantAutoscale | None = Field(
        None, description="Inference tenants: a KEDA ScaledObject on a MIG-safe GPU metric."
    )
    clients: TenantClients | None = Field(
        None,
        description="Where clients of the tenant's services connect from (a NetworkPolicy "
        "`allow-clients`). Unset: a tenant with `autoscale` serves clients through the "
        "ingress controller (`namespaces: [ingress-nginx]`); any other tenant admits none.",
    )

    def clients_in_effect(self) -> TenantClients | None:
        """`clients`, or for an autoscaled inference tenant the ingress controller's namespace."""
        if self.clients is None and self.autoscale is not None:
            return TenantClients()
        return self.clients

    @model_validator(mode="after")
    def _lends_within_quota(self) -> Tenant:
        if self.lending_limit is not None and self.lending_limit > self.gpus:
            raise ValueError(
                f"lending_limit ({self.lending_limit}) exceeds the tenant's gpus ({self.gpus})"
            )
        return self

    @property
    def borrows(self) -> bool:
        """Whether the tenant may use more than its quota (so it joins a cohort)."""
        return self.borrowing_limit != 0


class Preemption(StrictModel):
    """When a pending job may evict running ones (Kueue `preemption`, Volcano actions).

    Unset fields take the batch scheduler's default (`Scheduler.preemption_in_effect`):
    with Volcano placing jobs by HyperNode (the plan has SUs) nothing evicts, as in
    Volcano's own default configuration, because its preempt and reclaim actions ignore
    HyperNodes (lint RP076 explains); otherwise `reclaim: any` and
    `within_tenant: lower_priority`.
    """

    reclaim: Literal["any", "lower_priority", "never"] | None = Field(
        None,
        description="A tenant below its quota takes back GPUs others borrowed: from any job "
        "(`any`), only from lower-priority jobs, or never (Kueue `reclaimWithinCohort`); "
        "unset: the batch scheduler's default (never for Volcano with HyperNodes, else any).",
    )
    within_tenant: Literal["lower_priority", "never"] | None = Field(
        None,
        description="Whether a job may evict a lower-priority job of its own tenant "
        "(Kueue `withinClusterQueue`); unset: the batch scheduler's default (never for "
        "Volcano with HyperNodes, else lower_priority).",
    )


class PreemptionInEffect(NamedTuple):
    """`Preemption` with the batch scheduler's defaults filled in."""

    reclaim: Literal["any", "lower_priority", "never"]
    within_tenant: Literal["lower_priority", "never"]

    def volcano_evictions(self) -> list[str]:
        """The volcano-scheduler actions that evict running pods, in Volcano's order.

        ``preempt`` evicts lower-priority jobs *of the same queue* (volcano-sh/volcano
        pkg/scheduler/actions/preempt: "Preemption between Jobs within Queue"), so it follows
        ``within_tenant``; ``reclaim`` takes back GPUs other queues borrowed beyond their
        deserved share (docs/user-guide/how_to_use_capacity_plugin.md), so it follows
        ``reclaim``. Volcano's reclaim does not order victims by priority: ``lower_priority``
        reclaims like ``any``. The renderer and lint RP076 both read this.
        """
        return [
            *(["preempt"] if self.within_tenant != "never" else []),
            *(["reclaim"] if self.reclaim != "never" else []),
        ]


class PowerSaving(StrictModel):
    """Slurm power saving: idle nodes are powered off through their BMC and on again for work."""

    suspend_time: Duration = Field(
        "30m", description="How long a node stays idle before Slurm powers it off (`SuspendTime`)."
    )
    suspend_timeout: Duration = Field(
        "5m", description="How long powering off may take (`SuspendTimeout`)."
    )
    resume_timeout: Duration = Field(
        "15m",
        description="How long a node may take to boot and register again (`ResumeTimeout`); "
        "a DGX takes several minutes to POST with eight GPUs and its NICs.",
    )
    exclude_groups: list[str] = Field(
        default_factory=list,
        description="Node groups never powered off (infrastructure nodes never are).",
    )
    resume_rate: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Servers powered on per minute at most (`ResumeRate`), so a large job "
        "does not start a surge; default: one rack's servers a minute.",
    )
    suspend_rate: int = Field(
        60,
        ge=1,
        le=10_000,
        description="Servers powered off per minute at most (`SuspendRate`; Slurm's default).",
    )

    @field_validator("suspend_timeout", "resume_timeout")
    @classmethod
    def _sixteen_bits(cls, value: str) -> str:
        # slurm.conf's parser reads SuspendTimeout and ResumeTimeout as 16-bit counts of
        # seconds (s_p_get_uint16: "value ... is greater than 65535"): slurmctld refuses more.
        if duration_seconds(value) > 65_535:
            raise ValueError("Slurm reads it in seconds up to 65535 (18h 12m 15s): write e.g. 18h")
        return value


class Backfill(StrictModel):
    """Slurm's backfill scheduler (`sched/backfill`): the `SchedulerParameters` it reads.

    Every field defaults to Slurm's own default (slurm.conf(5), Slurm 22.05), so a spec
    without the key renders the scheduler Slurm would run anyway, and `railplan simulate`
    replays it.
    """

    interval: Duration = Field(
        "30s", description="Time between backfill cycles (`bf_interval`; Slurm's default 30 s)."
    )
    resolution: Duration = Field(
        "60s",
        description="Time resolution of backfill's plan of job starts and ends "
        "(`bf_resolution`; Slurm's default 60 s).",
    )
    window: Duration = Field(
        "24h",
        description="How far ahead backfill plans, in whole minutes (`bf_window`; Slurm's "
        "default one day).",
    )
    max_job_test: int = Field(
        500,
        ge=1,
        le=1_000_000,
        description="Pending jobs backfill tries per cycle, in priority order "
        "(`bf_max_job_test`; Slurm's default 500).",
    )

    @field_validator("window")
    @classmethod
    def _whole_minutes(cls, window: str) -> str:
        if duration_seconds(window) % 60:
            raise ValueError("bf_window is whole minutes: write e.g. 90m or 2h")
        if duration_seconds(window) > 30 * 86_400:
            raise ValueError("bf_window is at most 30 days (slurm.conf(5))")
        return window

    @model_validator(mode="after")
    def _slurm_ranges(self) -> Backfill:
        if duration_seconds(self.interval) > 10_800:
            raise ValueError("interval (bf_interval) is at most 3h (slurm.conf(5))")
        if duration_seconds(self.resolution) > 3600:
            raise ValueError("resolution (bf_resolution) is at most 1h (slurm.conf(5))")
        return self


class Monitoring(StrictModel):
    """GPU alert thresholds (dcgm-exporter metrics) and the Prometheus release that loads them."""

    scrape_interval: Duration = Field("15s", description="dcgm-exporter scrape interval.")
    idle_gpu_util_pct: float = Field(
        5.0, ge=0, le=100, description="A GPU below this utilisation, percent, counts as idle."
    )
    idle_for: Duration = Field("1h", description="How long a GPU stays idle before it alerts.")
    throttle_for: Duration = Field(
        "15m", description="How long thermal or power throttling lasts before it alerts."
    )
    error_window: Duration = Field(
        "5m", description="Window in which any new XID, NVLink or ECC error alerts."
    )
    prometheus_release: str = Field(
        "kube-prometheus-stack",
        pattern=HELM_RELEASE,
        max_length=53,
        description="Helm release name of the cluster's kube-prometheus-stack. Its Prometheus "
        "selects only ServiceMonitors and PrometheusRules labelled `release: <name>` (the "
        "chart's default `serviceMonitorSelectorNilUsesHelmValues` and "
        "`ruleSelectorNilUsesHelmValues`); railplan labels its objects so.",
    )


class CheckpointStorage(StrictModel):
    """The checkpoint filesystem as a Kubernetes StorageClass of its CSI driver."""

    name: str = Field("checkpoints", pattern=DNS_LABEL, description="StorageClass name.")
    provisioner: str = Field(
        pattern=r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$",
        description="CSI driver name, e.g. `fsx.csi.aws.com` or `lustre.csi.hpe.com`.",
    )
    parameters: dict[
        Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$")],
        # values reach the CSI driver as they are, through the rendered StorageClass
        Annotated[str, Field(max_length=1024, pattern=ONE_LINE_OR_EMPTY), TextRule],
    ] = Field(default_factory=dict, description="The driver's StorageClass parameters.")
    reclaim_policy: Literal["Retain", "Delete"] = Field(
        "Retain", description="Checkpoints outlive their claims unless you say otherwise."
    )
    mount_options: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.,=:/-]{1,128}$")]] = Field(
        default_factory=list, description="Mount options, e.g. `flock`."
    )


class Scheduler(StrictModel):
    """The workload scheduler and what runs on top of it."""

    kind: Literal["kubernetes", "slurm"] = Field("kubernetes", description="Scheduler.")
    mig_strategy: Literal["none", "single", "mixed"] = Field(
        "none",
        description="How MIG devices are exposed (NVIDIA device plugin / GPU Operator): "
        "`single` needs every GPU of a node MIG-enabled with one profile.",
    )
    batch: Literal["volcano", "kueue", "none"] = Field(
        "none",
        description="Kubernetes batch scheduler for gang scheduling and topology-aware "
        "placement: Volcano (HyperNodes) or Kueue (Topology); `none` for neither.",
    )
    tenants: list[Tenant] = Field(
        default_factory=list, description="Teams, each with a namespace, queue and GPU quota."
    )
    monitoring: Monitoring = Field(
        default_factory=Monitoring, description="GPU alert thresholds (Kubernetes)."
    )
    checkpoint_storage: CheckpointStorage | None = Field(
        None, description="StorageClass for checkpoints (Kubernetes); none when absent."
    )
    preemption: Preemption = Field(
        default_factory=Preemption, description="When pending jobs may evict running ones."
    )
    power_saving: PowerSaving | None = Field(
        None, description="Slurm: power idle nodes off through their BMC; none when absent."
    )
    backfill: Backfill = Field(
        default_factory=Backfill,
        description="Slurm: the backfill scheduler's parameters (`SchedulerParameters`).",
    )

    def preemption_in_effect(self, *, by_hypernode: bool) -> PreemptionInEffect:
        """The preemption settings with unset ones resolved.

        ``by_hypernode``: the plan has SUs, so Volcano places jobs by HyperNode. Render,
        lint and the simulator read this, so they agree on what evicts.
        """
        quiet = self.batch == "volcano" and by_hypernode
        p = self.preemption
        return PreemptionInEffect(
            reclaim=p.reclaim or ("never" if quiet else "any"),
            within_tenant=p.within_tenant or ("never" if quiet else "lower_priority"),
        )

    @field_validator("tenants")
    @classmethod
    def _unique_tenants(cls, tenants: list[Tenant]) -> list[Tenant]:
        twice = repeated(t.name for t in tenants)
        if twice:
            raise ValueError(f"tenant names must be unique; repeated: {', '.join(twice)}")
        return tenants

    @model_validator(mode="after")
    def _tenants_need_kubernetes(self) -> Scheduler:
        if self.kind == "slurm" and (self.tenants or self.batch != "none"):
            raise ValueError(
                "tenants and batch are Kubernetes settings; with kind: slurm use Slurm "
                "accounts and QOS instead (remove them or set kind: kubernetes)"
            )
        return self

    @model_validator(mode="after")
    def _power_saving_needs_slurm(self) -> Scheduler:
        if self.power_saving is not None and self.kind != "slurm":
            raise ValueError(
                "power_saving is a Slurm setting (SuspendTime, ResumeProgram); with kind: "
                "kubernetes scale node pools instead (remove it or set kind: slurm)"
            )
        return self
