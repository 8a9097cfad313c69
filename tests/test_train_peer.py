"""The peer comparison in docs/accuracy.md: Calculon's figures against railplan's step
model on the same published runs (tools/accuracy/train_peer.py)."""

from __future__ import annotations

import copy

import pytest

from infra.catalog import Catalog
from tools.accuracy.train_accuracy import compare, load_rows
from tools.accuracy.train_peer import peer_markdown, peer_rows

from .conftest import ROOT

DATA = ROOT / "tests" / "data" / "training-measurements.yaml"


def test_peer_rows_name_measured_runs_and_agree_with_their_times(catalog: Catalog) -> None:
    # Each published peer row names a measurement; where that measurement states the
    # iteration time, the peer table's measured time is the same number (no drift).
    data = load_rows(DATA)
    by_id = {r["id"]: r for r in data["measurements"]}
    rows = peer_rows(data, catalog, "calculon")
    assert len(rows) == 8 and {r.metric for r in rows} == {"iteration s"}
    for r in rows:
        if "step_s" in by_id[r.row_id]:
            assert r.measured == by_id[r.row_id]["step_s"]


def test_railplan_column_is_the_harness_prediction(catalog: Catalog) -> None:
    data = load_rows(DATA)
    harness = {(c.row_id, c.metric): c.predicted for c in compare(data, catalog)}
    for peer in ("calculon", "calculon-run"):
        for r in peer_rows(data, catalog, peer):
            if (r.row_id, r.metric) in harness:
                assert r.railplan == pytest.approx(harness[(r.row_id, r.metric)])


def test_a_peer_step_equal_to_railplans_gives_railplans_figures(catalog: Catalog) -> None:
    # A run compared on its own metrics converts the peer's step time with railplan's FLOPs:
    # a peer that predicted railplan's own step must land on railplan's every figure.
    data = copy.deepcopy(load_rows(DATA))
    entry: dict[str, object] = {"row": "mt-nlg-2800", "peer_s": 1.0}
    data["peers"] = {"probe": {"rows": [entry]}}
    rows = peer_rows(data, catalog, "probe")
    assert {r.metric for r in rows} == {"hardware TFLOP/s/GPU", "iteration s"}
    entry["peer_s"] = next(r.railplan for r in rows if r.metric == "iteration s")
    for r in peer_rows(data, catalog, "probe"):
        assert r.peer == pytest.approx(r.railplan)
    # and twice the step halves the throughput
    entry["peer_s"] = 2 * float(str(entry["peer_s"]))
    tflops = next(r for r in peer_rows(data, catalog, "probe") if r.metric != "iteration s")
    assert tflops.peer == pytest.approx(tflops.railplan / 2)


def test_the_table_says_who_is_closer_on_each_row(catalog: Catalog) -> None:
    data = load_rows(DATA)
    text = "\n".join(peer_markdown(data, catalog))
    for peer in ("calculon", "calculon-run"):
        rows = peer_rows(data, catalog, peer)
        closer = sum(abs(r.railplan_error) < abs(r.peer_error) for r in rows)
        assert f"railplan is closer on {closer} of {len(rows)} rows" in text
    assert text in (ROOT / "docs" / "accuracy.md").read_text()
