"""Budget evaluation: each kind on real example specs, verdicts, margins and errors."""

from __future__ import annotations

import json

import pytest

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.catalog import Catalog
from infra.lint import lint_loaded
from infra.lint.finding import Severity
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.topology import expand

from .conftest import ROOT
from .test_cli import railplan

CLAIMS = ROOT / "examples" / "claims-h100-8k.yaml"


def results(text: str, catalog: Catalog) -> list[BudgetResult]:
    spec = load_spec_text(text).spec
    return evaluate_budgets(spec, catalog, expand(spec, catalog))


@pytest.fixture(scope="module")
def claims(catalog: Catalog) -> dict[str, BudgetResult]:
    spec = load_spec(CLAIMS).spec
    found = evaluate_budgets(spec, catalog, expand(spec, catalog), spec_file=str(CLAIMS))
    return {r.kind: r for r in found}


def test_vendor_claims_are_each_answered(claims: dict[str, BudgetResult]) -> None:
    assert set(claims) == {
        "scaling_efficiency",
        "checkpoint",
        "sharp_gain",
        "all_reduce",
        "rack_power",
        "cluster_power",
        "cost_per_pflop_day",
        "model_fits",
        "utilization",
    }
    assert not any(r.error for r in claims.values())
    # The claims this cluster does not meet: GPT-3's 1536-sequence batch over 8,000 GPUs
    # leaves each pipeline a handful of micro-batches, so the bubble costs what 0.89 allows;
    # the shipped one-day trace never fills 8,000 GPUs, and jobs wait only for Slurm's next
    # pass over a submission: the background loop's, batch_sched_delay (3 whole seconds)
    # after its last, or a backfill cycle's (demand, not placement, sets the share; the spec
    # is a Slurm one, replayed with Slurm's scheduling). The vendor's
    # checkpoint in 92 s is 1.3x its 70 s estimate; held-out published saves took up to 1.6x
    # theirs, and the budget tests that slow edge.
    missed = [k for k, r in claims.items() if not r.passed]
    assert missed == ["scaling_efficiency", "checkpoint", "utilization"]
    assert 0.2 < claims["utilization"].predicted < 0.92
    assert "p95 wait 2 s" in claims["utilization"].detail
    assert 0.5 < claims["scaling_efficiency"].predicted < 0.89
    assert "bubble" in claims["scaling_efficiency"].detail
    # 2.8 TB at the declared 40 GB/s filesystem: 70 s, limited by the filesystem (1,000
    # writing nodes serialise far faster)
    assert claims["checkpoint"].predicted == pytest.approx(70.0)
    assert claims["checkpoint"].band_high == pytest.approx(70.0 * 1.596, rel=1e-3)
    assert "filesystem" in claims["checkpoint"].detail
    assert claims["sharp_gain"].predicted >= 0.4


def test_margins_are_signed_headroom() -> None:
    met = BudgetResult(0, "all_reduce", "p", 5.0, 10.0, "ms", "lower", "")
    missed = BudgetResult(0, "scaling_efficiency", "p", 0.8, 0.9, "", "higher", "")
    assert met.passed and met.margin == pytest.approx(0.5)
    assert not missed.passed and missed.margin == pytest.approx(-0.1 / 0.9)


BASE = "name: b\nnode_groups: [{name: gpu, node: dgx-h100, count: 16}]\n"


def test_too_many_gpus_is_an_error_not_a_verdict(catalog: Catalog) -> None:
    (r,) = results(
        BASE + "budgets:\n  - all_reduce: {bytes: 1GiB, gpus: 4096, max_ms: 5}\n", catalog
    )
    assert r.error and not r.passed and "4096" in r.error
    assert r.path == "budgets[0].all_reduce.gpus"


def test_sharp_gain_without_usable_sharp_is_zero(catalog: Catalog) -> None:
    text = BASE + (
        "fabrics: {compute: {switch: qm9700, sharp: true, rail_optimized: false}}\n"
        "budgets:\n  - sharp_gain: {bytes: 64KiB, gpus: 128, min: 0.3}\n"
    )
    (r,) = results(text, catalog)
    assert r.predicted == 0 and not r.passed and "not usable" in r.detail


def test_model_that_cannot_fit_fails_with_the_reason(catalog: Catalog) -> None:
    text = BASE + "budgets:\n  - model_fits: {model_params: 70e9, zero_stage: 0}\n"
    (r,) = results(text, catalog)
    assert not r.passed and r.predicted == pytest.approx(70e9 * 16 / 1e9)
    assert "fits on no GPU count" in r.detail


def test_fp8_scaling_on_a100_cannot_be_evaluated(catalog: Catalog) -> None:
    text = (
        "name: b\nnode_groups: [{name: gpu, node: dgx-a100-640gb, count: 16}]\nbudgets:\n"
        "  - scaling_efficiency: {gpus: 128, min: 0.9, model_params: 7e9, precision: fp8}\n"
    )
    (r,) = results(text, catalog)
    assert r.error and "fp8" in r.error


def test_budget_cli_exit_codes_and_json() -> None:
    claims = railplan("budget", "--format", "json", str(CLAIMS))
    assert claims.returncode == 0, claims.stdout  # the missed scaling figure is a claim
    doc = json.loads(claims.stdout)
    assert len(doc["budgets"]) == 9 and sum(not b["passed"] for b in doc["budgets"]) == 3
    missed = next(b for b in doc["budgets"] if not b["passed"])
    assert missed["kind"] == "scaling_efficiency" and "0.89" in missed["claim"]
    failing = railplan("budget", str(ROOT / "tests" / "corpus" / "lint" / "budget-not-met.yaml"))
    assert failing.returncode == 1 and "FAIL" in failing.stdout


def test_a_missed_claim_is_reported_as_a_warning_and_fails_nothing(catalog: Catalog) -> None:
    corpus = ROOT / "tests" / "corpus" / "lint"
    claim = railplan("budget", str(corpus / "budget-claim-not-met.yaml"))
    assert claim.returncode == 0 and "MISS" in claim.stdout and "FAIL" not in claim.stdout
    assert "0 of 1 budgets met; 1 claim not met (reported, not failed)" in claim.stdout
    findings = lint_loaded(load_spec(corpus / "budget-claim-not-met.yaml"), catalog)
    assert [(f.rule, f.severity) for f in findings] == [("RP060", Severity.WARNING)]
    assert "the claim does not hold here (a brochure: 1 GiB in 2 ms)" in findings[0].message
    requirement = lint_loaded(load_spec(corpus / "budget-not-met.yaml"), catalog)
    assert [(f.rule, f.severity) for f in requirement] == [("RP060", Severity.ERROR)]


def test_predict_cli_tables() -> None:
    a100 = railplan(
        "predict",
        str(ROOT / "examples" / "dgx-a100-superpod.yaml"),
        "--collective",
        "all_reduce",
        "--gpus",
        "1120",
    )
    assert a100.returncode == 0 and "# large-message busbw" in a100.stdout
    rows = [line for line in a100.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 31  # 8 B .. 8 GiB, factor 2
    h100 = railplan(
        "predict",
        str(ROOT / "examples" / "dgx-h100-superpod.yaml"),
        "--collective",
        "all_gather",
        "--gpus",
        "64",
        "--min-bytes",
        "1MiB",
        "--max-bytes",
        "1GiB",
        "--format",
        "json",
    )
    doc = json.loads(h100.stdout)
    assert (doc["collective"], doc["gpus"], doc["nodes"]) == ("all_gather", 64, 8)
    row = doc["rows"][0]
    assert set(row) == {
        "bytes",
        "time_us",
        "algbw_GBps",
        "busbw_GBps",
        "algorithm",
        "protocol",
        "band",  # every figure carries its error band and calibration flag
        "calibration",
    }
    low, high = row["band"]["busbw_GBps"]
    assert low <= row["busbw_GBps"] <= high and row["band"]["rows"] >= 3
    assert row["calibration"]["status"] in ("calibrated", "extrapolated")
    bad = railplan(
        "predict",
        str(ROOT / "examples" / "dgx-h100-superpod.yaml"),
        "--collective",
        "all_reduce",
        "--gpus",
        "12",
    )
    assert bad.returncode == 2 and "multiple of 8" in bad.stderr


def test_activation_shape_adds_memory(catalog: Catalog) -> None:
    base = BASE + "budgets:\n  - model_fits: {model_params: 7e9, zero_stage: 3%s}\n"
    shape = ", activations: {seq_len: 4096, micro_batch: 1, hidden: 4096, layers: 32, heads: 32}"
    (without,) = results(base % "", catalog)
    (with_acts,) = results(base % shape, catalog)
    assert with_acts.predicted > without.predicted
    assert "recompute-none" in with_acts.detail and "omitted" in without.detail


def test_a_claim_is_one_printable_line() -> None:
    base = "name: t\nnode_groups: [{name: g, node: dgx-h100, count: 4}]\nbudgets:\n"
    bad = base + '  - rack_power: {max_kw: 44, claim: "a\\x1b[31mb"}\n'
    with pytest.raises(SpecValidationError) as info:
        load_spec_text(bad)
    assert "one line of text, without control characters" in str(info.value.errors[0])
    assert load_spec_text(base + "  - rack_power: {max_kw: 44, claim: 'a vendor: 44 kW'}\n")


def test_scaling_budget_takes_a_context_parallel_layout(catalog: Catalog) -> None:
    text = (
        "name: b\nnode_groups: [{name: gpu, node: dgx-h100, count: 64}]\nbudgets:\n"
        "  - scaling_efficiency: {gpus: 512, min: 0.5, model: llama3-405b, seq: 131072,\n"
        "      global_batch: 32, tp: 8, pp: 16, cp: 4, recompute: full}\n"
    )
    (r,) = results(text, catalog)
    assert not r.error and "TP 8 x CP 4 x PP 16 (x" in r.detail and "x DP 1," in r.detail
    with pytest.raises(SpecValidationError, match="must be at least 1"):
        load_spec_text(text.replace("cp: 4", "cp: 0"))
