"""Trial 8 (session 51, issue 36): each test one cause a hostile trial broke, not one example.

1. A Python regular expression anchored with ``$`` accepts a trailing newline (``$`` also
   matches just before a final ``\\n``): the hostname pattern ``"t{index:02d}\\n"`` passed lint,
   and ``t01`` plus a newline reached hosts.csv, the inventory and slurm.conf; the renderer's
   own hostname guard, the fabric-validator field check, the tree state's journal and manifest
   names and digests, the leftover sweep and the cron items had the same anchor.
2. A file that cannot be read or written for a reason of its path (missing, a symlink loop, a
   name too long, a file used as a directory) was refused with no hint: a new user's typo
   ``exmaples/`` got "No such file or directory" and nothing about where to look.
3. Free text (a description, a budget's claim) with a control character got a hint that
   guessed a *name* (``did you mean 'script-alert-1-script-31m'?``): the fallback for pattern
   errors treated the one-line-text rule like a name pattern (and a device_power ``source``,
   checked by its own validator, got only "`railplan schema` shows what this key takes");
   a complex mapping key (``? [a, b]``) was refused with no hint at all.
4. ``render --addresses``: an address that is not a dotted quad (``192.168.10.256``,
   ``NaN``, a leading-zero octet) was refused without a hint.
5. A hostname pattern that gives names of digits alone (``{index:02d}`` -> ``01``) passed:
   glibc's resolver reads ``01`` as the address 0.0.0.1, so ssh, MPI and NCCL reach nothing.
6. A spelling hint offered an id at the smallest edit distance over the id the word extends:
   ``node: dgx-h100-80gb`` -> "did you mean 'hgx-a100-80gb'?".
7. A Philly cluster_job_log with an integer of 5,000 digits exited 3 (Python's 4,300-digit
   limit raised ValueError inside the JSON decoder); ``NaN`` and ``Infinity``, which are not
   JSON, were read; a ``vc`` or ``jobid`` that is a number, a list or NaN became the tenant's or
   job's name through ``str()``.
8. ``render --force`` deleted a file the last render made (by the manifest's word) and this one
   no longer makes, although the user had edited it, and reported it "replaced": a manifest
   claiming the user's ``group_vars/vault.yml`` cost the user the file.
9. An entry of the old copy that could not be removed once the new tree was in place (an
   immutable directory) was reported as "cannot write the tree" with a hint about free space.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.errors import InputError, spelling_hint
from infra.files import OutputError, check_outputs
from infra.reading import read_bounded
from infra.render import fabric_validators, tree_state, tree_swap
from infra.render.tree_fs import RenderError
from infra.render.tree_state import TreeStateError, read_journal, read_manifest
from infra.render.tree_swap import OLD
from infra.render.writer import RenderConflict, write_tree
from infra.simulate.traces import TraceError, trace_from_text
from infra.spec import SpecValidationError, load_spec_text
from infra.topology.addresses import AddressesError, with_addresses

from .cli_run import ROOT

LAB = (ROOT / "examples" / "a100-lab-mig.yaml").read_text()
LABS = LAB.replace("scheduler: {kind: kubernetes, mig_strategy: mixed}", "scheduler: {kind: slurm}")


def _errors(text: str) -> list[object]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    return list(caught.value.errors)


# --- 1. "$" accepts a trailing newline ------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["t{index:02d}\\n", "t\\n{index:02d}", "{index:02d}\\n"])
def test_a_hostname_pattern_ending_in_a_newline_is_refused(pattern: str) -> None:
    text = LABS.replace('hostname: "train{index:02d}"', f'hostname: "{pattern}"')
    (error,) = _errors(text)
    assert "hostname" in str(error)


def test_fabric_validator_fields_refuse_a_trailing_newline() -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        fabric_validators._checked("leaf01\n")


@pytest.mark.parametrize(
    "old",
    [".railplan-old-1-00000000000000ab\n", ".railplan-old-\u0663-00000000000000ab"],
    ids=["trailing-newline", "non-ascii-digit"],
)
def test_a_journal_whose_old_name_only_looks_right_is_forged(tmp_path: Path, old: str) -> None:
    journal = {
        "format": 2,
        "old": old,
        "staging": ".railplan-staging-1-00000000000000ab",
        "units": ["ansible.cfg", tree_state.MANIFEST],
        "created": [],
        "state": "swapping",
    }
    (tmp_path / tree_state.JOURNAL).write_text(json.dumps(journal))
    with pytest.raises(TreeStateError, match="'old'"):
        read_journal(tmp_path)


def _dollar_anchored_patterns() -> list[str]:
    """``re.compile`` calls in infra/ whose pattern ends in ``$`` (and no MULTILINE flag)."""
    found = []
    for path in sorted((ROOT / "infra").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "compile"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                continue
            pattern = node.args[0].value
            text = pattern.decode() if isinstance(pattern, bytes) else str(pattern)
            flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if text.endswith("$") and "MULTILINE" not in flags:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[-40:]}")
    return found


def test_no_python_regex_in_infra_is_anchored_with_a_dollar() -> None:
    """Python's ``$`` matches before a final newline; ``\\Z`` (or fullmatch) does not."""
    assert re.match(r"^a$", "a\n") and not re.match(r"^a\Z", "a\n")
    assert _dollar_anchored_patterns() == []


# --- 2. path errors carry a hint ------------------------------------------------------------------


def test_a_missing_file_gets_the_nearest_name_beside_it(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "lab.yaml").write_text("name: x\n")
    with pytest.raises(InputError) as caught:
        read_bounded(str(tmp_path / "exmaples" / "lab.yaml"), 1000)
    assert caught.value.hint and "examples" in caught.value.hint
    with pytest.raises(InputError) as caught:
        read_bounded(str(tmp_path / "examples" / "lab.yml"), 1000)
    assert caught.value.hint and "lab.yaml" in caught.value.hint


def test_a_symlink_loop_and_a_file_used_as_a_directory_get_hints(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "f").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for path in (
        tmp_path / "a",
        tmp_path / "f" / "spec.yaml",
        tmp_path / ("n" * 300),
        tmp_path / "dangling",
    ):
        with pytest.raises(InputError) as caught:
            read_bounded(str(path), 1000)
        assert caught.value.hint, path


def test_an_output_name_too_long_gets_a_hint(tmp_path: Path) -> None:
    with pytest.raises(OutputError) as caught:
        check_outputs({"--bom": str(tmp_path / ("b" * 300 + ".csv"))})
    assert caught.value.hint


# --- 3. free text is not a name -------------------------------------------------------------------


def test_free_text_with_a_control_character_gets_no_guessed_name() -> None:
    text = LAB.replace(
        "Seven small instances for 7B-class inference.", '"<b>seven</b> \\e[31m small"'
    )
    (error,) = _errors(text)
    hint = getattr(error, "hint", "") or ""
    assert "did you mean" not in hint
    assert "control characters" in hint


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "  bmc_cidr: 192.168.11.0/24\n",
            (
                "  bmc_cidr: 192.168.11.0/24\n  device_power:\n"
                '    qm8700: {typical_kw: 0.3, max_kw: 0.6, source: "\\e[2J sheet"}\n'
            ),
        ),
        ("Seven small instances for 7B-class inference.", '"x\\e]52;c;eA==\\a y"'),
    ],
)
def test_every_free_text_field_gets_the_free_text_hint(old: str, new: str) -> None:
    (error,) = _errors(LAB.replace(old, new))
    assert "control characters" in (getattr(error, "hint", "") or "")


def test_a_complex_mapping_key_gets_a_hint() -> None:
    with pytest.raises(InputError) as caught:
        load_spec_text(LAB.replace("count: 2\n", "count: 2\n    ? [a, b]\n    : 3\n", 1))
    assert caught.value.position is not None and caught.value.hint


# --- 4. addresses files ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["192.168.10.256", "192.168.010.5", float("nan"), 7])
def test_an_address_that_is_no_dotted_quad_gets_a_hint(value: object) -> None:
    from infra.catalog import load_catalog
    from infra.topology import expand

    plan = expand(load_spec_text(LAB, "spec.yaml").spec, load_catalog())
    with pytest.raises(AddressesError) as caught:
        with_addresses(plan, {"train01": value})
    assert caught.value.hint and "dotted-quad" in caught.value.hint


# --- 5. hostnames of digits alone -----------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["{index:02d}", "{index}", "{index:03d}"])
def test_a_hostname_of_digits_alone_is_refused(pattern: str) -> None:
    (error,) = _errors(LABS.replace('hostname: "train{index:02d}"', f'hostname: "{pattern}"'))
    assert "digits alone" in str(error)


def test_a_hostname_starting_with_digits_still_passes() -> None:
    load_spec_text(LABS.replace('hostname: "train{index:02d}"', 'hostname: "{index:02d}x"'))


# --- 6. a word that extends an id -----------------------------------------------------------------


def test_a_suffix_after_an_id_suggests_that_id() -> None:
    from infra.catalog import load_catalog

    nodes = load_catalog().nodes
    assert spelling_hint("dgx-h100-80gb", nodes) == "did you mean 'dgx-h100'?"
    assert spelling_hint("qm9700-ndr", ["qm8700", "qm9700", "qm9790"]) == "did you mean 'qm9700'?"
    assert spelling_hint("dgx-a100", ["dgx-a100-320gb", "dgx-h100"]).startswith(
        "did you mean 'dgx-a100-320gb'"
    )


# --- 7. Philly's JSON -----------------------------------------------------------------------------

_PHILLY = {
    "status": "Pass",
    "vc": "vc1",
    "jobid": "app_1",
    "user": "u1",
    "submitted_time": "2017-10-07 01:11:39",
    "attempts": [
        {
            "start_time": "2017-10-07 01:12:09",
            "end_time": "2017-10-07 02:13:23",
            "detail": [{"ip": "m47", "gpus": ["gpu0", "gpu1"]}],
        }
    ],
}


@pytest.mark.parametrize(
    "swap",
    [('"Pass"', "9" * 5000), ('"vc1"', "NaN"), ('"vc1"', "-Infinity"), ('"app_1"', "Infinity")],
)
def test_philly_refuses_what_is_not_json_with_a_location(swap: tuple[str, str]) -> None:
    text = json.dumps([_PHILLY]).replace(*swap)
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "cluster_job_log")
    assert caught.value.position is not None and caught.value.hint


@pytest.mark.parametrize("field", ["vc", "jobid"])
@pytest.mark.parametrize("value", [7, [1], {"a": 1}, True])
def test_philly_text_fields_must_be_strings(field: str, value: object) -> None:
    with pytest.raises(TraceError, match=field):
        trace_from_text(json.dumps([{**_PHILLY, field: value}]), "cluster_job_log")


# --- 8. an edited file railplan no longer renders is kept -----------------------------------------


@pytest.mark.parametrize("force", [False, True])
def test_an_edited_file_no_longer_rendered_is_kept_as_the_users(
    tmp_path: Path, force: bool
) -> None:
    unit = "inventories/c/group_vars"
    write_tree(tmp_path, {f"{unit}/all.yml": b"a: 1\n", f"{unit}/vault.yml": b"v: 1\n"})
    (tmp_path / unit / "vault.yml").write_text("secret: mine\n")
    report = write_tree(tmp_path, {f"{unit}/all.yml": b"a: 2\n"}, force=force)
    assert (tmp_path / unit / "vault.yml").read_text() == "secret: mine\n"
    assert f"{unit}/vault.yml" not in read_manifest(tmp_path)
    assert f"{unit}/vault.yml" not in report.removed + report.replaced


def test_an_unedited_file_no_longer_rendered_is_still_removed(tmp_path: Path) -> None:
    unit = "inventories/c/group_vars"
    write_tree(tmp_path, {f"{unit}/all.yml": b"a: 1\n", f"{unit}/old.yml": b"o: 1\n"})
    report = write_tree(tmp_path, {f"{unit}/all.yml": b"a: 2\n"})
    assert not (tmp_path / unit / "old.yml").exists()
    assert report.removed == (f"{unit}/old.yml",)


def test_an_edited_file_rendered_again_is_still_a_conflict(tmp_path: Path) -> None:
    unit = "inventories/c/group_vars"
    write_tree(tmp_path, {f"{unit}/all.yml": b"a: 1\n"})
    (tmp_path / unit / "all.yml").write_text("a: mine\n")
    with pytest.raises(RenderConflict):
        write_tree(tmp_path, {f"{unit}/all.yml": b"a: 2\n"})


# 9. An entry of the old copy that cannot be removed (an immutable directory, as root) after
#    the new tree is in place: the render said "cannot write the tree ... (hint: ... free
#    space)", false on both counts. It now says the new tree is in place and what is left.


def _tree(version: str) -> dict[str, bytes]:
    return {
        "inventories/lab/hosts.yml": f"all: {{}}  # {version}\n".encode(),
        "inventories/lab/group_vars/all.yml": f"v: {version}\n".encode(),
    }


def _assert_in_place_but_not_removed(root: Path, caught: pytest.ExceptionInfo[Any]) -> None:
    text = f"{caught.value}"
    assert "the new tree is in place" in text and "could not be removed" in text, text
    assert "free space" not in (caught.value.hint or ""), caught.value.hint
    assert "chattr -i" in (caught.value.hint or "")
    assert (root / "inventories/lab/group_vars/all.yml").read_bytes() == b"v: two\n"


def test_an_old_copy_that_cannot_be_removed_is_named_not_called_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file system's refusal, as removing an immutable entry gives it (EPERM), from the
    clean-up after the swap committed; the mock stands in for `chattr +i`, which needs root
    and an ext2/3/4-like file system (the real flag: the test below)."""
    root = tmp_path / "tree"
    write_tree(root, _tree("one"))
    real_remove = tree_swap.remove

    def refusing(path: Path) -> None:
        if OLD in path.name:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(path / "x"))
        real_remove(path)

    monkeypatch.setattr(tree_swap, "remove", refusing)
    with pytest.raises(RenderError) as caught:
        write_tree(root, _tree("two"))
    _assert_in_place_but_not_removed(root, caught)
    assert OLD in f"{caught.value}"  # the leftover is named


def test_an_immutable_directory_in_the_old_copy_as_root(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("chattr +i needs root and chattr")
    root = tmp_path / "tree"
    write_tree(root, _tree("one"))
    frozen = root / "inventories/lab/group_vars"
    if (
        subprocess.run(["chattr", "+i", str(frozen)], check=False, capture_output=True).returncode
        != 0
    ):
        pytest.skip(f"{tmp_path}'s file system takes no immutable flag")
    try:
        with pytest.raises(RenderError) as caught:
            write_tree(root, _tree("two"))
    finally:
        for path in root.rglob("group_vars"):
            subprocess.run(["chattr", "-i", str(path)], check=False)
    _assert_in_place_but_not_removed(root, caught)
    write_tree(root, _tree("two"))  # the flag cleared, the next render sweeps what was left
    assert not [p for p in root.iterdir() if p.name.startswith(".railplan-old")]
