"""What a scheduler engineer reads of a replay, checked by hand.

Per-job outcomes, completion times and makespan; FGD's fragmentation (Weng et al., ATC '23)
of single nodes and over a replay; what fractions hold beyond what they ask; allocation over
time in the JSON; and placement policies, the random one seeded by ``--seed``.
"""

from __future__ import annotations

import csv
import io

import pytest

from infra.simulate.fragment import fragment, typical_shapes
from infra.simulate.policy import SimPolicy
from tests.sim_helpers import group_spec, job, replay, starts


def test_outcomes_jct_and_makespan_worked_out_by_hand() -> None:
    # one node: a runs 0-100; b waits for it and runs from 100, cut at the 150 s horizon;
    # c never starts; d (64 GPUs) can never run.
    jobs = [
        job("a", 0, 100, 8),
        job("b", 10, 100, 8),
        job("c", 20, 100, 8),
        job("d", 0, 10, 64),
    ]
    _, result = replay(group_spec(1), jobs, SimPolicy(horizon_s=150))
    assert result.outcomes == {"finished": 1, "unfinished": 1, "not_started": 1, "never_ran": 1}
    assert (result.jct.jobs, result.jct.mean_s) == (1, 100.0)
    assert result.makespan_s == 100.0
    assert result.job_table is not None
    rows = list(csv.DictReader(io.StringIO(result.job_table.csv())))
    got = [(r["id"], r["outcome"], r["start_s"], r["end_s"], r["jct_s"]) for r in rows]
    assert got == [
        ("a", "finished", "0", "100", "100"),
        ("b", "unfinished", "100", "", ""),
        ("c", "not_started", "", "", ""),
        ("d", "never_ran", "", "", ""),
    ]
    assert rows[3]["reason"].startswith("asks for 64 GPUs")
    doc = result.as_json()
    assert doc["outcomes"]["finished"] == 1 and doc["jct_s"]["mean"] == 100.0
    assert doc["allocation"]["series"][0] == [0.0, 8]


def test_fgd_node_fragment_by_hand() -> None:
    # 3 free GPUs; half the tasks want 4 GPUs (they cannot use any of the 3), half want 1
    # (they can use all): 0.5 x 3 + 0.5 x 0
    shapes = [((0, 1000, 4, ()), 0.5), ((0, 1000, 1, ()), 0.5)]
    assert fragment(("a", 1, 64_000, 3, (), ()), shapes) == pytest.approx(1.5)
    # three free 1g slices and one 2g, for a quarter GPU (1.75 of 7 slices): it fits the 2g,
    # and each 1g slice (1/7 of a GPU) is too small: 3/7 of a GPU is fragment
    quarter = [((0, 250, 1, ()), 1.0)]
    assert fragment(("a", 1, 0, 0, (), ((1, 3), (2, 1))), quarter) == pytest.approx(3 / 7)
    # whole-GPU tasks cannot use slices at all
    one = [((0, 1000, 1, ()), 1.0)]
    assert fragment(("a", 1, 0, 2, (), ((1, 7),)), one) == pytest.approx(1.0)
    shares = typical_shapes([job("x", 0, 1, 1), job("y", 0, 1, 1), job("z", 0, 1, 4)], 8)
    assert [shape for shape, _ in shares] == [(0, 1000, 1, ()), (0, 1000, 4, ())]
    assert [share for _, share in shares] == pytest.approx([2 / 3, 1 / 3])


def test_fgd_fragment_counts_cpus_models_cpu_only_tasks_and_shared_gpus() -> None:
    # FGD (pkg/utils/frag.go): a task that does not fit for want of CPUs, of the node's GPU
    # model, or that asks no GPU at all, cannot use any of the free GPU capacity
    free = ("v100", 1, 4_000, 2, (), ())  # 2 free GPUs, 4 CPUs free
    assert fragment(free, [((8_000, 1000, 1, ()), 1.0)]) == pytest.approx(2.0)
    assert fragment(free, [((2_000, 1000, 1, ()), 1.0)]) == pytest.approx(0.0)
    assert fragment(free, [((2_000, 1000, 1, ("t4",)), 1.0)]) == pytest.approx(2.0)
    assert fragment(free, [((2_000, 0, 0, ()), 1.0)]) == pytest.approx(2.0)
    # a shared GPU (100 replicas) with 30 free and one wholly free: a 0.5 task fits the
    # whole one only, so the 0.3 left on the other is fragment; a 0.2 task fits both
    shared = ("t4", 100, 4_000, 1, (30,), ())
    assert fragment(shared, [((0, 500, 1, ()), 1.0)]) == pytest.approx(0.3)
    assert fragment(shared, [((0, 200, 1, ()), 1.0)]) == pytest.approx(0.0)


def test_typical_shapes_cover_95_percent_most_common_first() -> None:
    # 19 tasks of one shape and one of another: the first covers 95 %, the rare one is out
    jobs = [job(f"a{i}", 0, 1, 1) for i in range(19)] + [job("b", 0, 1, 2)]
    assert typical_shapes(jobs, 8) == [((0, 1000, 1, ()), 1.0)]
    jobs.append(job("c", 0, 1, 2))  # 19 of 21 is below 95 %: the 2-GPU shape is in
    assert [s for s, _ in typical_shapes(jobs, 8)] == [(0, 1000, 1, ()), (0, 1000, 2, ())]


def test_fgd_fragmentation_over_a_replay_by_hand() -> None:
    # Two nodes; the trace's one-node shapes: 5 GPUs and 4 GPUs, half each. Over the window
    # (0-100 s, the last submission) a holds 5 GPUs of one node: its 3 free GPUs fit neither
    # shape (3 GPUs of fragment), the other node's 8 fit both (none).
    jobs = [job("a", 0, 100, 5), job("b", 100, 10, 4)]
    _, result = replay(group_spec(2), jobs)
    assert result.window_s == 100.0
    assert result.fragmentation_fgd == {
        "share": pytest.approx(3 / 16),
        "share_of_free": pytest.approx(3 / 11),
    }


def test_a_fraction_on_an_unsplit_gpu_holds_the_rest_of_it_as_waste() -> None:
    _, result = replay(group_spec(1), [job("q", 0, 100, 1, milli=250)])
    assert result.share_waste == {"gpu_hours": pytest.approx(75 / 3600, abs=1e-6), "share": 0.75}
    assert result.gpu_hours["held"] == pytest.approx(100 / 3600, abs=1e-6)


def test_placement_first_fit_best_fit_and_seeded_random() -> None:
    # a holds n01 until 5 s, b 2 GPUs of n02: at 10 s best fit puts the 2-GPU c on n02 (6
    # free), first fit on n01 (the first in plan order with room), random on any of the three
    jobs = [job("a", 0, 5, 8), job("b", 0, 100, 2), job("c", 10, 100, 2)]

    def node_of_c(policy: dict[str, object]) -> str:
        run, _ = replay(group_spec(3), jobs, SimPolicy(horizon_s=50, **policy))  # type: ignore[arg-type]
        index = next(i for i, j in enumerate(run.jobs) if j.id == "c")
        return run.cluster.nodes[run.running[index].alloc[0].node].name

    assert node_of_c({}) == node_of_c({"placement": "best-fit"})
    assert {node_of_c({"placement": p}) for p in ("best-fit", "first-fit")} == {"n01", "n02"}
    nodes = [node_of_c({"placement": "random", "seed": s}) for s in range(12)]
    assert len(set(nodes)) > 1  # the seed is used: it changes the choice
    assert nodes == [node_of_c({"placement": "random", "seed": s}) for s in range(12)]


def test_the_same_seed_gives_the_same_random_replay() -> None:
    jobs = [job(f"j{i}", i, 50 + i % 7, 1 + i % 4) for i in range(40)]
    policy = SimPolicy(placement="random", seed=7)
    first = replay(group_spec(3), jobs, policy)
    second = replay(group_spec(3), jobs, policy)
    assert first[1].as_json() == second[1].as_json()
    assert starts(first[0]) == starts(second[0])


def test_the_jobs_csv_shows_trace_names_as_text_never_as_formulas() -> None:
    """A trace's job id or tenant starting with ``=`` (or ``+ - @``) would run as a formula in
    a spreadsheet opening `simulate --jobs-csv` (OWASP CSV injection): it gets a ``'``."""
    jobs = [job("=HYPERLINK(1)", 0, 10, 8, tenant="@SUM(1)"), job("plain", 0, 10, 8)]
    _, result = replay(group_spec(2), jobs, SimPolicy())
    assert result.job_table is not None
    rows = list(csv.DictReader(io.StringIO(result.job_table.csv())))
    assert [(r["id"], r["tenant"]) for r in rows] == [
        ("'=HYPERLINK(1)", "'@SUM(1)"),
        ("plain", "t"),
    ]


def test_the_jobs_csv_escapes_control_characters_from_the_trace() -> None:
    """ESC, OSC, C1 CSI and U+202E in a trace's ids or tenants reach the CSV as escapes, as in
    simulate's text and verify's work orders: `cat jobs.csv` must not drive the terminal."""
    jobs = [job("j\x1b]0;pwn\x07", 0, 10, 8, tenant="t\x9b31m\u202e"), job("plain", 0, 10, 8)]
    _, result = replay(group_spec(2), jobs, SimPolicy())
    assert result.job_table is not None
    text = result.job_table.csv()
    assert not any(ch in text for ch in "\x1b\x07\x9b\u202e"), repr(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert (rows[0]["id"], rows[0]["tenant"]) == ("j\\x1b]0;pwn\\x07", "t\\x9b31m\\u202e")
