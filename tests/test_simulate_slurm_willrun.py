"""Backfill's node-space map and cons_tres's will-run test (`infra.simulate.slurm_willrun`).

Each case is a rule of Slurm 22.05's code that a real slurmctld's plans showed mattered
(tests/slurm_replay: `_dump_job_sched` lines compared cycle by cycle). Times are wall
seconds; GPUs are whole, 8 a node.
"""

from __future__ import annotations

from dataclasses import replace

from infra.simulate.policy import SimPolicy
from infra.simulate.slurm_willrun import NodeSpace, RunningEnd, Wanted, mask_of, will_run
from tests.sim_helpers import group_spec, job, replay

EIGHT = Wanted(8, 8, "first-fit")


def _end(at: int, *parts: tuple[int, int]) -> RunningEnd:
    """A running job ending at ``at`` with (node, GPUs) ``parts``."""
    return (at, parts, mask_of(node for node, _ in parts))


BOTH = mask_of({0, 1})
NODE0 = mask_of({0})


def test_will_run_removes_running_jobs_in_aligned_doubling_windows() -> None:
    # the first batch runs to the barrier past the first end aligned on 30 s of wall clock
    # (100 -> 120) plus the window (150), so the job ending at 110 goes with the one at
    # 100: node 1 is free at 110, the batch's last end, not at 100 (where node 0 is not)
    ends = [_end(100, (0, 1)), _end(110, (1, 1)), _end(200, (0, 2))]
    assert will_run(EIGHT, {0: 6, 1: 7}, ends, BOTH, now=50) == (110, [1])
    # 16 GPUs need node 0's last job gone too: the next batch (window 60, then 120 >= 80)
    assert will_run(Wanted(16, 8, "first-fit"), {0: 6, 1: 7}, ends, BOTH, 50) == (200, [0, 1])


def test_a_job_on_other_nodes_is_skipped_yet_the_next_usable_one_joins_the_batch() -> None:
    # Slurm checks the window only after removing a job, against the next in the list:
    # the job at 125 (node 1, not usable) is within it, so the walk goes on, skips it, and
    # removes the one at 400 with no check. The estimate is 400, though node 0 fits at 100.
    ends = [_end(100, (0, 1)), _end(125, (1, 8)), _end(400, (0, 1))]
    assert will_run(EIGHT, {0: 6}, ends, NODE0, now=50) == (400, [0])
    # without the job at 125 the batch ends at the window, and a job 100 frees is planned
    # at 100
    seven = Wanted(7, 8, "first-fit")
    assert will_run(seven, {0: 6}, [ends[0], ends[2]], NODE0, 50) == (100, [0])


def test_a_job_past_its_limit_is_guessed_to_end_killwait_later() -> None:
    assert will_run(EIGHT, {0: 7}, [_end(40, (0, 1))], NODE0, now=50) == (70, [0])
    assert will_run(EIGHT, {0: 7}, [_end(10, (0, 1))], NODE0, now=50) == (51, [0])


def test_no_estimate_when_running_jobs_never_free_enough() -> None:
    assert will_run(Wanted(16, 8, "first-fit"), {0: 8}, [], NODE0, 50) is None


def _wide_map() -> NodeSpace:
    # the plans a real slurmctld held at 13:31:05 (tests/slurm_replay, wide run), from 0
    space = NodeSpace(0, 86_400, 1)
    space.reserve(38, 98, {0, 1, 2})
    space.reserve(28, 88, {3})
    space.reserve(88, 148, {3})
    for node in (0, 1, 2):
        space.reserve(98, 158, {node})
    return space


def test_identical_neighbour_records_are_merged_once_and_later_start_sees_past_them() -> None:
    # the holds on node 3 (28-88, 88-148) and nodes 0-2 (38-98, 98-158) leave every node
    # held from 38 to 148; each hold merges one pair of neighbours left alike (38-88 with
    # 88-98, then 38-98 with 98-148), so a 60 s job's walk, which stops at the first record
    # past its end, still looks one record on, sees node 3 come back at 148 and tries
    # again from there (`later_start`). Unmerged, the record after 38-88 is alike, the walk
    # stops there, and the job gets no plan: a real slurmctld planned it from 148.
    space = _wide_map()
    begins = [b for b, _, _ in space.records()]
    assert begins == [0, 28, 38, 148, 158]
    usable, later = space.usable(mask_of(range(4)), 0, 60)
    assert (usable, later) == (0, 148)
    assert space.usable(mask_of(range(4)), 148, 208) == (mask_of({3}), 158)


def test_a_hold_from_the_maps_first_second_leaves_an_empty_first_record() -> None:
    space = NodeSpace(100, 1000, 60)
    space.reserve(60, 100, {0})  # rounded down before the map: from 100, one resolution
    assert space.records()[:2] == [(100, 100, frozenset()), (100, 160, frozenset({0}))]
    assert space.overlaps(mask_of({0}), 120, 180) and not space.overlaps(mask_of({1}), 120, 180)
    assert not space.overlaps(mask_of({0}), 160, 220)


def test_a_completing_job_frees_its_gpus_and_leaves_the_will_run_test() -> None:
    # a (8 GPUs on node 0) runs 100 s, the last 5 of them its epilog; stopped at 97, the
    # scheduler sees node 0's GPUs free and a out of the running jobs, but node 0 completing
    spec = group_spec(2, "scheduler: {kind: slurm}\n")
    jobs = [replace(job("a", 0, 100, 8), epilog_s=5.0), job("b", 0, 400, 8)]
    for stop, listed in ((90.0, 2), (97.0, 1)):
        run, _ = replay(spec, jobs, SimPolicy(horizon_s=stop))
        assert run.slurm is not None
        group = next(iter(run.cluster.groups.values()))
        free, ends, completing = run.slurm._running_on(group)
        assert len(ends) == listed
        assert (free[0], completing) == ((0, frozenset()) if listed == 2 else (8, frozenset({0})))
