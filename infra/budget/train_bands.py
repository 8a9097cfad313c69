"""The error band and calibration flag of a training step (`railplan train`, training budgets).

A layout's regime (`band_regimes.training_levels`: stack, ZeRO group, parallelism shape, GPU
generation) picks the held-out ratios of published runs (`bands.ratios_for`); its coordinates
(`bands.TrainingPoint`) say whether published runs cover it (`bands.training_fit`). The layout
search ranks candidates by the conservative bound, `TrainBand.conservative_step_s`: the step
time the worst held-out row of the regime implies, and prefers the layouts published runs
cover, `TrainBand.layout_fit` (the stack's own switches aside: they are the same for every
candidate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.budget.band_regimes import scaling_levels, stack_family, training_levels, zero_group
from infra.budget.bands import (
    Band,
    Fit,
    Ratios,
    TrainingPoint,
    higher_band,
    layout_fit,
    lower_band,
    ratios_for,
    training_fit,
)
from infra.budget.train_job import Job, Layout

__all__ = ["TrainBand", "train_band", "training_point"]


@dataclass(frozen=True)
class TrainBand:
    """The held-out ratio range of a layout's regime, its scaling range and its calibration."""

    ratios: Ratios
    scaling: Ratios
    fit: Fit
    layout_fit: Fit | None = None  # `bands.layout_fit`; None: the same as ``fit``

    @property
    def search_fit(self) -> Fit:
        """The calibration the layout search ranks by: of the layout, stack switches aside."""
        return self.layout_fit or self.fit

    def throughput(self, value: float, digits: int = 1) -> Band:
        """Band of a throughput (TFLOP/s, tokens/s, MFU)."""
        return higher_band(value, self.ratios, digits)

    def time(self, value: float, digits: int = 4) -> Band:
        """Band of a step time."""
        return lower_band(value, self.ratios, digits)

    def efficiency(self, value: float) -> Band:
        """Band of a scaling efficiency (from the held-out scaling rows), at most 1.

        Efficiency is per-GPU throughput against one replica of the same layout; more replicas
        only add communication, so a band edge above 1 would be no prediction.
        """
        band = higher_band(value, self.scaling, 4)
        return replace(band, high=max(value, min(band.high, 1.0)))

    def conservative_step_s(self, step_s: float) -> float:
        """The step time at the band's slow edge: what the search ranks by."""
        return step_s * max(self.ratios.high, 1.0)


def training_point(job: Job, layout: Layout, stack: str) -> TrainingPoint:
    """The envelope coordinates of ``layout`` of ``job`` run by software ``stack``."""
    return TrainingPoint(
        job.gpu.architecture,
        stack_family(stack),
        zero_group(layout.zero),
        layout.tp,
        layout.pp > 1,
        layout.cp > 1,
        layout.recompute,
        job.flash_attention,
        layout.gpus,
        float(job.shape.params),
        layout.micro_batch,
        layout.virtual,
    )


def train_band(job: Job, layout: Layout, stack: str) -> TrainBand:
    """The band and calibration of ``layout`` of ``job`` run by software ``stack``."""
    dims = (stack, layout.zero, layout.tp, layout.pp, layout.cp, job.gpu.architecture)
    point = training_point(job, layout, stack)
    return TrainBand(
        ratios_for("training", training_levels(*dims)),
        ratios_for("scaling", scaling_levels(*dims)),
        training_fit(point),
        layout_fit(point),
    )
