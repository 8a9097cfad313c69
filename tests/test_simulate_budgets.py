"""The replay budgets (`utilization`, `queueing_delay`): evaluated from the same replay as
`railplan simulate`, read relative to the spec's directory, failed and passed by their limits,
and bad traces reported as the budget's error, located. No GPU is needed: the replay is the
simulator's arithmetic over the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.budget.evaluate import evaluate_budgets
from infra.budget.sim_policy import sim_policy
from infra.catalog import Catalog
from infra.simulate.engine import simulate
from infra.simulate.traces import read_trace
from infra.spec import load_spec
from infra.topology import expand
from tests.cli_run import ROOT, run_cli

BASE = (ROOT / "examples" / "k8s-tenants.yaml").read_text(encoding="utf-8")
BASE = BASE[: BASE.index("budgets:")]  # the example's own budgets need storage figures
TRACE = (
    "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"
    "a,0,7200,256,1000,research,high,\n"
    "b,60,3600,256,1000,research,high,\n"
    "c,120,600,1,250,serving,critical,\n"
    "d,180,1800,8,1000,serving,critical,\n"
    "e,240,3600,8,1000,research,high,\n"
)


def _cluster(tmp_path: Path, budgets: str) -> Path:
    (tmp_path / "traces").mkdir(exist_ok=True)
    (tmp_path / "traces" / "day.csv").write_text(TRACE, encoding="utf-8")
    spec = tmp_path / "cluster.yaml"
    spec.write_text(BASE + "budgets:\n" + budgets, encoding="utf-8")
    return spec


def _replayed(spec_file: Path, catalog: Catalog) -> tuple[float, float]:
    """The cluster's mean allocation and research's p95 delay, straight from the simulator."""
    loaded = load_spec(spec_file)
    plan = expand(loaded.spec, catalog)
    trace = read_trace(str(spec_file.parent / "traces" / "day.csv"))
    result = simulate(
        loaded.spec, plan, catalog, trace, policy=sim_policy(loaded.spec, catalog, plan)
    )
    return result.allocation_mean, result.queueing["research"].p95_s


def test_budgets_read_the_replay_simulate_makes(tmp_path: Path, catalog: Catalog) -> None:
    spec = _cluster(
        tmp_path,
        "  - utilization: {trace: traces/day.csv, min: 0.01}\n"
        "  - queueing_delay: {trace: traces/day.csv, tenant: research, max_s: 86400}\n",
    )
    mean, p95 = _replayed(spec, catalog)
    loaded = load_spec(spec)
    plan = expand(loaded.spec, catalog)
    use, wait = evaluate_budgets(loaded.spec, catalog, plan, spec_file=str(spec))
    assert use.predicted == pytest.approx(mean) and 0 < mean < 1
    assert wait.predicted == pytest.approx(p95) and wait.unit == "s"
    assert use.verdict == "pass" and wait.verdict == "pass"


def test_a_limit_the_replay_misses_fails_and_a_claim_is_a_miss(
    tmp_path: Path, catalog: Catalog
) -> None:
    spec = _cluster(
        tmp_path,
        "  - utilization: {trace: traces/day.csv, min: 0.92}\n"
        '  - utilization: {trace: traces/day.csv, min: 0.92, claim: "article: 92 %"}\n',
    )
    loaded = load_spec(spec)
    plan = expand(loaded.spec, catalog)
    fail, miss = evaluate_budgets(loaded.spec, catalog, plan, spec_file=str(spec))
    assert fail.predicted < 0.92 and fail.verdict == "fail" and miss.verdict == "miss"


def test_the_trace_is_found_next_to_the_spec_from_any_directory(tmp_path: Path) -> None:
    spec = _cluster(tmp_path, "  - utilization: {trace: traces/day.csv, min: 0.01}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_cli("budget", str(spec), "--format", "json", cwd=elsewhere)
    assert result.returncode == 0, result.stdout + result.stderr
    (only,) = json.loads(result.stdout)["budgets"]
    assert only["kind"] == "utilization" and only["passed"] and not only["error"]


def test_a_bad_trace_row_is_the_budgets_located_error(tmp_path: Path) -> None:
    spec = _cluster(tmp_path, "  - queueing_delay: {trace: traces/day.csv, max_s: 60}\n")
    (tmp_path / "traces" / "day.csv").write_text(
        TRACE.replace("d,180,1800", "d,soon,1800"), encoding="utf-8"
    )
    result = run_cli("budget", str(spec), "--format", "json")
    assert result.returncode == 1
    (only,) = json.loads(result.stdout)["budgets"]
    assert not only["passed"] and "day.csv:5:" in only["error"] and "submit_s" in only["error"]


def test_an_unknown_tenant_is_an_error_with_a_hint(tmp_path: Path, catalog: Catalog) -> None:
    spec = _cluster(
        tmp_path, "  - queueing_delay: {trace: traces/day.csv, tenant: reserch, max_s: 60}\n"
    )
    loaded = load_spec(spec)
    (only,) = evaluate_budgets(
        loaded.spec, catalog, expand(loaded.spec, catalog), spec_file=str(spec)
    )
    assert only.verdict == "error" and "did you mean 'research'" in only.error_text


def test_budgets_naming_one_trace_replay_it_once(
    tmp_path: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infra.simulate import engine  # the budgets import its `simulate` when they replay

    calls = []
    real = engine.simulate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "simulate", counted)
    spec = _cluster(
        tmp_path,
        "  - utilization: {trace: traces/day.csv, min: 0.01}\n"
        "  - utilization: {trace: ./traces/day.csv, min: 0.01, tenant: research}\n"
        "  - queueing_delay: {trace: traces/../traces/day.csv, max_s: 86400}\n",
    )
    loaded = load_spec(spec)
    results = evaluate_budgets(
        loaded.spec, catalog, expand(loaded.spec, catalog), spec_file=str(spec)
    )
    assert [r.verdict for r in results] == ["pass", "pass", "pass"] and len(calls) == 1
