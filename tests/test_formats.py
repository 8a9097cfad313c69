"""Tests for infra.lint.formats: text, JSON, SARIF 2.1.0 and GitHub workflow commands."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.errors import is_control
from infra.lint.finding import Finding, Severity
from infra.lint.formats import (
    INFORMATION_URI,
    MAX_SOURCE_WIDTH,
    SARIF_SCHEMA_URI,
    RuleInfo,
    format_github,
    format_json,
    format_sarif,
    format_text,
)

SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "ddddcccbf95c7c50c037b5b07eff4140556278ca574ff374db46786b5fce7949"
CONTRACT_KEYS = {"rule", "severity", "message", "path", "line", "column", "hint", "file"}


@dataclass(frozen=True)
class FakeRule:
    id: str
    name: str
    severity: Severity
    summary: str
    doc_text: str = ""

    @property
    def doc(self) -> str:  # a property, like engine.Rule.doc
        return self.doc_text or self.summary


RULES: list[RuleInfo] = [
    FakeRule(
        "RP001",
        "unknown-node",
        Severity.ERROR,
        "Node ids must exist in the catalog.",
        "Why: a typo deploys nothing.\n\nFix: use an id from `railplan catalog`.",
    ),
    FakeRule("RP011", "mig-layout-fits", Severity.WARNING, "MIG layouts must fit the GPU."),
    FakeRule("RP042", "sharp-note", Severity.INFO, "SHARP needs a UFM subnet manager."),
]


def finding(
    rule: str = "RP001",
    severity: Severity = Severity.ERROR,
    *,
    file: str = "examples/pod.yaml",
    line: int = 3,
    column: int = 5,
    message: str = "node 'dgx-h1000' is not in the catalog",
    path: str = "node_groups[0].node",
    hint: str = "did you mean 'dgx-h100'?",
) -> Finding:
    return Finding(file, line, column, rule, severity, message, path, hint)


@cache
def sarif_validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


# RFC 3986: a URI-reference uses only these characters, and "%" only as "%" HEXDIG HEXDIG.
_URI_CHARS = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$")


def assert_uri_reference(uri: str, *, absolute: bool) -> None:
    assert _URI_CHARS.match(uri), uri
    if absolute:
        assert uri.startswith("file:///"), uri
    else:
        first_segment = uri.split("/", 1)[0]
        assert ":" not in first_segment, uri  # would read as a scheme
        assert not uri.startswith("//"), uri  # would read as an authority


def check_sarif(text: str, findings: list[Finding]) -> dict[str, Any]:
    """Parse, schema-validate and cross-check one SARIF log; return it."""
    log: dict[str, Any] = json.loads(text)
    sarif_validator().validate(log)
    assert text.endswith("\n")
    assert log["$schema"] == SARIF_SCHEMA_URI
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "railplan"
    assert driver["informationUri"] == INFORMATION_URI
    assert len(run["results"]) == len(findings)
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"].strip()
        assert result["partialFingerprints"]["primaryLocationLineHash"]
        artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
        assert_uri_reference(artifact["uri"], absolute="uriBaseId" not in artifact)
    for rule in driver["rules"]:
        for key in ("shortDescription", "fullDescription", "help"):
            assert rule[key]["text"].strip()
        assert len(rule["shortDescription"]["text"]) <= 1024
        assert len(rule["fullDescription"]["text"]) <= 1024
    return log


# --- the schema file itself ------------------------------------------------------------------


def test_schema_file_is_the_unmodified_oasis_schema() -> None:
    raw = SCHEMA_PATH.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256
    schema = json.loads(raw)
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    jsonschema.Draft7Validator.check_schema(schema)


def test_schema_rejects_a_region_on_line_zero() -> None:
    log = json.loads(format_sarif([finding()], RULES, "0.1.0"))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate(log)


# --- SARIF -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "findings",
    [
        pytest.param([], id="no-findings"),
        pytest.param([finding()], id="one-with-position"),
        pytest.param([finding(line=0, column=0)], id="no-position"),
        pytest.param([finding(column=0)], id="line-without-column"),
        pytest.param(
            [
                finding("RP001", Severity.ERROR),
                finding("RP011", Severity.WARNING, line=9),
                finding("RP042", Severity.INFO, line=1, column=1),
            ],
            id="all-severities",
        ),
        pytest.param(
            [
                finding(
                    message='GPU "H100 ü 漢字 🚀" can\'t do {fp8}',
                    hint="use 'a100' \\ \"b\"",
                    path='mig_layouts["infer-day"]',
                    file="specs/ünï cödé/pod #1.yaml",
                )
            ],
            id="unicode-and-quotes",
        ),
        pytest.param([finding(message="", hint="", path="")], id="empty-strings"),
    ],
)
def test_sarif_output_is_schema_valid(findings: list[Finding]) -> None:
    check_sarif(format_sarif(findings, RULES, "0.1.0"), findings)


def test_sarif_rule_metadata_and_levels() -> None:
    findings = [
        finding("RP001", Severity.ERROR),
        finding("RP011", Severity.WARNING),
        finding("RP042", Severity.INFO),
    ]
    log = check_sarif(format_sarif(findings, RULES, "1.2.3"), findings)
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["version"] == "1.2.3"
    assert [r["id"] for r in driver["rules"]] == ["RP001", "RP011", "RP042"]
    first = driver["rules"][0]
    assert first["name"] == "unknown-node"
    assert first["shortDescription"]["text"] == "Node ids must exist in the catalog."
    assert first["fullDescription"]["text"] == RULES[0].doc
    assert first["help"]["text"] == RULES[0].doc
    assert [r["defaultConfiguration"]["level"] for r in driver["rules"]] == [
        "error",
        "warning",
        "note",
    ]
    assert [r["level"] for r in log["runs"][0]["results"]] == ["error", "warning", "note"]


def test_sarif_rule_index_points_at_the_right_rule() -> None:
    findings = [
        finding("RP042", Severity.INFO),
        finding("RP001"),
        finding("RP999", Severity.WARNING),  # not among the rules: gets a descriptor
        finding("RP011", Severity.WARNING),
    ]
    duplicated = [*RULES, FakeRule("RP001", "dupe", Severity.INFO, "ignored")]
    log = check_sarif(format_sarif(findings, duplicated, "0.1.0"), findings)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["RP001", "RP011", "RP042", "RP999"]
    assert rules[0]["name"] == "unknown-node"  # the first of duplicate ids wins
    assert rules[3]["defaultConfiguration"]["level"] == "warning"
    by_rule = {r["ruleId"]: r["ruleIndex"] for r in log["runs"][0]["results"]}
    assert by_rule == {"RP001": 0, "RP011": 1, "RP042": 2, "RP999": 3}


def test_sarif_locations() -> None:
    findings = [
        finding(line=12, column=7),
        finding("RP011", Severity.WARNING, line=0, column=0, path=""),
        finding("RP042", Severity.INFO, line=4, column=0),
    ]
    results = check_sarif(format_sarif(findings, RULES, "0.1.0"), findings)["runs"][0]["results"]
    unplaced, no_column, located = results  # sorted by line
    physical = located["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "examples/pod.yaml", "uriBaseId": "%SRCROOT%"}
    assert physical["region"] == {"startLine": 12, "startColumn": 7, "endLine": 12}
    assert located["locations"][0]["logicalLocations"] == [
        {"fullyQualifiedName": "node_groups[0].node", "kind": "property"}
    ]
    assert "region" not in unplaced["locations"][0]["physicalLocation"]
    assert "logicalLocations" not in unplaced["locations"][0]
    assert no_column["locations"][0]["physicalLocation"]["region"] == {"startLine": 4, "endLine": 4}


@pytest.mark.parametrize(
    ("file", "root", "uri", "base"),
    [
        ("./examples/pod.yaml", None, "examples/pod.yaml", True),
        ("specs/a b#1?.yaml", None, "specs/a%20b%231%3F.yaml", True),
        ("c:odd.yaml", None, "c%3Aodd.yaml", True),
        ("spécs/pod.yaml", None, "sp%C3%A9cs/pod.yaml", True),
        ("/repo/examples/pod.yaml", "/repo", "examples/pod.yaml", True),
        ("/elsewhere/pod.yaml", "/repo", "file:///elsewhere/pod.yaml", False),
        ("/abs/pod.yaml", None, "file:///abs/pod.yaml", False),
    ],
)
def test_sarif_artifact_uris(file: str, root: str | None, uri: str, base: bool) -> None:
    findings = [finding(file=file)]
    log = check_sarif(format_sarif(findings, RULES, "0.1.0", root=root), findings)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact["uri"] == uri
    assert ("uriBaseId" in artifact) is base


def test_sarif_message_has_hint_and_escaped_braces() -> None:
    findings = [finding(message="hostname {index:03d} repeats", hint="add {group}")]
    log = check_sarif(format_sarif(findings, RULES, "0.1.0"), findings)
    text = log["runs"][0]["results"][0]["message"]["text"]
    assert text == "hostname {{index:03d}} repeats\nHint: add {{group}}"


def test_sarif_empty_message_falls_back_to_rule_summary() -> None:
    findings = [finding(message="  ", hint="")]
    log = check_sarif(format_sarif(findings, RULES, "0.1.0"), findings)
    assert log["runs"][0]["results"][0]["message"]["text"] == RULES[0].summary


def test_sarif_fingerprints_are_stable_and_distinct() -> None:
    def fingerprints(findings: list[Finding]) -> list[str]:
        log = json.loads(format_sarif(findings, RULES, "0.1.0"))
        return [
            r["partialFingerprints"]["primaryLocationLineHash"] for r in log["runs"][0]["results"]
        ]

    base = fingerprints([finding(line=3)])
    assert base == fingerprints([finding(line=30, column=1)])  # lines moved: same alert
    assert base != fingerprints([finding(message="another problem")])
    assert base != fingerprints([finding(file="examples/other.yaml")])
    assert base != fingerprints([finding(path="node_groups[1].node")])
    twins = fingerprints([finding(line=3), finding(line=8)])
    assert len(set(twins)) == 2
    assert {fp.split(":")[0] for fp in twins} == {base[0].split(":")[0]}


def test_sarif_is_deterministic() -> None:
    findings = [finding("RP011", Severity.WARNING), finding(), finding(file="a.yaml")]
    first = format_sarif(findings, RULES, "0.1.0")
    assert first == format_sarif(list(reversed(findings)), RULES, "0.1.0")
    assert first.isascii()


def test_sarif_clips_long_descriptions_for_github() -> None:
    long_rule = FakeRule("RP050", "x" * 300, Severity.ERROR, "s" * 2000, "d" * 5000)
    findings = [finding("RP050")]
    log = check_sarif(format_sarif(findings, [long_rule], "0.1.0"), findings)
    rule = log["runs"][0]["tool"]["driver"]["rules"][0]
    assert len(rule["name"]) == 255
    assert rule["help"]["text"] == "d" * 5000


# --- JSON ------------------------------------------------------------------------------------


def test_json_keys_match_the_contract_exactly() -> None:
    findings = [finding(), finding("RP011", Severity.WARNING, line=0, column=0, hint="")]
    text = format_json(findings)
    document = json.loads(text)
    assert set(document) == {"findings"}
    assert len(document["findings"]) == 2
    for item in document["findings"]:
        assert set(item) == CONTRACT_KEYS
        assert isinstance(item["line"], int)
        assert isinstance(item["column"], int)
    assert document["findings"][1] == {
        "rule": "RP001",
        "severity": "error",
        "message": "node 'dgx-h1000' is not in the catalog",
        "path": "node_groups[0].node",
        "file": "examples/pod.yaml",
        "line": 3,
        "column": 5,
        "hint": "did you mean 'dgx-h100'?",
    }
    assert document["findings"][0]["severity"] == "warning"  # line 0 sorts first


def test_json_is_sorted_indented_and_deterministic() -> None:
    findings = [finding(file="b.yaml"), finding(file="a.yaml", line=9), finding(file="a.yaml")]
    text = format_json(findings)
    assert text == format_json(list(reversed(findings)))
    assert text.endswith("}\n")
    assert text.startswith('{\n  "findings": [\n    {\n      "column"')
    files = [(f["file"], f["line"]) for f in json.loads(text)["findings"]]
    assert files == [("a.yaml", 3), ("a.yaml", 9), ("b.yaml", 3)]
    assert format_json([]) == '{\n  "findings": []\n}\n'


# --- GitHub workflow commands ----------------------------------------------------------------


def test_github_command_per_severity() -> None:
    findings = [
        finding("RP001", Severity.ERROR),
        finding("RP011", Severity.WARNING, line=4),
        finding("RP042", Severity.INFO, line=5, column=0, hint="", path=""),
    ]
    lines = format_github(findings, RULES).splitlines()
    message = "node 'dgx-h1000' is not in the catalog"
    assert lines == [
        f"::error file=examples/pod.yaml,line=3,col=5,title=RP001 unknown-node::{message}"
        + " [node_groups[0].node]%0Ahint: did you mean 'dgx-h100'?",
        f"::warning file=examples/pod.yaml,line=4,col=5,title=RP011 mig-layout-fits::{message}"
        + " [node_groups[0].node]%0Ahint: did you mean 'dgx-h100'?",
        f"::notice file=examples/pod.yaml,line=5,title=RP042 sharp-note::{message}",
    ]


def test_github_escapes_data_and_properties() -> None:
    f = finding(
        file="dir,with:colons/100%.yaml",
        message="50% of\r\nthe pod: a, b",
        hint="",
        path="",
        line=0,
        column=0,
    )
    assert format_github([f]) == (
        "::error file=dir%2Cwith%3Acolons/100%25.yaml,title=RP001::50%25 of%0D%0Athe pod: a, b\n"
    )


def test_github_shows_control_characters_escaped() -> None:
    """An OSC title escape in a trace tenant or a file name once reached the log raw."""
    f = finding(
        file="spec\x1b]0;pwned\x07.yaml",
        message="tenant 'a\x1b]0;x\x07' unknown\u202e",
        hint="",
        path="",
        line=0,
        column=0,
    )
    out = format_github([f])
    assert out == (
        "::error file=spec\\x1b]0;pwned\\x07.yaml,title=RP001::"
        "tenant 'a\\x1b]0;x\\x07' unknown\\u202e\n"
    )
    assert not any(is_control(c) for c in out.rstrip("\n"))


def test_github_title_without_rule_names_and_no_findings() -> None:
    out = format_github([finding(hint="", path="")])
    assert out == "::error file=examples/pod.yaml,line=3,col=5,title=RP001::" + (
        "node 'dgx-h1000' is not in the catalog\n"
    )
    assert format_github([]) == ""


# --- text ------------------------------------------------------------------------------------


def caret_column(out: str, source_row: str) -> tuple[str, int]:
    """The shown source line after its gutter, and the index of the caret under it."""
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"{source_row} |"))
    source = lines[row].split(" | ", 1)[1]
    caret_line = lines[row + 1].split(" | ", 1)[1]
    assert caret_line.strip() == "^"
    return source, caret_line.index("^")


def test_text_caret_under_the_column() -> None:
    lines = ["name: pod", "node_groups:", "  - node: dgx-h1000"]
    out = format_text([finding(line=3, column=11)], {"examples/pod.yaml": lines}, 1)
    assert out.splitlines()[:4] == [
        "examples/pod.yaml:3:11: error[RP001] node 'dgx-h1000' is not in the catalog "
        + "[node_groups[0].node]",
        "  3 |   - node: dgx-h1000",
        "    |           ^",
        "  = hint: did you mean 'dgx-h100'?",
    ]
    source, at = caret_column(out, "3")
    assert source[at:].startswith("dgx-h1000")


def test_text_caret_with_tabs_and_wide_characters() -> None:
    line = '\tlabel:\t"漢字" # x'
    column = line.index("#") + 1  # 1-based character column, as the YAML loader counts
    out = format_text([finding(line=1, column=column)], {"examples/pod.yaml": [line]}, 1)
    source, at = caret_column(out, "1")
    assert "\t" not in source
    shown_width = sum(
        2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        for ch in source[: source.index("#")]
    )
    assert at == shown_width


def test_text_long_line_is_cut_around_the_column() -> None:
    line = "x" * 500 + "TARGET" + "y" * 500
    column = 501
    out = format_text([finding(line=1, column=column)], {"examples/pod.yaml": [line]}, 1)
    source, at = caret_column(out, "1")
    assert source.startswith("…") and source.endswith("…")
    assert len(source) == MAX_SOURCE_WIDTH + 2
    assert source[at:].startswith("TARGET")


def test_text_line_beyond_file_end_or_unknown_shows_no_source() -> None:
    sources = {"examples/pod.yaml": ["name: pod"]}
    out = format_text([finding(line=7), finding(line=0, column=0)], sources, 1)
    assert " | " not in out
    assert out.splitlines()[0].startswith("examples/pod.yaml: error[RP001]")
    assert out.splitlines()[2].startswith("examples/pod.yaml:7:5: error[RP001]")


def test_text_summary_counts() -> None:
    findings = [
        finding(),
        finding(line=4),
        finding(file="b.yaml"),
        finding("RP011", Severity.WARNING),
        finding("RP042", Severity.INFO),
        finding("RP042", Severity.INFO, line=8),
    ]
    assert (
        format_text(findings, None, 5).splitlines()[-1] == "3 errors, 1 warning, 2 info in 5 files"
    )
    assert format_text(findings[:1], None, 1).splitlines()[-1] == "1 error in 1 file"
    assert format_text([], None, 2) == "no problems found in 2 files\n"
    assert format_text([], None) == "no problems found\n"
    assert format_text(findings[3:4]).splitlines()[-1] == "1 warning in 1 file"


def test_text_escapes_control_characters_and_colors_on_request() -> None:
    f = finding(message="bad\nvalue \x1b[31m", hint="line1\nline2")
    plain = format_text([f], {"examples/pod.yaml": ["a", "b", "x\x1by"]}, 1)
    assert "\x1b" not in plain
    assert "bad\\nvalue \\x1b[31m" in plain
    assert "  = hint: line1\\nline2" in plain
    colored = format_text([f], None, 1, color=True)
    assert "\x1b[1;31merror\x1b[0m" in colored


# --- properties ------------------------------------------------------------------------------

any_text = st.text(max_size=40)


@st.composite
def findings_strategy(draw: st.DrawFn) -> Finding:
    return Finding(
        file=draw(any_text),
        line=draw(st.integers(min_value=0, max_value=10_000)),
        column=draw(st.integers(min_value=0, max_value=500)),
        rule=draw(st.sampled_from(["RP001", "RP011", "RP042", "RP777"]) | st.text(max_size=6)),
        severity=draw(st.sampled_from(list(Severity))),
        message=draw(any_text),
        path=draw(any_text),
        hint=draw(any_text),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(findings_strategy(), max_size=4), st.sampled_from([None, "/", "/repo"]))
def test_arbitrary_text_never_breaks_any_format(findings: list[Finding], root: str | None) -> None:
    check_sarif(format_sarif(findings, RULES, "0.1.0", root=root), findings)

    document = json.loads(format_json(findings))
    assert document == {"findings": [f.as_json() for f in sorted(findings)]}

    github = format_github(findings, RULES)
    lines = github.split("\n")
    assert lines[-1] == ""
    assert len(lines) == len(findings) + 1
    for line in lines[:-1]:
        assert "\r" not in line
        assert line.startswith(("::error", "::warning", "::notice"))
        assert not any(is_control(c) for c in line), line

    sources = {f.file: [f.message, f.hint, f.path] for f in findings}
    text = format_text(findings, sources, len(findings))
    assert all(ch == "\n" or unicodedata.category(ch) not in ("Cc", "Zl", "Zp") for ch in text)
