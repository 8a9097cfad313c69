"""The Ansible side of a rendered tree: ansible.cfg, the inventory and the entry playbook.

`ansible_files` turns a plan into the files `docs/ansible.md` describes: `hosts.yml` with
groups by role, node group, SU and rack (JSON syntax: ansible-core's YAML loader tries JSON
first, its fastest path); `group_vars/` with
what a group shares (versions cluster-wide; HCAs, NCCL settings, MIG config and acceptance
thresholds per node group); `host_vars/` with only what differs per host (addresses, rack,
unit, SU, slot); and `playbooks/<name>.yml`, which imports only the roles this cluster needs
and rolls disruptive steps one SU at a time. Acceptance thresholds come from
`infra.budget` predictions, so a node is held to what railplan promised.
"""

from __future__ import annotations

import functools
import json
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
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
from infra.render.nccl_env import nccl_conf
from infra.render.opensm import guid_files, sm_hosts
from infra.render.templating import render_template
from infra.render.writer import RenderError
from infra.spec import NodeGroup, Spec
from infra.spec.base import RESERVED_GROUP_HINT, RESERVED_GROUPS, inventory_group, reserved_group
from infra.topology.control import control_roll_order, uses_opensm
from infra.topology.migconfig import mig_parted_configs
from infra.topology.model import Plan, Server
from infra.wording import plural

__all__ = ["ACCEPTANCE_BYTES", "RESERVED_GROUPS", "ansible_files"]

ACCEPTANCE_BYTES = 1 << 30  # the acceptance role's nccl-tests size (1G): bandwidth-bound
MAX_FAIL_PERCENTAGE = 10
FORKS = 100
_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class _GroupPlay:
    """What the entry playbook needs to know of one node group."""

    name: str
    batches: list[int]  # servers per batch in inventory order, the control hosts left out
    fabric_manager: bool
    mig: str | None
    by_su: bool  # batches are SUs (else plain batches: no compute fabric, no SUs)

    @property
    def batch(self) -> int | list[int]:
        """``serial``: one size, or a list where the control hosts make SUs differ.

        Ansible repeats a list's last size and gives the last batch what remains, so the
        list stops where the sizes stop changing (a cluster of 32 SUs keeps a short line).
        """
        sizes = list(self.batches)
        if len(sizes) > 1 and sizes[-1] <= sizes[-2]:
            sizes.pop()  # the last SU: the remainder Ansible leaves for the last batch
        while len(sizes) > 1 and sizes[-1] == sizes[-2]:
            sizes.pop()
        return sizes[0] if len(sizes) == 1 else sizes

    @property
    def batch_text(self) -> str:
        sizes = sorted(set(self.batches))
        servers = (
            plural(sizes[0], "server") if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]} servers"
        )
        return f"one SU ({servers})" if self.by_su else servers

    @property
    def post_reboot(self) -> bool:
        return self.fabric_manager or self.mig is not None


@dataclass(frozen=True)
class _ControlPlay:
    """The control hosts' own rolling play (`infra.topology.control`), last, one at a time.

    Who they are, and which of them need Fabric Manager or MIG.
    """

    hosts: list[str]
    fabric_manager_groups: list[str]
    mig_groups: list[str]


def ansible_files(spec: Spec, catalog: Catalog, plan: Plan) -> dict[str, str]:
    """The Ansible files of one cluster, relative path -> text."""
    _check_names(spec, plan)
    inventory = f"inventories/{spec.name}"
    files = {
        "ansible.cfg": render_template("ansible/ansible.cfg.j2", forks=FORKS),
        f"{inventory}/hosts.yml": _hosts_yml(spec, catalog, plan),
        f"{inventory}/group_vars/all.yml": _yaml_file(_cluster_vars(spec), spec, "every host"),
        f"playbooks/{spec.name}.yml": _playbook(spec, catalog, plan),
    }
    settings = nccl_conf(plan, spec, catalog)
    for group in spec.node_groups:
        values = _node_group_vars(spec, catalog, plan, group)
        # NCCL_IB_HCA is left to the nccl role, which builds it from nccl_ib_hca
        extra = {k: v for k, v in settings.get(group.name, {}).items() if k != "NCCL_IB_HCA"}
        if extra:
            values["nccl_conf"] = extra
        files[f"{inventory}/group_vars/{group.name}.yml"] = _yaml_file(
            values, spec, f"node group {group.name}"
        )
    if uses_opensm(spec):
        files[f"{inventory}/group_vars/subnet_managers.yml"] = _yaml_file(
            _subnet_manager_vars(spec, catalog, plan), spec, "the subnet-manager hosts"
        )
    pods = {su.name: su.pod for su in plan.sus}
    for server in plan.servers:
        files[f"{inventory}/host_vars/{server.name}.yml"] = _host_vars(server, pods)
    return files


def _check_names(spec: Spec, plan: Plan) -> None:
    """Names become inventory groups and file names: refuse what Ansible or a path can't hold."""
    for i, group in enumerate(spec.node_groups):
        if reserved_group(group.name):
            raise RenderError(
                f"node group name {group.name!r} is an inventory group railplan reserves",
                path=f"node_groups[{i}].name",
                hint=RESERVED_GROUP_HINT,
            )
    for server in plan.servers:
        if not _HOSTNAME.match(server.name):
            raise RenderError(
                f"hostname {server.name!r} is not a valid DNS label",
                path="node_groups",
                hint="use lowercase letters, digits and '-' in the hostname pattern",
            )


# --- hosts.yml --------------------------------------------------------------------------------


def _hosts_yml(spec: Spec, catalog: Catalog, plan: Plan) -> str:
    """Node groups list their servers in index order; SUs nest racks; roles nest node groups.

    The rolling plays batch a node group one SU at a time with ``serial``, which needs the
    group's hosts in index order (each SU a run of consecutive servers). Ansible keeps the
    order of a group's own host list but not of its children's, so a node group lists its
    servers itself rather than through its SUs.
    """
    groups: dict[str, dict[str, Any]] = {}
    add = functools.partial(_add_group, groups)
    add("gpu_servers", {"children": {g.name: {} for g in spec.node_groups}})
    nvswitch = [g.name for g in spec.node_groups if catalog.nodes[g.node].nvswitches > 0]
    add("nvswitch_servers", {"children": {name: {} for name in nvswitch}})
    add("mig_servers", {"children": {g.name: {} for g in plan.groups.values() if g.mig_split}})
    for group in spec.node_groups:
        for name, body in _node_group_tree(plan, group.name).items():
            add(name, body, node_group=name == group.name)
    if uses_opensm(spec):
        add("subnet_managers", _members(sm_hosts(plan)))
    controller = plan.facts.control.controller  # Slurm specs only
    if controller is not None:
        add("slurm_controllers", _members([controller]))
    control = control_roll_order(plan, spec)
    if control:
        add("control_hosts", _members(control))
    document = {"all": {"children": groups}}
    return json.dumps(document, indent=1) + "\n"


def _add_group(
    groups: dict[str, dict[str, Any]], name: str, body: dict[str, Any], node_group: bool = False
) -> None:
    """Define one inventory group: a node group, a reserved role group, or an SU or rack group.

    Ansible merges groups of the same name, so a second definition is refused, and a group
    that is not a node group must be one `reserved_group` knows (lint RP005 refuses node
    groups of those names): the names cannot drift apart from the check.
    """
    if name in groups or not (node_group or reserved_group(name)):
        raise RenderError(
            f"inventory group {name!r} would be defined twice or is not reserved",
            path="node_groups",
            hint=RESERVED_GROUP_HINT,
        )
    groups[name] = body


def _node_group_tree(plan: Plan, name: str) -> dict[str, dict[str, Any]]:
    """The groups of one node group: itself, its SUs, their racks."""
    servers = plan.servers_in(name)
    sus = [su for su in plan.sus if su.group == name]
    tree: dict[str, dict[str, Any]] = {name: _members(s.name for s in servers)}
    for su in sus:
        racks = [r for r in su.racks if plan.rack(r).servers]
        in_racks = {h for r in racks for h in plan.rack(r).servers}
        entry: dict[str, Any] = {
            "children": {inventory_group("rack", r): {} for r in racks},
            **_members(h for h in su.servers if h not in in_racks),
        }
        tree[inventory_group("su", su.name)] = {k: v for k, v in entry.items() if v}
        for rack in racks:
            tree[inventory_group("rack", rack)] = _members(plan.rack(rack).servers)
    return tree


def _members(names: Iterable[str]) -> dict[str, Any]:
    return {"hosts": {name: {} for name in names}}


# --- variables --------------------------------------------------------------------------------


class _PlainDumper(yaml.SafeDumper):
    """A safe dumper as yamllint likes it: no anchors, lists indented under their key."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _yaml_file(values: dict[str, Any], spec: Spec, scope: str) -> str:
    header = f"---\n# Rendered by railplan from spec {spec.name!r}: values {scope} shares.\n"
    body = yaml.dump(
        values, Dumper=_PlainDumper, sort_keys=True, default_flow_style=False, width=100
    )
    return header + body


def _cluster_vars(spec: Spec) -> dict[str, Any]:
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


def _node_group_vars(spec: Spec, catalog: Catalog, plan: Plan, group: NodeGroup) -> dict[str, Any]:
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


def _subnet_manager_vars(spec: Spec, catalog: Catalog, plan: Plan) -> dict[str, Any]:
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


def _host_vars(server: Server, pods: dict[str, int | None]) -> str:
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


# --- the entry playbook -----------------------------------------------------------------------


def _playbook(spec: Spec, catalog: Catalog, plan: Plan) -> str:
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else None
    control = control_roll_order(plan, spec)
    plays = [
        _GroupPlay(
            name=g.name,
            batches=_batches(plan, g.name, g.rolling_batch, set(control), su_size is not None),
            fabric_manager=_fabric_manager(spec, catalog, g.node),
            mig=g.mig.now.config if g.mig_split else None,
            by_su=su_size is not None,
        )
        for g in plan.groups.values()
    ]
    plays = [p for p in plays if p.batches]
    sharp = plan.facts.sharp() == "usable"
    control_play = _control_play(spec, catalog, plan, control) if control else None
    overview = _overview(plays, sharp, control_play)
    if spec.scheduler.kind == "slurm":
        overview.insert(
            -1, "gpu_servers: slurm (munge, slurmd; slurmctld on slurm_controllers) — all at once"
        )
    return render_template(
        "ansible/playbook.yml.j2",
        name=spec.name,
        scheduler=spec.scheduler.kind,
        groups=plays,
        sharp=sharp,
        control_play=control_play,
        control_note=_control_note(control_play, spec),
        opensm=uses_opensm(spec),
        slurm_play=spec.scheduler.kind == "slurm",
        max_fail_percentage=MAX_FAIL_PERCENTAGE,
        overview=overview,
    )


def _control_note(control: _ControlPlay | None, spec: Spec) -> list[str]:
    """The header paragraph on the control hosts' play, wrapped like the rest."""
    if control is None:
        return []
    slurm, opensm = spec.scheduler.kind == "slurm", uses_opensm(spec)
    what = ["the Slurm controller"] * slurm + ["the OpenSM master and standby"] * opensm
    why = ["the first batch is ordinary compute"]
    why += ["slurmctld stays up to drain every other batch"] * slurm
    why += ["the two subnet managers are never down together"] * opensm
    text = (
        f"The control hosts ({', '.join(control.hosts)}: {' and '.join(what)}) roll last, "
        f"one host at a time, in a play of their own, so {', '.join(why[:-1])}"
        f"{' and ' if len(why) > 1 else ''}{why[-1]}. The node-group plays leave them out."
    )
    return textwrap.wrap(text, width=92)


def _batches(plan: Plan, group: str, batch: int, control: set[str], by_su: bool) -> list[int]:
    """The group's rolling batches without the control hosts, in inventory order.

    One per SU (Ansible's ``serial`` list; the last size repeats), or ``batch`` servers.
    """
    servers = [s for s in plan.servers_in(group) if s.name not in control]
    if not by_su:
        return [min(batch, len(servers))] if servers else []
    sizes: dict[str, int] = {}
    for server in servers:
        sizes[server.su or ""] = sizes.get(server.su or "", 0) + 1
    return list(sizes.values())


def _fabric_manager(spec: Spec, catalog: Catalog, node: str) -> bool:
    return catalog.nodes[node].nvswitches > 0 and spec.software.fabric_manager != "disabled"


def _control_play(spec: Spec, catalog: Catalog, plan: Plan, control: list[str]) -> _ControlPlay:
    """The control hosts are GPU servers of some node group: they get that group's FM and MIG."""
    groups = {s.group for s in plan.servers if s.name in set(control)}
    ours = [g for g in plan.groups.values() if g.name in groups]
    return _ControlPlay(
        hosts=control,
        fabric_manager_groups=[g.name for g in ours if _fabric_manager(spec, catalog, g.node)],
        mig_groups=[g.name for g in ours if g.mig_split],
    )


def _overview(plays: list[_GroupPlay], sharp: bool, control: _ControlPlay | None) -> list[str]:
    lines = []
    for play in plays:
        extra = [r for r, on in (("fabric_manager", play.fabric_manager), ("mig", play.mig)) if on]
        roles = ", ".join(["drain", "os_tuning", "nvidia_driver", "rdma", *extra, "resume"])
        hosts = f"{play.name} (without control_hosts)" if control else play.name
        lines.append(f"{hosts}: {roles} — {play.batch_text} per batch")
    if control is not None:
        # fabric_manager and mig run only on the hosts whose node group has them
        extra = ["fabric_manager"] if control.fabric_manager_groups else []
        extra += ["mig"] if control.mig_groups else []
        roles = ", ".join(
            ["drain", "os_tuning", "nvidia_driver", "rdma", *(["sharp"] if sharp else []), *extra]
        )
        order = ", ".join(control.hosts)
        lines.append(f"control_hosts ({order}), last: {roles}, resume — one host per batch")
    common = ", ".join(["nccl", *(["sharp"] if sharp else []), "dcgm", "topology_labels"])
    lines.append(f"gpu_servers: {common} — all at once (no reboot)")
    lines.append("gpu_servers: acceptance (tag `acceptance`) — host by host in step, read-only")
    return lines
