"""The swap of a staged tree into its root, behind a journal, and its recovery after a kill.

A swap moves *units* (an inventory, a role, a single file; the manifest is the last unit)
from a staging directory into the root. Before the first move the journal names the staging
and old directories, the units, and those that are new, in state ``swapping``. Each unit then
moves out of the root into the old directory, is checked there (out of the user's reach, so
an edit made up to that instant is seen: the check refuses the swap), and the staged one
moves in (a file by a hard link, which never replaces a file made at that name meanwhile).
Rewriting the journal as ``committed`` is the commit point: it does not depend on the manifest
changing, so re-rendering the same spec over its own tree commits like any other render.

Recovery, which every render runs first and ``railplan render --recover`` runs alone, reads
the journal: ``committed`` drops the old and staging directories; anything else puts each
unit back (whatever state a kill left it in, each step of the way back can be killed too)
and drops the staged one. The journal is untrusted input: its directories and the paths
under them are used only when no symlink is on the way (`refuse_symlinks`), exactly as for
the tree itself. A unit that someone made at a unit's name while it was being swapped is
never removed: the rollback stops with one line naming both, and the journal stays. A
journal no swap leaves (its directories gone, its units in states no swap or rollback
leaves, or asking to remove a file no render made and the rollback does not put back) is
refused with one line naming it, and nothing is done. A journal of an earlier railplan, which
had no format, is first carried over to this one (`infra.render.tree_legacy`).
"""

# The kill-at-call tests count os-level renames and links; lstat, never stat, is the point.
# ruff: noqa: PTH104, PTH108

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from infra.files import is_temp_name, make_dirs, replace_entry
from infra.render.tree_fs import (
    SYMLINK_HINT,
    RenderError,
    content,
    content_at,
    entries,
    is_being_removed,
    refuse_symlinks,
    remove,
)
from infra.render.tree_legacy import upgrade
from infra.render.tree_state import (
    JOURNAL,
    MANIFEST,
    Journal,
    TreeStateError,
    forged_journal,
    journal_text,
    read_journal,
    read_manifest_file,
)
from infra.signals import deferring_signals
from infra.wording import plural

__all__ = ["OLD", "STAGING", "recover", "swap"]

STAGING = ".railplan-staging"
OLD = ".railplan-old"
LEFTOVER_NAME = re.compile(r"^\.railplan-(old|staging)-[0-9]+(-[0-9a-f]{16})?\Z")
"""Staging and old directories a killed render may leave: `<name>-<pid>-<hex>`, or
`<name>-<pid>` as earlier railplans named them."""


def swap(
    root: Path,
    journal: Journal,
    check: Callable[[str, Path], None],
) -> None:
    """Move ``journal.units`` from its staging directory into ``root``, then commit.

    ``check(unit, moved)`` looks at the unit that was in the root once it is at ``moved``
    and raises to stop the swap (the caller's recovery puts everything back).
    """
    staging, old = root / journal.staging, root / journal.old
    old.mkdir(mode=0o700)  # exclusive: an existing name (a planted link) is an error
    replace_entry(str(root / JOURNAL), journal_text(journal))
    for unit in journal.units:
        target = root / unit
        if os.path.lexists(target):
            (old / unit).parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, old / unit)
        check(unit, old / unit)
        make_dirs(target.parent)
        _move_in(staging / unit, target)
    committed = Journal(journal.old, journal.staging, journal.units, journal.created, True)
    replace_entry(str(root / JOURNAL), journal_text(committed))  # the commit point


def _move_in(source: Path, target: Path) -> None:
    """Give ``source`` the name ``target``, which nothing should hold; never replace a file.

    A directory is renamed (which fails on a directory someone filled there meanwhile); a
    file is linked, then unlinked from staging, where the file system has hard links.
    """
    if stat.S_ISDIR(os.lstat(source).st_mode):
        os.rename(source, target)
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some FUSE and network file systems)
        os.rename(source, target)
    else:
        os.unlink(source)


def recover(root: Path) -> str:
    """Finish what a killed render left under ``root``; what it did, in words.

    Signals wait until it is done: a rollback or a sweep cut short would leave half of the
    previous tree, or a copy of it, in the root with nobody told.
    """
    with deferring_signals():
        return _recover(root)


def _recover(root: Path) -> str:
    journal = read_journal(root)
    done = "nothing to recover"
    if journal is not None:
        for name in (journal.old, journal.staging):
            # made before the journal is written, removed only after it is: never without it
            if name is not None and not os.path.lexists(root / name):
                raise forged_journal(root, f"names {name}, which is not in the root")
        if journal.committed is None:  # an earlier railplan's journal
            journal = upgrade(root, journal)
        if journal.committed:
            done = "finished a render killed after its commit: the new tree stays"
        else:
            _roll_back(root, journal)
            done = "rolled back a render killed before its commit: the previous tree is back"
        (root / JOURNAL).unlink()
    swept = _sweep(root)
    return done + (f"; removed {plural(swept, 'leftover')}" if swept else "")


def _roll_back(root: Path, journal: Journal) -> None:
    """Put every unit of ``journal`` back as it was before the swap; remove the new ones."""
    old, staging = root / journal.old, root / journal.staging
    for directory in (old, staging):
        if os.path.lexists(directory):
            if not stat.S_ISDIR(os.lstat(directory).st_mode):
                raise RenderError(
                    f"{directory} is not a directory railplan made", hint=SYMLINK_HINT
                )
            refuse_symlinks(directory, journal.units)
    refuse_symlinks(root, journal.units)
    created = set(journal.created)
    _refuse_out_of_order(root, journal, old, staging)
    doomed = [u for u in journal.units if _removes(root, old, staging, u, u in created)]
    if doomed:
        _refuse_unless_railplans(root, journal, doomed)
    for unit in journal.units:
        _put_back(root, old, staging, unit, unit in created)
    _drop_empty_parents(root, [u for u in journal.units if u in created])


def _drop_empty_parents(root: Path, units: list[str]) -> None:
    """Remove the directories a swap made to hold ``units`` (``inventories/``) once empty.

    The swap creates a new unit's parents; putting the unit back out leaves them empty. An
    empty directory on the way to a unit is taken for one the swap made: the rendered tree's
    own layout, which the next render makes again.
    """
    for unit in units:
        parent = (root / unit).parent
        while parent != root and not os.path.lexists(root / unit):
            try:
                parent.rmdir()
            except OSError:  # not empty (another unit, a user's file), or gone
                break
            parent = parent.parent


def _refuse_out_of_order(root: Path, journal: Journal, old: Path, staging: Path) -> None:
    """TreeStateError unless the units are in states a swap and its rollback leave.

    The swap moves units in in order and the rollback puts them back in the same order, so
    the units read: those put back, then those moved in (their old one is in ``old``, or
    they are new and here), then those still staged; the manifest, the last unit, is staged
    or moved in while anything is left to put back.
    """
    created = set(journal.created)
    phases = []
    for unit in journal.units:
        target = root / unit
        if _separate(staging / unit, target):
            phases.append(2)  # staged: never moved in
        elif os.path.lexists(old / unit) or (unit in created and os.path.lexists(target)):
            phases.append(1)  # moved in, not yet put back
        else:
            phases.append(0)  # put back (or there was nothing to move)
    if phases != sorted(phases):
        raise forged_journal(root, "its units are in states no swap or rollback leaves them in")


def _removes(root: Path, old: Path, staging: Path, unit: str, created: bool) -> bool:
    """Whether `_put_back` removes what is at ``unit`` (the new unit a swap moved in)."""
    target = root / unit
    if not os.path.lexists(target) or _separate(staging / unit, target):
        return False  # nothing there, or a unit the swap did not move in
    return created or os.path.lexists(old / unit)


def _put_back(root: Path, old: Path, staging: Path, unit: str, created: bool) -> None:
    target, saved = root / unit, old / unit
    here = os.path.lexists(target)
    staged = _separate(staging / unit, target)
    if os.path.lexists(saved):
        if here and staged:  # the staged unit never moved in: this one is someone's
            raise RenderError(
                f"{target} was made while a render swapped it; the one it replaced is {saved}",
                hint="keep the one you want at that name, remove the other, "
                f"then run railplan render --recover --root {root}",
            )
        if here:
            remove(target)
        os.rename(saved, target)
    elif created and here and not staged:
        remove(target)


def _separate(staged: Path, target: Path) -> bool:
    """Whether ``staged`` exists and is not the very file now at ``target`` (a link in)."""
    try:
        one = os.lstat(staged)
    except FileNotFoundError:
        return False
    try:
        other = os.lstat(target)
    except FileNotFoundError:
        return True
    return (one.st_dev, one.st_ino) != (other.st_dev, other.st_ino)


def _sweep(root: Path) -> int:
    """Remove staging and old directories and temporary files of killed renders; how many.

    Under the lock none of them belongs to a running render; a link is removed, not followed.
    """
    names = [
        entry.name
        for entry in os.scandir(root)
        # railplan's own names only (a user's `.railplan-oldnotes.txt` is the user's), the
        # `<name>-<pid>` of earlier railplans too
        if LEFTOVER_NAME.match(entry.name)
        or is_temp_name(entry.name)
        # temporary names the tree writer used before it shared `infra.files`'s
        or (entry.name.startswith(".railplan-") and entry.name.endswith(".tmp"))
    ]
    for name in names:
        remove(root / name)
    return len(names)


def _refuse_unless_railplans(root: Path, journal: Journal, units: list[str]) -> None:
    """TreeStateError unless every file in ``units`` is one the rollback may remove.

    A unit a swap moved in holds the files it rendered, each with the digest of the manifest
    it staged, and copies of the user's files, whose originals are in the old directory and
    come back. Anything else (a file the journal calls new but no render made, one edited
    since the render stopped) would be lost: the journal is refused and nothing is done.
    """
    manifest = _new_manifest(root, journal)
    for unit in units:
        if unit == MANIFEST:
            continue  # railplan's own file, which the old one replaces
        saved = root / journal.old / unit
        for rel, info in sorted(entries(root / unit, unit).items()):
            if is_being_removed(rel):
                continue  # an earlier rollback, killed while it removed this unit, moved it
            found = content(root / rel, info)
            inner = rel[len(unit) + 1 :]
            rendered = manifest.get(rel)
            if found is not None and found in (
                rendered and f"file {rendered}",
                content_at(saved, inner),
            ):
                continue
            raise TreeStateError(
                f"the rollback it asks for would remove {rel}, which no render made "
                "and which would not be put back",
                file=str(root / JOURNAL),
                hint=f"if you saved {rel} after a render stopped, move it out of the tree and "
                f"run railplan render --recover --root {root}; else the journal is forged "
                "or damaged and nothing was done: inspect the tree, then remove the journal",
            )


def _new_manifest(root: Path, journal: Journal) -> dict[str, str]:
    """The manifest of the swap ``journal`` tells of: staged, or moved into the root."""
    staged = root / journal.staging / MANIFEST
    if _separate(staged, root / MANIFEST):
        return read_manifest_file(staged)
    return read_manifest_file(root / MANIFEST)
