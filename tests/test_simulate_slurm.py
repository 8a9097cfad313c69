"""Slurm specs replay with Slurm's own scheduling (`infra.simulate.slurm`), checked by hand.

The issue's case: a large job behind a stream of small ones. Kubernetes' BestEffortFIFO lets
the stream pass it for as long as the stream lasts; Slurm's main scheduler blocks the
partition behind it, and backfill starts a small job only when it ends before the large
job's reservation. The real-Slurm comparison is `make slurm-replay` (tests/slurm_replay).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from infra.errors import SpecError
from infra.simulate.jobs import Job
from infra.simulate.policy import SimPolicy
from infra.simulate.slurm import time_limit_s
from infra.topology.slurm_sched import backfill_of
from tests.sim_helpers import group_spec, job, replay, starts

SLURM = "scheduler: {kind: slurm}\n"


def _stream() -> list[Job]:
    # three nodes busy until 1000, 1100, 1200; the 32-GPU "big" arrives at 300; a stream of
    # 8-GPU jobs (1,000 s each) from 400 every 100 s; "tiny" (300 s) at 450
    early = [job(f"s{i}", i * 100, 1000, 8) for i in range(3)]
    stream = [job(f"s{i}", i * 100 + 100, 1000, 8) for i in range(3, 23)]
    return [*early, job("big", 300, 500, 32), *stream, job("tiny", 450, 300, 8)]


def test_backfill_keeps_the_large_jobs_reservation_and_fills_before_it() -> None:
    # Slurm: the backfill agent, awake every second, starts s1 and s2 the second they arrive
    # (s0 at 1 s, its first wake-up); the main scheduler blocks the partition behind big;
    # backfill reserves all four nodes from 1200 (when s2 ends), so s3 (ending after 1400)
    # may not start on node 4, but tiny (450-750) may. big's plan holds node 4, idle, so
    # each cycle marks it PLANNED (a node update: more work) and cycles follow each other
    # 30 s apart from big's at 300: 330, ..., 420 (s3 planned past big), 450 starts tiny.
    run, _ = replay(group_spec(4, SLURM), _stream())
    at = starts(run)
    assert (at["big"], at["tiny"], at["s3"], at["s6"], at["s7"]) == (
        1200.0,
        450.0,
        1700.0,
        1700.0,
        2700.0,
    )


def test_kubernetes_lets_the_stream_pass_the_large_job() -> None:
    run, _ = replay(group_spec(4), _stream())
    assert starts(run)["s3"] == 400.0
    assert starts(run)["big"] is not None and starts(run)["big"] > 2000.0  # type: ignore[operator]


def test_time_limits_are_whole_minutes_and_the_parameters_are_the_rendered_ones() -> None:
    assert time_limit_s(job("a", 0, 61, 1)) == 120.0
    assert time_limit_s(replace(job("a", 0, 10, 1), limit_s=3600)) == 3600.0
    params = backfill_of(group_spec(1, SLURM))
    assert params.scheduler_parameters() == (
        "bf_interval=30,bf_resolution=60,bf_window=1440,bf_max_job_test=500,nohold_on_prolog_fail"
    )
    tuned = group_spec(1, "scheduler: {kind: slurm, backfill: {interval: 5s, window: 2h}}\n")
    assert (backfill_of(tuned).interval_s, backfill_of(tuned).window_s) == (5, 7200)


def test_a_job_longer_than_the_gap_waits_for_the_reservation_to_pass() -> None:
    # the same, with tiny's limit 800 s: 450 + 800 runs past big's 1200 start on every node
    jobs = [replace(j, limit_s=800.0) if j.id == "tiny" else j for j in _stream()]
    run, _ = replay(group_spec(4, SLURM), jobs, SimPolicy())
    assert starts(run)["tiny"] == pytest.approx(1700.0)


def test_a_submission_waits_for_the_loops_batch_sched_delay_and_its_full_pass() -> None:
    # slurmctld's background loop wakes once a second (here at 1, 2, 3 ...) and runs the main
    # scheduler for a submission when 3 whole seconds have passed since it last did: a's
    # pass at 1 (the backfill cycle starts a there too), so b (1.5) and c (2.5) start at 4,
    # not a second after they arrive. d (58.2) starts at the loop's next wake-up, 59. The
    # full pass every 60 s of slurmctld's life runs the main scheduler whatever asked: e's
    # request (59.5) is met at 60, not at 62; f (60.5) waits until 63. Backfill, every
    # 10 minutes here, stays out of the way after its first cycle.
    jobs = [
        job("a", 0, 10, 1),
        job("b", 1.5, 10, 1),
        job("c", 2.5, 10, 1),
        job("d", 58.2, 10, 1),
        job("e", 59.5, 10, 1),
        job("f", 60.5, 10, 1),
    ]
    spec = group_spec(2, "scheduler: {kind: slurm, backfill: {interval: 10m}}\n")
    at = starts(replay(spec, jobs)[0])
    assert (at["a"], at["b"], at["c"], at["d"], at["e"], at["f"]) == (
        1.0,
        4.0,
        4.0,
        59.0,
        60.0,
        63.0,
    )


def _blocked_partition(*more: Job) -> dict[str, float | None]:
    # a fills node 1 until 201 (its limit: 241); b holds half of node 2 until 70; big (16
    # GPUs) blocks the partition, so only backfill can start small (8 GPUs, fits from 70)
    jobs = [job("a", 0, 200, 8), job("b", 0, 69, 4), job("big", 1.5, 10, 16), *more]
    return starts(replay(group_spec(2, SLURM), [*jobs, job("small", 3.0, 20, 8)])[0])


def test_backfill_cycles_every_interval_while_a_plan_is_pushed_past_a_reservation() -> None:
    # long (8 GPUs, 200 s) would fit on node 2 when b's limit ends (121) but runs into big's
    # reservation (from 240): backfill plans it past that reservation (TRY_LATER), which
    # updates the job (`last_job_update`), so every cycle finds more work for the next:
    # cycles at 31, 61, 91 ... and small starts at 91, not when b ends at 70.
    at = _blocked_partition(job("long", 2.5, 200, 8))
    assert (at["a"], at["b"], at["small"]) == (1.0, 1.0, 91.0)


def test_backfill_stops_cycling_when_no_plan_changes_and_waits_for_an_event() -> None:
    # without long, the cycle at 31 plans big and small where they first fit: nothing is
    # updated, no cycle follows until b ends (70), and that cycle starts small
    at = _blocked_partition()
    assert (at["a"], at["b"], at["small"]) == (1.0, 1.0, 70.0)
    assert at["big"] is not None and at["big"] >= 201.0


@pytest.mark.parametrize(
    ("backfill", "message"),
    [
        ("{window: 90s}", "bf_window is whole minutes"),
        ("{interval: 4h}", r"bf_interval\) is at most 3h"),
        ("{resolution: 2h}", r"bf_resolution\) is at most 1h"),
    ],
)
def test_backfill_settings_slurm_refuses_are_spec_errors(backfill: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        group_spec(1, f"scheduler: {{kind: slurm, backfill: {backfill}}}\n")


def test_the_backfill_interval_counts_from_the_second_a_cycle_ends_in() -> None:
    # bf_interval=2 s; the backfill agent wakes at .999 of every second, the background
    # loop on the second. The cycle at 0.999 starts a; if it takes 3 ms it ends in second
    # 1, and the agent counts its 2 s from there: b (submitted at 1.5, room on the second
    # node) starts at the cycle at 3.999, not 2.999. (The main scheduler ran at the loop's
    # wake-up at 1.0 for a's submission, so batch_sched_delay keeps it off until 4.0.)
    spec = group_spec(2, "scheduler: {kind: slurm, backfill: {interval: 2s, resolution: 1s}}\n")
    jobs = [job("a", 0.0, 20, 8), job("b", 1.5, 5, 8)]
    for took, b_starts in ((0.0, 2.999), (0.003, 3.999)):
        clock = SimPolicy(backfill_wakes_s=(0.999,), backfill_took_s=(took,))
        run, _ = replay(spec, jobs, clock, origin=0.0)
        assert starts(run)["a"] == pytest.approx(0.999)
        assert starts(run)["b"] == pytest.approx(b_starts)
