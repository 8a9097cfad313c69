"""Issue 26 (hardening v2), the error contract and cost: regression tests for the attacks.

Each test is one attack of the adversarial trial that broke before its fix: layouts that
left zero data-parallel replicas (exit 3, ZeroDivisionError), a spec that is not UTF-8
(located by byte offset, not line and column), bidirectional-override characters echoed raw
(Trojan Source), and hundreds of identical budgets (evaluated once each, minutes of work).
"""

from __future__ import annotations

import json

import pytest

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
