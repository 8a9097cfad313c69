"""mig-parted file checks (infra.lint.migparted) on NVIDIA's published files and broken ones."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog.models import Gpu
from infra.errors import RailplanError
from infra.lint.finding import Finding, Severity

yamlpos = pytest.importorskip("infra.spec.yamlpos")
migparted = pytest.importorskip("infra.lint.migparted")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "mig-parted"
GPUS_YAML = ROOT / "infra" / "catalog" / "data" / "gpus.yaml"
MARKER = re.compile(r"#\s*expect:\s*(RP\d{3})")


@cache
def gpus() -> dict[str, Gpu]:
    data = yaml.safe_load(GPUS_YAML.read_text(encoding="utf-8"))
    return {key: Gpu.model_validate(value) for key, value in data["gpus"].items()}


def check_file(name: str, **kwargs: Any) -> list[Finding]:
    data, source = yamlpos.read_yaml_file(DATA / name)
    findings: list[Finding] = migparted.check_mig_parted(data, source, gpus(), **kwargs)
    return findings


def check_text(text: str, **kwargs: Any) -> list[Finding]:
    data, source = yamlpos.load_yaml_text(text, "mig.yaml")
    findings: list[Finding] = migparted.check_mig_parted(data, source, gpus(), **kwargs)
    return findings


def config_names(name: str) -> list[str]:
    data, _ = yamlpos.read_yaml_file(DATA / name)
    return sorted(data["mig-configs"])


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


# --- NVIDIA's own files are clean ----------------------------------------------------------


@pytest.mark.parametrize("file", ["config-default.yaml", "config.yaml"])
@pytest.mark.parametrize("gpu_id", [None, *sorted(gpus())])
def test_nvidia_files_have_no_findings(file: str, gpu_id: str | None) -> None:
    assert check_file(file, gpu_id=gpu_id) == []
    assert check_file(file, gpu_id=gpu_id, driver_branch=550) == []


@pytest.mark.parametrize("config", config_names("config-default.yaml"))
def test_every_default_config_passes_on_the_gpus_it_applies_to(config: str) -> None:
    assert errors(check_file("config-default.yaml", config=config)) == []


def test_the_default_config_covers_every_catalog_gpu_in_all_balanced() -> None:
    for gpu_id in gpus():
        assert check_file("config-default.yaml", gpu_id=gpu_id, config="all-balanced") == []


# NVIDIA's config-default.yaml gives A100-80GB and H100-80GB the same "all-" configs.
_CONFIGS_80GB_CLASS = [
    "all-1g.10gb",
    "all-1g.10gb.me",
    "all-1g.20gb",
    "all-2g.20gb",
    "all-3g.40gb",
    "all-4g.40gb",
    "all-7g.80gb",
    "all-balanced",
]


@pytest.mark.parametrize(
    ("gpu_id", "configs"),
    [
        (
            "a100-sxm4-40gb",
            [
                "all-1g.5gb",
                "all-1g.5gb.me",
                "all-2g.10gb",
                "all-3g.20gb",
                "all-4g.20gb",
                "all-7g.40gb",
                "all-1g.10gb",
                "all-balanced",
                "all-disabled",
                "all-enabled",
            ],
        ),
        (
            "a100-sxm4-80gb",
            _CONFIGS_80GB_CLASS,
        ),
        (
            "h100-sxm5-80gb",
            _CONFIGS_80GB_CLASS,
        ),
        (
            "h200-sxm5-141gb",
            [
                "all-1g.18gb",
                "all-1g.18gb.me",
                "all-1g.35gb",
                "all-2g.35gb",
                "all-3g.71gb",
                "all-4g.71gb",
                "all-7g.141gb",
                "all-balanced",
            ],
        ),
    ],
)
def test_the_gpus_own_default_configs_pass_strictly(gpu_id: str, configs: list[str]) -> None:
    """Naming both the GPU and the config checks every unfiltered entry on that GPU."""
    for config in configs:
        assert check_file("config-default.yaml", gpu_id=gpu_id, config=config) == [], config


@pytest.mark.parametrize("config", config_names("config.yaml"))
def test_dgx_a100_example_passes_strictly_on_a100_40gb(config: str) -> None:
    assert check_file("config.yaml", gpu_id="a100-sxm4-40gb", config=config) == []


def test_a100_40gb_config_strictly_on_h100_names_the_unknown_profile() -> None:
    findings = check_file("config-default.yaml", gpu_id="h100-sxm5-80gb", config="all-1g.5gb")
    assert [(f.rule, f.path) for f in findings] == [
        ("RP103", 'mig-configs["all-1g.5gb"][0].mig-devices["1g.5gb"]')
    ]
    assert "is not a MIG profile of NVIDIA H100 80GB HBM3 (valid: 1g.10gb," in findings[0].message


# --- one broken file per failure kind ------------------------------------------------------

INVALID = [
    ("invalid-version.yaml", {}, 'version must be "v1"'),
    ("invalid-unknown-field.yaml", {}, "unknown field 'mig-device'"),
    ("invalid-missing-mig-devices.yaml", {}, "missing required field mig-devices"),
    ("invalid-disabled-with-devices.yaml", {}, "must be empty when mig-enabled is false"),
    ("invalid-profile-name.yaml", {}, "'1g.5bg' is not a MIG profile name"),
    ("invalid-zero-counts.yaml", {}, "all counts in mig-devices are 0"),
    ("invalid-devices.yaml", {}, "devices lists GPU indices more than once: [1]"),
    ("invalid-device-filter.yaml", {}, "device-filter '0x20B0' is not 0x<device><vendor>"),
    ("invalid-device-filter-vendor.yaml", {}, "has vendor id 1002, not NVIDIA's 10DE"),
    ("invalid-unknown-profile.yaml", {}, "profile 1g.5gb is not a MIG profile of"),
    (
        "invalid-does-not-fit.yaml",
        {},
        "no non-overlapping placement exists for 4g.20gb + 2 × 2g.10gb (memory slices 0–7)",
    ),
    ("invalid-no-entry-applies.yaml", {}, "no entry of config all-1g.10gb applies to NVIDIA H100"),
    (
        "invalid-no-entry-applies.yaml",
        {"gpu_id": "h100-sxm5-80gb", "config": "all-1g.10gb"},
        "no entry of config all-1g.10gb applies to NVIDIA H100",
    ),
]


def expected_marker(file: str) -> tuple[str, int]:
    lines = (DATA / file).read_text(encoding="utf-8").splitlines()
    marks = [(m.group(1), n) for n, line in enumerate(lines, 1) if (m := MARKER.search(line))]
    assert len(marks) == 1, f"{file} needs exactly one '# expect: RPxxx' marker"
    return marks[0]


@pytest.mark.parametrize(("file", "kwargs", "message"), INVALID)
def test_each_invalid_file_reports_its_rule_at_the_marked_line(
    file: str, kwargs: dict[str, Any], message: str
) -> None:
    rule, line = expected_marker(file)
    findings = check_file(file, **kwargs)
    hits = [f for f in findings if f.rule == rule and message in f.message]
    assert hits, findings
    assert {f.line for f in hits} == {line}
    assert all(f.file == str(DATA / file) for f in findings)
    expected_severity = Severity.WARNING if rule == "RP106" else Severity.ERROR
    assert all(f.severity is expected_severity for f in hits)


@pytest.mark.parametrize(("file", "kwargs", "message"), INVALID)
def test_findings_are_sorted_deterministic_and_positioned(
    file: str, kwargs: dict[str, Any], message: str
) -> None:
    data, source = yamlpos.read_yaml_file(DATA / file)
    first = migparted.check_mig_parted(data, source, gpus(), **kwargs)
    assert first == sorted(first) == migparted.check_mig_parted(data, source, gpus(), **kwargs)
    assert len(set(first)) == len(first)
    for f in first:
        pos = source.position(f.path)
        assert (f.line, f.column) == (pos.line, pos.column)
        assert f.rule in migparted.MIG_CHECKS


def test_unknown_field_hint_suggests_the_spelling() -> None:
    findings = check_file("invalid-unknown-field.yaml")
    unknown = next(f for f in findings if "unknown field" in f.message)
    assert unknown.hint == "did you mean 'mig-devices'?"
    assert unknown.path == 'mig-configs["all-1g.5gb"][0].mig-device'


def test_device_filter_hint_appends_the_vendor() -> None:
    (finding,) = check_file("invalid-device-filter.yaml")
    assert finding.hint == "did you mean '0x20B010DE'?"
    assert finding.path == "mig-configs.all-balanced[0].device-filter[0]"


def test_missing_config_is_reported_with_did_you_mean() -> None:
    data, source = yamlpos.read_yaml_file(DATA / "config.yaml")
    findings = migparted.check_mig_parted(data, source, gpus(), config="all-balance")
    assert [(f.rule, f.hint) for f in findings] == [("RP105", "did you mean 'all-balanced'?")]
    assert findings[0].line == source.position("mig-configs").line == 3
    assert "config 'all-balance' is not in the file" in findings[0].message


def test_unknown_gpu_id_is_a_usage_error() -> None:
    with pytest.raises(RailplanError, match="unknown GPU 'h100-sxm5-80g'") as info:
        check_file("config.yaml", gpu_id="h100-sxm5-80g")
    assert info.value.hint == "did you mean 'h100-sxm5-80gb'?"


def test_4g_plus_3g_needs_r510() -> None:
    text = """\
version: v1
mig-configs:
  mixed:
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"4g.20gb": 1, "3g.20gb": 1}
"""
    assert check_text(text) == []
    assert check_text(text, driver_branch=510) == []
    findings = check_text(text, driver_branch=470)
    assert [(f.rule, f.line) for f in findings] == [("RP104", 7)]
    assert findings[0].message == (
        "config mixed on NVIDIA A100-SXM4-40GB: "
        "4g + 3g on one GPU needs driver R510 or later (got R470)"
    )


# --- schema details ------------------------------------------------------------------------

ENTRY = "version: v1\nmig-configs:\n  c:\n    - "


@pytest.mark.parametrize(
    ("text", "rule", "message", "line"),
    [
        ("", "RP101", "got an empty file", 1),
        ("- 1\n", "RP101", "got a list", 1),
        ("mig-configs: {c: [{devices: all, mig-enabled: false}]}\n", "RP101", "missing", 1),
        ("version: 1\nmig-configs: {c: [{devices: all, mig-enabled: false}]}\n", "RP101", "", 1),
        ("versoin: v1\n", "RP101", "unknown field 'versoin'", 1),
        ("version: v1\n", "RP101", "mig-configs must be a non-empty mapping", 1),
        ("version: v1\nmig-configs: {}\n", "RP101", "mig-configs must be a non-empty", 2),
        ("version: v1\nmig-configs:\n  c: []\n", "RP101", "non-empty list of entries", 3),
        ("version: v1\nmig-configs:\n  c: all\n", "RP101", "non-empty list of entries", 3),
        (ENTRY + "all\n", "RP101", "an entry must be a mapping", 4),
        (ENTRY + "{mig-enabled: false}\n", "RP101", "missing required field devices", 4),
        (ENTRY + "{devices: all}\n", "RP101", "missing required field mig-enabled", 4),
        (ENTRY + "{devices: any, mig-enabled: false}\n", "RP101", 'devices must be "all"', 4),
        (ENTRY + "{devices: [-1], mig-enabled: false}\n", "RP101", "ints >= 0", 4),
        (ENTRY + "{devices: [true], mig-enabled: false}\n", "RP101", "ints >= 0", 4),
        (ENTRY + "{devices: all, mig-enabled: 'yes'}\n", "RP101", "true or false", 4),
        (ENTRY + "{devices: all, mig-enabled: true, mig-devices: [1]}\n", "RP101", "mapping", 4),
        (
            ENTRY + "devices: all\n      mig-enabled: true\n      mig-devices: {1g.5gb: -1}\n",
            "RP101",
            "count for 1g.5gb must be an int >= 0, got -1",
            6,
        ),
        (
            ENTRY + "devices: all\n      mig-enabled: true\n      mig-devices: {1g.5gb: true}\n",
            "RP101",
            "must be an int >= 0, got True",
            6,
        ),
        (
            ENTRY + "devices: all\n      mig-enabled: true\n      mig-devices: {1g.5gb+xx: 1}\n",
            "RP101",
            "'1g.5gb+xx' is not a MIG profile name",
            6,
        ),
        (
            ENTRY + "{device-filter: 0x20B010DE, devices: all, mig-enabled: false}\n",
            "RP102",
            "must be a string",
            4,
        ),
        (ENTRY + "{device-filter: 5, devices: all, mig-enabled: false}\n", "RP102", "string", 4),
        (ENTRY + "{device-filter: [], devices: all, mig-enabled: false}\n", "RP102", "empty", 4),
        (
            ENTRY + "{device-filter: ['0x20B010DEX'], devices: all, mig-enabled: false}\n",
            "RP102",
            "8 hex digits",
            4,
        ),
    ],
)
def test_schema_rules(text: str, rule: str, message: str, line: int) -> None:
    findings = check_text(text)
    hits = [f for f in findings if f.rule == rule and message in f.message]
    assert hits, findings
    assert hits[0].line == line


def test_unquoted_device_filter_is_a_yaml_int_and_the_hint_says_quote_it() -> None:
    (finding,) = check_text(
        ENTRY + "{device-filter: 0x20B010DE, devices: all, mig-enabled: false}\n"
    )
    assert finding.rule == "RP102"
    assert finding.hint == 'quote the id: "0x20B010DE"'


def test_empty_mig_devices_when_enabled_is_valid() -> None:
    assert check_text(ENTRY + "{devices: all, mig-enabled: true, mig-devices: {}}\n") == []


@pytest.mark.parametrize(
    "device_filter",
    ['"0x20B010DE"', '"0x20b010de"', '["0x20B010DE:0x145F10DE"]', '["0x233010DE", "0x20B010DE"]'],
)
def test_device_filters_match_case_insensitively_and_ignore_the_subsystem(
    device_filter: str,
) -> None:
    text = (
        ENTRY + f"device-filter: {device_filter}\n      devices: all\n"
        '      mig-enabled: true\n      mig-devices: {"1g.5gb": 8}\n'
    )
    findings = check_text(text, gpu_id="a100-sxm4-40gb")
    assert {f.rule for f in findings} == {"RP104"}
    assert any("8 GPU instances exceed the GPU's maximum of 7" in f.message for f in findings)


def test_unfiltered_entries_apply_to_gpus_that_have_one_of_their_profiles() -> None:
    counts = '{"1g.5gb": 2, "2g.20gb": 1}'
    text = ENTRY + f"devices: all\n      mig-enabled: true\n      mig-devices: {counts}\n"
    found = {(f.rule, f.message.split(" (valid")[0]) for f in check_text(text)}
    assert found == {
        ("RP103", "config c: profile 2g.20gb is not a MIG profile of NVIDIA A100-SXM4-40GB"),
        ("RP103", "config c: profile 1g.5gb is not a MIG profile of NVIDIA A100-SXM4-80GB"),
        ("RP103", "config c: profile 1g.5gb is not a MIG profile of NVIDIA H100 80GB HBM3"),
    }  # H200 has neither profile: the entry is taken to be meant for other GPUs
    strict = check_text(text, gpu_id="h200-sxm5-141gb", config="c")
    assert [f.rule for f in strict] == ["RP103", "RP103"]


def test_compute_instance_profiles_in_mig_devices() -> None:
    text = ENTRY + 'devices: all\n      mig-enabled: true\n      mig-devices: {"1c.3g.20gb": 6}\n'
    assert check_text(text, gpu_id="a100-sxm4-40gb", config="c") == []
    text = text.replace(": 6}", ": 7}")
    (finding,) = check_text(text, gpu_id="a100-sxm4-40gb", config="c")
    assert finding.rule == "RP104"
    assert "3 × 3g.20gb exceeds the maximum of 2 per GPU" in finding.message


def test_mig_checks_document_every_rule() -> None:
    checks = migparted.MIG_CHECKS
    assert sorted(checks) == [f"RP10{i}" for i in range(1, 7)]
    names = [name for name, _, _ in checks.values()]
    assert len(set(names)) == len(names)
    assert all(name.startswith("mig-parted-") for name in names)
    severities = migparted.MIG_SEVERITY
    assert severities == {**dict.fromkeys(checks, Severity.ERROR), "RP106": Severity.WARNING}
    for name, summary, doc in checks.values():
        assert summary.endswith(".") and "\n" not in summary, name
        assert len(doc) > 100, name
