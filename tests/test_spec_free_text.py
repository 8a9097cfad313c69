"""Free text in a spec is one line without control characters: one rule for every such field.

A MIG layout's ``description`` had no rule at all, so ESC, BEL and U+202E reached the HTML
report raw (U+202E reorders what a reviewer reads); a budget's ``claim`` and a trace path
refused C0 controls only. Each is now refused at load, located, with the characters that
`infra.errors.is_control` escapes on every echo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.spec import SpecValidationError, load_spec_text

from .cli_run import run_cli

LAYOUT = """\
name: t
node_groups:
  - {{name: gpu, node: dgx-a100-640gb, count: 2, mig: day}}
mig_layouts:
  day: {{profiles: {{"1g.10gb": 7}}, description: "{text}"}}
"""
CLAIM = """\
name: t
node_groups: [{{name: gpu, node: dgx-h100, count: 4}}]
budgets:
  - all_reduce: {{bytes: 1GiB, gpus: 32, max_ms: 100, claim: "{text}"}}
"""
# YAML double-quoted escapes: ESC, BEL, U+202E (right-to-left override), a C1 CSI, the line
# separator U+2028, a zero-width space and the byte-order mark.
HOSTILE = [
    r"a\e[31mred",
    r"bell\a",
    r"\u202Eevil",
    r"c1\x9b31m",
    r"one\u2028two",
    r"z\u200Bw",
    r"\uFEFFbom",
]


def _refused(text: str, path: str, line_number: int) -> str:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "s.yaml")
    (error,) = caught.value.errors
    assert error.path == path and error.rule == "RP000", error
    assert error.position is not None and error.position.line == line_number
    line = error.one_line()
    assert "must be one line of text, without control characters" in line, line
    assert line.isprintable(), line  # the message escapes what it echoes
    return line


@pytest.mark.parametrize("text", HOSTILE)
def test_a_layout_description_with_control_characters_is_refused_at_load(text: str) -> None:
    _refused(LAYOUT.format(text=text), "mig_layouts.day.description", 5)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_budget_claim_follows_the_same_rule(text: str) -> None:
    _refused(CLAIM.format(text=text), "budgets[0].all_reduce.claim", 4)


def test_the_message_names_the_character_and_where_it_is() -> None:
    line = _refused(LAYOUT.format(text=r"day \u202Elayout"), "mig_layouts.day.description", 5)
    assert r"(\u202e at character 5)" in line


@pytest.mark.parametrize("text", ["", "Inference by day: 7 × 1g.10gb", "<b>é</b> ü 中文"])
def test_ordinary_text_is_kept(text: str) -> None:
    spec = load_spec_text(LAYOUT.format(text=text)).spec
    assert spec.mig_layouts["day"].description == text


def test_report_refuses_it_and_writes_no_page(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(LAYOUT.format(text=r"\e]0;pwn\a\u202Eevil"))
    page = tmp_path / "r.html"
    result = run_cli("report", str(spec), "-o", str(page))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"{spec}:5:"), result.stderr
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert not page.exists()


POWER_SOURCE = """\
name: t
site:
  device_power: {{qm8790: {{max_kw: 0.64, source: "{text}"}}}}
node_groups: [{{name: gpu, node: dgx-a100-640gb, count: 4}}]
"""
STORAGE = """\
name: t
node_groups: [{{name: gpu, node: dgx-a100-640gb, count: 4}}]
fabrics:
  compute: {{switch: qm8790, su_size: 20}}
  storage: {{switch: qm8790, filesystem_gbps: 80}}
scheduler:
  kind: kubernetes
  checkpoint_storage:
    provisioner: lustre.csi.hpe.com
    parameters: {{fsname: "{text}"}}
"""


@pytest.mark.parametrize("text", HOSTILE)
def test_a_device_power_source_follows_the_same_rule(text: str) -> None:
    _refused(POWER_SOURCE.format(text=text), "site.device_power.qm8790.source", 3)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_storage_class_parameter_follows_the_same_rule(text: str) -> None:
    """The value reached the CSI driver raw through the rendered StorageClass."""
    _refused(STORAGE.format(text=text), "scheduler.checkpoint_storage.parameters.fsname", 10)


@pytest.mark.parametrize("text", ["", "ckpt", "10.42.0.10@o2ib", "a b=c,d"])
def test_ordinary_storage_class_parameters_are_kept(text: str) -> None:
    spec = load_spec_text(STORAGE.format(text=text)).spec
    assert spec.scheduler.checkpoint_storage is not None
    assert spec.scheduler.checkpoint_storage.parameters == {"fsname": text}


def test_render_refuses_a_hostile_storage_class_parameter(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(STORAGE.format(text=r"ckpt\e]0;pwn\a"))
    result = run_cli("render", str(spec), "--root", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"{spec}:10:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "\x1b" not in result.stderr
    assert not list((tmp_path / "out").rglob("11-storageclass.yaml"))
