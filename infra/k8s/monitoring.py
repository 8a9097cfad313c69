"""GPU monitoring and checkpoint storage as plain data: ServiceMonitor, alerts, StorageClass.

Owns how Prometheus scrapes dcgm-exporter (a ``ServiceMonitor`` with the spec's interval),
the GPU alert rules (``PrometheusRule`` ``railplan-gpu-alerts``: idle GPUs that a pod or
job holds, XID, NVLink and ECC errors, thermal and power throttling; the same group as a
plain Prometheus rule file for every cluster, `rules_document`) and the checkpoint
``StorageClass``. Thresholds
come only from ``spec.scheduler.monitoring`` (its defaults are documented there), and every
rule reads a metric the counters file of the Ansible ``dcgm`` role exports, which is also
what the GPU Operator's dcgm-exporter exports (infra.k8s.gpu).
"""

from __future__ import annotations

from typing import Any

from infra.k8s.gpu import GPU_NAMESPACE, counters_csv
from infra.k8s.objects import KubeObject, kube_object
from infra.spec import Monitoring, Spec

__all__ = [
    "ALERTS_NAME",
    "RELEASE_LABEL",
    "checkpoint_storage",
    "exported_metrics",
    "gpu_alert_group",
    "gpu_alert_rules",
    "monitoring",
    "prometheus_labels",
    "rules_document",
]

MONITORING_API = "monitoring.coreos.com/v1"
ALERTS_NAME = "railplan-gpu-alerts"
# The Service the GPU Operator creates for dcgm-exporter: its label and port name.
EXPORTER_SELECTOR = {"app": "nvidia-dcgm-exporter"}
EXPORTER_PORT = "gpu-metrics"
TARGET_POD_LABELS = ("pod", "namespace", "container")
# The label dcgm-exporter puts on the series of a GPU in use: with its Kubernetes pod mapping
# (DCGM_EXPORTER_KUBERNETES, on in the GPU Operator's values) the pod holding it; with its HPC
# job mapping (--hpc-job-mapping-dir, files the Slurm prolog writes) the Slurm job.
ALLOCATED_LABEL = {"kubernetes": "pod", "slurm": "hpc_job"}
_HOLDER = {
    "pod": "pod {{ $labels.namespace }}/{{ $labels.pod }}",
    "hpc_job": "job {{ $labels.hpc_job }}",
}

# DCGM_CLOCKS_EVENT_REASON_* bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (DCGM's dcgm_fields:
# the same values as NVML's nvmlClocksEventReason*): SW power cap 0x4, HW slowdown 0x8,
# SW thermal 0x20, HW thermal 0x40, HW power brake 0x80. SW power cap is left out on
# purpose: a busy GPU sits at its power limit, and DCGM's own diagnostic counts only the
# other four as failures.
THERMAL_BITS = (0x20, 0x40)
POWER_BITS = (0x8, 0x80)
EVENT_REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
WHERE = "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"  # dcgm-exporter's labels
# kube-prometheus-stack's Prometheus selects ServiceMonitors, PodMonitors and PrometheusRules
# by this label, valued as its Helm release (its chart's *SelectorNilUsesHelmValues: true).
RELEASE_LABEL = "release"


def prometheus_labels(spec: Spec) -> dict[str, str]:
    """The label that has the cluster's kube-prometheus-stack load an object of its operator."""
    return {RELEASE_LABEL: spec.scheduler.monitoring.prometheus_release}


def monitoring(spec: Spec) -> list[KubeObject]:
    """The dcgm-exporter ServiceMonitor and the GPU alert rules, in the GPU namespace."""
    return [service_monitor(spec), gpu_alerts(spec)]


def exported_metrics() -> frozenset[str]:
    """The DCGM fields the counters file exports (its non-comment first columns)."""
    lines = (line.strip() for line in counters_csv().splitlines())
    return frozenset(line.split(",")[0].strip() for line in lines if line and line[0] != "#")


def service_monitor(spec: Spec) -> KubeObject:
    """Scrape dcgm-exporter at the spec's interval (the chart's own monitor is off)."""
    endpoint: dict[str, Any] = {
        "port": EXPORTER_PORT,
        "interval": spec.scheduler.monitoring.scrape_interval,
        # dcgm-exporter labels series with the pod using the GPU (pod, namespace,
        # container); honouring them keeps those the workload's instead of exported_*.
        "honorLabels": True,
        # The operator also gives every series its target's pod, namespace and container
        # (the exporter's own pod in gpu-operator), which honorLabels keeps wherever the
        # exporter sets none: on every GPU no pod holds. Dropped, so `pod` on a series means
        # a workload holds that GPU (GPUIdle and the KEDA queries rely on it).
        "relabelings": [{"action": "labeldrop", "regex": "|".join(TARGET_POD_LABELS)}],
    }
    return kube_object(
        MONITORING_API,
        "ServiceMonitor",
        "nvidia-dcgm-exporter",
        spec,
        spec={"selector": {"matchLabels": dict(EXPORTER_SELECTOR)}, "endpoints": [endpoint]},
        namespace=GPU_NAMESPACE,
        labels=prometheus_labels(spec),
    )


def gpu_alerts(spec: Spec) -> KubeObject:
    """The PrometheusRule holding `gpu_alert_rules`."""
    group = gpu_alert_group(spec)
    return kube_object(
        MONITORING_API,
        "PrometheusRule",
        ALERTS_NAME,
        spec,
        spec={"groups": [group]},
        namespace=GPU_NAMESPACE,
        labels=prometheus_labels(spec),
    )


def rules_document(spec: Spec) -> dict[str, Any]:
    """The alert rules as a plain Prometheus rule file's document (``rule_files:``).

    The same group as the PrometheusRule's spec: Slurm clusters, whose hosts run
    dcgm-exporter from the dcgm role, load it into their own Prometheus. The renderer
    writes it (`infra.render.k8s_manifests.rules_file`) with the manifests' YAML style.
    """
    return {"groups": [gpu_alert_group(spec)]}


def gpu_alert_group(spec: Spec) -> dict[str, Any]:
    """The rule group: one builder for the PrometheusRule and the plain rule file."""
    allocated = ALLOCATED_LABEL[spec.scheduler.kind]
    return {"name": "railplan-gpu", "rules": gpu_alert_rules(spec.scheduler.monitoring, allocated)}


def _idle_expr(pct: float, allocated: str) -> str:
    # dcgm-exporter reports no DCGM_FI_DEV_GPU_UTIL for MIG instances (NVIDIA/dcgm-exporter
    # #50, #430): their series carry GPU_I_ID, and the graphics-engine activity (a 0-1
    # ratio, DCGM_FI_PROF_GR_ENGINE_ACTIVE) is what DCGM measures per instance. Only a GPU
    # (or instance) something holds counts: a free GPU is idle by design, not a waste.
    held = f'{allocated}!=""'
    return (
        f'DCGM_FI_DEV_GPU_UTIL{{GPU_I_ID="",{held}}} < {pct:g}'
        f' or DCGM_FI_PROF_GR_ENGINE_ACTIVE{{GPU_I_ID!="",{held}}} * 100 < {pct:g}'
    )


def gpu_alert_rules(m: Monitoring, allocated: str = "pod") -> list[dict[str, Any]]:
    """Alerting rules from the spec's thresholds, one per GPU fault class.

    ``allocated``: the series label naming what holds a GPU (`ALLOCATED_LABEL`); GPUIdle
    alerts only on GPUs that carry it.
    """
    window = m.error_window
    return [
        _rule(
            "GPUIdle",
            _idle_expr(m.idle_gpu_util_pct, allocated),
            m.idle_for,
            "info",
            f"{WHERE} is held but idle",
            f"Utilisation (graphics-engine activity on a MIG instance) of a GPU held by "
            f"{_HOLDER[allocated]} has stayed below {m.idle_gpu_util_pct:g}% for {m.idle_for}.",
        ),
        _rule(
            "GPUXidError",
            # DCGM_FI_DEV_XID_ERRORS holds the last XID, so a repeat of the same code changes
            # nothing there (NVIDIA/dcgm-exporter#190). The exporter's own
            # DCGM_EXP_XID_ERRORS_COUNT counts XIDs, by code (label xid), within its
            # xid-count-window-size (5 min by default; dcgm-exporter#239).
            "DCGM_EXP_XID_ERRORS_COUNT > 0",
            None,
            "critical",
            f"{WHERE} reported XID {{{{ $labels.xid }}}}",
            "{{ $value }} XID {{ $labels.xid }} errors within dcgm-exporter's count window; "
            "check the node's kernel log (dmesg) for the NVRM Xid lines.",
        ),
        _rule(
            "GPUNVLinkErrors",
            _any_increase(NVLINK_ERRORS, window),
            None,
            "warning",
            f"{WHERE} has NVLink errors",
            f"NVLink CRC, replay or recovery errors within {window}.",
        ),
        _rule(
            "GPUDoubleBitECC",
            f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{window}]) > 0",
            None,
            "critical",
            f"{WHERE} has uncorrectable ECC errors",
            f"Double-bit (uncorrectable) volatile ECC errors within {window}; drain the node.",
        ),
        *_throttle_rules(m),
    ]


def _throttle_rules(m: Monitoring) -> list[dict[str, Any]]:
    return [
        _rule(
            "GPUThermalThrottling",
            _any_bit(EVENT_REASONS, THERMAL_BITS),
            m.throttle_for,
            "warning",
            f"{WHERE} is thermally throttled",
            f"SW or HW thermal slowdown for {m.throttle_for}; check cooling and airflow.",
        ),
        _rule(
            "GPUPowerThrottling",
            _any_bit(EVENT_REASONS, POWER_BITS),
            m.throttle_for,
            "warning",
            f"{WHERE} is power throttled",
            f"HW slowdown or power brake for {m.throttle_for}; check PSUs and the rack's power.",
        ),
    ]


def _any_increase(metrics: tuple[str, ...], window: str) -> str:
    return " or ".join(f"increase({metric}[{window}]) > 0" for metric in metrics)


def _any_bit(metric: str, bits: tuple[int, ...]) -> str:
    # PromQL has no bitwise operators: bit b of x is set when floor(x / b) is odd.
    return " or ".join(f"floor({metric} / {bit}) % 2 == 1" for bit in bits)


def _rule(
    alert: str,
    expr: str,
    for_: str | None,
    severity: str,
    summary: str,
    description: str,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if for_ is not None:  # error rules fire at once: one XID or ECC error is already news
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


# --- checkpoint storage -------------------------------------------------------------------


def checkpoint_storage(spec: Spec) -> list[KubeObject]:
    """The checkpoint StorageClass of `scheduler.checkpoint_storage`; none when absent."""
    storage = spec.scheduler.checkpoint_storage
    if storage is None:
        return []
    fields: dict[str, Any] = {"provisioner": storage.provisioner}
    if storage.parameters:
        fields["parameters"] = dict(sorted(storage.parameters.items()))
    fields["reclaimPolicy"] = storage.reclaim_policy
    if storage.mount_options:
        fields["mountOptions"] = list(storage.mount_options)
    # A shared parallel filesystem is reachable from every node, so there is no zone to
    # wait for; a training job's pods mount the same volume wherever they land.
    fields["volumeBindingMode"] = "Immediate"
    fields["allowVolumeExpansion"] = True  # checkpoints grow with the model
    return [kube_object("storage.k8s.io/v1", "StorageClass", storage.name, spec, **fields)]
