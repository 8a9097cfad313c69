"""A render of an earlier railplan, killed mid-swap, recovered by this one: the old or the new tree.

Before its journal got a ``format``, the tree writer journaled ``{"old", "units", "created",
"manifest"}`` (the new manifest's digest), moved each unit out and in by rename, and wrote
the new manifest last as its commit point. `legacy_render` does exactly that (staged by
today's writer, which stages the same tree plus a manifest the earlier one did not stage)
and is killed after each of its calls in turn; today's recovery must then leave the old or
the new tree, the user's files included, and the next render the new tree. Before, every
kill point between the first unit moved in and the commit was refused as a forged journal
("would remove ..., which no render made"), and the tree stayed half-swapped.
"""

# The kill-at-call harness counts os-level renames, as the earlier writer's were.
# ruff: noqa: PTH104

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from infra.files import replace_entry
from infra.render import writer
from infra.render.tree_fs import remove
from infra.render.tree_state import JOURNAL, MANIFEST, TreeStateError, digest
from infra.render.writer import recover_tree, write_tree
from tests.test_render_writer_swap import (
    SCENARIOS,
    Scenario,
    _killed_in_child,
    _prepared,
    scratch,  # noqa: F401 - the fixture
    snapshot,
)

_TAG = "1-0123456789abcdef"
_OLD, _STAGING = f".railplan-old-{_TAG}", f".railplan-staging-{_TAG}"
_CALLS = ("rename", "replace", "link", "unlink", "rmdir")


def legacy_render(root: Path, files: dict[str, bytes], force: bool) -> None:
    """The swap of the tree writer before its journal's format, as it ran."""
    plan = writer._decide(root, files, force)
    staging, old = root / _STAGING, root / _OLD
    writer._stage(root, staging, plan, lambda: None)
    (staging / MANIFEST).unlink()  # it did not stage its manifest
    journal = {
        "old": old.name,
        "units": plan.units,
        "created": plan.created,
        "manifest": digest(plan.manifest.encode()),
    }
    old.mkdir(mode=0o700)
    replace_entry(str(root / JOURNAL), json.dumps(journal, sort_keys=True).encode())
    for unit in plan.units:
        target = root / unit
        if os.path.lexists(target):
            (old / unit).parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, old / unit)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging / unit, target)
    replace_entry(str(root / MANIFEST), plan.manifest.encode())  # the commit point
    (root / JOURNAL).unlink()
    for leftover in (staging, old):
        remove(leftover)


def _legacy_sweep(tmp_path: Path, scenario: Scenario) -> tuple[int, list[str]]:
    root, reference = tmp_path / "root", tmp_path / "reference"
    _prepared(reference, scenario)
    old = snapshot(reference)
    write_tree(reference, scenario.after, force=scenario.force)
    new = snapshot(reference)
    bad: list[str] = []
    kills = 0
    for n in range(1, 200):
        _prepared(root, scenario)
        render = lambda: legacy_render(root, scenario.after, scenario.force)
        if not _killed_in_child(render, _CALLS, n):
            break
        kills += 1
        try:
            said = recover_tree(root)
        except TreeStateError as exc:
            bad.append(f"kill {n}: refused: {exc.message}")
            continue
        state = snapshot(root)
        if state not in (old, new):
            bad.append(f"kill {n}: neither tree after '{said}'")
            continue
        write_tree(root, scenario.after, force=scenario.force)
        if snapshot(root) != new:
            bad.append(f"kill {n}: the next render does not give the new tree")
    return kills, bad


# `make test` sweeps the same spec over its own tree (the scenario where a kill once lost
# units, tests/test_render_writer_swap.py), about 5.5 s of CPU each; the others are
# `make test-slow`'s.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, id=n, marks=[] if n == "same spec" else [pytest.mark.slow])
        for n in sorted(SCENARIOS)
    ],
)
def test_an_earlier_railplans_render_killed_at_any_call_recovers_to_the_old_or_the_new_tree(
    scratch: Path,  # noqa: F811
    name: str,
) -> None:
    kills, bad = _legacy_sweep(scratch, SCENARIOS[name])
    assert kills >= 10, kills
    assert bad == [], f"{len(bad)} of {kills} kill points: " + "; ".join(bad[:3])


def _half_swapped(tmp_path: Path) -> Path:
    """A root an earlier railplan's render left with some units moved in, some staged."""
    scenario = SCENARIOS["changed spec"]
    root = tmp_path / "root"
    _prepared(root, scenario)
    assert _killed_in_child(lambda: legacy_render(root, scenario.after, False), _CALLS, 6)
    assert (root / JOURNAL).exists() and (root / _STAGING / "playbooks").exists()
    return root


def test_an_edit_since_the_kill_refuses_the_legacy_rollback_with_the_way_back_by_hand(
    tmp_path: Path,
) -> None:
    """The rebuilt manifest no longer hashes to the journal's: nothing is removed, and the
    one line says which directories to move back and what to remove."""
    root = _half_swapped(tmp_path)
    edited = root / "inventories/c/hosts.yml"  # moved in: the new render's, now edited
    edited.write_bytes(b"all: edited after the kill\n")
    before = snapshot(root)
    with pytest.raises(TreeStateError) as caught:
        recover_tree(root)
    assert snapshot(root) == before  # nothing done
    message = caught.value.message + " " + (caught.value.hint or "")
    assert "earlier railplan" in message
    assert f"from {root / _OLD} back to its place" in message
    assert "inventories/c" in message and f"delete {root / JOURNAL}" in message


def test_a_legacy_recovery_killed_midway_recovers_on_the_next_try(tmp_path: Path) -> None:
    """Once proved, the journal is rewritten in today's format before anything moves back,
    so a kill during that rollback leaves a journal today's recovery finishes."""
    scenario = SCENARIOS["changed spec"]
    reference = tmp_path / "reference"
    _prepared(reference, scenario)
    old = snapshot(reference)
    bad = []
    for m in range(1, 30):
        root = _half_swapped(tmp_path)
        if not _killed_in_child(lambda: recover_tree(root), _CALLS, m):  # noqa: B023
            break
        try:
            recover_tree(root)
        except TreeStateError as exc:
            bad.append(f"recovery killed at {m}: {exc.message}")
            continue
        if snapshot(root) != old:
            bad.append(f"recovery killed at {m}: not the old tree")
        shutil.rmtree(root)
    assert m > 3, m
    assert not bad, bad[:3]
