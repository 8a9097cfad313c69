"""The broken-spec corpus: each file states the finding (or error) and line it must produce.

Lint corpus files (tests/corpus/lint) start with ``# expect: RPnnn line N`` lines and must
produce exactly those findings. Schema corpus files (tests/corpus/schema) start with
``# expect-error: LINE:COL text | more text`` and must fail to load with an error at that
position whose one-line rendering contains each text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.errors import InputError, RailplanError
from infra.lint import lint_loaded
from infra.lint.engine import all_rules
from infra.lint.finding import Severity
from infra.spec import SpecValidationError, load_spec

from .conftest import ROOT, TESTS

LINT_CORPUS = sorted((TESTS / "corpus" / "lint").glob("*.yaml"))
SCHEMA_CORPUS = sorted((TESTS / "corpus" / "schema").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
_EXPECT = re.compile(r"^# expect: (RP\d{3}) line (\d+)$", re.MULTILINE)
_EXPECT_ERROR = re.compile(r"^# expect-error: (\d+):(\d+) (.+)$", re.MULTILINE)
# Files that cannot carry a comment header.
_HEADERLESS = {
    "empty.yaml": (1, 1, ["the file is empty"]),
    "binary.yaml": (1, 1, ["binary data (a NUL byte)"]),
}


def _expected_findings(path: Path) -> set[tuple[str, int]]:
    found = {(rule, int(line)) for rule, line in _EXPECT.findall(path.read_text())}
    assert found, f"{path.name} has no '# expect:' line"
    return found


@pytest.mark.parametrize("path", LINT_CORPUS, ids=lambda p: p.stem)
def test_lint_corpus_yields_exactly_its_findings(path: Path) -> None:
    findings = lint_loaded(load_spec(path), load_catalog())
    assert {(f.rule, f.line) for f in findings} == _expected_findings(path), findings


def _expected_error(path: Path) -> tuple[int | None, int | None, list[str]]:
    if path.name in _HEADERLESS:
        return _HEADERLESS[path.name]
    m = _EXPECT_ERROR.search(path.read_text())
    assert m, f"{path.name} has no '# expect-error:' line"
    return int(m.group(1)), int(m.group(2)), [s.strip() for s in m.group(3).split("|")]


@pytest.mark.parametrize("path", SCHEMA_CORPUS, ids=lambda p: p.stem)
def test_schema_corpus_fails_at_the_right_place(path: Path) -> None:
    line, column, texts = _expected_error(path)
    with pytest.raises(RailplanError) as caught:
        load_spec(path)
    err = caught.value
    assert isinstance(err, SpecValidationError | InputError)
    errors = err.errors if isinstance(err, SpecValidationError) else [err]
    rendered = [(e.position, e.one_line()) for e in errors]
    assert any(
        (line is None or (pos and (pos.line, pos.column) == (line, column)))
        and all(t in text for t in texts)
        for pos, text in rendered
    ), rendered
    assert all("\n" not in text for _, text in rendered)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_lint_clean(path: Path) -> None:
    findings = lint_loaded(load_spec(path), load_catalog())
    # met budgets are reported as info (with their headroom); nothing else may appear, but
    # for the vendor-claims example, whose scaling, checkpoint (92 s against a slow edge of 112 s)
    # and utilisation claims this cluster misses
    errors = [f for f in findings if f.severity is not Severity.INFO]
    if path.stem == "claims-h100-8k":
        assert [(f.rule, f.path) for f in errors] == [
            ("RP060", "budgets[0].scaling_efficiency"),
            ("RP060", "budgets[1].checkpoint"),
            ("RP060", "budgets[8].utilization"),
        ]
        assert "bubble" in errors[0].hint and errors[0].severity is Severity.WARNING
    elif path.stem == "k8s-tenants":
        # serving autoscales on a group that is whole GPUs from 21:00 and all weekend
        assert [(f.rule, f.path) for f in errors] == [
            ("RP107", "scheduler.tenants[1].autoscale.group")
        ]
    else:
        assert errors == []
    # RP093: the SuperPOD example runs Ubuntu 22.04, whose Slurm 21.08 cannot hold a run's
    # hosts off power saving
    infos = {f.rule for f in findings if f.severity is Severity.INFO}
    assert infos <= ({"RP060", "RP093"} if path.stem == "dgx-h100-superpod" else {"RP060"})


def test_every_rule_has_a_failing_corpus_case() -> None:
    covered = {rule for path in LINT_CORPUS for rule, _ in _expected_findings(path)}
    # RP042 cannot fire with the shipped catalog (every InfiniBand switch in it supports
    # SHARP); tests/test_rules.py checks it against a catalog with a non-SHARP switch.
    missing = {r.id for r in all_rules()} - covered - {"RP042"}
    assert not missing, f"rules without a corpus case: {sorted(missing)}"
