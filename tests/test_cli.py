"""The `railplan` command: outputs, exit codes, no tracebacks.

The command runs in-process (`tests.cli_run.run_cli`, the same `main` the console script
calls, without a Python start per test); the end-to-end tests at the end run the installed
console script as a real process.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from .cli_run import run_cli, run_installed
from .conftest import ROOT, TESTS

EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))
MIG_4G_4G = str(TESTS / "corpus" / "lint" / "mig-4g-4g.yaml")
MIG_DATA = TESTS / "data" / "mig-parted"


def railplan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``railplan ARGS`` in-process (see `tests.cli_run`)."""
    return run_cli(*args, cwd=cwd)


def test_examples_lint_clean() -> None:
    # claims-h100-8k declares a vendor claim the cluster misses: a warning, as a claim's miss
    # is (tests/test_corpus.py); k8s-tenants autoscales on a group that is whole GPUs every
    # night (RP107); every other example has nothing but met budgets to say
    warned = ("claims-h100-8k.yaml", "k8s-tenants.yaml")
    clean = [p for p in EXAMPLES if not p.endswith(warned)]
    result = railplan("lint", "--verbose", *clean)
    assert result.returncode == 0, result.stdout
    assert "error" not in result.stdout and "warning" not in result.stdout
    assert result.stdout.count(" — ok") == len(clean)
    claims = railplan("lint", str(ROOT / "examples" / "claims-h100-8k.yaml"))
    assert claims.returncode == 0 and "3 warnings," in claims.stdout, claims.stdout
    assert "error" not in claims.stdout
    tenants = railplan("lint", str(ROOT / "examples" / "k8s-tenants.yaml"))
    assert tenants.returncode == 0 and "1 warning," in tenants.stdout, tenants.stdout
    assert "RP107" in tenants.stdout and "error" not in tenants.stdout
    assert railplan("lint", *EXAMPLES).returncode == 0


def test_a_failing_spec_exits_1_with_caret_and_hint() -> None:
    result = railplan("lint", MIG_4G_4G)
    assert result.returncode == 1
    assert "error[RP011]" in result.stdout
    assert '  9 |     profiles: {"4g.40gb": 2}' in result.stdout
    assert "    |     ^" in result.stdout


def test_json_output_follows_the_contract() -> None:
    result = railplan("lint", "--format", "json", MIG_4G_4G)
    (finding,) = json.loads(result.stdout)["findings"]
    assert {"rule", "severity", "message", "path", "line", "column", "hint"} <= set(finding)
    assert (finding["rule"], finding["line"], finding["column"]) == ("RP011", 9, 5)


def test_sarif_output_is_valid_sarif_210() -> None:
    schema = json.loads((TESTS / "data" / "sarif-schema-2.1.0.json").read_text())
    result = railplan(
        "lint",
        "--format",
        "sarif",
        MIG_4G_4G,
        str(TESTS / "corpus" / "schema" / "misspelled-key.yaml"),
    )
    assert result.returncode == 2  # one file is invalid input
    log = json.loads(result.stdout)
    jsonschema.Draft7Validator(schema).validate(log)
    rules = {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert {"RP000", "RP011", "RP101"} <= rules
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"RP000", "RP011"}


def test_github_annotations() -> None:
    result = railplan("lint", "--format", "github", MIG_4G_4G)
    assert result.stdout.startswith(f"::error file={MIG_4G_4G},line=9,col=5,")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: [unclosed\n", "not valid YAML"),
        (b"- a\n- b\n", "a spec is a mapping"),
        (b"name: x\nnode_groups: {a: 1}\n", "node_groups"),
        (b"", "the file is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00", "binary data"),
        ("name: caf\u00e9\nnode_groups: 3\n".encode("latin-1"), "not UTF-8"),
        (
            b"name: &a x\nnode_groups: &a y\n",
            (
                "2:14: error[RP000]: not valid YAML: an anchor is defined a second time here "
                "(first at line 1, column 7) (hint: give each '&anchor' its own name)"
            ),
        ),
    ],
    ids=["not-yaml", "list", "wrong-type", "empty", "binary", "latin1", "duplicate-anchor"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_bytes(content)
    result = railplan("lint", str(spec))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith(f"{spec}") for line in lines), result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_a_50_mb_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    spec = tmp_path / "huge.yaml"
    with spec.open("wb") as f:
        f.truncate(50 * 1024 * 1024)
    result = railplan("lint", str(spec))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "52.4 MB" in result.stderr


@pytest.mark.parametrize("target", ["missing.yaml", "."])
def test_unreadable_paths(target: str) -> None:
    result = railplan("lint", target)
    assert result.returncode == 2 and result.stderr.count("\n") == 1


def test_select_and_ignore() -> None:
    assert railplan("lint", "--ignore", "RP011", MIG_4G_4G).returncode == 0
    assert railplan("lint", "--select", "RP05", MIG_4G_4G).returncode == 0
    assert railplan("lint", "--select", "mig-layout-does-not-fit", MIG_4G_4G).returncode == 1


def test_rules_and_explain() -> None:
    listed = railplan("rules", "--format", "json")
    ids = [r["id"] for r in json.loads(listed.stdout)]
    assert ids == sorted(ids) and {"RP000", "RP001", "RP011", "RP052", "RP101"} <= set(ids)
    explained = railplan("explain", "RP030")
    assert explained.returncode == 0 and "fabricmanager must match" in explained.stdout
    assert railplan("explain", "mig-layout-does-not-fit").returncode == 0
    unknown = railplan("explain", "RP999")
    assert unknown.returncode == 2 and "railplan rules" in unknown.stderr


def test_schema_command_prints_the_json_schema() -> None:
    schema = json.loads(railplan("schema").stdout)
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"name", "node_groups"}


def test_usage_errors_exit_2() -> None:
    assert railplan("lint").returncode == 2
    assert railplan("lint", "--format", "xml", MIG_4G_4G).returncode == 2
    assert railplan("no-such-command").returncode == 2


@pytest.mark.parametrize("group", [[], ["mig"]], ids=["railplan", "railplan mig"])
def test_a_bare_group_prints_its_help_and_one_line(group: list[str]) -> None:
    """A new user's first command, `railplan` alone, once ended in a traceback (exit 1)."""
    result = railplan(*group)
    assert result.returncode == 2
    assert "Usage:" in result.stdout
    command = " ".join(["railplan", *group])
    assert result.stderr.splitlines()[-1].endswith(f"no command given (see {command} --help)")


def test_mig_check_nvidia_default_passes_and_broken_files_fail() -> None:
    ok = railplan("mig", "check", str(MIG_DATA / "config-default.yaml"))
    assert ok.returncode == 0, ok.stdout
    bad = railplan("mig", "check", "--format", "json", str(MIG_DATA / "invalid-does-not-fit.yaml"))
    assert bad.returncode == 1
    assert {f["rule"] for f in json.loads(bad.stdout)["findings"]} == {"RP104"}


@pytest.mark.parametrize("text", ["", "\n\n", "# a comment, no document\n", "---\n"])
def test_mig_check_of_an_empty_file_is_a_located_error(tmp_path: Path, text: str) -> None:
    """As the spec loader says of an empty spec: one located line, exit 2 (not "1 config")."""
    empty = tmp_path / "mig.yaml"
    empty.write_text(text)
    result = railplan("mig", "check", str(empty))
    assert result.returncode == 2, result.stdout
    where = "2:1" if text == "---\n" else "1:1"  # where the spec loader puts it too
    assert result.stderr.startswith(f"{empty}:{where}: error: the file is empty"), result.stderr
    assert result.stderr.count("\n") == 1 and not result.stdout
    document = railplan("mig", "check", "--format", "json", str(empty))
    assert document.returncode == 2
    assert json.loads(document.stdout)["errors"][0]["message"] == "the file is empty"


@pytest.mark.parametrize(
    ("text", "config", "checked"),
    [
        ("- 1\n", None, "0 configs"),  # not a mapping: no config in it
        ("version: v1\n", None, "0 configs"),
        ("version: v1\nmig-configs: {}\n", None, "0 configs"),
        ("version: v1\nmig-configs: {a: []}\n", "nosuch", "0 configs"),
        ("version: v1\nmig-configs: {a: [], b: []}\n", "b", "1 config"),
    ],
)
def test_mig_check_counts_the_configs_it_checked(
    tmp_path: Path, text: str, config: str | None, checked: str
) -> None:
    mig = tmp_path / "mig.yaml"
    mig.write_text(text)
    result = railplan("mig", "check", str(mig), *(["--config", config] if config else []))
    assert result.stdout.startswith(f"{mig}: checked {checked} against"), result.stdout


def test_mig_check_options() -> None:
    default = str(MIG_DATA / "config-default.yaml")
    missing = railplan("mig", "check", "--config", "all-balansed", default)
    assert missing.returncode == 1 and "all-balanced" in missing.stdout
    assert railplan("mig", "check", "--gpu", "h100", default).returncode == 2
    assert railplan("mig", "check", "--driver", "latest", default).returncode == 2
    old = railplan(
        "mig",
        "check",
        "--driver",
        "470.256.02",
        "--gpu",
        "a100-sxm4-40gb",
        "--config",
        "all-balanced",
        str(MIG_DATA / "config.yaml"),
    )
    assert old.returncode == 0, old.stdout  # 1g+2g+3g needs no R510 feature


def test_catalog_command_lists_design_ids() -> None:
    out = railplan("catalog").stdout
    for key in ("a100-sxm4-40gb", "dgx-h100", "aws-p5.48xlarge", "qm9790"):
        assert key in out


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: Path(p).stem)
def test_plan_prints_every_example(example: str) -> None:
    result = railplan("plan", example)
    assert result.returncode == 0, result.stderr
    assert " GPUs, " in result.stdout.splitlines()[0]


def test_plan_json_contract_and_csv_files(tmp_path: Path) -> None:
    import csv

    spec = str(ROOT / "examples" / "dgx-h100-superpod.yaml")
    cabling, bom, hosts = tmp_path / "cabling.csv", tmp_path / "bom.csv", tmp_path / "hosts.csv"
    result = railplan(
        "plan", "--format", "json", spec, "--cabling", str(cabling), "--bom", str(bom),
        "--hosts", str(hosts),
    )  # fmt: skip
    doc = json.loads(result.stdout)
    assert {"name", "servers", "gpus", "racks", "power_kw", "fabrics"} <= set(doc)
    compute = doc["fabrics"]["compute"]
    keys = {"tiers", "switches", "cables", "oversubscription", "injection_gbps", "bisection_gbps"}
    assert keys <= set(compute)
    assert compute["switches"] == {"leaf": 32, "spine": 16, "core": 0}
    # docs/design.md's example values for this spec
    assert (compute["injection_gbps"], compute["bisection_gbps"]) == (406400, 203200)
    rows = list(csv.DictReader(cabling.open()))
    assert len(rows) == sum(sum(f["cables"].values()) for f in doc["fabrics"].values())
    assert all(r["a_device"] and r["b_device"] and r["a_port"] and r["b_port"] for r in rows)
    assert len({r["cable_id"] for r in rows}) == len(rows)
    assert {r["medium"] for r in rows if r["fabric"] == "oob"} == {"cat6"}
    assert all(float(r["length_m"]) > 0 for r in rows if r["a_rack"] and r["b_rack"])
    bom_rows = list(csv.DictReader(bom.open()))
    quantity = Counter[str]()
    for r in bom_rows:
        quantity[r["category"] + "/" + r["fabric"]] += int(r["quantity"])
    assert quantity["switch/compute"] == 48
    assert quantity["server/"] == 127 and quantity["rack/"] == doc["racks"]
    assert quantity["appliance/compute"] == 1  # the UFM
    assert quantity["pdu/"] == sum(r["pdus"] for r in doc["rack_list"])
    host_rows = list(csv.DictReader(hosts.open()))
    assert list(host_rows[0]) == [
        "name",
        "group",
        "su",
        "slot",
        "rack",
        "rack_unit",
        "mgmt_ip",
        "bmc_ip",
    ]
    assert len(host_rows) == 127 and all(r["mgmt_ip"] and r["bmc_ip"] for r in host_rows)


def test_plan_files_follow_the_umask(tmp_path: Path) -> None:
    spec = str(ROOT / "examples" / "a100-lab-mig.yaml")
    out = tmp_path / "hosts.csv"
    old = os.umask(0o022)
    try:
        assert railplan("plan", spec, "--hosts", str(out)).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_plan_exits_1_and_writes_nothing_when_a_rack_breaks_its_budget(tmp_path: Path) -> None:
    spec = TESTS / "corpus" / "lint" / "rack-over-budget.yaml"
    bom = tmp_path / "bom.csv"
    result = railplan("plan", str(spec), "--bom", str(bom))
    assert result.returncode == 1
    # lint's RP055 is the one rack-budget check, located at the budget it breaks
    assert "rack-over-budget.yaml:5:10: error[RP055]" in result.stderr
    assert "kW budget" in result.stderr
    assert not bom.exists()


def test_plan_failure_is_located_and_exits_1() -> None:
    result = railplan("plan", str(TESTS / "corpus" / "lint" / "beyond-three-tiers.yaml"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "beyond-three-tiers.yaml:7:3:" in result.stderr


def test_plan_output_file_errors_are_usage_errors(tmp_path: Path) -> None:
    spec = str(ROOT / "examples" / "a100-lab-mig.yaml")
    result = railplan("plan", spec, "--bom", str(tmp_path / "missing-dir" / "bom.csv"))
    assert result.returncode == 2 and "cannot write" in result.stderr


def test_version() -> None:
    result = railplan("--version")
    assert result.returncode == 0 and result.stdout.startswith("railplan ")


def test_sarif_uris_are_relative_even_for_absolute_paths() -> None:
    result = railplan("lint", "--format", "sarif", str(Path(MIG_4G_4G).resolve()))
    (res,) = json.loads(result.stdout)["runs"][0]["results"]
    uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "tests/corpus/lint/mig-4g-4g.yaml"


# --- end to end: the installed console script, as a real process ----------------------------


def test_e2e_version_and_usage_exit_codes() -> None:
    version = run_installed("--version")
    assert version.returncode == 0 and version.stdout.startswith("railplan ")
    assert run_installed("no-such-command").returncode == 2


def test_e2e_lint_a_failing_spec_exits_1() -> None:
    result = run_installed("lint", "--format", "json", MIG_4G_4G)
    assert result.returncode == 1
    (finding,) = json.loads(result.stdout)["findings"]
    assert (finding["rule"], finding["line"], finding["column"]) == ("RP011", 9, 5)


def test_e2e_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: [unclosed\n")
    result = run_installed("lint", str(spec))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"{spec}:")


def test_e2e_render_writes_a_tree(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    result = run_installed(
        "render", str(ROOT / "examples" / "a100-lab-mig.yaml"), "--root", str(root)
    )
    assert result.returncode == 0, result.stderr
    assert (root / "ansible.cfg").is_file() and any((root / "inventories").iterdir())


def test_in_process_runs_leave_no_state_behind(tmp_path: Path) -> None:
    stdout, stderr, cwd = sys.stdout, sys.stderr, Path.cwd()
    before = os.environ.get("RAILPLAN_PROGRESS")
    result = run_cli("plan", str(ROOT / "examples" / "a100-lab-mig.yaml"), cwd=tmp_path)
    assert result.returncode == 0 and result.stdout
    assert (sys.stdout, sys.stderr, Path.cwd()) == (stdout, stderr, cwd)
    assert os.environ.get("RAILPLAN_PROGRESS") == before
