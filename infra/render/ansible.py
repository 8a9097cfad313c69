"""The Ansible side of a rendered tree: ansible.cfg, the inventory and the entry playbook.

`ansible_files` turns a plan into the files `docs/ansible.md` describes. This module owns
the file set and `hosts.yml`: groups by role, node group, SU and rack (JSON syntax:
ansible-core's YAML loader tries JSON first, its fastest path), and the names it refuses.
What the variables say (`group_vars/` with what a group shares, `host_vars/` with only what
differs per host) is `infra.render.ansible_vars`; the entry playbook `playbooks/<name>.yml`,
which imports only the roles this cluster needs and rolls disruptive steps one SU at a
time, is `infra.render.ansible_playbook`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from infra.catalog import Catalog
from infra.render.ansible_playbook import playbook
from infra.render.ansible_vars import (
    cluster_vars,
    host_vars,
    node_group_vars,
    subnet_manager_vars,
    yaml_file,
)
from infra.render.nccl_env import nccl_conf
from infra.render.opensm import sm_hosts
from infra.render.templating import render_template
from infra.render.writer import RenderError
from infra.spec import Spec
from infra.spec.base import RESERVED_GROUP_HINT, inventory_group, reserved_group
from infra.topology.control import control_roll_order, uses_opensm
from infra.topology.model import Plan

__all__ = ["ansible_files"]

FORKS = 100
_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")


def ansible_files(spec: Spec, catalog: Catalog, plan: Plan) -> dict[str, str]:
    """The Ansible files of one cluster, relative path -> text."""
    _check_names(spec, plan)
    inventory = f"inventories/{spec.name}"
    files = {
        "ansible.cfg": render_template("ansible/ansible.cfg.j2", forks=FORKS),
        f"{inventory}/hosts.yml": _hosts_yml(spec, catalog, plan),
        f"{inventory}/group_vars/all.yml": yaml_file(cluster_vars(spec), spec, "every host"),
        f"playbooks/{spec.name}.yml": playbook(spec, catalog, plan),
    }
    settings = nccl_conf(plan, spec, catalog)
    for group in spec.node_groups:
        values = node_group_vars(spec, catalog, plan, group)
        # NCCL_IB_HCA is left to the nccl role, which builds it from nccl_ib_hca
        extra = {k: v for k, v in settings.get(group.name, {}).items() if k != "NCCL_IB_HCA"}
        if extra:
            values["nccl_conf"] = extra
        files[f"{inventory}/group_vars/{group.name}.yml"] = yaml_file(
            values, spec, f"node group {group.name}"
        )
    if uses_opensm(spec):
        files[f"{inventory}/group_vars/subnet_managers.yml"] = yaml_file(
            subnet_manager_vars(spec, catalog, plan), spec, "the subnet-manager hosts"
        )
    pods = {su.name: su.pod for su in plan.sus}
    for server in plan.servers:
        files[f"{inventory}/host_vars/{server.name}.yml"] = host_vars(server, pods)
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
        if not _HOSTNAME.match(server.name) or server.name.isdigit():
            raise RenderError(
                f"hostname {server.name!r} is not a valid DNS label",
                path="node_groups",
                hint="use lowercase letters, digits and '-' in the hostname pattern, with a "
                "letter in every name",
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
