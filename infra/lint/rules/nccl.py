"""Rules about NCCL: the features a spec asks for, or its budgets rely on, against its version.

The feature gates are `infra.catalog.nccl` (CollNet 2.7.3, NVLS 2.17.1, NVLS with IB SHARP
2.18.1, each with its source). A spec asks for SHARP with `fabrics.compute.sharp`; it cannot
ask for NVLS (NCCL enables NVLS by itself on Hopper NVSwitch nodes). Budgets are predicted with
the algorithms the spec's NCCL has; the rule says when a newer one would be faster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace

from infra.budget.cluster import BudgetError, comm_topology, sharp_usable
from infra.budget.collectives import CommTopology, predict
from infra.catalog.drivers import comparable
from infra.catalog.nccl import NCCL_FEATURES, nccl_has
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups
from infra.spec.budgets import Budget


def _feature_of(algorithm: str, topo: CommTopology) -> str | None:
    """The NCCL feature an algorithm of the performance model needs (None: any NCCL)."""
    if algorithm.startswith("collnet"):
        return "collnet"
    if algorithm == "nvls" and topo.nodes == 1:
        return "nvls"
    if algorithm in ("nvls", "nvls_tree"):  # across nodes: added with NVLS + IB SHARP
        return "nvls_ib_sharp"
    return None


def _feature_forgone(ctx: LintContext, i: int, budget: Budget) -> tuple[str, str] | None:
    """What a newer NCCL would buy an all-reduce budget: ``(feature, why)``, or None.

    The feature is one the newest NCCL would predict the budget with and the spec's lacks.

    The performance model only chooses algorithms the spec's NCCL has, so the budget's own
    prediction is honest; this says what a newer NCCL would buy.
    """
    if budget.kind not in ("all_reduce", "sharp_gain"):
        return None
    b = getattr(budget, budget.kind)
    try:
        topo = comm_topology(ctx.loaded.spec, ctx.catalog, b.gpus, group=b.group)
    except BudgetError:
        return None  # RP061 or RP062 reports why the budget cannot be evaluated
    now = predict(topo, "all_reduce", b.bytes)
    newest = predict(replace(topo, nccl=CommTopology.nccl), "all_reduce", b.bytes)
    feature = _feature_of(newest.algorithm, topo)
    if feature is None or nccl_has(topo.nccl, feature) or newest.time_us >= now.time_us:
        return None
    why = (
        f"budgets[{i}].{budget.kind} would run "
        f"{newest.algorithm} with it: {newest.time_us / 1000:.3g} ms instead of "
        f"{now.time_us / 1000:.3g} ms ({now.algorithm})"
    )
    return feature, why


def _needs(ctx: LintContext) -> dict[str, list[tuple[str, Severity]]]:
    """Feature -> (why the spec needs it, how bad its absence is), over the whole spec."""
    needs: dict[str, list[tuple[str, Severity]]] = defaultdict(list)
    spec = ctx.loaded.spec
    groups = list(known_groups(ctx))
    if sharp_usable(spec, ctx.catalog) and any(node.compute_hcas for _, _, node, _ in groups):
        needs["collnet"].append(("fabrics.compute.sharp enables SHARP", Severity.ERROR))
        nvls_capable = sorted(
            g.name
            for _, g, node, gpu in groups
            if gpu.architecture == "hopper" and node.nvswitches and node.compute_hcas
        )
        if nvls_capable and nccl_has(spec.software.nccl, "collnet"):
            groups_text = "node group" + ("s " if len(nvls_capable) > 1 else " ")
            why = (
                f"SHARP on NVSwitch Hopper nodes ({groups_text}{', '.join(nvls_capable)}) "
                "runs through CollNet only without it"
            )
            needs["nvls_ib_sharp"].append((why, Severity.WARNING))
    for i, budget in enumerate(spec.budgets):
        forgone = _feature_forgone(ctx, i, budget)
        if forgone:
            needs[forgone[0]].append((forgone[1], Severity.WARNING))
    return needs


@rule(
    "RP034",
    "nccl-feature-missing",
    Severity.ERROR,
    "The NCCL version lacks a feature the spec enables or its budgets are predicted with.",
)
def nccl_feature_missing(ctx: LintContext) -> Iterator[Violation]:
    """`software.nccl` must have the NCCL features the spec relies on.

    Why: SHARP reaches NCCL through the CollNet algorithm, first in NCCL 2.7.3 ("NCCL version
    2.7.3 or higher", NVIDIA SHARP docs); NVLink SHARP (NVLS) inside a node came with 2.17.1,
    and NVLS across nodes (NVLS with IB SHARP, and NVLSTree) with 2.18.1 (NCCL release notes;
    `infra.catalog.nccl`). An older NCCL silently runs ring or tree instead: SHARP switches
    sit idle. An error when SHARP is enabled; a warning when only NVLS with IB SHARP is
    missing on SHARP-enabled Hopper NVSwitch nodes (CollNet still works), and when an
    all-reduce budget would be faster with a newer NCCL's algorithm (the message gives both
    predicted times; budgets are predicted with the algorithms the spec's NCCL has).
    Fix: raise `software.nccl` to the version the message names (or later), or drop the
    feature (`sharp: false`).
    """
    version = ctx.loaded.spec.software.nccl
    if not comparable(version):
        return  # no release has such a version; the schema bounds versions
    for feature, reasons in _needs(ctx).items():
        gate = NCCL_FEATURES[feature]
        if nccl_has(version, feature):
            continue
        worst = Severity.ERROR if any(s is Severity.ERROR for _, s in reasons) else None
        yield Violation(
            "software.nccl",
            f"NCCL {version} lacks {gate.what} (NCCL >= {gate.minimum}): "
            + "; ".join(why for why, _ in reasons),
            f"use NCCL {gate.minimum} or later",
            worst or Severity.WARNING,
        )
