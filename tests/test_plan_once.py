"""Each command plans each spec once and evaluates its budgets once.

`render` and `report` used to lint (which plans its own copy) and then plan again, and
`report` evaluated the budgets in lint and again for the page. The counters wrap the one
function every plan goes through (`infra.topology.plan._expand`) and `evaluate_budgets`
wherever it is imported; the commands run in-process (`tests.cli_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import infra.lint.context
import infra.report.report
import infra.topology.plan

from .cli_run import run_cli
from .conftest import ROOT

SPEC = ROOT / "examples" / "dgx-h100-superpod.yaml"  # lints clean, declares budgets


def _counting(calls: list[str], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return function(*args, **kwargs)

    return counted


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the specs planned so far (one entry per plan built)."""
    calls: list[str] = []
    original = infra.topology.plan._expand

    def counted(spec: Any, *args: Any) -> Any:
        calls.append(spec.name)
        return original(spec, *args)

    monkeypatch.setattr(infra.topology.plan, "_expand", counted)
    return calls


@pytest.fixture
def budget_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One entry per evaluation of a spec's budgets, by the module that asked."""
    calls: list[str] = []
    for module in (infra.lint.context, infra.report.report):
        original = module.evaluate_budgets
        monkeypatch.setattr(module, "evaluate_budgets", _counting(calls, module.__name__, original))
    return calls


def test_render_plans_once(plans: list[str], tmp_path: Path) -> None:
    result = run_cli("render", str(SPEC), "--root", str(tmp_path / "tree"))
    assert result.returncode == 0, result.stderr
    assert plans == ["h100-pod1"]


def test_report_plans_once_and_evaluates_budgets_once(
    plans: list[str], budget_runs: list[str], tmp_path: Path
) -> None:
    result = run_cli("report", str(SPEC), "--output", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stderr
    assert plans == ["h100-pod1"]
    assert len(budget_runs) == 1
    assert "budget" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_report_of_a_spec_with_lint_errors_still_plans_once(
    plans: list[str], budget_runs: list[str], tmp_path: Path
) -> None:
    """Lint stops before its plan rules (RP082, SHARP without NVIDIA's subnet manager); the
    page then needs the plan and the budgets: each built once, still."""
    text = SPEC.read_text(encoding="utf-8").replace("subnet_manager: ufm", "subnet_manager: opensm")
    spec = tmp_path / "sharp-on-opensm.yaml"
    spec.write_text(text, encoding="utf-8")
    result = run_cli("report", str(spec), "--output", str(tmp_path / "r.html"))
    assert result.returncode == 1 and "lint error" in result.stdout, result.stderr
    assert plans == ["h100-pod1"]
    assert len(budget_runs) == 1


def test_diff_plans_each_spec_once(plans: list[str], tmp_path: Path) -> None:
    text = SPEC.read_text(encoding="utf-8")
    grown = tmp_path / "grown.yaml"
    grown.write_text(text.replace("count: 127", "count: 128"), encoding="utf-8")
    assert text != grown.read_text(encoding="utf-8")
    result = run_cli("diff", str(SPEC), str(grown))
    assert result.returncode == 1, result.stderr  # something changes
    assert plans == ["h100-pod1", "h100-pod1"]


def test_plan_plans_once(plans: list[str]) -> None:
    result = run_cli("plan", str(SPEC))
    assert result.returncode == 0, result.stderr
    assert plans == ["h100-pod1"]
