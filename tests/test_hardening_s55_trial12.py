"""Trial 12 (7 December 2026): each test one cause the trial found or left from trial 11.

1. ``railplan render`` into a root where a file railplan did not write stands at a rendered
   name (no manifest, or a path the manifest does not list) said the file had "changed since
   the last render", although there had been none: a hard link at ``ansible.cfg`` in an empty
   root was refused as an edit. It is the user's own file, and the refusal now says so; a file
   (a hard link included) with the rendered bytes is adopted, and its other name keeps them.
2. A spec the planner cannot expand (too big for three fabric tiers) printed a located error
   with no rule on every verb that plans (``plan``, ``budget``, ``diff``), where lint reports
   the same problem as RP049: the error line now names RP049. Its exit code stays 1 (DESIGN.md:
   "1 the input is understood and fails a check"; lint and render exit 1 on the same spec).
3. ``railplan train`` printed "sequence parallel on" (JSON ``sequence_parallel: true``) for a
   layout of TP 1, asked (``--tp 1 --sequence-parallel``) or searched: Megatron-LM and NeMo turn
   it off at TP 1 ("Disabling sequence parallelism because tensor model parallelism is
   disabled"), so the layout printed was not the one the framework runs. The step time and
   memory were already the same either way (no TP collectives at TP 1).
4. ``railplan train --stack megatron-2021`` took ``--cp 2`` and its search picked CP 2 for a
   long sequence, though Megatron-LM v2.6 (the 2021 stack) has no ``--context-parallel-size``
   (context parallelism came with Megatron-Core in 2023): a layout the named stack cannot run.
5. ``railplan simulate``: a headerless Alibaba PAI task table whose first row holds U+2028,
   U+2029, NEL, VT, FF or U+001C in a text field (a job or task name) was refused as "not
   recognised from its first line": the format was detected on ``str.splitlines()``, which
   splits there, while the CSV reader splits at newlines only (verify's dumps already split so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infra.render.writer import RenderConflict, write_tree

from .cli_run import ROOT, run_cli

LAB = ROOT / "examples" / "a100-lab-mig.yaml"
K8S = ROOT / "examples" / "k8s-tenants.yaml"
BEYOND = ROOT / "tests" / "corpus" / "lint" / "beyond-three-tiers.yaml"
TREE = {"ansible.cfg": b"[defaults]\n", "inventories/lab/hosts.yml": b"all: {}\n"}


# --- 1. a file no render made is the user's own, not an edit since the last render --------------


@pytest.mark.parametrize("how", ["hard link", "plain file"])
def test_a_foreign_file_at_a_rendered_name_is_refused_as_the_users_own(
    tmp_path: Path, how: str
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.write_bytes(b"# my own\n")
    if how == "hard link":
        os.link(outside, root / "ansible.cfg")
    else:
        (root / "ansible.cfg").write_bytes(b"# my own\n")
    with pytest.raises(RenderConflict) as caught:
        write_tree(root, TREE)
    message = caught.value.message
    assert "not written by railplan" in message and "since the last render" not in message
    assert caught.value.foreign == ["ansible.cfg"] == caught.value.files
    assert outside.read_bytes() == b"# my own\n"


def test_an_edit_and_a_foreign_file_are_each_named_for_what_they_are(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    (tmp_path / "ansible.cfg").write_bytes(b"# edited\n")
    (tmp_path / "inventories/lab/extra.yml").write_bytes(b"mine\n")
    new = {**TREE, "inventories/lab/extra.yml": b"rendered\n"}
    with pytest.raises(RenderConflict) as caught:
        write_tree(tmp_path, new)
    message = caught.value.message
    assert "ansible.cfg (changed since the last render)" in message, message
    assert "inventories/lab/extra.yml (not written by railplan)" in message, message


def test_a_hard_link_with_the_rendered_bytes_is_adopted_and_its_other_name_kept(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.write_bytes(TREE["ansible.cfg"])
    os.link(outside, root / "ansible.cfg")
    write_tree(root, TREE)
    write_tree(root, {**TREE, "ansible.cfg": b"[defaults]\nforks = 5\n"})
    assert outside.read_bytes() == TREE["ansible.cfg"]  # the swap never writes through a link


def test_the_cli_names_a_foreign_file_in_one_line_exit_1(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "v").write_bytes(b"victim\n")
    os.link(tmp_path / "v", root / "ansible.cfg")
    out = run_cli("render", str(LAB), "--root", str(root))
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "ansible.cfg (not written by railplan)" in out.stderr and "hint:" in out.stderr
    assert (tmp_path / "v").read_bytes() == b"victim\n"


# --- 2. a spec that cannot be planned names its rule on every verb that plans -------------------


@pytest.mark.parametrize("verb", [["plan"], ["budget"], ["diff", str(LAB)]])
def test_an_unplannable_spec_is_located_with_its_rule_and_a_hint(verb: list[str]) -> None:
    args = [verb[0], *verb[1:], str(BEYOND)] if verb[0] == "diff" else [*verb, str(BEYOND)]
    out = run_cli(*args)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert f"{BEYOND}:7:3: error[RP049]: " in out.stderr and "(hint: " in out.stderr


def test_an_unplannable_spec_names_its_rule_in_json() -> None:
    out = run_cli("plan", str(BEYOND), "--format", "json")
    (error,) = json.loads(out.stdout)["errors"]
    assert out.returncode == 1 and error["rule"] == "RP049", error


# --- 3. a layout says sequence parallelism only where the framework runs it (TP > 1) ------------

TRAIN = ["--layers", "24", "--hidden", "2048", "--heads", "16", "--global-batch", "64"]


@pytest.mark.parametrize("layout", [["--tp", "1", "--pp", "2", "--sequence-parallel"], []])
def test_sequence_parallel_is_off_at_tp_1(layout: list[str]) -> None:
    out = run_cli("train", str(LAB), *TRAIN, "--gpus", "16", *layout, "--format", "json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["tp"] == 1, (out.stderr, doc["tp"])
    assert doc["sequence_parallel"] is False
    text = run_cli("train", str(LAB), *TRAIN, "--gpus", "16", *layout).stdout
    assert "sequence parallel off" in text, text


def test_sequence_parallel_stays_on_with_tensor_parallelism() -> None:
    out = run_cli(
        "train", str(LAB), *TRAIN, "--gpus", "16", "--tp", "2", "--pp", "1", "--format", "json"
    )
    assert json.loads(out.stdout)["sequence_parallel"] is True, out.stderr


@pytest.mark.parametrize(("gpus", "nodes"), [("4", "1 node of"), ("16", "2 nodes of")])
def test_the_heading_counts_nodes_in_words_that_agree(gpus: str, nodes: str) -> None:
    out = run_cli("train", str(LAB), *TRAIN, "--gpus", gpus)
    assert out.returncode == 0, out.stderr
    assert f"GPUs ({nodes} NVIDIA" in out.stdout.splitlines()[0], out.stdout


# --- 4. a stack without context parallelism never runs CP > 1 ------------------------------------


@pytest.mark.parametrize("layout", [[], ["--tp", "1", "--pp", "1"]])
def test_context_parallelism_on_the_2021_stack_is_refused(layout: list[str]) -> None:
    args = [*TRAIN, "--gpus", "16", "--cp", "2", "--stack", "megatron-2021", *layout]
    out = run_cli("train", str(LAB), *args)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "has no context parallelism" in out.stderr and "[--cp] (hint: " in out.stderr


def test_the_search_on_the_2021_stack_never_splits_a_sequence() -> None:
    long = ["--layers", "32", "--hidden", "4096", "--heads", "32", "--global-batch", "64"]
    args = [*long, "--gpus", "64", "--seq", "131072", "--format", "json"]
    old = json.loads(run_cli("train", str(K8S), *args, "--stack", "megatron-2021").stdout)
    core = json.loads(run_cli("train", str(K8S), *args).stdout)
    assert old["cp"] == 1 and core["cp"] > 1, (old["cp"], core["cp"])  # core still splits it


# --- 5. a trace's first line is the CSV reader's first line ---------------------------------------

PAI_ROW = "{name},t1,1,Terminated,0,60,600,29,100,A100\n"


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c"])
def test_a_pai_table_with_a_line_separator_in_its_first_row_is_read(
    tmp_path: Path, sep: str
) -> None:
    (tmp_path / "pai_task_table.csv").write_text(PAI_ROW.format(name=f"j{sep}1"), newline="")
    out = run_cli("simulate", str(LAB), "--trace", str(tmp_path / "pai_task_table.csv"))
    assert out.returncode == 0, out.stderr
    assert "(pai-task): 1 rows, 1 used" in out.stdout, out.stdout
