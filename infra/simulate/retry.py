"""When each waiting bucket last tried preemption, kept per cohort of buckets, not per bucket.

A queue head that may preempt tries once per `preempt_retry_s` (`retry_due`). In a pass where
nothing can be evicted (`infra.simulate.preempt.Preemptor.quiet`) every try finds no victim
and only moves the time of the bucket's last try to now, for every waiting bucket whose try
was due. Buckets that last tried at one time are due at the same passes from then on, so they
form a cohort; a quiet pass moves the cohorts that are due, not their buckets, and merges them
into one (a union-find: a cohort merged points to the one it joined). A bucket leaves its
cohort when its head changes (it has not tried since) or it empties. The times read back
(`RetryClock.export`) are those the engine's pass would have recorded bucket by bucket.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from infra.simulate.state import BucketKey

__all__ = ["RetryClock", "retry_due"]


def retry_due(last: float | None, now: float, retry_s: float) -> bool:
    """Whether a head that last tried preemption at ``last`` (None: never) tries at ``now``.

    At most once per instant, whatever ``retry_s``: a second pass at one time does not retry.
    """
    if last is None:
        return True
    return now - last >= retry_s and not (last == now and retry_s > 0)


class _Cohort:
    """Buckets that last tried at ``at`` (None: not yet), or merged ``into`` a later cohort."""

    __slots__ = ("at", "into")

    def __init__(self, at: float | None) -> None:
        self.at = at
        self.into: _Cohort | None = None


class RetryClock:
    """The last preemption try of each waiting bucket that may preempt, by cohort."""

    def __init__(self, retry_s: float) -> None:
        self.retry_s = retry_s
        self.of: dict[BucketKey, _Cohort] = {}
        self.roots: list[_Cohort] = []  # cohorts not merged into another
        self.fresh: _Cohort | None = None  # buckets whose head has not tried yet

    def reset(self, key: BucketKey) -> None:
        """Bucket ``key`` has a new head: it has not tried since."""
        if self.fresh is None:
            self.fresh = _Cohort(None)
            self.roots.append(self.fresh)
        self.of[key] = self.fresh

    def drop(self, key: BucketKey) -> None:
        """Bucket ``key`` no longer waits."""
        self.of.pop(key, None)

    def tick(self, now: float) -> None:
        """A pass that evicted nothing ran at ``now``: every bucket due tried then."""
        due = [c for c in self.roots if retry_due(c.at, now, self.retry_s)]
        if not due:
            return
        joined = _Cohort(now)
        for cohort in due:
            cohort.into = joined
        self.roots = [c for c in self.roots if c.into is None]
        self.roots.append(joined)
        if self.fresh is not None and self.fresh.into is not None:
            self.fresh = None

    def last(self, key: BucketKey) -> float | None:
        """When bucket ``key`` last tried (None: not since its head changed)."""
        cohort = root = self.of[key]
        while root.into is not None:
            root = root.into
        while cohort.into is not None and cohort.into is not root:  # path compression
            cohort.into, cohort = root, cohort.into
        self.of[key] = root
        return root.at

    def export(self) -> dict[BucketKey, float]:
        """Every tracked bucket's last try, as the engine's pass keeps them."""
        out: dict[BucketKey, float] = {}
        for key in self.of:
            at = self.last(key)
            if at is not None:
                out[key] = at
        return out

    def load(self, tried: Mapping[BucketKey, float], keys: Iterable[BucketKey]) -> None:
        """Start again from the engine's record ``tried`` for the waiting ``keys``."""
        self.of, self.roots, self.fresh = {}, [], None
        by_time: dict[float, _Cohort] = {}
        for key in keys:
            at = tried.get(key)
            if at is None:
                self.reset(key)
                continue
            cohort = by_time.get(at)
            if cohort is None:
                cohort = by_time[at] = _Cohort(at)
                self.roots.append(cohort)
            self.of[key] = cohort
