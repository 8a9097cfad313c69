"""The count of wholly free nodes per group (`GroupIndex.full`) that ends a gang search early.

A gang of n whole nodes fits only where its group has n wholly free nodes, so placement
refuses it at once when the count says fewer (most waiting gangs, searched again after every
job that ends). The count must equal the SU indexes' sizes after every take, give (preemption's
tentative lifts included), MIG drain and re-layout, or a gang that fits would be refused;
so must the SUs counted by their wholly free nodes (`GroupIndex.su_counts`), which refuse a
gang no SU holds without reading every SU.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from infra.simulate.cluster import Cluster
from infra.simulate.policy import SimPolicy
from tests.sim_helpers import group_spec, job, replay

MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'
DAY_NIGHT = (
    ", mig: mix, mig_schedule: {timezone: UTC, drain_timeout: 20m, changes: "
    '[{at: "0 7 * * *", mig: mix}, {at: "0 21 * * *", mig: disabled}]}'
)
SPEC = group_spec(
    6,
    "scheduler:\n  mig_strategy: mixed\n  tenants:\n    - {name: a, gpus: 24}\n"
    "    - {name: b, gpus: 24, priority: high}\n" + MIX,
    DAY_NIGHT,
)


def test_the_count_of_wholly_free_nodes_follows_every_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = 0

    def checking(change: Any) -> Any:
        def checked_change(self: Cluster, *args: Any) -> None:
            nonlocal checked
            change(self, *args)
            for g in self.groups.values():
                assert g.full == sum(len(nodes) for nodes in g.su_full.values()), g.name
                counts = [0] * len(g.su_counts)
                for nodes in g.su_full.values():
                    counts[len(nodes)] += 1
                assert g.su_counts == counts, g.name
            checked += 1

        return checked_change

    for name in ("_apply", "close", "relayout"):
        monkeypatch.setattr(Cluster, name, checking(getattr(Cluster, name)))
    rng = random.Random(3)
    jobs = []
    for i in range(400):
        gpus = rng.choice((1, 2, 4, 8, 12, 16, 24, 40))
        milli = 300 if gpus == 1 and rng.random() < 0.3 else 1000
        tenant, priority = rng.choice("ab"), rng.choice(("low", "normal", "high"))
        submit, duration = rng.randint(0, 3 * 86_400), rng.randint(600, 8 * 3600)
        jobs.append(
            job(f"j{i}", submit, duration, gpus, milli=milli, tenant=tenant, priority=priority)
        )
    _, result = replay(SPEC, jobs, SimPolicy(checkpoint_write_s=10))
    assert result.preemptions > 0 and result.repartitions  # lifts, drains and re-layouts ran
    assert checked > 1000
