"""Slurm files from the plan: topology.conf (tree plugin), gres.conf and slurm.conf node lines.

- `topology_conf`: the compute fabric as Slurm's ``topology/tree`` sees it. On a
  rail-optimized fabric the scalable unit is the leaf domain: NIC ``r`` of every server of an
  SU is cabled to leaf ``(SU, r)``, so any two servers of one SU reach each other through one
  switch on every rail, and Slurm should treat the SU as one "switch". Pods (three-tier
  fabrics) group their SUs; one top switch joins pods or SUs. A fabric that is not
  rail-optimized puts whole servers on a leaf, so there the physical leaf is the leaf domain.
  Servers without an SU (no compute fabric, cloud instances) get one switch per node group,
  deliberately joined to nothing: Slurm then never spans a job across groups that share no
  planned fabric, and jobs inside a group are placed as if on one switch.
- `gres_conf`: ``Name=gpu`` lines with ``File=/dev/nvidia[...]`` and the GPUs' local ``Cores=``
  (catalog ``gpu_cores``, where sourced) for whole-GPU groups; MIG
  groups get ``AutoDetect=nvml``, as SchedMD documents for MIG (Slurm >= 21.08; the MIG
  device files are per compute instance and only NVML knows them).
- `nodes_conf`: slurm.conf ``NodeName=`` lines with the planned management addresses
  (``NodeAddr=``, so no name service is needed), the host's CPUs and memory (catalog ``host``),
  ``Gres=`` counts per type and ``Features=`` (node group, SU, rack, pod), one line per (group,
  SU, rack) as a hostlist expression. slurm.conf includes it.

Node names are compressed into Slurm hostlist ranges (`hostlist`): ``dgx[001-020]``. Slurm
pads every number of a range to the width of its first bound, so a range is only emitted
where that rule gives back exactly the planned names (padded or not). A range must also end
its name: Slurm's grammar is ``prefix[ranges]`` (hostlist.c refuses any text after ``]``, and
slurmctld stops with "Unable to create NodeName list"), so names with text after the index
(``dgx001-ib``) are listed one by one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from itertools import groupby

from infra.catalog import Catalog, Gpu, Host, Node
from infra.spec import Spec
from infra.topology.model import Plan, ScalableUnit, Server

__all__ = [
    "gpu_type",
    "gres_conf",
    "gres_counts",
    "hostlist",
    "mig_type",
    "node_hardware",
    "nodes_conf",
    "real_memory_mib",
    "topology_conf",
]

_DIGITS = re.compile(r"[0-9]+")
TOP_SWITCH = "compute-top"
# RealMemory share of the installed memory: the OS sees 1-3 % less than the DIMMs hold, and a
# node whose memory falls short of RealMemory is drained, so leave the OS some headroom.
REAL_MEMORY_SHARE = 0.95


# --- hostlists -------------------------------------------------------------------------------


def _split(name: str, index: int) -> tuple[str, str, str]:
    """(prefix, digits, suffix): the rightmost digit run whose value is ``index``."""
    for m in reversed(list(_DIGITS.finditer(name))):
        if int(m.group()) == index:
            return name[: m.start()], m.group(), name[m.end() :]
    return name, "", ""


def _extends(run: tuple[str, str, int], prefix: str, digits: str, n: int) -> bool:
    """Whether name (prefix, digits) with index ``n`` continues ``run`` in Slurm's rule."""
    same = run[0] == prefix and n == run[2] + 1
    return same and str(n).zfill(len(run[1])) == digits


def _runs(servers: Iterable[tuple[str, int]]) -> list[tuple[str, list[str]]]:
    """Maximal runs Slurm expands back exactly and in order: (prefix, range texts).

    A bare name is (name, []). Only names their index ends form ranges (Slurm's
    ``prefix[ranges]``, module docstring); any other name stands alone. A run joins the
    bracket before it only when that one is the previous entry with the same prefix, so the
    expansion keeps the order given (``NodeAddr=`` lists addresses in that order).
    """
    out: list[tuple[str, list[str]]] = []
    run: tuple[str, str, int] | None = None  # prefix, first digits, last value

    def close() -> None:
        if run is None:
            return
        p, first, last = run
        text = first if int(first) == last else f"{first}-{str(last).zfill(len(first))}"
        if out and out[-1][1] and out[-1][0] == p:
            out[-1][1].append(text)
        else:
            out.append((p, [text]))

    for name, index in servers:
        prefix, digits, suffix = _split(name, index)
        if not digits or suffix:
            close()
            run = None
            out.append((name, []))
        elif run is not None and _extends(run, prefix, digits, index):
            run = (prefix, run[1], index)
        else:
            close()
            run = (prefix, digits, index)
    close()
    return out


def hostlist(servers: Iterable[Server]) -> str:
    """A Slurm hostlist expression naming exactly ``servers`` (in the order given).

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class S:
    ...     name: str
    ...     index: int
    >>> hostlist([S("dgx001", 1), S("dgx002", 2), S("dgx004", 4)])  # type: ignore[list-item]
    'dgx[001-002,004]'
    >>> hostlist([S("n9", 9), S("n10", 10), S("n11", 11)])  # type: ignore[list-item]
    'n[9-11]'
    >>> hostlist([S("dgx001-ib", 1), S("dgx002-ib", 2)])  # type: ignore[list-item]
    'dgx001-ib,dgx002-ib'
    """
    parts = []
    for prefix, texts in _runs((s.name, s.index) for s in servers):
        if not texts:
            parts.append(prefix)
        elif len(texts) == 1 and "-" not in texts[0]:
            parts.append(f"{prefix}{texts[0]}")
        else:
            parts.append(f"{prefix}[{','.join(texts)}]")
    return ",".join(parts)


# --- topology.conf ---------------------------------------------------------------------------


def _leaf_domains(plan: Plan) -> list[tuple[str, int | None, list[Server]]]:
    """(switch name, pod, servers) of the lowest level: SUs, or leaves when not rail-optimized."""
    by_name = {s.name: s for s in plan.servers}
    switches = {w.name: w for w in plan.switches_in("compute", "leaf")}
    rails = {w.rail for w in switches.values()}
    if rails == {None} and any(len(su.leaves) > 1 for su in plan.sus):
        first_leaf: dict[str, str] = {}
        for c in plan.cables_in("compute", "node_leaf"):
            first_leaf.setdefault(c.a, c.b)
        members: dict[str, list[Server]] = {}
        for server in plan.servers:
            if server.name in first_leaf:
                members.setdefault(first_leaf[server.name], []).append(server)
        return [(leaf, switches[leaf].pod, group) for leaf, group in members.items()]
    return _merge_shared_leaves(plan, by_name)


def _merge_shared_leaves(
    plan: Plan, by_name: dict[str, Server]
) -> list[tuple[str, int | None, list[Server]]]:
    """SU domains; SUs cabled to the very same leaves (a one-switch lab) are one domain.

    Every node group fills its own SUs, so a small fabric whose groups share one leaf switch
    has several SUs but one switch: Slurm must see that switch, not a top switch that does not
    exist above per-SU "leaves". A merged domain is named after its leaf when it has one.
    """
    merged: dict[tuple[tuple[str, ...], int | None], list[ScalableUnit]] = {}
    for su in plan.sus:
        merged.setdefault((tuple(sorted(su.leaves)) or (su.name,), su.pod), []).append(su)
    domains = []
    for (leaves, pod), sus in merged.items():
        name = leaves[0] if len(sus) > 1 and len(leaves) == 1 else sus[0].name
        servers = [by_name[n] for su in sus for n in su.servers]
        domains.append((name, pod, servers))
    return domains


def topology_conf(plan: Plan) -> str:
    """Slurm ``topology/tree`` configuration of the compute fabric.

    Every server appears exactly once, on the lowest level. Needs ``TopologyPlugin=
    topology/tree`` in slurm.conf.
    """
    domains = _leaf_domains(plan)
    by_su = all(name in {su.name for su in plan.sus} for name, _, _ in domains)
    why = (
        [
            "# Leaf domain = scalable unit: on a rail-optimized fabric NIC r of every server of",
            "# an SU is cabled to leaf (SU, r), so all servers of an SU are one switch hop apart",
            "# on every rail; cross-SU traffic goes through spines (and cores: pods).",
        ]
        if by_su
        else ["# Leaf domain = leaf switch: the fabric is not rail-optimized (whole servers)."]
        if len(plan.switches_in("compute", "leaf")) > 1
        else ["# The compute fabric is one leaf switch: every server hangs off it."]
    )
    lines = [
        f"# topology.conf for {plan.name}: generated by railplan from the plan; do not edit.",
        "# slurm.conf: TopologyPlugin=topology/tree",
        *why,
        "# Servers outside the compute fabric: one switch per node group, joined to nothing.",
    ]
    lines += [f"SwitchName={name} Nodes={hostlist(servers)}" for name, _, servers in domains]
    pods = sorted({pod for _, pod, _ in domains if pod is not None})
    if pods:
        for pod in pods:
            children = [name for name, p, _ in domains if p == pod]
            lines.append(f"SwitchName=compute-pod{pod:02d} Switches={','.join(children)}")
        lines.append(
            f"SwitchName={TOP_SWITCH} Switches={','.join(f'compute-pod{p:02d}' for p in pods)}"
        )
    elif len(domains) > 1:  # one leaf domain is the whole fabric: no top switch above it
        lines.append(f"SwitchName={TOP_SWITCH} Switches={','.join(n for n, _, _ in domains)}")
    loose = [s for s in plan.servers if s.su is None]
    for group, servers in groupby(loose, key=lambda s: s.group):
        lines.append(f"SwitchName={group} Nodes={hostlist(servers)}")
    return "\n".join(lines) + "\n"


# --- GRES ------------------------------------------------------------------------------------


def gpu_type(gpu: Gpu) -> str:
    """Slurm GRES type of a whole GPU: the model token of its NVML name (``a100``, ``h100``).

    slurmd's NVML autodetect names a GPU after its NVML device name, lower case with ``_``
    for spaces (``nvidia_a100-sxm4-80gb``); a configured type matches by substring.
    """
    return gpu.name.lower().removeprefix("nvidia ").replace("-", " ").split()[0]


def mig_type(gpu: Gpu, profile: str) -> str:
    """Slurm GRES type of a MIG device, as slurmd's NVML autodetect builds it.

    slurmd (``src/plugins/gpu/nvml/gpu_nvml.c``, ``_handle_mig``) names a MIG device
    ``<device name up to its first '-'>_<slices>g.<memory MiB / 1024, rounded>gb``, lower
    case with ``_`` for spaces, so an A100-80GB ``4g.40gb`` (39.25 GiB) is
    ``nvidia_a100_4g.39gb`` and the type here is ``a100_4g.39gb``.
    """
    base = gpu.name.split("-", 1)[0].lower().removeprefix("nvidia ").replace(" ", "_")
    spec = gpu.mig.profile(profile) if gpu.mig else None
    if spec is None:
        return f"{base}_{profile}"
    return f"{base}_{spec.compute_slices}g.{math.floor(spec.memory_gib + 0.5)}gb"


def gres_counts(server: Server, spec: Spec, catalog: Catalog) -> dict[str, int]:
    """GPU GRES per Slurm type on ``server``: whole GPUs plus MIG devices of each layout."""
    gpu = catalog.node_gpu(server.node)
    counts: dict[str, int] = {}
    for layout in server.mig:
        if layout is None:
            counts[gpu_type(gpu)] = counts.get(gpu_type(gpu), 0) + 1
            continue
        for profile, n in sorted(spec.mig_layouts[layout].profiles.items()):
            if n:
                key = mig_type(gpu, profile)
                counts[key] = counts.get(key, 0) + n
    return dict(sorted(counts.items()))


def _gres_text(counts: dict[str, int]) -> str:
    return ",".join(f"gpu:{t}:{n}" for t, n in counts.items())


def _by_layout(plan: Plan) -> list[tuple[str, tuple[str | None, ...], list[Server]]]:
    """Servers by (node group, MIG layout per GPU), in plan order."""
    groups: dict[tuple[str, tuple[str | None, ...]], list[Server]] = {}
    for s in plan.servers:
        groups.setdefault((s.group, s.mig), []).append(s)
    return [(group, mig, servers) for (group, mig), servers in groups.items()]


def gres_conf(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    """gres.conf: explicit device files for whole GPUs, NVML autodetection for MIG nodes."""
    lines = [
        f"# gres.conf for {plan.name}: generated by railplan from the plan; do not edit.",
        "# Whole-GPU nodes: explicit device files. MIG nodes: AutoDetect=nvml, which SchedMD",
        "# documents for MIG (https://slurm.schedmd.com/gres.html#MIG_Management): slurmd finds",
        "# the MIG devices and their /dev/nvidia-caps files itself; partition the GPUs first",
        "# (mig-parted), Slurm does not. Check the types with slurmd's debug2 'MIG Profile'.",
    ]
    for group, _, servers in _by_layout(plan):
        nodes = hostlist(servers)
        counts = gres_counts(servers[0], spec, catalog)
        if plan.groups[group].mig.now.splits:  # Slurm has no MIG schedule (lint RP016)
            lines.append(f"# {group}: MIG, expects Gres={_gres_text(counts)}")
            lines.append(f"NodeName={nodes} AutoDetect=nvml")
            continue
        node = catalog.nodes[servers[0].node]
        kind = gpu_type(catalog.node_gpu(servers[0].node))
        for first, last, cores in _core_runs(node):
            devices = f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"
            where = f" Cores={cores}" if cores else ""
            lines.append(
                f"NodeName={nodes} AutoDetect=off Name=gpu Type={kind} File={devices}{where}"
            )
    return "\n".join(lines) + "\n"


def _core_runs(node: Node) -> list[tuple[int, int, str]]:
    """(first GPU, last GPU, local cores) runs of consecutive GPUs sharing their cores.

    Without sourced affinity (``gpu_cores`` empty) one run covers every GPU with no cores,
    and gres.conf then leaves Cores= out: any core may drive any GPU.
    """
    cores = node.gpu_cores or ("",) * node.gpus
    runs: list[tuple[int, int, str]] = []
    for index, local in enumerate(cores):
        if runs and runs[-1][2] == local:
            runs[-1] = (runs[-1][0], index, local)
        else:
            runs.append((index, index, local))
    return runs


# --- slurm.conf node lines ---------------------------------------------------------------------


def _features(server: Server, pods: dict[str, int | None]) -> list[str]:
    """Node features: group, SU, rack and pod (``-`` becomes ``_``, like Ansible groups)."""
    features = [server.group]
    if server.su is not None:
        features.append(f"su_{server.su.replace('-', '_')}")
    if server.rack is not None:
        features.append(f"rack_{server.rack.replace('-', '_')}")
    pod = pods.get(server.su or "")
    if pod is not None:
        features.append(f"pod_{pod}")
    return features


def nodes_conf(plan: Plan, spec: Spec, catalog: Catalog) -> str:
    """slurm.conf ``NodeName=`` lines, per (group, SU, rack).

    Addresses, the host's CPUs and memory, GRES counts per type and features.
    """
    pods = {su.name: su.pod for su in plan.sus}
    lines = [
        f"# slurm.conf node lines for {plan.name}: generated by railplan; do not edit.",
        (
            "# CPUs, sockets, cores and threads are the catalog's; RealMemory is"
            f" {REAL_MEMORY_SHARE:.0%} of the installed"
        ),
        "# memory (the kernel and firmware keep some, and slurmd drains a node that reports less",
        "# than RealMemory). Compare with `slurmd -C` on one node of each group.",
    ]
    groups: dict[tuple[str, str | None, str | None, tuple[str | None, ...]], list[Server]] = {}
    for s in plan.servers:
        groups.setdefault((s.group, s.su, s.rack, s.mig), []).append(s)
    for servers in groups.values():
        counts = gres_counts(servers[0], spec, catalog)
        features = ",".join(_features(servers[0], pods))
        hardware = node_hardware(catalog.nodes[servers[0].node].host)
        lines.append(
            f"NodeName={hostlist(servers)}{_node_addr(servers)} {hardware} "
            f"Gres={_gres_text(counts)} Features={features}"
        )
    return "\n".join(lines) + "\n"


def _node_addr(servers: list[Server]) -> str:
    """`` NodeAddr=`` with each server's management address, in NodeName's order.

    So slurmctld and slurmd reach a node without DNS or /etc/hosts knowing its name.
    """
    addresses = [s.mgmt_ip for s in servers]
    if any(a is None for a in addresses):
        return ""
    return " NodeAddr=" + ",".join(a for a in addresses if a is not None)


def real_memory_mib(host: Host) -> int:
    """Slurm ``RealMemory`` (MiB): `REAL_MEMORY_SHARE` of the installed memory."""
    return int(host.memory_gib * 1024 * REAL_MEMORY_SHARE)


def node_hardware(host: Host) -> str:
    """The CPU and memory part of a ``NodeName=`` line."""
    return (
        f"CPUs={host.cpus} Sockets={host.sockets} CoresPerSocket={host.cores_per_socket} "
        f"ThreadsPerCore={host.threads_per_core} RealMemory={real_memory_mib(host)}"
    )
