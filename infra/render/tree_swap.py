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
never removed: the rollback stops with one line naming both, and the journal stays.
"""

# The kill-at-call tests count os-level renames and links; lstat, never stat, is the point.
# ruff: noqa: PTH104, PTH108

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from infra.files import is_temp_name, replace_entry
from infra.render.tree_fs import SYMLINK_HINT, RenderError, refuse_symlinks, remove
from infra.render.tree_state import (
    JOURNAL,
    MANIFEST,
    MANIFEST_LIMIT,
    Journal,
    digest,
    journal_text,
    read_journal,
    read_regular,
)
from infra.wording import plural

__all__ = ["OLD", "STAGING", "recover", "swap"]

STAGING = ".railplan-staging"
OLD = ".railplan-old"
LEFTOVER_NAME = re.compile(r"^\.railplan-(old|staging)-\d+(-[0-9a-f]{16})?$")
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
    assert journal.staging is not None
    staging, old = root / journal.staging, root / journal.old
    old.mkdir(mode=0o700)  # exclusive: an existing name (a planted link) is an error
    replace_entry(str(root / JOURNAL), journal_text(journal))
    for unit in journal.units:
        target = root / unit
        if os.path.lexists(target):
            (old / unit).parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, old / unit)
        check(unit, old / unit)
        target.parent.mkdir(parents=True, exist_ok=True)
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
    """Finish what a killed render left under ``root``; what it did, in words."""
    journal = read_journal(root)
    done = "nothing to recover"
    if journal is not None:
        if _committed(root, journal):
            done = "finished a render killed after its commit: the new tree stays"
        else:
            _roll_back(root, journal)
            done = "rolled back a render killed before its commit: the previous tree is back"
        (root / JOURNAL).unlink()
    swept = _sweep(root)
    return done + (f"; removed {plural(swept, 'leftover')}" if swept else "")


def _committed(root: Path, journal: Journal) -> bool:
    if journal.committed is not None:
        return journal.committed
    # An earlier railplan's journal: committed when the manifest on disk is the new one.
    manifest = read_regular(root / MANIFEST, MANIFEST_LIMIT)
    return manifest is not None and digest(manifest) == journal.manifest


def _roll_back(root: Path, journal: Journal) -> None:
    """Put every unit of ``journal`` back as it was before the swap; remove the new ones."""
    old = root / journal.old
    staging = root / journal.staging if journal.staging else None
    for directory in (old, staging):
        if directory is not None and os.path.lexists(directory):
            if not stat.S_ISDIR(os.lstat(directory).st_mode):
                raise RenderError(
                    f"{directory} is not a directory railplan made", hint=SYMLINK_HINT
                )
            refuse_symlinks(directory, journal.units)
    refuse_symlinks(root, journal.units)
    created = set(journal.created)
    for unit in journal.units:
        _put_back(root, old, staging, unit, unit in created)


def _put_back(root: Path, old: Path, staging: Path | None, unit: str, created: bool) -> None:
    target, saved = root / unit, old / unit
    here = os.path.lexists(target)
    staged = staging is not None and _separate(staging / unit, target)
    if os.path.lexists(saved):
        if here and staged:  # the staged unit never moved in: this one is someone's
            raise RenderError(
                f"{target} was made while a render swapped it; the one it replaced is {saved}",
                hint="keep the one you want at that name, remove the other, "
                "then run railplan render --recover",
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
