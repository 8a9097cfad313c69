"""Issue 36 (hardening: names, references, layouts): one regression test per break.

1. ``train --tp 8 --pp 1 --virtual 4`` was timed as "PP 1 (x4 interleaved)": Megatron-LM
   refuses interleaved stages without pipeline parallelism (`check_layout` lacked the rule).
2. A Slurm node group named ``default`` rendered ``PartitionName=default``, slurm.conf's
   template line: lint RP006.
5. ``rack_class: liqiud`` made lint, render and report exit 3 (KeyError): the reference was
   checked only by planning, which plan and budget do first; ``dgx-a100`` was offered
   ``dgx-h100`` rather than the ids it starts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.train_layout import Layout
from infra.budget.train_model import PRESETS
from infra.budget.train_plan import TrainRequest, build_job, check_layout, train
from infra.catalog import Catalog
from infra.errors import InputError, spelling_hint
from infra.lint.finding import Severity
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.models import GROUP_NAME

from .conftest import lint_text
from .test_cli import railplan

CLUSTER = "name: t\nnode_groups: [{name: gpu, node: dgx-h100, count: 16}]\n"
LLAMA = PRESETS["llama2-70b"]


# --- 1. interleaving needs a pipeline -----------------------------------------------------------


def test_interleaving_without_a_pipeline_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    spec = load_spec_text(CLUSTER).spec
    request = TrainRequest(128, LLAMA, 256, tp=8, pp=1, virtual=4)
    with pytest.raises(InputError) as caught:
        train(spec, catalog, request)
    assert caught.value.path == "--virtual" and "pipeline parallelism" in caught.value.message
    job = build_job(spec, catalog, request)[0]
    with pytest.raises(InputError, match="PP 1 has a single stage"):
        check_layout(job, Layout(8, 1, 16, 1, virtual=4))  # no search may time it either
    # the same interleaving on a pipeline is Megatron's and stays
    piped = train(spec, catalog, TrainRequest(128, LLAMA, 256, tp=8, pp=2, virtual=2))
    assert (piped.result.layout.pp, piped.result.layout.virtual) == (2, 2)
    (tmp_path / "s.yaml").write_text(CLUSTER)
    args = ["--gpus", "128", "--model", "llama2-70b", "--global-batch", "256"]
    cli = railplan("train", str(tmp_path / "s.yaml"), *args, "--tp", "8", "--pp", "1",
                   "--virtual", "4")  # fmt: skip
    assert cli.returncode == 2 and cli.stdout == "", cli
    assert cli.stderr.count("\n") == 1 and "[--virtual]" in cli.stderr and "hint:" in cli.stderr


# --- 2. Slurm's DEFAULT partition ---------------------------------------------------------------

SLURM = "name: lab\nscheduler: {kind: slurm}\nsoftware: {dcgm: 4.2.3}\nnode_groups:\n"


def test_a_slurm_group_named_default_is_refused() -> None:
    text = SLURM + "  - {name: default, node: dgx-h100, count: 2}\n"
    (finding,) = [f for f in lint_text(text) if f.severity is Severity.ERROR]
    assert (finding.rule, finding.path, finding.line) == ("RP006", "node_groups[0].name", 5)
    assert "rename the group" in finding.hint
    renamed = [f for f in lint_text(text.replace("default", "gpu")) if f.rule == "RP006"]
    assert renamed == []


@settings(max_examples=200, deadline=None)
@given(name=st.from_regex(GROUP_NAME, fullmatch=True) | st.just("default"))
def test_rp006_fires_for_default_and_only_for_it(name: str) -> None:
    text = SLURM + f"  - {{name: {name}, node: dgx-h100, count: 2}}\n"
    fired = [f.path for f in lint_text(text, select=("RP006",))]
    assert fired == (["node_groups[0].name"] if name == "default" else [])


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
