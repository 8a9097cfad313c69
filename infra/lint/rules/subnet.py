"""Rules about the compute fabric's subnet manager: its routing engine against SHARP and AR.

SHARP's prerequisites are the NVIDIA SHARP guide's "Setting up NVIDIA SHARP Environment"
list: a tree routing engine on fat trees, the Aggregation Manager on the master SM's host
(RP041) and the managed switches' on-board SM disabled (implied by `subnet_manager: ufm` or
`opensm`; the spec has no key for a switch's SM state, so the render says so instead).
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity

# "Make sure SHARP Aggregation Manager out-of-the-box subnets are configured with SM using the
# following routing engines: Tree based topologies: updn, ar_updn, ftree, ar_ftree" (NVIDIA
# SHARP Rev 3.3.0, Setting up NVIDIA SHARP Environment); railplan plans fat trees only.
SHARP_TREE_ENGINES = ("updn", "ar_updn", "ftree", "ar_ftree")


@rule(
    "RP080",
    "sharp-routing-engine",
    Severity.ERROR,
    "SHARP is enabled with a routing engine SHARP does not support on a fat tree.",
)
def sharp_routing_engine(ctx: LintContext) -> Iterator[Violation]:
    """With `sharp: true`, the subnet manager must route the fat tree with a tree engine.

    Why: the Aggregation Manager builds its reduction trees over the SM's routing; NVIDIA's
    SHARP guide ("Setting up NVIDIA SHARP Environment", https://docs.nvidia.com/networking/
    display/sharpv330/setting+up+nvidia+sharp+environment) requires updn, ar_updn,
    ftree or ar_ftree on tree-based topologies (dfp is for Dragonfly+, dor for hypercubes).
    With another engine (minhop, lash, dfsssp, ...) sharp_am finds no valid trees and SHARP
    jobs fall back to the plain network.
    Fix: set `fabrics.compute.routing_engine` to `auto` (ar_updn or updn) or one of the four.
    """
    compute = ctx.loaded.spec.fabrics.compute
    if compute is None or not compute.sharp or compute.routing_engine == "auto":
        return
    if compute.routing_engine not in SHARP_TREE_ENGINES:
        yield Violation(
            "fabrics.compute.routing_engine",
            f"SHARP on a fat tree needs a tree routing engine ({', '.join(SHARP_TREE_ENGINES)}), "
            f"not {compute.routing_engine}",
            "set routing_engine: auto (ar_updn where the switches support adaptive routing)",
        )
