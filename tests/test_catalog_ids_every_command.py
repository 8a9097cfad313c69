"""A catalog id the catalog lacks is one located error in every command that reads a spec.

`train` and `predict` do not plan; before, they gave numbers for a spec whose compute
switch was a typo (`qm970`: a default fabric was assumed), and `train` reported an
unknown node without the spec's file, line and column.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli_run import run_cli

SPEC = """\
name: t
node_groups:
  - {name: gpu, node: NODE, count: 8}
fabrics:
  compute: {switch: SWITCH, su_size: 8, rail_optimized: true}
"""
TRAIN = ["train", "--gpus", "16", "--layers", "4", "--hidden", "1024", "--heads", "8",
         "--global-batch", "16"]  # fmt: skip
PREDICT = ["predict", "--collective", "all_reduce", "--gpus", "16"]


def _spec(tmp_path: Path, node: str = "dgx-h100", switch: str = "qm9700") -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("NODE", node).replace("SWITCH", switch))
    return str(path)


@pytest.mark.parametrize("command", [TRAIN, PREDICT], ids=["train", "predict"])
def test_an_unknown_compute_switch_is_a_located_error(tmp_path: Path, command: list[str]) -> None:
    spec = _spec(tmp_path, switch="qm970")
    result = run_cli(command[0], spec, *command[1:])
    assert result.returncode == 2, result.stdout
    assert result.stderr == (
        f"{spec}:5:13: error: unknown switch 'qm970' [fabrics.compute.switch] "
        "(hint: did you mean 'qm9700'?)\n"
    )


@pytest.mark.parametrize("command", [TRAIN, PREDICT], ids=["train", "predict"])
def test_an_unknown_node_is_a_located_error(tmp_path: Path, command: list[str]) -> None:
    spec = _spec(tmp_path, node="dgx-h10")
    result = run_cli(command[0], spec, *command[1:])
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(f"{spec}:3:17: error: unknown node 'dgx-h10'"), result.stderr


@pytest.mark.parametrize("command", [TRAIN, PREDICT], ids=["train", "predict"])
def test_known_ids_still_answer(tmp_path: Path, command: list[str]) -> None:
    result = run_cli(command[0], _spec(tmp_path), *command[1:])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", [["lint"], ["plan"], TRAIN], ids=["lint", "plan", "train"])
def test_an_id_in_upper_case_gets_the_catalog_spelling(tmp_path: Path, command: list[str]) -> None:
    """`DGX-H100` as printed on the box: the hint named every node instead of `dgx-h100`."""
    spec = _spec(tmp_path, node="DGX-H100")
    result = run_cli(command[0], spec, *command[1:])
    assert result.returncode in (1, 2), result.stdout
    assert "did you mean 'dgx-h100'?" in result.stdout + result.stderr
