"""Subnet-manager files for the compute fabric: OpenSM, UFM or the switches' embedded SM.

`subnet_manager_files(plan, spec, catalog)` returns relative file name -> text (for
``files/subnet-manager/``), chosen by ``fabrics.compute.subnet_manager``:

- ``opensm`` / ``nvidia-opensm``: one ``opensm-<host>.conf`` per SM host, ``partitions.conf``,
  ``root_guids.conf`` and a README (`infra.render.opensm`); with SHARP, ``sharp_am.cfg``.
- ``ufm``: ``ufm-pkeys.json`` (request bodies for UFM's PKey REST API), ``ufm-sm.conf`` (the
  routing engine and root GUIDs for UFM's SM settings), a README, and for the fabric twin
  only ``rehearsal-opensm.conf`` with ``rehearsal-partitions.conf`` (the same SM as the
  distributions' OpenSM runs it on ibsim).
- ``switch``: a README: the SM runs on the managed switches; the PKeys to configure there.

Without a compute fabric nothing is rendered.

Sources: NVIDIA UFM Enterprise REST API guide, "PKey GUIDs REST API"; NVIDIA SHARP guide,
"Setting up NVIDIA SHARP Environment"; the OpenSM sources are in `infra.render.opensm`.
"""

from __future__ import annotations

import json

from infra.catalog import Catalog
from infra.render.opensm import (
    REHEARSAL_CONF,
    cn_guids_file,
    nvidia_sm,
    opensm_files,
    rehearsal_files,
    root_switches,
    routing_engine,
    routing_lines,
    sharp_am_cfg,
    sm_hosts,
)
from infra.render.slurm import hostlist
from infra.spec import Spec
from infra.topology.model import Plan

__all__ = ["subnet_manager_files", "ufm_pkeys_json"]

_UFM_PKEY_URL = (
    "https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6202/pkey+guids+rest+api"
)


def _group_hosts(plan: Plan, group: str) -> str:
    return hostlist(plan.servers_in(group)) or "(no servers)"


def ufm_pkeys_json(plan: Plan) -> str:
    """Request bodies for ``POST /ufmRest/resources/pkeys/add``, one per node-group P_Key.

    UFM's API creates a PKey without GUIDs from ``{"pkey": ...}`` (the only required
    field); the default partition 0x7fff exists without being created.
    """
    bodies = [
        {"pkey": pkey, "index0": False, "ip_over_ib": True}
        for name, pkey in plan.pkeys.items()
        if name != "default"
    ]
    return json.dumps(bodies, indent=2, sort_keys=True) + "\n"


def _pkey_table(plan: Plan) -> list[str]:
    return [
        f"- `{pkey}` `{name}`: {'every port' if name == 'default' else _group_hosts(plan, name)}"
        for name, pkey in plan.pkeys.items()
    ]


def _ufm_readme(plan: Plan, spec: Spec) -> str:
    sharp = plan.facts.sharp() != "off"  # asked: UFM's README says how, usable or not
    lines = [
        f"# Subnet manager: UFM ({plan.name})",
        "",
        "UFM Enterprise runs the subnet manager (and, with SHARP, the Aggregation Manager).",
        "Partitions, per the UFM Enterprise REST API guide, PKey GUIDs REST API",
        f"({_UFM_PKEY_URL}):",
        "",
        "1. POST each body of `ufm-pkeys.json` to `/ufmRest/resources/pkeys/add` (creates",
        "   the PKey without GUIDs).",
        '2. POST `{"pkey": ..., "guids": [...]}` to `/ufmRest/resources/pkeys/` with the',
        "   port GUIDs of the group's servers (not known when planning).",
        "",
        "PKeys:",
        *_pkey_table(plan),
        "",
        "Routing: `ufm-sm.conf` holds the routing engine and root GUID file for UFM's SM",
        "(`root_guids.conf` lists the top-tier switches; add GUIDs to the spec's",
        "`fabrics.compute.guids` after cabling and render again).",
        "",
        f"Rehearsal only: `{REHEARSAL_CONF}` and `rehearsal-partitions.conf` run the same SM",
        "(roots, partitions; the engine without adaptive routing) with the distributions'",
        "OpenSM on the fabric twin, `files/fabric/ibsim.net`, before UFM is on site. Do not",
        "install them: UFM takes its SM settings in UFM.",
    ]
    if sharp:
        lines += [
            "",
            "SHARP: enable it in UFM (UFM Enterprise User Manual, Appendix - NVIDIA SHARP",
            "Integration); UFM starts sharp_am on its own SM host.",
            _ONBOARD_SM_OFF,
        ]
    return "\n".join(lines) + "\n"


# NVIDIA SHARP guide, "Setting up NVIDIA SHARP Environment": "Make sure onboard Subnet Manager
# is disabled in the managed switches" (sharp_am runs beside the master SM on a host).
_ONBOARD_SM_OFF = (
    "Disable the on-board subnet manager of every managed compute switch (NVIDIA SHARP guide, "
    "Setting up NVIDIA SHARP Environment): sharp_am works with the host SM only."
)


def _switch_readme(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    model = spec.fabrics.compute.switch if spec.fabrics.compute else ""
    managed = catalog.switches[model].managed
    lines = [
        f"# Subnet manager: embedded in the switches ({plan.name})",
        "",
        "The subnet manager runs on the managed compute switches: enable it on one, and on a",
        "second as standby (lower SM priority) where the fabric has more than one switch.",
        "Configure these partitions there, each group's member port GUIDs added on site:",
        "",
        *_pkey_table(plan),
        "",
        f"Routing engine: `{routing_engine(plan, spec, catalog)}`.",
    ]
    if not managed:
        lines += ["", f"WARNING: {model} is externally managed and cannot host an SM."]
    return "\n".join(lines) + "\n"


def _ufm_sm_conf(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    """The SM settings UFM needs from the plan: routing engine and root GUID file."""
    engine = routing_engine(plan, spec, catalog)
    header = [
        f"# Subnet-manager settings for UFM's SM ({plan.name}), generated by railplan.",
        "# UFM runs NVIDIA's OpenSM: ar_updn (adaptive routing over up/down) exists there.",
        "# Set these in UFM's SM configuration; root_guids.conf lists the top-tier switches.",
    ]
    return "\n".join(header + routing_lines(plan, spec, engine)) + "\n"


def _opensm_readme(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    nvidia = nvidia_sm(spec)
    hosts = sm_hosts(plan)
    lines = [
        f"# Subnet manager: {'NVIDIA' if nvidia else 'upstream'} OpenSM ({plan.name})",
        "",
        f"Routing engine `{routing_engine(plan, spec, catalog)}`. "
        + (
            "NVIDIA's OpenSM (DOCA-Host / MLNX_OFED) has the adaptive-routing engines."
            if nvidia
            else "The distributions' OpenSM 3.3 has no `ar_*` engines and no SHARP."
        ),
        "",
        f"- `opensm-<host>.conf`: {', '.join(hosts)} (master first, sm_priority 15, then",
        "  14); the rdma role installs each host's file as opensm.conf.",
        "- `partitions.conf`: each node group's partition (P_Key index 0) lists its servers'",
        "  port GUIDs as full members; once every server's GUIDs are known, hosts are limited",
        "  members of the default partition, so node groups cannot reach each other.",
        "- `root_guids.conf`: the top-tier switches for root_guid_file.",
        "",
        "GUIDs exist only after cabling. Read them (`ibswitches`, `ibstat -p` on each",
        "server), put them in the spec under `fabrics.compute.guids` (switch name:",
        "`[node GUID]`, server name: its compute port GUIDs in rail order) and render",
        "again. Until then OpenSM detects the root switches itself (updn/ftree by min-hop),",
        "each SM binds to its first active port and the default partition isolates",
        "nothing: the conf files and partitions.conf say which GUIDs are missing.",
    ]
    if plan.facts.sharp() != "off":
        lines += ["", _ONBOARD_SM_OFF]
    return "\n".join(lines) + "\n"


def subnet_manager_files(plan: Plan, spec: Spec, catalog: Catalog) -> dict[str, str]:
    """Subnet-manager files by relative name; empty without a compute fabric."""
    fabric = spec.fabrics.compute
    if fabric is None or "compute" not in plan.fabrics:
        return {}
    if fabric.subnet_manager == "ufm":
        files = {
            "README.md": _ufm_readme(plan, spec),
            "root_guids.conf": root_switches(plan, spec),
            "ufm-pkeys.json": ufm_pkeys_json(plan),
            "ufm-sm.conf": _ufm_sm_conf(plan, spec, catalog),
            **rehearsal_files(plan, spec, catalog),
        }
        cn = cn_guids_file(plan, spec, catalog)
        if cn is not None:
            files["cn_guids.conf"] = cn
        return dict(sorted(files.items()))
    if fabric.subnet_manager == "switch":
        return {"README.md": _switch_readme(plan, spec, catalog)}
    files = opensm_files(plan, spec, catalog)
    files["README.md"] = _opensm_readme(plan, spec, catalog)
    if plan.facts.sharp() != "off":
        files["sharp_am.cfg"] = sharp_am_cfg(plan, spec, catalog)
    return dict(sorted(files.items()))
