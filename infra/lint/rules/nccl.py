"""Rules about NCCL: the features a spec asks for, or its budgets rely on, against its version.

The feature gates are `infra.catalog.nccl` (CollNet 2.7.3, NVLS 2.17.1, NVLS with IB SHARP
2.18.1, each with its source). A spec asks for SHARP with `fabrics.compute.sharp`; it cannot
ask for NVLS (NCCL enables NVLS by itself on Hopper NVSwitch nodes), but its collective budgets
are predicted with the algorithm NCCL would choose, which may be one its NCCL lacks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

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


def _predicted_algorithm(ctx: LintContext, budget: Budget) -> tuple[str, CommTopology] | None:
    """The all-reduce algorithm a collective budget is predicted with, and its topology."""
    spec, cat, b = ctx.loaded.spec, ctx.catalog, getattr(budget, budget.kind)
    try:
        if budget.kind in ("all_reduce", "sharp_gain"):
            topo = comm_topology(spec, cat, b.gpus, group=b.group)
            return predict(topo, "all_reduce", b.bytes).algorithm, topo
        if budget.kind == "scaling_efficiency":
            topo = comm_topology(spec, cat, b.gpus, group=b.group)
            nbytes = int(b.model_params * b.gradient_bytes)
            return predict(topo, "all_reduce", nbytes).algorithm, topo
    except BudgetError:
        return None  # RP061 or RP062 reports why the budget cannot be evaluated
    return None


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
        predicted = _predicted_algorithm(ctx, budget)
        feature = _feature_of(*predicted) if predicted else None
        if predicted and feature:
            needs[feature].append(
                (f"budgets[{i}].{budget.kind} is predicted with {predicted[0]}", Severity.ERROR)
            )
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
    sit idle and a budget predicted with NVLS or CollNet is optimistic. An error when SHARP is
    enabled or a budget's prediction uses the feature; a warning when only NVLS with IB SHARP
    is missing on SHARP-enabled Hopper NVSwitch nodes (CollNet still works).
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
