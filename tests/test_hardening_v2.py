"""Hardening v2, the error contract and cost: regression tests for the attacks.

Each test is one attack of the adversarial trial that broke before its fix: layouts that
left zero data-parallel replicas (exit 3, ZeroDivisionError), a spec that is not UTF-8
(located by byte offset, not line and column), bidirectional-override characters echoed raw
(Trojan Source), and hundreds of identical budgets (evaluated once each, minutes of work).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infra.budget import evaluate, memo, train_plan
from infra.budget.evaluate import BudgetResult
from infra.budget.train_plan import TrainAnswer
from infra.budget.train_request import TrainRequest
from infra.catalog import Catalog, load_catalog
from infra.errors import Position, escape_controls
from infra.reading import byte_position
from infra.spec import Spec, load_spec
from infra.spec.base import repeated
from infra.spec.budgets import MAX_BUDGETS, Budget
from infra.spec.scheduling import Scheduler

from .conftest import ROOT
from .test_cli import railplan

SPEC = str(ROOT / "examples" / "dgx-h100-superpod.yaml")
TRAIN = ["train", SPEC, "--gpus", "16", "--global-batch", "64", "--model", "gpt3-175b"]

LAYOUTS = {
    "tp larger than the job": ["--tp", "32", "--pp", "1"],
    "pp larger than the job": ["--tp", "1", "--pp", "32"],
    "huge tp": ["--tp", str(10**20), "--pp", "1"],
    "tp x cp x pp larger than the job": ["--tp", "8", "--pp", "1", "--cp", "4"],
    "cp larger than the job": ["--cp", "64"],
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_a_layout_without_replicas_is_a_usage_error(layout: list[str]) -> None:
    # before: exit 3, "internal error: ZeroDivisionError" (DP = 0 divided the global batch)
    result = railplan(*TRAIN, *layout)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "hint:" in result.stderr, result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_a_layout_without_replicas_is_a_json_error(layout: list[str]) -> None:
    result = railplan(*TRAIN, *layout, "--format", "json")
    doc = json.loads(result.stdout)
    assert result.returncode == 2 and doc["exit_code"] == 2, doc
    (error,) = doc["errors"]
    assert error["path"] in ("--gpus", "--cp") and error["hint"], error


BAD_UTF8 = b"name: x\nnode_groups:\n  - {name: g\xff, node: dgx-h100, count: 2}\n"
VERBS = {
    "lint": ["lint", "{spec}"],
    "plan": ["plan", "{spec}"],
    "render": ["render", "{spec}", "--root", "{tmp}/tree"],
    "report": ["report", "{spec}", "--output", "{tmp}/report.html"],
    "diff": ["diff", SPEC, "{spec}"],
    "verify": ["verify", "{spec}", "{tmp}/dump.txt"],
    "train": ["train", "{spec}", "--gpus", "16", "--global-batch", "64", "--model", "gpt3-175b"],
    "trace": ["trace", "{spec}", "--jobs", "5"],
}


@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_spec_that_is_not_utf8_is_located_by_line_and_column(
    verb: list[str], tmp_path: Path
) -> None:
    # before: "not UTF-8 text (invalid byte at offset 33)", no line or column
    spec = tmp_path / "bad.yaml"
    spec.write_bytes(BAD_UTF8)
    (tmp_path / "dump.txt").write_text("")
    args = [a.format(spec=spec, tmp=tmp_path) for a in verb]
    result = railplan(*args)
    assert result.returncode == 2, result
    assert f"{spec}:3:13: error" in result.stderr and "not UTF-8" in result.stderr, result
    assert "offset" not in result.stderr


def test_byte_positions_count_characters_and_skip_the_byte_order_mark() -> None:
    assert byte_position(b"\xef\xbb\xbfa: \xff", 6) == Position(1, 4)
    assert byte_position("a: 1\nb: ñ".encode() + b"\xff", 10) == Position(2, 5)


RLO, PDF = "\u202e", "\u202c"  # right-to-left override, pop directional formatting


def test_lint_excerpts_escape_bidirectional_overrides(tmp_path: Path) -> None:
    # before: the excerpt echoed U+202E raw, reordering what a reviewer sees (Trojan Source)
    text = (ROOT / "tests" / "corpus" / "lint" / "air-cooling.yaml").read_text()
    spec = tmp_path / "bidi.yaml"
    spec.write_text(text.replace("power_kw: 80", f"power_kw: 80  # {RLO}riaf{PDF}"))
    result = railplan("lint", str(spec))
    assert "5 |     power_kw: 80  # \\u202eriaf\\u202c" in result.stdout, result.stdout
    assert RLO not in result.stdout and PDF not in result.stdout


def test_error_lines_escape_bidirectional_overrides(tmp_path: Path) -> None:
    # before: a file name with U+202E reached the error line raw (only Cc/Zl/Zp were escaped)
    spec = tmp_path / f"spec{RLO}lmay.yaml"
    spec.write_text("name: x\nnode_groups: 3\n")
    result = railplan("plan", str(spec))
    assert result.returncode == 2 and "spec\\u202elmay.yaml:2:" in result.stderr, result
    assert RLO not in result.stderr


@pytest.mark.parametrize("char", ["\u202a", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff"])
def test_every_format_character_is_escaped(char: str) -> None:
    assert escape_controls(f"a{char}b") == "a" + char.encode("unicode_escape").decode() + "b"


SCALING = '  - scaling_efficiency: {gpus: 256, min: 0.5, model: gpt3-175b, claim: "a claim"}\n'
OTHER = "  - scaling_efficiency: {gpus: 128, min: 0.5, model: gpt3-175b}\n"


def _budget_spec(tmp_path: Path, budgets: str) -> Path:
    text = Path(SPEC).read_text()
    spec = tmp_path / "budgets.yaml"
    spec.write_text(text[: text.index("budgets:")] + "budgets:\n" + budgets)
    return spec


def test_a_spec_declares_at_most_max_budgets(tmp_path: Path) -> None:
    # before: 300 identical budgets were all evaluated, each by lint, budget and report
    spec = _budget_spec(tmp_path, SCALING * (MAX_BUDGETS + 1))
    result = railplan("lint", str(spec))
    line = Path(spec).read_text().splitlines().index("budgets:") + 1
    assert result.returncode == 2, result
    assert f"{spec}:{line}:1: error[RP000]: must list at most {MAX_BUDGETS} items" in result.stderr


def test_each_distinct_budget_is_evaluated_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before: 6 layout searches for 5 equal budgets and 1 other, again for each reader
    searches: list[int] = []
    dispatched: list[int] = []

    def counting_train(spec: Spec, catalog: Catalog, request: TrainRequest) -> TrainAnswer:
        searches.append(request.gpus)
        return train_plan.train(spec, catalog, request)

    def counting_dispatch(budget: Budget, *args: Any) -> BudgetResult:
        dispatched.append(budget.scaling_efficiency.gpus)  # type: ignore[union-attr]
        return real_dispatch(budget, *args)

    real_dispatch = evaluate._dispatch
    monkeypatch.setattr(memo, "train", counting_train)
    monkeypatch.setattr(evaluate, "_dispatch", counting_dispatch)
    spec = load_spec(_budget_spec(tmp_path, SCALING * 5 + OTHER)).spec
    catalog = load_catalog()
    first = evaluate.evaluate_budgets(spec, catalog, None)
    again = evaluate.evaluate_budgets(spec, catalog, None)  # as the report does after lint
    # each call evaluates each distinct budget once; the layout search runs once in all
    for i, b in enumerate(spec.budgets):  # and its step drawings
        evaluate.scaling_answer(b.scaling_efficiency, spec, catalog, f"budgets[{i}]")  # type: ignore[union-attr]
    assert sorted(searches) == [128, 256] and sorted(dispatched) == [128, 128, 256, 256]
    assert first == again and [r.index for r in first] == list(range(6))
    assert [r.path for r in first][4:] == [
        "budgets[4].scaling_efficiency",
        "budgets[5].scaling_efficiency",
    ]
    assert len({(r.predicted, r.detail) for r in first[:5]}) == 1


class _CountedName(str):
    """A tenant name that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_tenant_uniqueness_is_linear() -> None:
    # before: names.count(n) per name, n^2 = 4,000,000 comparisons for 2,000 tenants
    tenants = [SimpleNamespace(name=_CountedName(f"t{i}")) for i in range(2000)]
    tenants.append(SimpleNamespace(name="t7"))
    with pytest.raises(ValueError, match="repeated: t7"):
        Scheduler._unique_tenants(tenants)  # type: ignore[arg-type]
    assert _CountedName.compared <= len(tenants)


def test_repeated_lists_each_value_seen_twice_once() -> None:
    assert repeated([3, 1, 3, 2, 1, 3]) == [1, 3] and repeated(["a"]) == []
