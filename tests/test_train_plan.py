"""`railplan train`: layout rules, the search, the CLI contract and the accuracy document."""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.cluster import BudgetError
from infra.budget.train_layout import ELEMENTWISE, FP8_SHARE, HALF_DIM, PEAK_SHARE, STEP_FIXED_S
from infra.budget.train_model import PRESETS
from infra.budget.train_plan import TrainAnswer, train
from infra.budget.train_request import TrainRequest, model_shape, train_request_checks
from infra.catalog import Catalog, load_catalog
from infra.errors import InputError
from infra.spec import load_spec_text
from tools.accuracy.accuracy_doc import training_doc
from tools.accuracy.train_accuracy import (
    compare,
    fit,
    fit_fp8_share,
    fit_step_fixed,
    load_rows,
    split,
)

from .conftest import ROOT
from .test_cli import railplan

DATA = ROOT / "tests" / "data" / "training-measurements.yaml"
KEYS = {
    "gpus", "nodes", "tp", "pp", "dp", "micro_batch", "global_batch", "step_s", "tokens_per_s",
    "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu", "scaling_efficiency",
    "memory_gb_per_gpu", "breakdown",
}  # fmt: skip
BREAKDOWN = {
    "compute_s", "recompute_s", "tp_comm_s", "cp_comm_s", "pp_comm_s", "pp_bubble_s",
    "dp_comm_exposed_s", "optimizer_s",
}  # fmt: skip


def cluster(nodes: int) -> str:
    return f"name: t\nnode_groups: [{{name: gpu, node: dgx-h100, count: {nodes}}}]\n"


@pytest.fixture(scope="module")
def big() -> object:
    return load_spec_text(cluster(1250)).spec


def test_search_on_10000_gpus_returns_a_fitting_layout(catalog: Catalog, big: object) -> None:
    request = TrainRequest(10_000, PRESETS["gpt3-175b"], 2500)
    answer = train(big, catalog, request)  # type: ignore[arg-type]
    layout = answer.result.layout
    assert answer.result.memory.fits and layout.gpus == 10_000
    assert 8 % layout.tp == 0 and PRESETS["gpt3-175b"].layers % layout.pp == 0
    assert 2500 % (layout.dp * layout.micro_batch) == 0
    assert 0 < answer.candidates < 5000  # bounded: the search stays in seconds


def test_search_says_when_nothing_fits(catalog: Catalog) -> None:
    spec = load_spec_text(cluster(1)).spec
    with pytest.raises(BudgetError, match="fits in memory"):
        train(spec, catalog, TrainRequest(8, PRESETS["gpt-1t"], 8))


@functools.cache
def _searched_llama2_70b() -> TrainAnswer:
    """The layout search of llama2-70b on 128 GPUs, done once for every example below."""
    spec = load_spec_text(cluster(16)).spec
    return train(spec, load_catalog(), TrainRequest(128, PRESETS["llama2-70b"], 256))


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]))
def test_searched_layout_is_at_least_as_fast_as_any_fixed_one(
    catalog: Catalog, tp: int, pp: int
) -> None:
    spec = load_spec_text(cluster(16)).spec
    shape = PRESETS["llama2-70b"]
    searched = _searched_llama2_70b()  # the same search for every (tp, pp)
    try:
        fixed = train(spec, catalog, TrainRequest(128, shape, 256, 1, tp, pp))
    except (InputError, BudgetError):
        return
    if fixed.result.memory.fits:
        assert searched.result.step_s <= fixed.result.step_s * (1 + 1e-9)


@pytest.mark.parametrize(
    ("tp", "pp", "match"),
    [
        (16, 1, "NVLink domain"),
        (3, 1, "128 GPUs do not split into TP 3"),  # checked before the NVLink rule
        (1, 128, "80 layers into whole chunks"),
    ],
)
def test_fixed_layouts_outside_megatron_rules_are_refused(
    catalog: Catalog, tp: int, pp: int, match: str
) -> None:
    spec = load_spec_text(cluster(16)).spec
    with pytest.raises(InputError, match=match):
        train(spec, catalog, TrainRequest(128, PRESETS["llama2-70b"], 256, 1, tp, pp))


def test_uneven_pipeline_stages_are_timed_by_the_fullest_stage(catalog: Catalog) -> None:
    # Llama 3 405B ran 126 layers on PP 16 (Meta, "The Llama 3 Herd of Models", table 4):
    # stages of 7 and 8 layers; the step is paced by the 8-layer stages.
    spec = load_spec_text(cluster(16)).spec
    shape = PRESETS["llama3-405b"]
    uneven = train(spec, catalog, TrainRequest(128, shape, 16, 1, 8, 16)).result
    assert shape.layers % 16 != 0 and uneven.layout.pp == 16
    padded = replace(shape, name="padded", layers=128)  # 8 layers on every stage
    even = train(spec, catalog, TrainRequest(128, padded, 16, 1, 8, 16)).result
    assert uneven.breakdown.compute_s == pytest.approx(even.breakdown.compute_s, rel=1e-9)
    assert uneven.step_s <= even.step_s


def test_bad_options_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown model preset"):
        model_shape("gpt3")
    with pytest.raises(InputError, match="layers, hidden and heads"):
        model_shape(None, layers=4)
    with pytest.raises(InputError, match="multiple of heads"):
        model_shape(None, 4, 100, 3)
    with pytest.raises(InputError, match="both --tp and --pp"):
        train_request_checks(TrainRequest(8, PRESETS["gpt3-175b"], 8, tp=8), "bf16")
    with pytest.raises(InputError, match="training precision"):
        train_request_checks(TrainRequest(8, PRESETS["gpt3-175b"], 8), "int8")
    assert model_shape(None, 4, 1024, 16).params > 0


def test_cli_json_carries_the_design_keys(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(cluster(16))
    out = railplan(
        "train", str(spec), "--gpus", "128", "--model", "llama2-70b", "--global-batch", "256",
        "--format", "json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= KEYS and set(doc["breakdown"]) == BREAKDOWN
    assert doc["tp"] * doc["cp"] * doc["pp"] * doc["dp"] == doc["gpus"] == 128
    assert sum(doc["breakdown"].values()) == pytest.approx(doc["step_s"], rel=1e-4)
    assert 0 < doc["mfu"] <= doc["hfu"] < 1 and 0 < doc["scaling_efficiency"] <= 1
    fixed = railplan(
        "train", str(spec), "--gpus", "128", "--model", "llama2-70b", "--global-batch", "256",
        "--tp", "4", "--pp", "4", "--cp", "2",
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert "layout: TP 4 x CP 2 x PP 4" in fixed.stdout and "cp_comm" in fixed.stdout


def test_cli_text_shows_the_breakdown_and_bad_input_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(cluster(16))
    args = ["train", str(spec), "--gpus", "128", "--global-batch", "256"]
    text = railplan(*args, "--layers", "32", "--hidden", "4096", "--heads", "32")
    assert text.returncode == 0, text.stderr
    for word in ("pp_bubble", "dp_comm_exposed", "MFU", "HFU", "scaling efficiency", "memory"):
        assert word in text.stdout
    bad = railplan(*args, "--model", "gpt3-175b", "--tp", "3", "--pp", "1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--tp" in bad.stderr and "hint" in bad.stderr


def test_accuracy_section_is_current_and_held_out_within_target(catalog: Catalog) -> None:
    data = load_rows(DATA)
    # the training section sits between the collectives and the error bands
    assert training_doc(data, catalog) in (ROOT / "docs" / "accuracy.md").read_text(), (
        "docs/accuracy.md is stale: run `make accuracy`"
    )
    held = [c for c in compare(data, catalog) if c.held_out]
    assert len(held) >= 8
    assert statistics.median(abs(c.error) for c in held) <= 0.10


def test_split_is_deterministic_and_every_row_cites_a_source() -> None:
    data = load_rows(DATA)
    fit, held = split(data["measurements"])
    assert split(list(reversed(data["measurements"]))) == (fit, held)
    assert not {r["id"] for r in fit} & {r["id"] for r in held}
    assert all(r["source"] in data["sources"] for r in data["measurements"])


def test_rows_added_after_the_fit_never_move_an_original_row() -> None:
    original = [{"id": i} for i in "acegi"]
    fit, held = split(original)
    added = [{"id": i, "added": "2026-12-04"} for i in "bdf"]
    fit2, held2 = split(original + added)
    assert [r for r in fit2 if "added" not in r] == fit
    assert [r for r in held2 if "added" not in r] == held
    assert [r["id"] for r in fit2 if "added" in r] == ["b", "f"]


@pytest.mark.slow
def test_the_fitted_constants_are_what_the_documented_fits_give(catalog: Catalog) -> None:
    data = load_rows(DATA)
    shares, half, factor, _ = fit(data, catalog)
    assert (shares, half, factor) == (PEAK_SHARE, HALF_DIM, ELEMENTWISE)
    assert fit_fp8_share(data, catalog)[0] == FP8_SHARE


def test_the_fixed_step_cost_is_what_its_fit_on_the_original_rows_gives(catalog: Catalog) -> None:
    # Fitted on `fit`'s rows only (no added or held-out row): their median chooses none.
    cost, error = fit_step_fixed(load_rows(DATA), catalog)
    assert cost == STEP_FIXED_S
    assert error <= 0.05


def test_a_later_batch_of_added_rows_never_moves_an_earlier_one() -> None:
    earlier = [{"id": i, "added": "2026-12-04"} for i in "bdfh"]
    fit, held = split(earlier)
    later = [{"id": i, "added": "2026-12-04T03:30Z"} for i in "aceg"]
    fit2, held2 = split(earlier + later)
    assert [r for r in fit2 if r["added"] == "2026-12-04"] == fit
    assert [r for r in held2 if r["added"] == "2026-12-04"] == held
    assert [r["id"] for r in held2 if r not in earlier] == ["c", "g"]


def test_long_sequences_are_searched_with_context_parallelism(catalog: Catalog) -> None:
    # Llama 3 405B at 131,072 tokens on 16,384 H100 (Meta ran CP 16): without CP only full
    # recompute with ZeRO-3 squeezes the activations in (1F1B holds L layers' inputs, 2·s·h
    # bytes each over TP 8: 69 GB), and it is far slower; at 2,048 tokens the search never
    # splits a sequence.
    spec = load_spec_text(cluster(2048)).spec
    long = replace(PRESETS["llama3-405b"], seq=131_072)
    answer = train(spec, catalog, TrainRequest(16_384, long, 128))
    assert answer.result.layout.cp > 1 and answer.result.memory.fits
    whole = train(spec, catalog, TrainRequest(16_384, long, 128, cp=1)).result
    assert whole.layout.recompute == "full" and whole.memory.activations > 60e9
    assert whole.step_s > 2 * answer.result.step_s
    short = train(spec, catalog, TrainRequest(1024, PRESETS["gpt3-175b"], 1536))
    assert short.result.layout.cp == 1


def test_context_parallel_layouts_must_split_the_sequence_evenly(catalog: Catalog) -> None:
    spec = load_spec_text(cluster(16)).spec
    with pytest.raises(InputError, match="CP 3 must split the 8192-token sequence"):
        train(spec, catalog, TrainRequest(96, PRESETS["llama3-405b"], 4, 1, 8, 2, cp=3))
    with pytest.raises(InputError, match="--cp must be between 1 and 1,024"):
        train_request_checks(TrainRequest(8, PRESETS["gpt3-175b"], 8, cp=0), "bf16")


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(sorted(PRESETS)),
    st.sampled_from([8, 16, 64, 128, 512]),
    st.sampled_from([64, 256, 1000, 1536]),
)
def test_search_returns_a_fitting_layout_or_says_none_fits(
    catalog: Catalog, preset: str, gpus: int, batch: int
) -> None:
    spec = load_spec_text(cluster(64)).spec
    try:
        answer = train(spec, catalog, TrainRequest(gpus, PRESETS[preset], batch))
    except BudgetError as exc:
        assert "fits in memory" in exc.message or "no layout splits" in exc.message
        return
    assert answer.result.memory.fits and answer.result.layout.gpus == gpus


def test_fixed_layout_that_cannot_fit_is_shown_as_not_fitting(catalog: Catalog) -> None:
    spec = load_spec_text(cluster(1)).spec
    answer = train(spec, catalog, TrainRequest(8, PRESETS["gpt3-175b"], 8, 1, 8, 1))
    assert not answer.result.memory.fits and answer.result.layout.tp == 8
