"""Smoke case of the real-Slurm comparison (`make slurm-replay` runs the full cases).

Eight short jobs on two nodes: slurmctld and a slurmd per node in network namespaces run
them (tests/slurm_replay/cluster.py), and railplan's Slurm model predicts their starts. Checks
that the harness works end to end (every job recorded, every prediction made) and that the
prediction is close on a case this small. Without root or the Slurm packages the test skips,
saying why; under CI (``CI`` set) that is a failure (`make unit` installs them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.slurm_replay.cluster import Plans, missing_tools
from tests.slurm_replay.replay import CASES, run_case, same_plans


def test_a_small_trace_on_real_slurm_and_on_the_model(tmp_path: Path) -> None:
    missing = missing_tools()
    if missing:
        why = f"real Slurm cluster needs: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    result = run_case(CASES["smoke"], tmp_path / "cluster")
    assert result["jobs"] == CASES["smoke"].jobs
    assert all(row[5] >= 0 for row in result["per_job"])  # every job predicted to start
    assert result["start_error_s"]["max"] < 10.0
    plans = result["plans_same"]  # the log's backfill plans were read and compared
    assert plans["cycles"] > 0 and plans["same"] <= plans["cycles"]


def test_plans_differ_by_cycle_job_start_or_node() -> None:
    # slurmctld planned job 7 at 100 on node 0 in the cycle of second 40, and nothing in
    # the cycle of 42; the model must have planned the same, no more and no less
    real: Plans = {40: {7: (100, (0,))}, 42: {}}
    ids = {"a": 7}
    assert same_plans(real, [(40, "a", 100, (0,))], ids) == {"cycles": 2, "same": 2, "first": None}
    for log in ([(40, "a", 101, (0,))], [(40, "a", 100, (1,))], [], [(41, "a", 100, (0,))]):
        assert same_plans(real, log, ids)["first"] in (40, 41), log
