"""Trial 13 (7-8 December 2026): each test one cause the trial found or left from trial 12.

1. ``railplan train`` took a ZeRO stage the named software stack cannot run: ``--stack
   megatron-core-2024 --zero 2`` (Megatron-Core's distributed optimizer shards optimizer state
   only, ZeRO-1; it has no gradient-sharding stage) and ``--stack megatron-2021 --zero 1``
   (Megatron-LM v2.6 has no distributed optimizer). A `scaling_efficiency` budget naming
   ``stack`` with ``zero`` or ``cp`` skipped the CLI's checks altogether, so ``stack:
   megatron-2021, cp: 2`` was evaluated too. The planner now checks the stack itself.
2. A forged ``.railplan-manifest.json`` entry naming a directory (``inventories``, a unit
   itself) was handled safely by every render (an entry in a unit the render owns is carried
   over as the user's), but one outside the render's units stayed listed in every manifest
   after it. A render never writes a directory as a file: such an entry is now dropped.
3. ``railplan verify`` of a dump whose lines end in a carriage return alone (CR, as old Mac
   editors save) read it as one line: an ibnetdiscover dump said "holds no switch, HCA or
   cable" with a hint about InfiniBand ports, and an iblinkinfo dump against the lab's spec
   exited 1 with "5 findings (1 unexpected, 4 device_missing); 1 link seen", a NodeDescription
   holding the rest of the file. It is now refused as what it is, with the conversion.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from infra.render.writer import write_tree

from .cli_run import ROOT, run_cli

LAB = ROOT / "examples" / "a100-lab-mig.yaml"
SUPERPOD = ROOT / "examples" / "dgx-h100-superpod.yaml"
TREE = {"ansible.cfg": b"[defaults]\n", "inventories/lab/hosts.yml": b"all: {}\n"}
TRAIN = ["--layers", "24", "--hidden", "2048", "--heads", "16", "--global-batch", "64"]


# --- 1. a ZeRO stage (or CP) the named stack cannot run --------------------------------------------


@pytest.mark.parametrize(
    ("stack", "zero", "runs"),
    [
        ("megatron-core-2024", "2", "runs ZeRO-0, ZeRO-1, ZeRO-3: use --zero 1"),
        ("megatron-2021", "1", "runs ZeRO-0: use --zero 0"),
        ("megatron-2021", "3", "runs ZeRO-0: use --zero 0"),
    ],
)
def test_a_zero_stage_the_stack_cannot_run_is_refused(stack: str, zero: str, runs: str) -> None:
    out = run_cli("train", str(LAB), *TRAIN, "--gpus", "16", "--stack", stack, "--zero", zero)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert f"has no ZeRO-{zero}" in out.stderr and "[--zero] (hint: " in out.stderr
    assert runs in out.stderr, out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--stack", "deepspeed-zero", "--zero", "2"],
        ["--stack", "megatron-core-2024", "--zero", "3"],
        ["--stack", "megatron-2021", "--zero", "0"],
        ["--stack", "megatron-2021", "--distributed-optimizer", "--zero", "1"],
    ],
)
def test_a_zero_stage_the_stack_runs_is_planned(args: list[str]) -> None:
    out = run_cli("train", str(LAB), *TRAIN, "--gpus", "16", *args)  # controls: pass on both
    assert out.returncode == 0, out.stderr
    assert f"ZeRO-{args[-1]}," in out.stdout


def test_switching_the_distributed_optimizer_off_leaves_zero_0_only() -> None:
    args = ["--stack", "megatron-core-2024", "--no-distributed-optimizer", "--zero", "1"]
    out = run_cli("train", str(LAB), *TRAIN, "--gpus", "16", *args)
    assert out.returncode == 2 and "distributed optimizer is switched off" in out.stderr


@pytest.mark.parametrize(("field", "value"), [("cp", "2"), ("zero", "1")])
def test_a_budget_naming_the_2021_stack_is_checked_like_train(
    tmp_path: Path, field: str, value: str
) -> None:
    old = "  - scaling_efficiency: {gpus: 1016, min: 0.89, model_params: 175e9, precision: fp8}"
    new = (
        "  - scaling_efficiency: {gpus: 64, min: 0.1, model: llama2-70b, global_batch: 64, "
        f"stack: megatron-2021, {field}: {value}}}"
    )
    text = SUPERPOD.read_text()
    assert old in text
    spec = tmp_path / "spec.yaml"
    spec.write_text(text.replace(old, new))
    out = run_cli("lint", str(spec))
    column = new.index(f"{field}: ") + 1  # 1-based column of the key
    located = f"spec.yaml:{text[: text.index(old)].count(chr(10)) + 1}:{column}: error[RP061]"
    assert out.returncode == 1 and located in out.stdout + out.stderr, out.stdout + out.stderr
    assert f"scaling_efficiency.{field}]" in out.stdout + out.stderr


# --- 2. a forged manifest entry naming a directory --------------------------------------------------


def _forge(root: Path, *names: str) -> None:
    manifest = root / ".railplan-manifest.json"
    document = json.loads(manifest.read_text())
    document["files"].update(dict.fromkeys(names, hashlib.sha256(b"x").hexdigest()))
    manifest.write_text(json.dumps(document))


@pytest.mark.parametrize("force", [False, True])
def test_a_manifest_entry_naming_a_directory_is_dropped(tmp_path: Path, force: bool) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    _forge(root, "inventories", "playbooks", "inventories/lab")  # outside, and the unit itself
    report = write_tree(root, TREE, force=force)
    assert (
        report.removed == () and (root / "inventories/lab/hosts.yml").read_bytes() == b"all: {}\n"
    )
    listed = json.loads((root / ".railplan-manifest.json").read_text())["files"]
    assert sorted(listed) == sorted(TREE), listed  # inventories and playbooks were kept on main


# --- 3. a dump whose lines end in CR alone ---------------------------------------------------------


@pytest.mark.parametrize("name", ["ibnetdiscover.txt", "iblinkinfo.txt", "topograph-ndr-cut.out"])
def test_a_dump_with_lines_ended_by_cr_alone_is_refused(tmp_path: Path, name: str) -> None:
    dump = tmp_path / name
    text = (ROOT / "tests" / "data" / "verify" / name).read_text()
    dump.write_text(text.replace("\n", "\r"), newline="")
    out = run_cli("verify", "--structure", str(dump))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stdout + out.stderr
    assert "carriage return alone (CR)" in out.stderr and "(hint: " in out.stderr


def test_a_dump_with_crlf_lines_is_still_read(tmp_path: Path) -> None:  # control: passes on both
    text = (ROOT / "tests" / "data" / "verify" / "ibnetdiscover.txt").read_text()
    dump = tmp_path / "crlf.txt"
    dump.write_text(text.replace("\n", "\r\n"), newline="")
    out = run_cli("verify", "--structure", str(dump))
    assert out.returncode == 0, out.stderr
