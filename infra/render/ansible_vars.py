"""The inventory's variables: `group_vars/` for what a group shares, `host_vars/` per host.

This module owns what the rendered inventory says of its hosts (`infra.render.ansible`
writes the files): versions and cluster-wide choices for every host (`cluster_vars`); per
node group its HCAs, NCCL settings, MIG config and acceptance thresholds
(`node_group_vars`, thresholds from `infra.budget` predictions so a node is held to what
railplan promised); the subnet-manager hosts' OpenSM and SHARP settings; and per host only
what differs (addresses, rack, unit, SU, slot), written as plain block YAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from infra.budget.bands import collective_bands
from infra.budget.cluster import comm_topology
from infra.budget.collectives import predict
from infra.catalog import Catalog
from infra.catalog.distro_slurm import needs_legacy_cgroups
from infra.catalog.drivers import KernelModules, kernel_modules_for
from infra.catalog.models import Gpu
from infra.k8s.gpu import DEVICE_PLUGIN_LABEL
from infra.render.opensm import guid_files, sm_hosts
from infra.spec import NodeGroup, Spec
from infra.topology.migconfig import mig_parted_configs
from infra.topology.model import Plan, Server

__all__ = [
    "ACCEPTANCE_BYTES",
    "cluster_vars",
    "host_vars",
    "node_group_vars",
    "subnet_manager_vars",
    "yaml_file",
]

ACCEPTANCE_BYTES = 1 << 30  # the acceptance role's nccl-tests size (1G): bandwidth-bound


class _PlainDumper(yaml.SafeDumper):
    """A safe dumper as yamllint likes it: no anchors, lists indented under their key."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def yaml_file(values: dict[str, Any], spec: Spec, scope: str) -> str:
    """``values`` as a group_vars file, under a header saying whose values they are."""
    header = f"---\n# Rendered by railplan from spec {spec.name!r}: values {scope} shares.\n"
    body = yaml.dump(
        values, Dumper=_PlainDumper, sort_keys=True, default_flow_style=False, width=100
    )
    return header + body


def cluster_vars(spec: Spec) -> dict[str, Any]:
    """What the spec decides for every host; what a role derives (branches) stays there.

    Every inventory value is printed once per host by `ansible-inventory --list`, so the
    inventory holds decisions, not copies of role defaults.
    """
    sw = spec.software
    values: dict[str, Any] = {
        "railplan_cluster": spec.name,
        "railplan_scheduler": spec.scheduler.kind,
        "nvidia_driver_version": sw.driver,
        "nccl_version": sw.nccl,
        "nccl_cuda_version": sw.cuda,
        "dcgm_version": sw.dcgm,
        "rdma_stack": _rdma_stack(spec),
        # nvidia_driver configures the CUDA repository on every GPU server, before nccl
        # runs; a second entry for the same URL with another key makes apt refuse both.
        "nccl_repo_manage": False,
        # On Kubernetes the GPU Operator runs dcgm-exporter; on Slurm the host runs it, from
        # NVIDIA's package, which needs DCGM 4 (DCGM 3 would need a binary URL of your own).
        "dcgm_exporter_enabled": spec.scheduler.kind == "slurm" and _major(sw.dcgm) >= 4,
    }
    if spec.scheduler.kind == "kubernetes":
        # One DCGM owner per node: the GPU Operator's dcgm-exporter embeds its own host engine
        # (infra.k8s.gpu), so a host nv-hostengine would be a second one on the same GPUs.
        values["dcgm_service_enabled"] = False
    if sw.fabric_manager not in ("auto", "disabled"):
        values["fabric_manager_version"] = sw.fabric_manager
    if values["rdma_stack"] == "doca":
        values["rdma_doca_version"] = sw.doca
    elif values["rdma_stack"] == "ofed":
        values["rdma_ofed_version"] = sw.ofed
    # The acceptance role runs nccl-tests' all_reduce_perf on a node and with mpirun across
    # an SU; the nccl role builds it (MPI=1, with the CUDA toolkit and Open MPI) when asked.
    values["nccl_tests_enabled"] = True
    values["nccl_tests_mpi"] = True
    if spec.fabrics.compute is not None:
        values["acceptance_fabric_rail_optimized"] = spec.fabrics.compute.rail_optimized
    if spec.scheduler.kind == "slurm" and needs_legacy_cgroups(sw.os):
        # the OS boots cgroup v2, its Slurm has only cgroup/v1 (infra.catalog.distro_slurm)
        values["os_tuning_cgroup_hierarchy"] = "legacy"
    if spec.scheduler.kind == "slurm":
        # Static NodeName lines (files/slurm/nodes.conf) carry the features already.
        values["topology_labels_slurm_method"] = "file"
        if spec.scheduler.power_saving is not None:
            values["slurm_power_saving"] = True  # programs, map and BMC credentials (slurm role)
    return values


def _rails_per_plane(plan: Plan, group: str, hcas: int) -> int:
    """Rails of one compute-fabric plane for ``group``'s servers (all HCAs on one plane).

    The acceptance role pairs a server alone in its SU with its own next HCA of the same
    plane, since planes are separate fat trees.
    """
    compute = plan.facts.fabrics.get("compute")
    geometry = compute.geometry if compute is not None else None
    if geometry is None or not plan.facts.groups[group].sus:
        return hcas
    return hcas // geometry.planes


def _gpu_kernel_modules(spec: Spec, gpu: Gpu) -> KernelModules:
    """The spec's kernel-module flavour, or for `auto` NVIDIA's recommendation for ``gpu``."""
    chosen = spec.software.gpu_kernel_modules
    if chosen != "auto":
        return chosen
    return kernel_modules_for(gpu.open_kernel_modules, spec.software.driver_branch)


def _major(version: str) -> int:
    return int(version.split(".")[0])


def _rdma_stack(spec: Spec) -> str:
    if spec.software.ofed:
        return "ofed"
    return "doca" if spec.software.doca else "none"


def node_group_vars(spec: Spec, catalog: Catalog, plan: Plan, group: NodeGroup) -> dict[str, Any]:
    """What the servers of ``group`` share: HCAs, GPU, acceptance thresholds, MIG config."""
    node = catalog.nodes[group.node]
    gpu = catalog.gpus[node.gpu]
    servers = plan.servers_in(group.name)
    hcas = list(servers[0].hcas) if servers else []
    values: dict[str, Any] = {
        "railplan_node_group": group.name,
        "railplan_node_type": group.node,
        "railplan_gpus_per_node": node.gpus,
        "nccl_ib_hca": hcas,
        "acceptance_gpu_name": gpu.name,
        "acceptance_nvlink_links_per_gpu": gpu.nvlink_links if node.nvswitches else 0,
        "acceptance_ib_rate_gbps": round(plan.facts.groups[group.name].nic_gbps) if hcas else 0,
        "acceptance_ib_rails_per_plane": _rails_per_plane(plan, group.name, len(hcas)),
        # Per group: `auto` depends on the GPU, and the rdma role picks GPUDirect from it.
        "nvidia_driver_kernel_modules": _gpu_kernel_modules(spec, gpu),
    }
    if node.cloud == "aws":
        values["rdma_stack"] = "efa"
    planned = plan.groups[group.name]
    values.update(_expected_busbw(spec, catalog, group, planned.mig_split))
    if planned.mig_split:
        values["mig_config_name"] = planned.mig.now.config
        values["mig_parted_config"] = mig_parted_configs(spec, [group])
        if spec.scheduler.kind == "kubernetes":
            # The GPU Operator's MIG manager applies the config this label names (its
            # default would undo the group's layout); MIG schedules relabel through the API.
            values["topology_labels_kubernetes_extra"] = {
                "nvidia.com/mig.config": planned.mig.now.config
            }
            # ...so the host's own MIG manager must not apply or re-apply it at boot.
            values["mig_manager_owner"] = "gpu_operator"
    if group.sharing is not None and spec.scheduler.kind == "kubernetes":
        # The GPU Operator's device plugin shares the group's GPUs as the config of this
        # name says (infra.k8s.gpu; a group with sharing is never MIG-split).
        values["topology_labels_kubernetes_extra"] = {DEVICE_PLUGIN_LABEL: group.name}
    return values


def _expected_busbw(
    spec: Spec, catalog: Catalog, group: NodeGroup, mig_split: bool
) -> dict[str, float]:
    """all_reduce busbw at 1 GiB on one node and across one SU (0 = no test).

    ``acceptance_*_expected_*`` is the lower edge of the prediction's error band:
    the slowest a healthy cluster was seen to run against the model in the prediction's
    regime, so the role's threshold, expected x (1 - tolerance), is the band's lower edge
    minus the tolerance and a healthy SU passes. ``acceptance_*_predicted_*`` is the central
    prediction, for the reader. ``mig_split``: the group is MIG-split at some time (no NCCL
    test on MIG instances).
    """
    gpus = catalog.nodes[group.node].gpus
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 1
    su_nodes = min(su_size, group.count)
    node = su = (0.0, 0.0)
    if not mig_split:
        if gpus >= 2:
            node = _busbw(spec, catalog, group, gpus)
        if su_nodes >= 2:
            su = _busbw(spec, catalog, group, su_nodes * gpus)
    return {
        "acceptance_node_expected_busbw_gbytes_per_s": node[0],
        "acceptance_node_predicted_busbw_gbytes_per_s": node[1],
        "acceptance_su_expected_busbw_gbytes_per_s": su[0],
        "acceptance_su_predicted_busbw_gbytes_per_s": su[1],
    }


def _busbw(spec: Spec, catalog: Catalog, group: NodeGroup, gpus: int) -> tuple[float, float]:
    """(band's lower edge, prediction) of all_reduce busbw at `ACCEPTANCE_BYTES` on ``gpus``."""
    topo = comm_topology(spec, catalog, gpus, group=group.name)
    row = predict(topo, "all_reduce", ACCEPTANCE_BYTES)
    band = collective_bands(topo, "all_reduce", row.bytes, row.busbw_GBps, row.time_us)
    return band.busbw.low, row.busbw_GBps


def subnet_manager_vars(spec: Spec, catalog: Catalog, plan: Plan) -> dict[str, Any]:
    """OpenSM's files and port GUIDs on the subnet-manager hosts, and SHARP's AM where usable."""
    files = "{{ inventory_dir }}/files/subnet-manager"
    values: dict[str, Any] = {
        "rdma_opensm_enabled": True,
        # one file per SM host: its sm_priority (master 15, standby 14) and pinned port
        "rdma_opensm_conf_file": files + "/opensm-{{ inventory_hostname }}.conf",
        "rdma_opensm_partitions_file": f"{files}/partitions.conf",
        "rdma_opensm_guid_files": [f"{files}/{name}" for name in guid_files(plan, spec, catalog)],
    }
    compute = spec.fabrics.compute
    guids = compute.guids if compute else {}
    ports = {h: f"0x{int(guids[h][0], 16):016x}" for h in sm_hosts(plan) if h in guids}
    sharp = plan.facts.sharp() == "usable"
    if ports:
        values["rdma_opensm_port_guids"] = ports
        if sharp:
            # sharp_am sends its MADs from the SM's port on each SM host (NVIDIA SHARP,
            # "Appendix B: SHARP_am Network Interfaces", ib_port_guid)
            values["sharp_am_conf"] = {
                "ib_port_guid": "{{ rdma_opensm_port_guids[inventory_hostname] }}"
            }
    if sharp:
        values["sharp_am_enabled"] = True
    return values


def host_vars(server: Server, pods: dict[str, int | None]) -> str:
    """One host's own variables: addresses, index, SU, slot, rack, unit, pod (None left out)."""
    values = {
        "ansible_host": server.mgmt_ip,
        "railplan_index": server.index,
        "railplan_su": server.su,
        "railplan_slot": server.slot,
        "railplan_rack": server.rack,
        "railplan_rack_unit": server.rack_unit,
        "railplan_pod": pods.get(server.su) if server.su else None,
        "railplan_bmc_ip": server.bmc_ip,
    }
    present = {k: v for k, v in values.items() if v is not None}
    return _flat_yaml(present)


_PLAIN_SCALAR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*\Z")
_RESOLVER = yaml.resolver.Resolver()


def _flat_yaml(values: dict[str, Any]) -> str:
    """One host's variables as block YAML, one key a line, as `_PlainDumper` writes them.

    Written by hand when every value is an integer or a string PyYAML writes plain (reads
    back as that string; addresses and names are): PyYAML's pure-Python dumper costs ~0.35 ms
    a host, 6 s of a 16,384-host render. Anything else goes through the dumper itself.
    """
    if not values or not all(_plain(v) for v in values.values()):
        return "---\n" + yaml.dump(values, Dumper=_PlainDumper, sort_keys=True)
    return "---\n" + "".join(f"{key}: {values[key]}\n" for key in sorted(values))


def _plain(value: Any) -> bool:
    if type(value) is int:
        return True
    return (
        type(value) is str
        and _PLAIN_SCALAR.match(value) is not None
        and _implicit_tag(value) == "tag:yaml.org,2002:str"
    )


def _implicit_tag(value: str) -> str:
    """The type YAML gives ``value`` written plain (types-PyYAML leaves `resolve` untyped)."""
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return tag
