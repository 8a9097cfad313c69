"""DESIGN.md: with ``--format json`` standard output holds exactly one JSON document, errors
included. Every verb with a JSON format answers a bad file, a bad option and a bad request
with ``{"errors": [...], "exit_code": 2}`` on stdout (lint with its findings, diff with
``changed: null``) and leaves stderr empty; text mode keeps its one stderr line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_cli import railplan

SPEC = str(ROOT / "examples" / "claims-h100-8k.yaml")
MISSING = "/nonexistent/spec.yaml"
CASES = {
    "plan, unreadable": ["plan", MISSING, "--format", "json"],
    "budget, unreadable": ["budget", MISSING, "-f", "json"],
    "predict, bad option": ["predict", SPEC, "--collective", "nope", "--gpus", "8", "--format=json"],
    "predict, too many GPUs": [
        "predict", SPEC, "--collective", "all_reduce", "--gpus", "99999", "--format", "json",
    ],
    "train, too many GPUs": [
        "train", SPEC, "--gpus", "99999", "--model", "gpt3-175b", "--global-batch", "8", "-fjson",
    ],
    "train, bad layout": [
        "train", SPEC, "--gpus", "64", "--model", "gpt3-175b", "--global-batch", "64",
        "--tp", "3", "--pp", "1", "--format", "json",
    ],
    "rules, bad option": ["rules", "--format", "json", "--nope"],
}  # fmt: skip


@pytest.mark.parametrize("args", CASES.values(), ids=CASES.keys())
def test_json_mode_errors_are_one_document_on_stdout(args: list[str]) -> None:
    result = railplan(*args)
    assert result.returncode == 2, result
    doc = json.loads(result.stdout)  # exactly one document: json.loads rejects trailing text
    assert doc["exit_code"] == 2 and doc["errors"], doc
    for error in doc["errors"]:
        assert set(error) == {"file", "line", "column", "rule", "message", "path", "hint"}
        assert error["message"] and "\n" not in error["message"]
    assert result.stderr == ""


def test_spec_errors_keep_their_location_in_json(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: b\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: -1}\n")
    result = railplan("budget", str(spec), "--format", "json")
    (error,) = json.loads(result.stdout)["errors"]
    assert result.returncode == 2 and error["file"] == str(spec)
    assert (error["line"], error["rule"]) == (3, "RP000") and "count" in error["path"]


def test_text_mode_errors_stay_one_stderr_line() -> None:
    result = railplan(*CASES["train, too many GPUs"][:-1])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "asks for 99999 GPUs" in result.stderr


@pytest.mark.parametrize("verb", ["plan", "budget"])
def test_a_spec_that_cannot_be_planned_fails_as_one_document(verb: str) -> None:
    spec = str(ROOT / "tests" / "corpus" / "lint" / "beyond-three-tiers.yaml")
    result = railplan(verb, spec, "--format", "json")
    doc = json.loads(result.stdout)
    assert result.returncode == 1 and doc["exit_code"] == 1 and result.stderr == ""
    (error,) = doc["errors"]
    assert (error["line"], error["column"], error["path"]) == (7, 3, "fabrics.compute")
