"""The plan's compute fabric as an ibsim netlist: a fabric twin to run OpenSM and discovery on.

`ibsim_netlist(plan)` returns ``files/fabric/ibsim.net``: one ``Switch``/``Hca``
record per device of the InfiniBand compute fabric and one port line per cable end, in the
topology-file format ibsim(1) (package ``ibsim-utils``) reads. Switches are named as the plan
names them and have their radix (unused ports stay Down/Polling, as on a real leaf);
each HCA is a one-port node named ``<host> <device>`` (``dgx001 mlx5_0``), the
NodeDescription rdma-ndd sets by default, so ``railplan verify`` reads the twin's discovery
dumps as it reads a real fabric's. Each port line carries the planned link rate after ``#``
(``lid 0 4xHDR``, parsed by ibsim's ``parse_port_link_width_and_speed``); without it the
simulated links come up 4x SDR. ibsim knows HDR since 0.8 and NDR since 0.11 (Debian
bookworm ships 0.10: it warns ``invalid speed`` and brings 4xNDR links up as 4x SDR, which
``railplan verify`` then reports as degraded). Pure: no files, no processes.

Source: ibsim ``ibsim/sim_net.c`` (linux-rdma/ibsim: ``Switch <ports> "<name>"``,
``Hca <ports> "<name>"``, ``[<port>] "<remote>"[<remote port>]``, the ``# ... lid N 4xHDR``
tail, the ``-N``/``-S``/``-P`` size limits, 2048 nodes, 256 switches, 13312 ports by default).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from infra.topology.model import Cable, Plan

__all__ = ["hca_node", "ibsim_netlist", "link_rate", "sim_limits"]

# 4x lane rates ibsim can enable, in Gb/s per lane (IBTA names, as ibnetdiscover prints them).
_LANE_SPEEDS: tuple[tuple[float, str], ...] = (
    (2.5, "SDR"),
    (5.0, "DDR"),
    (10.0, "QDR"),
    (25.0, "EDR"),
    (50.0, "HDR"),
    (100.0, "NDR"),
)


_UNSAFE = re.compile(r'["\[\]\n#]')


def hca_node(server: str, device: str) -> str:
    """The twin's name of a server's HCA: ``<host> <device>``, rdma-ndd's default ``%h %d``."""
    return f"{server} {device}"


def link_rate(gbps: float) -> str:
    """The ibsim rate of a planned cable: ``4xHDR`` for 200 Gb/s, the slowest 4x that carries it."""
    for lane, name in _LANE_SPEEDS:
        if 4 * lane >= gbps:
            return f"4x{name}"
    return "4xNDR"


def _checked(name: str) -> str:
    # a quote or newline would end the quoted node name and corrupt the record
    if _UNSAFE.search(name):
        raise ValueError(f"name {name!r} cannot be written to an ibsim netlist")
    return name


def _links(
    plan: Plan, cables: Sequence[Cable] | None = None
) -> dict[str, list[tuple[int, str, int, str]]]:
    """Node -> its (port, remote node, remote port, rate), both directions of every cable.

    A switch end is the switch and its port; any other end is the one-port HCA node
    ``<host> <device>`` (`hca_node`), its name checked once per host and device.
    ``cables``: the plan's compute cables, if already listed.
    """
    switches = {_checked(s.name) for s in plan.switches_in("compute")}
    links: dict[str, list[tuple[int, str, int, str]]] = defaultdict(list)
    numbers = _Numbers()  # a switch has tens of ports, a fabric a million cable ends
    rates = _Rates()
    safe: set[str] = set()
    for cable in plan.cables_in("compute") if cables is None else cables:
        a, b, a_text, b_text = cable.a, cable.b, cable.a_port, cable.b_port
        if a in switches:
            a_port = numbers[a_text]
        else:
            a, a_port = hca_node(a, a_text), 1
            if cable.a not in safe or a_text not in safe:  # a safe name has safe parts
                safe.update((_checked(a) and cable.a, a_text))
        if b in switches:
            b_port = numbers[b_text]
        else:
            b, b_port = hca_node(b, b_text), 1
            if cable.b not in safe or b_text not in safe:
                safe.update((_checked(b) and cable.b, b_text))
        gbps = rates[cable.gbps]
        links[a].append((a_port, b, b_port, gbps))
        links[b].append((b_port, a, a_port, gbps))
    return links


class _Numbers(dict[str, int]):
    """Port text -> its number, each converted once."""

    def __missing__(self, text: str) -> int:
        number = self[text] = int(text)
        return number


class _Rates(dict[float, str]):
    """Planned rate -> `link_rate`, each worked out once (a fabric has a rate or two)."""

    def __missing__(self, gbps: float) -> str:
        rate = self[gbps] = link_rate(gbps)
        return rate


def sim_limits(
    plan: Plan, links: dict[str, list[tuple[int, str, int, str]]] | None = None
) -> tuple[int, int, int]:
    """The ``ibsim -N nodes -S switches -P ports`` this netlist needs, never below the defaults.

    ``links``: the plan's `_links`, if already built (the netlist has them).
    """
    radix = {s.name: s.ports for s in plan.switches_in("compute")}
    nodes = _links(plan) if links is None else links
    switches = [radix[n] for n in nodes if n in radix]
    # ibsim allocates each node's ports in one table: a switch's port 0 too, an HCA's 1..n
    ports = sum(p + 1 for p in switches) + 2 * (len(nodes) - len(switches))
    need = (len(nodes), len(switches), ports)
    # ibsim's defaults (MAXNETNODES, MAXNETSWITCHES, MAXNETPORTS in ibsim/sim.h)
    return (max(need[0], 2048), max(need[1], 256), max(need[2], 13312))


def _header(plan: Plan, links: dict[str, list[tuple[int, str, int, str]]]) -> list[str]:
    nodes, switches, ports = sim_limits(plan, links)
    return [
        f"# ibsim netlist of {plan.name}'s compute fabric (a fabric twin), generated by railplan.",
        "# Switches by plan name at their radix; HCAs as '<host> <device>' (rdma-ndd's %h %d);",
        "# '# lid 0 4xHDR' sets the planned link rate (ibsim/sim_net.c; 4xNDR needs ibsim 0.11).",
        "# Run it, no hardware needed:",
        f"#   sleep inf | ibsim -s -N {nodes} -S {switches} -P {ports} ibsim.net &",
        "#   export SIM_HOST='<host> mlx5_0'   # the HCA the tools run on",
        "#   ibsim-run opensm -o -F opensm-<host>.conf   # one sweep; then discovery:",
        "#   (a UFM spec: subnet-manager/rehearsal-opensm.conf, the same SM for the twin)",
        "#   ibsim-run ibnetdiscover -p > fabric.txt && railplan verify SPEC fabric.txt",
        "",
        "",
    ]


def ibsim_netlist(plan: Plan, cables: Sequence[Cable] | None = None) -> str:
    """The netlist: switches first (by name), then HCAs; ports in order within each node.

    ``cables``: the plan's compute cables, if already listed.
    """
    links = _links(plan, cables)
    radix = {s.name: s.ports for s in plan.switches_in("compute")}
    head = "\n".join(_header(plan, links))
    records = []
    # switches first, then HCAs, each by name
    switches = sorted(n for n in links if n in radix)
    for node in switches:
        # a switch port's tail is '"<remote>" lid <remote lid> <rate>'; an HCA port's
        # starts with its own 'lid 0 lmc 0' (0: unassigned, the SM assigns LIDs)
        lines = [f'Switch\t{radix[node]} "{node}"']
        lines += [
            f'[{port}]\t"{remote}"[{remote_port}]\t\t# "{remote}" lid 0 {rate}'
            for port, remote, remote_port, rate in sorted(links.pop(node))
        ]
        records.append("\n".join(lines))
    for node in sorted(links):  # the HCAs: most have one cable, written in one go
        ends = links.pop(node)
        if len(ends) == 1:
            ((port, remote, remote_port, rate),) = ends
            records.append(
                f'Hca\t1 "{node}"\n'
                f'[{port}]\t"{remote}"[{remote_port}]\t\t# lid 0 lmc 0 "{remote}" lid 0 {rate}'
            )
            continue
        lines = [f'Hca\t1 "{node}"']
        lines += [
            f'[{port}]\t"{remote}"[{remote_port}]\t\t# lid 0 lmc 0 "{remote}" lid 0 {rate}'
            for port, remote, remote_port, rate in sorted(ends)
        ]
        records.append("\n".join(lines))
    if not records:
        return head + "\n"
    # one join, no copy after it: the netlist of a large fabric is tens of megabytes
    records[0] = head + records[0]
    records[-1] += "\n"
    return "\n\n".join(records)
