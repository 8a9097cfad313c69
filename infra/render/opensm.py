"""OpenSM files for the compute fabric: one ``opensm-<host>.conf`` per SM host, partitions, GUIDs.

Two builds share the name OpenSM. The distributions' (`subnet_manager: opensm`, linux-rdma
OpenSM 3.3: Debian/Ubuntu/RHEL) has the routing engines minhop, updn, dnup, file, ftree,
lash, dor, torus-2QoS, nue, dfsssp and sssp, and no SHARP support; NVIDIA's
(`nvidia-opensm`, DOCA-Host/MLNX_OFED) adds the adaptive-routing engines (``ar_updn``,
``ar_ftree``, ...). So the upstream build gets ``updn`` (or the spec's engine) and only keys
that ``opensm -c`` of 3.3.23 writes; NVIDIA's gets ``ar_updn`` where every switch has AR.

Switch and port GUIDs exist only after cabling: the operator writes them into the spec
(``fabrics.compute.guids``). With the top-tier switches' GUIDs the conf names a root GUID
file; without them it says that OpenSM detects the roots (updn/ftree by min-hop), never
silently. Partitions: once every server's port GUIDs are known, hosts are limited members
of the default partition and full members of their node group's, so groups cannot reach
each other; until then the file says the default partition isolates nothing.

Sources: opensm(8) and partitions.conf syntax (opensm(8) "PARTITION CONFIGURATION",
linux-rdma/opensm doc/partition-config.txt); NVIDIA "InfiniBand Cluster Bring-up
Procedure", Adaptive Routing, for ``ar_updn``; NVIDIA SHARP Rev 3.14.0 "Appendix B:
SHARP_am Network Interfaces" for ``ib_port_guid``; NVIDIA SHARP Rev 3.2.0 "Setting up NVIDIA
SHARP Environment" for ``sharp_enabled 2``.
"""

from __future__ import annotations

from infra.catalog import Catalog
from infra.render.slurm import hostlist
from infra.spec import Spec
from infra.spec.models import UPSTREAM_ENGINES
from infra.topology.control import subnet_manager_hosts
from infra.topology.model import Plan, SwitchTier

__all__ = [
    "CONF_DIR",
    "REHEARSAL_CONF",
    "REHEARSAL_PARTITIONS",
    "SM_PRIORITIES",
    "UPSTREAM_ENGINES",
    "cn_guids_file",
    "guid_files",
    "nvidia_sm",
    "opensm_conf",
    "opensm_files",
    "partitions_conf",
    "rehearsal_files",
    "root_switches",
    "routing_engine",
    "routing_lines",
    "sharp_am_cfg",
    "sharp_lines",
    "sm_hosts",
    "upstream_engine",
]

CONF_DIR = "/etc/opensm"
# Master 15 (the highest of 0-15), standby 14: the higher priority wins the election, so the
# standby takes over only when the master is gone (opensm(8), -p/--priority).
SM_PRIORITIES = (15, 14)
# UFM owns its SM's configuration; these two files only rehearse that SM on the fabric twin.
REHEARSAL_CONF = "rehearsal-opensm.conf"
REHEARSAL_PARTITIONS = "rehearsal-partitions.conf"
_AR_URL = "https://docs.nvidia.com/networking/display/ibclusterbringupprocedure/adaptive+routing"
_SHARP_OPENSM_URL = (
    "https://docs.nvidia.com/networking/display/SHARPv320/Setting+up+NVIDIA+SHARP+Environment"
)
_SHARP_NET_URL = (
    "https://docs.nvidia.com/networking/display/sharpv3140/Appendix-B-SHARP_am-Network-Interfaces"
)


def sm_hosts(plan: Plan) -> list[str]:
    """Master and standby OpenSM (`infra.topology.control.subnet_manager_hosts`)."""
    return subnet_manager_hosts(plan)


def nvidia_sm(spec: Spec) -> bool:
    """Whether the SM is NVIDIA's (UFM or NVIDIA's OpenSM): ar_* engines and SHARP exist."""
    fabric = spec.fabrics.compute
    return fabric is not None and fabric.subnet_manager in ("ufm", "nvidia-opensm")


def routing_engine(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    """The spec's engine, or for `auto`: ar_updn on NVIDIA's SM where every switch has AR."""
    fabric = spec.fabrics.compute
    chosen = fabric.routing_engine if fabric else "auto"
    if chosen != "auto":
        return chosen
    models = {s.model for s in plan.switches_in("compute")}
    adaptive = bool(models) and all(catalog.switches[m].adaptive_routing for m in models)
    return "ar_updn" if adaptive and nvidia_sm(spec) else "updn"


def _guid(text: str) -> str:
    return f"0x{int(text, 16):016x}"


def _guids(spec: Spec) -> dict[str, list[str]]:
    fabric = spec.fabrics.compute
    raw = fabric.guids if fabric else {}
    return {name: [_guid(g) for g in values] for name, values in raw.items()}


def _top_tier(plan: Plan) -> SwitchTier:
    tiers = plan.fabrics["compute"].tiers
    return "core" if tiers == 3 else "spine" if tiers == 2 else "leaf"


def _root_guids(plan: Plan, spec: Spec) -> list[str] | None:
    """The top-tier switches' node GUIDs, or None unless every one is known."""
    guids = _guids(spec)
    names = [s.name for s in plan.switches_in("compute", _top_tier(plan))]
    if not names or any(n not in guids for n in names):
        return None
    return [guids[n][0] for n in names]


def _cn_guids(plan: Plan, spec: Spec) -> list[str] | None:
    """Every server's compute port GUIDs (ftree's compute nodes), or None unless all known."""
    guids = _guids(spec)
    if not plan.servers or any(s.name not in guids for s in plan.servers):
        return None
    return [g for s in plan.servers for g in guids[s.name]]


def root_switches(plan: Plan, spec: Spec) -> str:
    """``root_guids.conf``: the top-tier switches, each one's node GUID where the spec has it."""
    guids = _guids(spec)
    tier = _top_tier(plan)
    lines = [f"# Root GUID file (opensm root_guid_file) of {plan.name}: the {tier} switches."]
    for switch in plan.switches_in("compute", tier):
        known = guids.get(switch.name)
        lines.append(f"{known[0]}  # {switch.name}" if known else f"# {switch.name}: GUID unknown")
    return "\n".join(lines) + "\n"


def routing_lines(plan: Plan, spec: Spec, engine: str) -> list[str]:
    """routing_engine and, only when every root GUID is known, root_guid_file.

    An incomplete or empty root GUID file is worse than none: OpenSM 3.3.23 with a root file
    naming no switch logs "no root nodes were found" and routes with minhop.
    """
    roots = _root_guids(plan, spec)
    lines = [f"routing_engine {engine}"]
    if roots is not None:
        lines.append(f"root_guid_file {CONF_DIR}/root_guids.conf")
    else:
        lines += [
            "# No root GUID file: fabrics.compute.guids lacks the top-tier switches' GUIDs, so",
            "# OpenSM detects the roots itself (updn/ftree: the switches farthest from the",
            "# hosts by min-hop). Add them to the spec after cabling and render again.",
        ]
    if engine.endswith("ftree"):
        if _cn_guids(plan, spec) is not None:
            lines.append(f"cn_guid_file {CONF_DIR}/cn_guids.conf")
        else:
            lines.append("# No cn_guid_file: the servers' port GUIDs are not in the spec.")
    return lines


def opensm_conf(plan: Plan, spec: Spec, catalog: Catalog, host: str, priority: int) -> str:
    """``opensm.conf`` for one SM host: its port, priority, routing and partition file."""
    engine = routing_engine(plan, spec, catalog)
    port = _guids(spec).get(host)
    build = (
        [
            "# for NVIDIA's OpenSM (DOCA-Host / MLNX_OFED). ar_updn is NVIDIA's adaptive routing",
            f"# over up/down for fat trees ({_AR_URL}).",
        ]
        if nvidia_sm(spec)
        else [
            "# for the distribution's linux-rdma OpenSM 3.3, which has no ar_* engines: every",
            "# key below is one that `opensm -c` of 3.3.23 writes.",
        ]
    )
    lines = [
        f"# opensm.conf of {host} ({plan.name}), generated by railplan",
        *build,
        "# Keys not set here keep OpenSM's defaults (`opensm -c FILE` writes them all).",
        f"# Master election: the higher sm_priority wins; {host} is "
        + ("the master." if priority == SM_PRIORITIES[0] else "the standby."),
        f"sm_priority {priority}",
    ]
    if port:
        lines += ["# The SM binds to this port (its first compute HCA).", f"guid {port[0]}"]
    else:
        lines.append(f"# guid: unset (first active port): add {host}'s port GUIDs to the spec.")
    lines += routing_lines(plan, spec, engine)
    lines += sharp_lines(plan, spec)
    lines.append(f"partition_config_file {CONF_DIR}/partitions.conf")
    return "\n".join(lines) + "\n"


def sharp_lines(plan: Plan, spec: Spec) -> list[str]:
    """``sharp_enabled 2`` on NVIDIA's OpenSM when the spec asks for SHARP; nothing otherwise.

    sharp_am builds its trees from what the SM found, and NVIDIA's OpenSM configures SHARP
    on the switches only with ``sharp_enabled 2``: without it SHARP jobs find no trees and
    fall back to the host network. The distributions' OpenSM 3.3 has no such key (it logs
    ``Unrecognized token: "sharp_enabled"``), and lint refuses SHARP with it.
    """
    if plan.facts.sharp() == "off" or not nvidia_sm(spec):
        return []
    return [
        "# SHARP: NVIDIA's OpenSM enables the aggregation nodes of every capable switch for",
        "# sharp_am (NVIDIA SHARP guide, Setting up NVIDIA SHARP Environment, Using NVIDIA",
        f"# SHARP Aggregation Manager with OpenSM: {_SHARP_OPENSM_URL}).",
        "sharp_enabled 2",
    ]


def partitions_conf(plan: Plan, spec: Spec) -> str:
    """``partitions.conf``: with every server's GUIDs, hosts limited in Default, full in their group.

    Two limited members cannot talk, so isolating the groups (limited in the default
    partition) needs every host to be a full member of its group's partition first: until
    the spec has every server's port GUIDs, hosts stay full members of the default partition
    and the file says so.
    """
    guids = _guids(spec)
    isolated = bool(plan.servers) and all(s.name in guids for s in plan.servers)
    lines = [
        f"# partitions.conf of {plan.name}, generated by railplan (syntax: opensm(8),",
        "# PARTITION CONFIGURATION).",
    ]
    for name, pkey in plan.pkeys.items():
        if name == "default":
            lines += _default_partition(pkey, isolated)
            continue
        servers = plan.servers_in(name)
        missing = [s for s in servers if s.name not in guids]
        lines.append(f"# {name}: ports of {hostlist(servers) or '(no servers)'}")
        if missing:
            lines.append(f"# GUIDs not in the spec yet (not members): {hostlist(missing)}")
        members = [guids[s.name] for s in servers if s.name in guids]
        lines.append(_group_partition(name, pkey, members, isolated))
    return "\n".join(lines) + "\n"


def _group_partition(name: str, pkey: str, members: list[list[str]], isolated: bool) -> str:
    """A node group's partition: its servers' ports, one server per line.

    ``indx0`` only once hosts are isolated: before, index 0 must stay the default P_Key
    every host shares, or a member would speak a P_Key its peers lack. Without any member
    the partition holds the SM's port, as a placeholder OpenSM accepts.
    """
    if not members:
        return f"{name}={pkey}, ipoib, defmember=full : SELF ;"
    ports = ",".join(f"\n    {', '.join(m)}" for m in members)
    return f"{name}={pkey}{', indx0' if isolated else ''}, ipoib, defmember=full :{ports} ;"


def _default_partition(pkey: str, isolated: bool) -> list[str]:
    if isolated:
        return [
            "# Hosts are limited members of the default partition (limited members cannot",
            "# talk to each other); switches and the SM are full: node groups are isolated.",
            f"Default={pkey}, ipoib, defmember=limited : ALL, ALL_SWITCHES=full, SELF=full ;",
        ]
    return [
        "# NOT ISOLATED: fabrics.compute.guids lacks servers' port GUIDs, so every port stays",
        "# a full member of the default partition (limited members could not talk at all).",
        "# Add every server's GUIDs to the spec and render again to isolate the node groups.",
        f"Default={pkey}, ipoib, defmember=full : ALL=full ;",
    ]


def sharp_am_cfg(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    """``sharp_am.cfg`` for the SHARP Aggregation Manager beside the master SM."""
    model = spec.fabrics.compute.switch if spec.fabrics.compute else ""
    capable = sum(1 for s in plan.switches_in("compute") if catalog.switches[s.model].sharp)
    master = sm_hosts(plan)[0]
    port = _guids(spec).get(master)
    lines = [
        f"# sharp_am.cfg for {plan.name}: generated by railplan; /etc/sharp/sharp_am.cfg on",
        f"# {master}, the master SM's host (NVIDIA/nccl#320, #1425). Other parameters keep",
        "# the factory defaults (`sharp_am -c FILE` writes them).",
        f"# Planned: {capable} SHARP-capable switches ({model}).",
        f"# ib_port_guid: the port sharp_am sends its MADs from ({_SHARP_NET_URL}).",
    ]
    if port:
        lines.append(f"ib_port_guid {port[0]}")
    else:
        lines.append(f"# ib_port_guid unset (0: OpenSM's port): {master}'s GUIDs are not known.")
    return "\n".join(lines) + "\n"


def cn_guids_file(plan: Plan, spec: Spec, catalog: Catalog) -> str | None:
    """``cn_guids.conf`` (ftree's compute nodes) when the engine is ftree and all are known."""
    cn = _cn_guids(plan, spec)
    if cn is None or not routing_engine(plan, spec, catalog).endswith("ftree"):
        return None
    return "\n".join(cn) + "\n"


def guid_files(plan: Plan, spec: Spec, catalog: Catalog) -> list[str]:
    """Names of the GUID files `opensm_files` writes, for the rdma role to install."""
    cn = cn_guids_file(plan, spec, catalog) is not None
    return ["cn_guids.conf", "root_guids.conf"] if cn else ["root_guids.conf"]


def opensm_files(plan: Plan, spec: Spec, catalog: Catalog) -> dict[str, str]:
    """The OpenSM files by relative name (``opensm`` and ``nvidia-opensm``)."""
    files = {
        f"opensm-{host}.conf": opensm_conf(plan, spec, catalog, host, priority)
        for host, priority in zip(sm_hosts(plan), SM_PRIORITIES, strict=False)
    }
    files["partitions.conf"] = partitions_conf(plan, spec)
    files["root_guids.conf"] = root_switches(plan, spec)
    cn = cn_guids_file(plan, spec, catalog)
    if cn is not None:
        files["cn_guids.conf"] = cn
    return files


def upstream_engine(engine: str) -> str:
    """The distributions' engine nearest NVIDIA's: ``ar_X`` routes as X without adaptive routing."""
    base = engine.removeprefix("ar_")
    return base if base in UPSTREAM_ENGINES else "updn"


def rehearsal_files(plan: Plan, spec: Spec, catalog: Catalog) -> dict[str, str]:
    """A UFM spec's SM as the distributions' OpenSM 3.3 runs it on the fabric twin (ibsim).

    UFM's SM takes its settings in UFM (``ufm-sm.conf`` says which), so nothing here is
    installed anywhere: the files let the twin sweep the planned fabric with the same roots,
    partitions and (without adaptive routing) engine before UFM exists on site.
    """
    engine = routing_engine(plan, spec, catalog)
    twin = upstream_engine(engine)
    lines = [
        f"# {REHEARSAL_CONF} of {plan.name}, generated by railplan: for rehearsing UFM's",
        "# subnet manager with the distributions' OpenSM 3.3 on the fabric twin (ibsim) only.",
        "# UFM owns its SM's configuration (ufm-sm.conf lists what to set there).",
    ]
    if twin != engine:
        lines.append(f"# UFM routes with {engine}; OpenSM 3.3 has no such engine: {twin} here.")
    lines += [f"sm_priority {SM_PRIORITIES[0]}", *routing_lines(plan, spec, twin)]
    lines.append(f"partition_config_file {CONF_DIR}/{REHEARSAL_PARTITIONS}")
    return {
        REHEARSAL_CONF: "\n".join(lines) + "\n",
        REHEARSAL_PARTITIONS: partitions_conf(plan, spec),
    }
