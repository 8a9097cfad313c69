"""Trial 7 (session 50, issue 36): each test one cause a hostile trial broke, not one example.

1. A plain number or boolean that YAML 1.1 (railplan's reader) types otherwise than YAML 1.2
   (the editors the README points at the JSON Schema) was taken silently: trial 6 refused the
   leading-zero octal and base-60 forms only, so ``0b10``, ``1_000``, ``0x_2``, ``-0x1F``,
   ``1_0.5`` and ``yes``/``on`` still passed; NEL, U+2028 and U+2029 end a line in YAML 1.1
   and not in 1.2, so the two read different documents; a raw control character (ESC, U+009B)
   was refused by libyaml with no line or column and a hint about indentation.
2. Schema errors without a hint: a pattern (``Train``, a zero-width space, a tenant named
   ``team-``, whose message even showed the regex), a type, a bound or a length said what
   was wrong and never what to write; a union's wrong branch said "must be a string" with
   advice to quote a list that was meant as a list.
3. Output floods and slow refusals: 10,000 unknown keys printed 10,000 lines; a 5 MB flow
   mapping was composed whole (13 s CPU, a minute under load) before the node budget
   refused it.
4. A first render that failed (no space) left the root it created, and the ``inventories/``
   and ``playbooks/roles/`` directories its swap created, empty behind (trial 6's C8); a root
   that could not be created (a read-only file system) was refused without a hint.
5. A trace with a NUL byte was replayed (the tenant ``def\0ault`` reached the job table and
   the CSV written from it); one that was not UTF-8 was refused without a column or a hint,
   and so were a non-finite or negative number, a zero run time and an unreadable CSV field;
   ``railplan trace --days 1e-9`` wrote a header alone, a trace simulate refuses.
6. Success lines printed a path's non-UTF-8 bytes raw (``0x9b`` is a C1 escape to some
   terminals) where error lines escape them.
7. With stderr closed (``2>&-``) a spec error exited 1, lint's "findings", not 2: the error
   line's write raised inside the error handler.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.errors import InputError, escape_controls
from infra.render import tree_swap
from infra.render.writer import RenderError, write_tree
from infra.spec import SpecValidationError, load_spec_text, yamlpos
from infra.spec.yamlpos import load_yaml_text

from .cli_run import ROOT, run_cli

LAB = (ROOT / "examples" / "a100-lab-mig.yaml").read_text()
K8S = (ROOT / "examples" / "k8s-tenants.yaml").read_text()


def _errors(text: str) -> list[object]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    return list(caught.value.errors)


# --- 1. YAML 1.1 against YAML 1.2 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reading"),
    [
        ("0b10", "the number 2"),
        ("1_000", "the number 1000"),
        ("0x_2", "the number 2"),
        ("-0x1F", "the number -31"),
        ("1_0.5", "the number 10.5"),
        ("0_10", "octal 8"),
        ("yes", "a boolean"),
        ("On", "a boolean"),
        ("off", "a boolean"),
    ],
)
def test_a_value_yaml_1_2_reads_as_a_string_is_refused(value: str, reading: str) -> None:
    with pytest.raises(InputError) as caught:
        load_yaml_text(f"name: x\nvalue: {value}\n", "spec.yaml")
    error = caught.value
    assert reading in error.message and "YAML 1.2" in error.message
    assert error.position is not None and (error.position.line, error.position.column) == (2, 8)
    assert error.hint


@pytest.mark.parametrize(
    ("value", "loaded"),
    [("04", 4), ("0x10", 16), ("true", True), ("1.5", 1.5), ("'yes'", "yes"), ("0", 0)],
)
def test_a_value_both_versions_read_alike_still_loads(value: str, loaded: object) -> None:
    assert load_yaml_text(f"value: {value}\n", "spec.yaml")[0] == {"value": loaded}


def test_yes_as_a_boolean_setting_is_refused_in_a_spec() -> None:
    text = LAB.replace("rail_optimized: true", "rail_optimized: yes")
    with pytest.raises(InputError, match=r"a boolean in YAML 1\.1"):
        load_spec_text(text, "spec.yaml")


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029"])
def test_a_yaml_1_1_only_line_break_is_refused_where_it_stands(char: str) -> None:
    with pytest.raises(InputError) as caught:
        load_yaml_text(f"name: x\ncount: 2{char}\n", "spec.yaml")
    error = caught.value
    assert f"U+{ord(char):04X}" in error.message
    assert error.position is not None and (error.position.line, error.position.column) == (2, 9)


@pytest.mark.parametrize("char", ["\x1b", "\x9b", "\x7f", "\x07"])
def test_a_raw_control_character_is_located_with_what_to_write(char: str) -> None:
    with pytest.raises(InputError) as caught:
        load_yaml_text(f"name: x\n# a {char}[31m comment\n", "spec.yaml")
    error = caught.value
    assert error.position is not None and (error.position.line, error.position.column) == (2, 5)
    assert f"U+{ord(char):04X}" in error.message and "double-quoted" in str(error.hint)


def test_an_explicitly_tagged_octal_is_still_refused() -> None:
    with pytest.raises(InputError, match="octal 8"):
        load_yaml_text("count: !!int '010'\n", "spec.yaml")


# --- 2. a hint for every schema error --------------------------------------------------------------


_BAD_SPECS = {
    "pattern": (LAB, "name: train\n", "name: Train\n"),
    "pattern-zero-width": (LAB, "name: train\n", "name: tr\u200bain\n"),
    "pattern-timestamp": (LAB, "name: a100-lab", "name: 2024-01-01"),
    "tenant-pattern": (K8S, "{name: research,", "{name: team-,"),
    "hostname": (LAB, 'hostname: "train{index:02d}"', 'hostname: "train"'),
    "hostname-label": (LAB, 'hostname: "train{index:02d}"', 'hostname: "tr,ain{index:02d}"'),
    "bound": (LAB, "count: 2\n", "count: -1\n"),
    "whole-number": (LAB, "count: 2\n", "count: 0.2e1\n"),
    "length": (LAB, "Seven small instances for 7B-class inference.", "d" * 300),
    "boolean": (LAB, "rail_optimized: true", "rail_optimized: 'maybe'"),
    "finite": (LAB, "power_kw: 14", "power_kw: .inf"),
    "mapping": (LAB, "rack: {power_kw: 14, units: 42, cooling: air}", "rack: []"),
    "helm": (K8S, "idle_for: 2h}", "idle_for: 2h, prometheus_release: '-kp'}"),
}


@pytest.mark.parametrize("case", sorted(_BAD_SPECS))
def test_every_schema_error_says_what_to_write(case: str) -> None:
    base, old, new = _BAD_SPECS[case]
    assert old in base
    errors = _errors(base.replace(old, new, 1))
    assert errors and all(getattr(e, "hint", None) for e in errors), errors


@pytest.mark.parametrize(
    ("old", "new", "guess"),
    [
        ("name: train\n", "name: Train\n", "train"),
        ("name: train\n", "name: tr\u200bain\n", "train"),
        ("name: train\n", "name: gpu-nodes\n", "gpu_nodes"),
        ("infer-small:\n", "Infer_Small:\n", "infer_small"),
    ],
)
def test_a_name_that_breaks_its_pattern_gets_the_nearest_that_fits(
    old: str, new: str, guess: str
) -> None:
    (error,) = _errors(LAB.replace(old, new, 1))
    assert getattr(error, "hint", None) == f"did you mean {guess!r}?"


def test_a_tenant_pattern_is_said_in_words_with_the_name_to_write() -> None:
    (error,) = _errors(K8S.replace("{name: research,", "{name: team-,", 1))
    assert "^[" not in error.message and "letter or digit" in error.message  # type: ignore[attr-defined]
    assert error.hint == "did you mean 'team'?"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("gpus", "path"),
    [("[6, x]", "node_groups[1].mig[1].gpus[1]"), ("0:7", "node_groups[1].mig[1].gpus")],
)
def test_a_union_error_is_reported_for_the_form_the_value_took(gpus: str, path: str) -> None:
    errors = _errors(LAB.replace("gpus: [6, 7]", f"gpus: {gpus}", 1))
    assert [e.path for e in errors] == [path]  # type: ignore[attr-defined]
    assert "quote the value" not in str(errors[0].hint)  # type: ignore[attr-defined]


# --- 3. floods and slow refusals -------------------------------------------------------------------


def test_at_most_twenty_problems_of_one_file_are_printed(tmp_path: Path) -> None:
    spec = tmp_path / "many.yaml"
    spec.write_text("".join(f"k{i}: 1\n" for i in range(500)) + LAB)
    result = run_cli("lint", str(spec))
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 21
    assert lines[-1].startswith(f"{spec}:21:1: error: 480 more problems not shown (hint: ")


def test_a_huge_document_is_refused_before_it_is_composed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_compose(*args: object, **kwargs: object) -> None:
        raise AssertionError("composed a document the node budget refuses")

    monkeypatch.setattr(yamlpos.yaml, "compose", no_compose)
    text = "{" + ", ".join(f"k{i}: {i}" for i in range(60_000)) + "}\n"
    with pytest.raises(InputError, match="more than 100,000 nodes") as caught:
        load_yaml_text(text, "big.yaml")
    assert caught.value.position is not None and caught.value.position.line == 1
    assert yaml.__name__ == "yaml"  # the real module is untouched outside this test


# --- 4. a failed first render leaves nothing -------------------------------------------------------


_TREE = {
    "ansible.cfg": b"[defaults]\n",
    "inventories/c/hosts.yml": b"all: {}\n",
    "playbooks/c.yml": b"- hosts: all\n",
    "playbooks/roles/base/tasks/main.yml": b"- debug: {}\n",
}


def _full_at_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal's commit write fails with ENOSPC: every unit is in, then rolled back."""
    real = tree_swap.replace_entry

    def full(path: str, data: bytes) -> None:
        if b'"committed"' in data:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, data)

    monkeypatch.setattr(tree_swap, "replace_entry", full)


def test_a_first_render_that_runs_out_of_space_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _full_at_commit(monkeypatch)
    with pytest.raises(RenderError, match="No space left on device"):
        write_tree(tmp_path / "new" / "deploy", _TREE)
    assert list(tmp_path.iterdir()) == []


def test_a_first_render_into_an_empty_root_leaves_it_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "deploy"
    root.mkdir()
    (root / "notes").mkdir()  # the user's: kept
    _full_at_commit(monkeypatch)
    with pytest.raises(RenderError, match="No space left on device"):
        write_tree(root, _TREE)
    assert sorted(p.name for p in root.iterdir()) == ["notes"]


def test_a_root_that_cannot_be_created_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RenderError, match="cannot create") as caught:
        write_tree(tmp_path / "file" / "deploy", _TREE)
    assert caught.value.hint


# --- 5. a trace holding binary data ------------------------------------------------------------------

_HEADER = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"


@pytest.mark.parametrize(
    ("row", "message", "column"),
    [
        (b"j0,1,100,8,1000,def\x00ault,low,\n", "NUL", 20),
        (b"j0,1,100,8,1000,d\xe9f,low,\n", "UTF-8", 18),
    ],
)
def test_a_trace_that_is_not_text_is_refused_where_it_stops_being_text(
    tmp_path: Path, row: bytes, message: str, column: int
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_bytes(_HEADER.encode() + row)
    result = run_cli(
        "simulate", str(ROOT / "examples" / "a100-lab-mig.yaml"), "--trace", str(trace)
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"{trace}:2:{column}: error: ") and message in result.stderr
    assert "(hint: " in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "row",
    [
        "j0,1,Infinity,8,1000,default,low,\n",
        "j0,1,0,8,1000,default,low,\n",
        "j0,-5,100,8,1000,default,low,\n",
        "j0,1,100,8,0,default,low,\n",
        "j0,1,100,8,1000," + "t" * 200_000 + ",low,\n",
    ],
)
def test_every_trace_error_says_what_to_write(tmp_path: Path, row: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(_HEADER + row)
    result = run_cli(
        "simulate", str(ROOT / "examples" / "a100-lab-mig.yaml"), "--trace", str(trace)
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"{trace}:2:") and "(hint: " in result.stderr


def test_trace_refuses_a_window_that_draws_no_job(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    spec = str(ROOT / "examples" / "a100-lab-mig.yaml")
    result = run_cli("trace", spec, "--days", "1e-9", "-o", str(out))
    assert result.returncode == 2 and "draws no job" in result.stderr and "(hint: " in result.stderr
    assert not out.exists()  # simulate would refuse a header alone


# --- 6. success lines escape a path's bytes --------------------------------------------------------


def test_a_path_byte_that_is_not_utf8_is_escaped_like_a_control() -> None:
    assert escape_controls("out\udcff\udc9b.csv") == "out\\udcff\\udc9b.csv"


def test_a_success_line_never_prints_a_raw_byte_of_a_path(tmp_path: Path) -> None:
    target = os.fsencode(tmp_path) + b"/page\xff\x9b.html"
    spec = str(ROOT / "examples" / "a100-lab-mig.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "infra", "report", spec, "-o", os.fsdecode(target)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert Path(os.fsdecode(target)).exists()
    assert b"\xff" not in done.stdout and b"\x9b" not in done.stdout
    assert b"page\\udcff\\udc9b.html: report of" in done.stdout


# --- 7. stderr closed ------------------------------------------------------------------------------


def test_a_closed_stderr_keeps_the_exit_code(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: X\n")
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m infra lint "{spec}" 2>&-'],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2  # exit 1 would tell a CI script "lint findings"
