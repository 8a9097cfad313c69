"""The peer comparison in docs/accuracy.md: Calculon's recorded figures against railplan's
step model on the same published runs (infra/budget/train_peer.py)."""

from __future__ import annotations

import pytest

from infra.budget.train_accuracy import compare, load_rows
from infra.budget.train_peer import peer_markdown, peer_rows
from infra.catalog import Catalog

from .conftest import ROOT

DATA = ROOT / "tests" / "data" / "training-measurements.yaml"


def test_peer_rows_name_measured_runs_and_agree_with_their_times(catalog: Catalog) -> None:
    # Each peer row names a measurement; where that measurement states the iteration time,
    # the peer table's measured time is the same number (no second transcription drifts).
    data = load_rows(DATA)
    by_id = {r["id"]: r for r in data["measurements"]}
    rows = peer_rows(data, catalog, "calculon")
    assert len(rows) == 8
    for r in rows:
        if "step_s" in by_id[r.row_id]:
            assert r.measured_s == by_id[r.row_id]["step_s"]


def test_railplan_column_is_the_harness_prediction(catalog: Catalog) -> None:
    data = load_rows(DATA)
    harness = {c.row_id: c.predicted for c in compare(data, catalog) if c.metric == "iteration s"}
    for r in peer_rows(data, catalog, "calculon"):
        if r.row_id in harness:
            assert r.railplan_s == pytest.approx(harness[r.row_id])


def test_the_table_says_who_is_closer_on_each_row(catalog: Catalog) -> None:
    data = load_rows(DATA)
    text = "\n".join(peer_markdown(data, catalog))
    rows = peer_rows(data, catalog, "calculon")
    closer = sum(abs(r.railplan_error) < abs(r.peer_error) for r in rows)
    assert f"railplan is closer on {closer} of {len(rows)} rows" in text
    assert text in (ROOT / "docs" / "accuracy.md").read_text()
