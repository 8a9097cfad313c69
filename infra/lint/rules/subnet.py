"""Rules about the compute fabric's subnet manager: engines and SHARP per SM build, GUID inputs.

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
from infra.spec.models import UPSTREAM_ENGINES

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
    Fix: set `fabrics.compute.routing_engine` to `auto` (ar_updn on NVIDIA's SM, else updn)
    or one of the four.
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


@rule(
    "RP081",
    "routing-engine-not-in-sm",
    Severity.ERROR,
    "The routing engine is one the chosen subnet manager does not have.",
)
def routing_engine_not_in_sm(ctx: LintContext) -> Iterator[Violation]:
    """The distributions' OpenSM has no adaptive-routing (`ar_*`) or Dragonfly+ engines.

    Why: linux-rdma OpenSM 3.3 (Debian/Ubuntu/RHEL `opensm`) knows minhop, updn, dnup, file,
    ftree, lash, dor, torus-2QoS, nue, dfsssp and sssp (opensm(8), -R); `ar_updn`, `ar_ftree`
    and `dfp` exist only in NVIDIA's OpenSM (DOCA-Host/MLNX_OFED, UFM). Given another name,
    OpenSM 3.3.23 logs "cannot find or setup routing engine 'ar_updn'" and routes with
    minhop, which on a fat tree is not deadlock-free up/down routing.
    Fix: `routing_engine: updn` (or ftree, or auto), or `subnet_manager: nvidia-opensm`/`ufm`.
    """
    compute = ctx.loaded.spec.fabrics.compute
    if compute is None or compute.subnet_manager != "opensm" or compute.routing_engine == "auto":
        return
    if compute.routing_engine not in UPSTREAM_ENGINES:
        yield Violation(
            "fabrics.compute.routing_engine",
            f"the distributions' OpenSM (subnet_manager: opensm) has no routing engine "
            f"{compute.routing_engine}: it would fall back to minhop",
            "set routing_engine: updn (or auto), or subnet_manager: nvidia-opensm for NVIDIA's "
            "OpenSM with adaptive routing",
        )


@rule(
    "RP082",
    "sharp-needs-nvidia-sm",
    Severity.ERROR,
    "SHARP is enabled with the distributions' OpenSM, which cannot enable it.",
)
def sharp_needs_nvidia_sm(ctx: LintContext) -> Iterator[Violation]:
    """SHARP's Aggregation Manager works with NVIDIA's subnet manager, not upstream OpenSM.

    Why: the upstream OpenSM 3.3 configuration has no SHARP key at all (`opensm -c` of
    3.3.23 writes none), while NVIDIA's OpenSM enables SHARP on the switches (UFM-SDN
    Command Reference, "SHARP Configuration in OpenSM") and SHARP's guide requires its
    OpenSM ("Setting up NVIDIA SHARP Environment"). With the distribution's build sharp_am
    finds no SHARP-enabled switch and NCCL's CollNet falls back to the plain network.
    Fix: `subnet_manager: nvidia-opensm` (DOCA-Host/MLNX_OFED) or `ufm`, or `sharp: false`.
    """
    compute = ctx.loaded.spec.fabrics.compute
    if compute is not None and compute.sharp and compute.subnet_manager == "opensm":
        yield Violation(
            "fabrics.compute.subnet_manager",
            "SHARP needs NVIDIA's subnet manager; the distributions' OpenSM cannot enable it",
            "set subnet_manager: nvidia-opensm (or ufm), or sharp: false",
        )


@rule(
    "RP083",
    "guids-unknown-name",
    Severity.ERROR,
    "fabrics.compute.guids names a device the plan does not have, or a wrong GUID count.",
)
def guids_unknown_name(ctx: LintContext) -> Iterator[Violation]:
    """Each GUID entry must name a planned compute switch (one GUID) or server (one per rail).

    Why: the GUIDs become OpenSM's root GUID file, partition members and the SM's pinned
    port; a misspelt name would silently leave a switch out of the roots or a server out of
    its partition, and a server with too few GUIDs would lose rails from its partition.
    Fix: use the names of `railplan plan` (cabling.csv) and one GUID per compute HCA.
    """
    compute = ctx.loaded.spec.fabrics.compute
    plan = ctx.plan
    if compute is None or plan is None or not compute.guids:
        return
    switches = {s.name for s in plan.switches_in("compute")}
    servers = {s.name: len(s.hcas) for s in plan.servers}
    for name, guids in sorted(compute.guids.items()):
        expected = 1 if name in switches else servers.get(name)
        if expected is None:
            yield Violation(
                f"fabrics.compute.guids.{name}",
                f"{name} is neither a compute switch nor a server of the plan",
                "use a name from cabling.csv",
            )
        elif len(guids) != expected:
            yield Violation(
                f"fabrics.compute.guids.{name}",
                f"{name} has {len(guids)} GUIDs, expected {expected}",
                "a switch takes its node GUID, a server one port GUID per compute HCA",
            )


@rule(
    "RP084",
    "nvidia-sm-needs-nvidia-stack",
    Severity.ERROR,
    "NVIDIA's OpenSM is chosen but no NVIDIA RDMA stack (DOCA-Host or MLNX_OFED) installs it.",
)
def nvidia_sm_needs_nvidia_stack(ctx: LintContext) -> Iterator[Violation]:
    """`subnet_manager: nvidia-opensm` needs `software.doca` or `software.ofed`.

    Why: NVIDIA's OpenSM (with the `ar_*` engines and SHARP) ships in the DOCA-Host and
    MLNX_OFED repositories; the rdma role installs it from there (`opensmd`). Without either
    (`doca: null` and no `ofed`), the role installs the distribution's OpenSM under the same
    package name, which has neither adaptive routing nor SHARP (RP081, RP082), and the
    rendered configuration names an engine it lacks.
    Fix: keep `software.doca` (its default) or set `software.ofed`, or choose
    `subnet_manager: opensm`.
    """
    spec = ctx.loaded.spec
    compute = spec.fabrics.compute
    if compute is None or compute.subnet_manager != "nvidia-opensm":
        return
    if not spec.software.doca and not spec.software.ofed:
        yield Violation(
            "fabrics.compute.subnet_manager",
            "NVIDIA's OpenSM comes with DOCA-Host or MLNX_OFED, and the spec installs neither "
            "(software.doca and software.ofed are unset)",
            'set software.doca (e.g. "2.7.0"), or subnet_manager: opensm',
        )
