"""Rules about power feeds: a node's PSU redundancy against the feeds its rack class gives it.

railplan plans a rack's PDUs on alternating feeds A and B (`infra.topology.racks`), so a rack
class with one PDU has one feed. The node catalog records each node's power supplies, their
rating and how many carry the node at full load (N of N+M), with sources.
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups
from infra.wording import plural


@rule(
    "RP059",
    "single-power-feed",
    Severity.WARNING,
    "A rack class has one power feed, so a feed loss powers off nodes built for PSU redundancy.",
)
def single_power_feed(ctx: LintContext) -> Iterator[Violation]:
    """Nodes with redundant power supplies should stand in racks with two feeds.

    Why: a DGX H100 has six 3.3 kW PSUs of which four carry it (4+2), a DGX A100 six 3 kW
    PSUs in 3+3 (catalog `dgx-h100-power`, `dgx-a100-power`: copies of the DGX user guides).
    That redundancy covers a failed PSU; it covers a failed feed only when the PSUs are spread
    over two feeds. railplan puts a rack's PDUs on alternating feeds A and B, so a rack class
    with `pdus: 1` has feed A only, and losing it powers off every node in the rack at once.
    Not checked: with two feeds a DGX H100's PSUs split 3 + 3, and three 3.3 kW PSUs (9.9 kW)
    are below its 10.2 kW maximum, so after a feed loss it cannot draw its maximum (how the
    node then limits its power was not verified); the spec cannot give a third feed, so
    railplan does not report what the spec cannot fix.
    Fix: give the rack class at least two PDUs (`pdus: 2` or more).
    """
    site = ctx.loaded.spec.site
    default_pdus = int(ctx.catalog.site["pdu_per_rack_default"])
    for _, group, node, _ in known_groups(ctx):
        rack = site.rack_class(group.rack_class)
        pdus = default_pdus if rack.pdus is None else rack.pdus
        if pdus != 1 or node.psus is None or node.psus_needed is None:
            continue  # pdus: 0 plans no PDUs at all (the site powers racks its own way)
        redundancy = f"{node.psus_needed}+{node.psus - node.psus_needed}"
        name = group.rack_class or "default"
        yield Violation(
            "site.rack.pdus" if name == "default" else f"site.rack_classes.{name}.pdus",
            f"rack class {name!r} has 1 PDU, so one power feed (A): losing it powers off "
            f"node group {group.name!r} ({plural(group.count, 'node')} of {node.name}, "
            f"{node.psus} × {node.psu_kw:g} kW PSUs in {redundancy}), whose PSU redundancy "
            "covers a PSU failure, not a feed loss",
            "give the rack class pdus: 2 or more (PDUs alternate feeds A and B)",
        )
