"""Regimes of the error bands: which published rows' residuals describe a prediction.

A prediction's band comes from the held-out rows of its regime (`infra.budget.bands`). A
regime is a tuple of labelled fields, finest first; when the finest has too few held-out rows
the band falls back to a coarser one, down to every row. Both the table generator
(`tools.accuracy.band_table`, which reads the published rows) and the runtime (which classifies
a request) call these functions, so a row and a request that describe the same thing land in
the same regime.

Collectives: collective x size class x node-count class x fabric. Training: software stack x
ZeRO stage group x parallelism shape x GPU generation. ZeRO stages 0 and 1 are one group:
Megatron's distributed optimizer (stage 1) moves the same bytes as stage 0's all-reduce, as a
reduce-scatter and an all-gather (Rajbhandari et al. 2020, ZeRO, §5.1).

>>> collective_levels("all_reduce", 2**30, 2, "ib")[0]
'all_reduce, large, 2 nodes, ib'
>>> training_levels("megatron-2021", 0, 8, 8, 1, "ampere")[1]
'megatron, ZeRO 0-1, TP+PP, ampere'
"""

from __future__ import annotations

__all__ = [
    "LARGE_BYTES",
    "SMALL_BYTES",
    "collective_family",
    "collective_levels",
    "fabric_of",
    "node_class",
    "scaling_levels",
    "shape_of",
    "size_class",
    "stack_family",
    "training_levels",
    "zero_group",
]

LARGE_BYTES = 256 * 2**20
"""Messages from here on are "large": the bandwidth plateau nccl-tests reports."""
SMALL_BYTES = 64 * 2**10
"""Messages up to here are "small": latency dominates."""


def size_class(nbytes: int) -> str:
    """``small`` (<= 64 KiB), ``large`` (>= 256 MiB) or ``medium``."""
    return "large" if nbytes >= LARGE_BYTES else "small" if nbytes <= SMALL_BYTES else "medium"


def node_class(nodes: int) -> str:
    """``1 node``, ``2 nodes``, ``3-8 nodes`` or ``9+ nodes``."""
    if nodes <= 2:
        return "1 node" if nodes == 1 else "2 nodes"
    return "3-8 nodes" if nodes <= 8 else "9+ nodes"


def fabric_of(nodes: int, sharp: bool, efa: bool) -> str:
    """``nvlink`` inside one node; between nodes ``efa``, ``ib-sharp`` or ``ib``.

    RoCE rows count as ``ib``: NCCL's IB transport drives both, with the same model.
    """
    if nodes <= 1:
        return "nvlink"
    if efa:
        return "efa"
    return "ib-sharp" if sharp else "ib"


def collective_family(collective: str) -> str:
    """``all_reduce`` (most rows), or ``other`` for the rest."""
    return "all_reduce" if collective == "all_reduce" else "other"


def collective_levels(collective: str, nbytes: int, nodes: int, fabric: str) -> list[str]:
    """The regimes of a collective prediction, finest first, ending with every row."""
    coll, size, where = collective_family(collective), size_class(nbytes), node_class(nodes)
    return [
        f"{coll}, {size}, {where}, {fabric}",
        f"{size}, {where}, {fabric}",
        f"{size}, {fabric}",
        fabric,
        size,
        "all rows",
    ]


def zero_group(zero: int) -> str:
    """``ZeRO 0-1`` (the same bytes), ``ZeRO 2`` or ``ZeRO 3``."""
    return "ZeRO 0-1" if zero <= 1 else f"ZeRO {zero}"


def shape_of(tp: int, pp: int, cp: int) -> str:
    """Which kinds of model parallelism a layout uses: ``TP+PP``, ``TP``, ``CP`` ..., or ``DP``."""
    kinds = [k for k, n in (("TP", tp), ("CP", cp), ("PP", pp)) if n > 1]
    return "+".join(kinds) or "DP"


def stack_family(stack: str) -> str:
    """``megatron`` for Megatron-LM and the stacks built on it (Megatron-Core, NeMo), else the name."""
    return "megatron" if stack.split("-")[0] in ("megatron", "nemo") else stack


def training_levels(stack: str, zero: int, tp: int, pp: int, cp: int, arch: str) -> list[str]:
    """The regimes of a training prediction, finest first, ending with every row."""
    zero_label, shape = zero_group(zero), shape_of(tp, pp, cp)
    return [
        f"{stack}, {zero_label}, {shape}, {arch}",
        f"{stack_family(stack)}, {zero_label}, {shape}, {arch}",
        f"{zero_label}, {shape}, {arch}",
        f"{zero_label}, {arch}",
        arch,
        "all rows",
    ]


def scaling_levels(stack: str, zero: int, tp: int, pp: int, cp: int, arch: str) -> list[str]:
    """The regimes of a scaling-efficiency prediction (fewer rows: no stack levels)."""
    levels = training_levels(stack, zero, tp, pp, cp, arch)
    return [levels[2], levels[3], levels[4], levels[5]]
