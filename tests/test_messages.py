"""Regression tests of number limits and one-line, located messages.

Each test names the cause it guards: a number with no upper bound (OverflowError or Python's
4,300-digit limit, exit 3), an error with no location, Pydantic's wording, click's usage box,
a value echoed whole, schema errors without a rule id or printed twice. The CLI runs
in-process (`infra.cli.main`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from infra.cli import main
from infra.errors import RailplanError, cut_long_values, shorten
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.units import MAX_COUNT, MAX_SIZE, parse_bytes, parse_count

from .conftest import ROOT

BASE = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
BIG = "9" * 400
LOCATED = re.compile(r"^[^:\n]+:\d+:\d+: error\[RP000\]: ")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run railplan in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err


def errors(text: str) -> list[str]:
    """The schema error lines of spec ``text`` ([] when it loads)."""
    try:
        load_spec_text(text, "spec.yaml")
    except SpecValidationError as exc:
        return [e.one_line() for e in exc.errors]
    except RailplanError as exc:
        return [exc.one_line()]
    return []


def one_error(text: str) -> str:
    lines = errors(text)
    assert len(lines) == 1, lines
    return lines[0]


# --- every number has an upper bound ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        (BASE.replace("count: 4", f"count: {BIG}"), "node_groups[0].count", "at most 16,384"),
        (
            BASE.replace("count: 4", f"count: 4, first_index: {BIG}"),
            "node_groups[0].first_index",
            "at most 1,000,000,000",
        ),
        (
            BASE + f"budgets:\n  - all_reduce: {{bytes: 1GiB, gpus: {BIG}, max_ms: 5}}\n",
            "budgets[0].all_reduce.gpus",
            "at most 1,048,576 GPUs",
        ),
        (
            BASE + f"budgets:\n  - all_reduce: {{bytes: {BIG}, gpus: 8, max_ms: 5}}\n",
            "budgets[0].all_reduce.bytes",
            "at most 1 EiB",
        ),
        (
            BASE + f"budgets:\n  - checkpoint: {{bytes: '{BIG}GiB', max_s: 5}}\n",
            "budgets[0].checkpoint.bytes",
            "at most 1 EiB",
        ),
        (
            BASE + f"budgets:\n  - model_fits: {{model_params: {BIG}}}\n",
            "budgets[0].model_fits.model_params",
            "at most 10^15",
        ),
        (
            BASE + f"budgets:\n  - model_fits: {{model_params: '{BIG}'}}\n",
            "budgets[0].model_fits.model_params",
            "at most 10^15",
        ),
        (
            BASE + "budgets:\n  - model_fits: {model_params: 7e9, activations: "
            f"{{seq_len: {BIG}, micro_batch: 1, hidden: 8, layers: 1, heads: 1}}}}\n",
            "budgets[0].model_fits.activations.seq_len",
            "at most 100,000,000",
        ),
        (
            BASE + f"budgets:\n  - all_reduce: {{bytes: 1GiB, gpus: 8, max_ms: {BIG}}}\n",
            "budgets[0].all_reduce.max_ms",
            "too large",
        ),
        (
            BASE + f"fabrics:\n  storage: {{switch: qm9700, filesystem_gbps: {BIG}}}\n",
            "fabrics.storage.filesystem_gbps",
            "too large",
        ),
        (
            BASE + 'software: {driver: "550.' + "9" * 5000 + '.07"}\n',
            "software.driver",
            "at most 8 digits a part",
        ),
        (
            BASE + 'software: {nccl: "2.' + "9" * 5000 + '"}\n',
            "software.nccl",
            "at most 8 digits a part",
        ),
    ],
)
def test_a_huge_number_is_one_located_bound_error(text: str, path: str, words: str) -> None:
    line = one_error(text)
    assert LOCATED.match(line) and f"[{path}]" in line and words in line
    assert len(line) < 300  # the 400 (or 5,000) digits are counted, not echoed


def test_yaml_integer_beyond_pythons_digit_limit_is_located() -> None:
    # PyYAML's int constructor raised ValueError ("Exceeds the limit (4300 digits)...").
    line = one_error(BASE.replace("count: 4", "count: " + "9" * 5000))
    assert line.startswith("spec.yaml:3:40: error") and "5,000 digits" in line
    assert "set_int_max_str_digits" not in line and len(line) < 200


def test_units_keep_ints_exact_and_bounded() -> None:
    assert parse_bytes(MAX_SIZE) == MAX_SIZE and parse_count(MAX_COUNT) == MAX_COUNT
    for parse in (parse_bytes, parse_count):
        with pytest.raises(ValueError, match="at most"):
            parse(10**400)  # float(10**400) raised OverflowError
        with pytest.raises(ValueError, match="at most"):
            parse("9" * 5000)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["predict", "{spec}", "--collective", "all_reduce", "--gpus", BIG], "at most 1,048,576"),
        (
            ["predict", "{spec}", "--collective", "all_reduce", "--gpus", "8", "--max-bytes", BIG],
            "at most 1 EiB",
        ),
        (["mig", "check", "{mig}", "--driver", "5" * 5000], "not a driver version"),
    ],
)
def test_huge_numbers_in_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], words: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE)
    mig = str(ROOT / "examples/mig-parted/config-default.yaml")
    code, out, err = run(capsys, *(a.format(spec=spec, mig=mig) for a in argv))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and words in err and len(err) < 300


# --- located messages ------------------------------------------------------------------------


def test_deep_nesting_is_located_with_a_hint() -> None:
    # RecursionError in the YAML walk carried the file only.
    deep = "".join("  " * (i + 1) + "a:\n" for i in range(600))
    line = one_error(BASE + "site:\n" + deep + "  " * 601 + "b: 1\n")
    assert re.match(r"^spec\.yaml:\d+:\d+: error: document is nested too deeply", line)
    assert "(hint: " in line


def test_predict_on_an_unknown_node_names_the_spec_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The group was skipped and predict blamed MIG ("every node group is MIG-partitioned").
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE.replace("dgx-h100", "dgx-h9000"))
    code, _, err = run(capsys, "predict", str(spec), "--collective", "all_reduce", "--gpus", "8")
    assert code == 2
    assert err == (
        f"{spec}:3:17: error: unknown node 'dgx-h9000' [node_groups[0].node] "
        "(hint: did you mean 'dgx-h200'?)\n"
    )


@pytest.mark.parametrize(
    ("fabric", "path"),
    [
        ("storage: {switch: qm9700, storage_ports: 100000}", "fabrics.storage"),
    ],
)
def test_storage_fabric_plan_errors_carry_the_spec_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fabric: str, path: str
) -> None:
    # A PlanError from the shared fat-tree sizing had no path: it was reported at 1:1.
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + f"fabrics:\n  {fabric}\n")
    code, _, err = run(capsys, "plan", str(spec))
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"{spec}:5:3: error[RP049]:") and f"[{path}]" in err
    assert "planes" not in err  # the compute fabric's hint does not apply


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["lint", "--bogus", "x"],
            (
                "railplan: lint: no such option: --bogus (Possible options: --verbose) "
                "(see railplan lint --help)"
            ),
        ),
        (["plan"], "railplan: plan: missing argument 'SPEC' (see railplan plan --help)"),
        (
            ["mig", "check"],
            "railplan: mig check: missing argument 'file' (see railplan mig check --help)",
        ),
        (["nosuch"], "railplan: no such command 'nosuch' (see railplan --help)"),
        (
            ["predict", "x.yaml", "--collective", "all_reduce", "--gpus", "x"],
            (
                "railplan: predict: invalid value for '--gpus': not a whole number "
                "(see railplan predict --help)"
            ),
        ),
    ],
)
def test_usage_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    # click printed a 4-9 line box: "Usage: ...", "Try ...", "Error: ...".
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", line + "\n")


def test_a_huge_value_is_cut_in_every_message(tmp_path: Path) -> None:
    value = "x" * 7_340_032
    line = one_error(BASE.replace("name: lab", f"name: {value}"))
    assert "...(7,340,034 chars)" in line and len(line) < 400  # repr adds the quotes
    assert shorten("y" * 100) == "y" * 60 + "...(100 chars)"
    assert cut_long_values("a " + "z" * 1000 + " b") == "a " + "z" * 60 + "...(1,000 chars) b"


# --- schema errors in the user's words, with their rule id, printed once ----------------------


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("site: {rack: []}", "must be a mapping (rack), got a list"),
        ("fabrics: {compute: []}", "must be a mapping (compute fabric), got a list"),
        ("fabrics: {compute: {switch: qm9700, su_size: big}}", "must be a whole number, got a"),
        ("fabrics: {compute: {switch: qm9700, sharp: 'yes'}}", "must be true or false, got a"),
        ("fabrics: {compute: {switch: qm9700, oversubscription: x}}", "must be a number, got"),
        ("fabrics: {compute: {switch: qm9700, su_size: 0}}", "must be at least 1, got"),
        ("fabrics: {compute: {switch: qm9700, oversubscription: 99}}", "must be at most 16, got"),
        ("scheduler: {kind: k}", "must be one of 'kubernetes' or 'slurm', got a string 'k'"),
        ("software: {driver: abc}", "'abc' must be a dotted version such as 550.90.07"),
        ("mig_layouts: {a: {profiles: {}}}", "a MIG layout needs at least one profile"),
        ("node_groups: 7", "must be a list, got an integer 7"),
    ],
)
def test_schema_errors_speak_the_specs_language(snippet: str, message: str) -> None:
    text = BASE + snippet + "\n" if not snippet.startswith("node_groups") else "name: x\n" + snippet
    line = one_error(text)
    assert message in line, line
    for pydantic in ("Input should", "valid dictionary", "instance of", "after validation"):
        assert pydantic not in line


def test_an_empty_list_says_how_many_items_it_needs() -> None:
    line = one_error("name: lab\nnode_groups: []\n")
    assert line == (
        "spec.yaml:2:1: error[RP000]: must list at least 1 item, got 0 [node_groups] "
        "(hint: give at least 1 entry)"
    )


def test_schema_errors_carry_their_rule_id_in_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + "site: {rack: []}\n")
    code, _, err = run(capsys, "lint", str(spec))
    assert code == 2
    assert err == (
        f"{spec}:4:8: error[RP000]: must be a mapping (rack), got a list [site.rack] "
        "(hint: write rack as a mapping: `key: value` lines, or {key: value, ...})\n"
    )


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats_carry_schema_errors_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    # With --format json they were on stderr and in the JSON document.
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + "site: {rack: []}\n")
    code, out, err = run(capsys, "lint", "--format", fmt, str(spec))
    assert code == 2 and err == ""
    assert out.count("must be a mapping (rack)") == 1
    if fmt == "json":
        (finding,) = json.loads(out)["findings"]
        assert (finding["rule"], finding["line"], finding["column"]) == ("RP000", 4, 8)


def test_explain_cuts_a_long_rule_id(capsys: pytest.CaptureFixture[str]) -> None:
    # Found by tests/test_cli_fuzz.py: explain echoed a 5,000-character id whole.
    code, out, err = run(capsys, "explain", "x" * 5000)
    assert (code, out) == (2, "")
    assert err.startswith("railplan: error: unknown rule 'xxx") and "(5,002 chars)" in err
    assert len(err) < 200 and err.endswith("(hint: `railplan rules` lists them)\n")


@pytest.mark.parametrize("options", ["size=64k,ro", "size=8k"])
def test_render_onto_a_read_only_or_full_file_system_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, options: str
) -> None:
    # Found by tests/test_cli_fuzz.py: the staging directory's EROFS was "internal error", exit 3.
    root = tmp_path / "mnt"
    root.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(root)]
    if os.geteuid() != 0 or subprocess.run(mount, capture_output=True, check=False).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        spec = str(ROOT / "examples/a100-lab-mig.yaml")
        code, _, err = run(capsys, "render", spec, "--root", str(root))
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"railplan: error: cannot write the tree under {root}: ")
    assert "(hint: render into a writable directory with free space)" in err


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_lint_findings_cut_a_huge_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    # RP001 echoed a 7 MB node id whole in the finding line (and the GitHub annotation).
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE.replace("dgx-h100", "d" * 7_340_032))
    code, out, _ = run(capsys, "lint", "--format", fmt, str(spec))
    assert code == 1 and "...(7,340,034 chars)" in out and len(out) < 2000


@pytest.mark.parametrize("value", ["[]", "{a: 1}", "7"])
def test_a_model_that_is_no_name_is_one_schema_error(value: str) -> None:
    # found by the budget fuzz: `model: []` reached a dict lookup with a list (TypeError)
    text = (
        "name: x\nnode_groups: [{name: g, node: dgx-h100, count: 4}]\nbudgets:\n"
        f"  - scaling_efficiency: {{gpus: 8, min: 0.5, model: {value}}}\n"
    )
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "s.yaml")
    (error,) = caught.value.errors
    assert error.path == "budgets[0].scaling_efficiency.model" and "must be one of" in error.message
