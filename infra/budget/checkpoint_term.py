"""The serialisation term of a checkpoint's time: what each writing node adds to the I/O.

Before a checkpoint's bytes reach a link, each writing node copies its tensors from GPU
memory to host memory and serialises them (``torch.save``'s pickling and zip framing, or a
checkpoint library's own), one stream at a time per file. Published saves show it:
torchsnapshot's benchmark took 32 s for ``torch.save`` of 20 GB from one rank on a p4d node
whose local disk took the same bytes in 3.4 s from eight; DeepSpeed's DeepNVMe blog charts
``torch.save`` at about 1 GB/s to NVMe that takes 11 GB/s. The term is one more stage in
`storage.checkpoint_estimate`: the writing nodes times a per-node serialisation rate, so the
time is set by it where few nodes write (a ``replica`` checkpoint, a small job) and by the
filesystem where many do. Its one constant, `SERIALISATION_GBPS_PER_NODE`, is fitted on the
fit half of ``tests/data/checkpoint-measurements.yaml`` (`fit_rate`; a test refits it); it
lies within the single-stream ``torch.save`` rates above and far below a GPU's PCIe
device-to-host rate (about 25 GB/s on PCIe 4.0 x16), the copy that bounds it.

>>> serialisation_gbs(16)
13.44
>>> fit_rate([(18.0, 2.0, 1, 11.0), (20.0, 5.92, 1, 32.0)])
1.01
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["SERIALISATION_GBPS_PER_NODE", "STAGE", "fit_rate", "serialisation_gbs"]

SERIALISATION_GBPS_PER_NODE = 0.84
"""GB/s one writing node serialises: least squares of log(measured / model) on the fit rows."""

STAGE = "writers' serialisation"
"""The stage's name in a checkpoint estimate."""

_GRID = [round(0.01 * k, 2) for k in range(5, 1001)]
"""Candidate rates, 0.05 to 10 GB/s per node in steps of 0.01 (the fit is a grid search)."""


def serialisation_gbs(writer_nodes: int, rate: float = SERIALISATION_GBPS_PER_NODE) -> float:
    """GB/s the writing nodes serialise together."""
    return round(writer_nodes * rate, 6)


def _loss(rows: Sequence[tuple[float, float, int, float]], rate: float) -> float:
    """Sum of squared log(measured / model) when serialisation is one more stage."""
    total = 0.0
    for gbytes, io_gbs, nodes, seconds in rows:
        model = gbytes / min(io_gbs, serialisation_gbs(nodes, rate))
        total += math.log(seconds / model) ** 2
    return total


def fit_rate(rows: Sequence[tuple[float, float, int, float]]) -> float:
    """The per-node rate that fits ``(GB, I/O-bound GB/s, writing nodes, seconds)`` rows best.

    The grid's first rate of least loss, so the fit is deterministic.
    """
    return min(_GRID, key=lambda rate: (_loss(rows, rate), rate))
