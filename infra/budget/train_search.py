"""How the layout search chooses: by the conservative bound, calibrated layouts first.

The step model is least accurate where no published run was measured, and a search that
maximises its predictions lands there first (it once chose ZeRO-3 at DP 128 on 1,024 A100, 61 %
MFU, where published 175B runs reach about 52 %). So the search keeps two bests, each ranked by
its conservative bound (`TrainBand.conservative_step_s`, the step time the slowest held-out row
of its regime implies): the best calibrated layout and the best extrapolated one. The
extrapolated one wins only if it beats the calibrated one by more than its own band, that is if
even its slow edge is faster than the calibrated layout's central step; the answer then carries
a warning and the calibrated layout beside it. With no calibrated layout the best extrapolated
one is the answer, flagged.

"Calibrated" here is the layout's (`TrainBand.search_fit`): the stack's own switches, the same
for every candidate, are left aside, so a stack no published run of the GPU generation used
(fused attention on A100) still has its published-style layouts preferred; the answer's flag
(`TrainBand.fit`) says that the stack is outside.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.budget.train_bands import TrainBand
from infra.budget.train_layout import StepResult

__all__ = ["Candidate", "Ranking"]


@dataclass(frozen=True)
class Candidate:
    """A layout that fits, with its band and calibration."""

    result: StepResult
    band: TrainBand

    @property
    def conservative_s(self) -> float:
        """The step time at the slow edge of the band (the ranking key)."""
        return self.band.conservative_step_s(self.result.step_s)

    @property
    def calibrated(self) -> bool:
        """Whether published runs cover the layout (`TrainBand.search_fit`: stack aside)."""
        return self.band.search_fit.status == "calibrated"


@dataclass
class Ranking:
    """The best calibrated and the best extrapolated candidate seen so far."""

    calibrated: Candidate | None = None
    extrapolated: Candidate | None = None

    def add(self, candidate: Candidate) -> None:
        """Keep ``candidate`` if its conservative bound beats the best of its kind (ties: first)."""
        best = self.calibrated if candidate.calibrated else self.extrapolated
        if best is not None and candidate.conservative_s >= best.conservative_s:
            return
        if candidate.calibrated:
            self.calibrated = candidate
        else:
            self.extrapolated = candidate

    @property
    def chosen(self) -> Candidate | None:
        """The answer: the calibrated best unless the extrapolated one beats it beyond its band."""
        cal, ext = self.calibrated, self.extrapolated
        if cal is None or (ext is not None and ext.conservative_s < cal.result.step_s):
            return ext
        return cal

    @property
    def other(self) -> Candidate | None:
        """What the answer shows beside the choice: the calibrated best, or the layout passed over.

        When the choice is extrapolated, the best calibrated layout (the published-style one);
        when it is calibrated, a faster extrapolated layout the search did not take, if any.
        """
        chosen = self.chosen
        if chosen is None:
            return None
        if not chosen.calibrated:
            return self.calibrated
        ext = self.extrapolated
        return ext if ext is not None and ext.result.step_s < chosen.result.step_s else None
