"""Issue 36 (hardening: names, references, layouts): one regression test per break.

5. ``rack_class: liqiud`` made lint, render and report exit 3 (KeyError): the reference was
   checked only by planning, which plan and budget do first; ``dgx-a100`` was offered
   ``dgx-h100`` rather than the ids it starts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.errors import spelling_hint
from infra.spec import SpecValidationError, load_spec_text

from .conftest import lint_text
from .test_cli import railplan

# --- 5. references and suggestions --------------------------------------------------------------

TYPO = """\
name: t
site:
  rack_classes:
    liquid: {power_kw: 80, units: 48, cooling: liquid}
node_groups:
  - {name: gpu, node: dgx-h100, count: 4, rack_class: liqiud}
"""


def test_an_unknown_rack_class_is_a_located_spec_error() -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(TYPO, "s.yaml")
    (error,) = caught.value.errors
    assert error.path == "node_groups[0].rack_class" and error.rule == "RP000"
    assert error.position is not None and (error.position.line, error.position.column) == (6, 43)
    assert error.hint == "did you mean 'liquid'?"


@pytest.mark.parametrize("command", ["lint", "plan", "budget", "render", "report"])
def test_every_command_refuses_an_unknown_rack_class_alike(command: str, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(TYPO)
    extra = {
        "render": ["--root", str(tmp_path / "out")],
        "report": ["-o", str(tmp_path / "r.html")],
    }
    result = railplan(command, str(spec), *extra.get(command, []))
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "internal error" not in result.stderr
    assert re.search(r"s\.yaml:6:43: error\S*: unknown rack class 'liqiud'", result.stderr)
    assert "did you mean 'liquid'?" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # nothing written


def test_a_truncated_catalog_id_suggests_the_ids_it_starts(tmp_path: Path) -> None:
    text = "name: t\nnode_groups:\n  - {name: gpu, node: dgx-a100, count: 4}\n"
    (finding,) = lint_text(text)
    assert finding.rule == "RP001"
    assert finding.hint == "did you mean 'dgx-a100-320gb' or 'dgx-a100-640gb'?"
    (tmp_path / "s.yaml").write_text(text)
    planned = railplan("plan", str(tmp_path / "s.yaml"))
    assert "did you mean 'dgx-a100-320gb' or 'dgx-a100-640gb'?" in planned.stderr
    # a prefix of several ids names them all; a typo that starts none gets the closest id;
    # a prefix of more than four ids says too little: difflib's one closest id, as before
    assert spelling_hint("dgx-h", ["dgx-h100", "dgx-h200"]) == (
        "did you mean 'dgx-h100' or 'dgx-h200'?"
    )
    assert spelling_hint("dgx-h1000", ["dgx-h100", "dgx-h200"]) == "did you mean 'dgx-h100'?"
    assert spelling_hint("d", ["d1", "d2", "d3", "d4", "d5"]).count(" or ") == 0
