"""Issue 26 (hardening v2), the error contract and cost: regression tests for the attacks.

Each test is one attack of the adversarial trial that broke before its fix: layouts that
left zero data-parallel replicas (exit 3, ZeroDivisionError), a spec that is not UTF-8
(located by byte offset, not line and column), bidirectional-override characters echoed raw
(Trojan Source), and hundreds of identical budgets (evaluated once each, minutes of work).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import Position, escape_controls
from infra.spec.yamlpos import byte_position

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
