"""Journals of the tree writer before its journal had a format: decided, proved, carried over.

Until its journal got a ``format`` (2), railplan's tree writer wrote ``{"old", "units",
"created", "manifest"}``: its staging directory had the old directory's tag, each unit moved
out into the old directory and in from staging by rename, and writing the new manifest over
the root's was the commit point, so the journal held only that manifest's digest. Such a
journal committed when the root's manifest has that digest and no unit is left in staging
(the digest alone also matches a re-render of the same spec stopped half-way, whose manifest
does not change).

A rollback must not remove anything the render did not make. The new render's manifest is
rebuilt from what its swap left (the root's manifest for the units it did not render; for
the units it did, every file of the new unit except the user's, which it carried over as
copies of the files the rollback puts back) and must hash to the journal's digest: that
proves each file the rollback removes. The rebuilt manifest is then staged and the journal
rewritten in format 2, so the rollback, and a kill during it, go the way of today's swaps
(`infra.render.tree_swap`). What cannot be proved so (an edit since the kill, a rollback of
the earlier railplan's own cut short) is refused with one line saying what to move back by
hand, and nothing is done.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from infra.files import replace_entry
from infra.render.tree_fs import content, content_at, entries, refuse_symlinks
from infra.render.tree_state import (
    JOURNAL,
    MANIFEST,
    MANIFEST_LIMIT,
    Journal,
    TreeStateError,
    digest,
    journal_text,
    manifest_text,
    read_manifest_file,
    read_regular,
)

__all__ = ["upgrade"]


def upgrade(root: Path, journal: Journal) -> Journal:
    """The format-2 journal that means what the earlier railplan's ``journal`` means.

    Committed: returned as such (the recovery drops what is left). Not committed: the
    rebuilt manifest is staged and the journal rewritten before it is returned, or, when
    the rebuilt manifest is not the one the journal names, `TreeStateError` and nothing done.
    """
    old, staging = root / journal.old, root / journal.staging
    for directory in (old, staging):
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            raise _by_hand(root, journal, f"{directory.name} is not a directory")
    for base in (root, old, staging):
        refuse_symlinks(base, journal.units)
    left = [u for u in journal.units if os.path.lexists(staging / u)]
    on_disk = read_regular(root / MANIFEST, MANIFEST_LIMIT)
    if not left and on_disk is not None and digest(on_disk) == journal.manifest:
        return Journal(journal.old, journal.staging, journal.units, journal.created, True)
    rebuilt = _rebuilt(root, journal)
    if rebuilt is None or digest(rebuilt) != journal.manifest:
        raise _by_hand(root, journal, "its units do not hold what that render made")
    replace_entry(str(staging / MANIFEST), rebuilt)
    units = (*journal.units, MANIFEST)  # staged, as a swap of today leaves its manifest
    upgraded = Journal(journal.old, journal.staging, units, journal.created, False)
    replace_entry(str(root / JOURNAL), journal_text(upgraded))  # from here on, format 2
    return upgraded


def _rebuilt(root: Path, journal: Journal) -> bytes | None:
    """The manifest the swap of ``journal`` was to commit, rebuilt from what it left.

    None if a new unit holds something no render writes (a link, a special file) that is not
    the user's.
    """
    before = read_manifest_file(root / MANIFEST)  # the swap had not replaced it yet
    units = set(journal.units)
    # the earlier railplan kept the other units' files that were there when it started
    files = {p: d for p, d in before.items() if not _in(p, units) and os.path.lexists(root / p)}
    for unit in journal.units:
        new, previous = _versions(root, journal, unit)
        for rel, info in entries(new, unit).items():
            inner = rel[len(unit) + 1 :]
            found = content(new / inner if inner else new, info)
            if rel not in before and found is not None and found == content_at(previous, inner):
                continue  # the user's own file, carried over: not in the manifest
            if found is None or not found.startswith("file "):
                return None
            files[rel] = found.removeprefix("file ")
    return manifest_text(files).encode()


def _versions(root: Path, journal: Journal, unit: str) -> tuple[Path, Path]:
    """Where ``unit`` is as the render made it, and as it was before (maybe nowhere)."""
    staged, saved = root / journal.staging / unit, root / journal.old / unit
    if os.path.lexists(staged):  # not moved in yet: the one before is still in the root
        return staged, saved if os.path.lexists(saved) else root / unit
    return root / unit, saved


def _in(path: str, units: set[str]) -> bool:
    """Whether ``path`` is one of ``units`` or lies inside one."""
    parts = path.split("/")
    return any("/".join(parts[:n]) in units for n in range(1, len(parts) + 1))


def _by_hand(root: Path, journal: Journal, why: str) -> TreeStateError:
    """The refusal of a journal whose rollback cannot be proved, with the way back by hand."""
    old = root / journal.old
    back = [u for u in journal.units if os.path.lexists(old / u)]
    new = [u for u in journal.created if u not in back and os.path.lexists(root / u)]
    steps = [f"move each of {', '.join(back)} from {old} back to its place in {root}"] * bool(back)
    steps += [f"remove {', '.join(new)} from {root} (that render made them)"] * bool(new)
    steps += [f"delete {root / JOURNAL}, then run railplan render --recover --root {root}"]
    return TreeStateError(
        f"left by an earlier railplan killed while it swapped a render in; {why}, so railplan "
        "cannot tell that render's files from yours and did nothing",
        file=str(root / JOURNAL),
        hint="to put back the tree from before that render by hand: " + "; ".join(steps),
    )
