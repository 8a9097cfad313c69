"""Regression tests of checks that passed when they must fail, hostnames, output
injection and formatting cost: one test per cause, each failing before its fix.

The CLI runs in-process (`infra.cli.main` with captured stdout/stderr), not as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import Catalog
from infra.cli import main
from infra.errors import RailplanError
from infra.lint.finding import Finding, Severity
from infra.lint.formats import format_github, format_text
from infra.lint.migparted import check_mig_parted
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.yamlpos import load_yaml_text

from .conftest import ROOT, lint_text

MIG_4G_4G = str(ROOT / "tests/corpus/lint/mig-4g-4g.yaml")
BASE = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run railplan in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err


def spec_errors(text: str) -> str:
    """The schema errors of spec ``text`` as one string ("" when it loads)."""
    try:
        load_spec_text(text, "spec.yaml")
    except SpecValidationError as exc:
        return "\n".join(e.one_line() for e in exc.errors)
    return ""


# --- 5: --select / --ignore ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "key", "hint"),
    [
        ("--select", "NOPE", "railplan rules"),
        ("--select", "RP0111", "did you mean 'RP011'?"),
        ("--ignore", "mig-layout-does-not-fi", "did you mean 'mig-layout-does-not-fit'?"),
        ("--select", "", "railplan rules"),
    ],
)
def test_unknown_rule_key_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, key: str, hint: str
) -> None:
    code, out, err = run(capsys, "lint", option, key, MIG_4G_4G)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and "matches no rule" in err and hint in err


def test_known_rule_keys_still_select(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "lint", "--select", "rp01", MIG_4G_4G)[0] == 1
    assert run(capsys, "lint", "--select", "RP000", MIG_4G_4G)[0] == 0  # a documented id
    assert run(capsys, "lint", "--ignore", "RP011", MIG_4G_4G)[0] == 0


# --- 5: mig check of a profile no GPU has ----------------------------------------------------


def test_mig_check_refuses_a_profile_no_gpu_has(catalog: Catalog) -> None:
    text = "version: v1\nmig-configs:\n  bad:\n    - devices: all\n      mig-enabled: true\n"
    text += '      mig-devices: {"1g.11gb": 7}\n'
    data, source = load_yaml_text(text, "mig.yaml")
    findings = check_mig_parted(data, source, catalog.gpus)
    assert [(f.rule, f.line) for f in findings] == [("RP103", 6)]
    # NVIDIA's own default file (profiles of GPUs outside the catalog too) stays clean
    default = (ROOT / "examples/mig-parted/config-default.yaml").read_text()
    data, source = load_yaml_text(default, "config-default.yaml")
    assert check_mig_parted(data, source, catalog.gpus) == []


# --- 5: model_fits on more GPUs than the cluster ---------------------------------------------


def test_model_fits_beyond_the_cluster_is_unevaluable() -> None:
    spec = BASE + "budgets:\n  - model_fits: {model_params: 7e9, gpus: 64}\n"
    assert [f.rule for f in lint_text(spec)] == ["RP061"]  # 4 x 8 GPUs, not 64
    huge = BASE + "budgets:\n  - model_fits: {model_params: 7e9, gpus: " + "9" * 400 + "}\n"
    assert "must be at most 1,048,576 GPUs" in spec_errors(huge)


# --- 5: finite numbers only ------------------------------------------------------------------


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_spec_numbers_must_be_finite(value: str) -> None:
    spec = BASE + f"budgets:\n  - cluster_power: {{max_kw: {value}}}\n"
    assert "finite" in spec_errors(spec)
    assert "finite" in spec_errors(BASE + f"site: {{rack: {{power_kw: {value}}}}}\n")


@pytest.mark.parametrize("factor", ["nan", "inf", "-inf", "1"])
def test_predict_step_factor_must_be_finite_and_above_one(
    capsys: pytest.CaptureFixture[str], factor: str
) -> None:
    spec = str(ROOT / "examples/dgx-a100-superpod.yaml")
    code, out, err = run(
        capsys, "predict", spec, "--collective", "all_reduce", "--gpus", "16",
        f"--step-factor={factor}",
    )  # fmt: skip
    assert (code, out) == (2, "")
    # NaN and infinities are refused as the option is read, 1 by the size check after
    said = "finite --step-factor > 1" if factor == "1" else "must be a finite number"
    assert said in err and len(err.splitlines()) == 1


def test_budget_json_never_holds_infinity_or_nan() -> None:
    from infra.budget.evaluate import BudgetResult
    from infra.budget.tables import budgets_json

    result = BudgetResult(0, "cluster_power", "budgets[0]", float("inf"), 1.0, "kW", "lower", "")
    text = budgets_json([result])
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text)["budgets"][0]["predicted"] is None


# --- 3: predict row cap ----------------------------------------------------------------------


def test_predict_refuses_more_than_ten_thousand_rows(capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(ROOT / "examples/dgx-a100-superpod.yaml")
    args = ("predict", spec, "--collective", "all_reduce", "--gpus", "16")
    code, out, err = run(capsys, *args, "--step-factor", "1.000001")  # refused before any row
    assert (code, out) == (2, "")
    assert "more than the 10,000" in err and "use --step-factor 1.00" in err
    assert run(capsys, *args, "--step-factor", "1.01")[0] == 0


# --- 3: spines bound -------------------------------------------------------------------------


def test_spines_have_an_upper_bound() -> None:
    spec = BASE + "fabrics:\n  compute: {switch: qm9700, spines: 1000000000}\n"
    assert "spines" in spec_errors(spec) and "2,048" in spec_errors(spec)


def test_more_spines_than_leaf_uplinks_cannot_be_planned() -> None:
    spec = (
        "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 64}\n"
        "fabrics:\n  compute: {switch: qm9700, spines: 200}\n"
    )
    found = lint_text(spec)
    assert [(f.rule, f.path) for f in found] == [("RP049", "fabrics.compute.spines")]


# --- 6: hostnames ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "extra"),
    [
        ("n{index:9d}", ""),  # space padding
        ("a" * 60 + "{index}", ", count: 4, first_index: 9999"),  # 64 characters at the end
        ("a" * 54 + "{index}", ", count: 20, first_index: 999999990"),  # ten digits at the end
    ],
)
def test_every_rendered_hostname_is_an_rfc1123_label(pattern: str, extra: str) -> None:
    spec = f'name: lab\nnode_groups:\n  - {{name: gpu, node: dgx-h100, hostname: "{pattern}"'
    spec += (extra or ", count: 4") + "}\n"
    assert "not a valid hostname" in spec_errors(spec)


def test_hostname_ranges_that_fit_still_load() -> None:
    spec = 'name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4, hostname: "'
    assert spec_errors(spec + "a" * 61 + '{index}", first_index: 96}\n') == ""  # ...99: 63


def test_hostname_must_not_be_a_device_name() -> None:
    spec = (
        "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4, "
        'hostname: "ib0-leaf-{index:02d}"}\nfabrics:\n  compute: {switch: qm9700}\n'
    )
    assert [(f.rule, f.path) for f in lint_text(spec)] == [("RP056", "node_groups[0].hostname")]


@pytest.mark.parametrize(
    "cidr", ["224.0.0.0/16", "255.255.255.255/32", "127.0.0.0/16", "169.254.0.0/16",
             "240.0.0.0/8", "0.0.0.0/0", "0.0.0.0/16"],
)  # fmt: skip
def test_unaddressable_networks_are_refused(cidr: str) -> None:
    for key in ("management_cidr", "bmc_cidr"):
        assert "no host can be addressed" in spec_errors(BASE + f"site: {{{key}: {cidr}}}\n")


# --- 8: output injection ---------------------------------------------------------------------


def test_github_annotations_cannot_be_forged() -> None:
    file = "a\n::error file=x.yaml::forged,b:c%.yaml"
    f = Finding(file, 3, 1, "RP001", Severity.ERROR, "bad\r\n::error::x", "p", "fix\nit")
    out = format_github([f])
    assert out.count("\n") == 1 and out.startswith("::error file=a%0A%3A%3Aerror ")
    assert "file=a%0A%3A%3Aerror file=x.yaml%3A%3Aforged%2Cb%3Ac%25.yaml," in out
    assert out.endswith("::bad%0D%0A::error::x [p]%0Ahint: fix%0Ait\n")


def test_text_output_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "a\n::error::forged\x1b[31m.yaml"
    spec.write_text((ROOT / "tests/corpus/lint/mig-4g-4g.yaml").read_text())
    code, out, _ = run(capsys, "lint", str(spec))
    assert code == 1 and "\x1b" not in out and "\n::error" not in out
    assert "a\\n::error::forged\\x1b[31m.yaml:9:5: error[RP011]" in out
    spec.write_bytes(b"name: [\x1b]0;x\x07\n")  # an invalid spec: the error line on stderr
    code, out, err = run(capsys, "lint", str(spec))
    assert code == 2 and "\x1b" not in err and len(err.splitlines()) == 1


def test_error_lines_escape_control_characters() -> None:
    line = RailplanError("bad\x1b[2J", file="x\ny.yaml", hint="h\r").one_line()
    assert line == "x\\ny.yaml: error: bad\\x1b[2J (hint: h\\r)"


# --- 3: linear-time text formatting ----------------------------------------------------------


def test_text_format_of_many_findings_on_one_long_line_stays_small() -> None:
    # each finding shows a window of the line, not the line: output linear in findings (the
    # time is measured by `make bench`, case format:16384, not asserted here)
    line = "x" * 300_000
    findings = [Finding("a.yaml", 1, c, "RP001", Severity.ERROR, "m") for c in range(1, 16_385)]
    out = format_text(findings, {"a.yaml": [line]}, 1)
    assert len(out) < 16_384 * 600
    assert out.endswith("16384 errors in 1 file\n")
    assert max(len(s) for s in out.splitlines()) < 300


def test_cut_line_keeps_the_caret_under_the_column_with_tabs() -> None:
    line = "\t" * 400 + "TARGET" + "y" * 400
    out = format_text([Finding("a", 1, 401, "RP001", Severity.ERROR, "m")], {"a": [line]}, 1)
    source, caret = out.splitlines()[1:3]
    assert source[caret.index("^") :].startswith("TARGET")
