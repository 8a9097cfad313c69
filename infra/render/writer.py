"""The one writer of rendered trees: atomic, deterministic, confined to its root, edit-aware.

A render is a mapping of relative POSIX paths to bytes. `write_tree` takes the root's lock
(one render per root; a second one fails at once, see `infra.render.tree_state.locked`),
stages the whole tree in a fresh private directory under the root, then swaps each *unit*
(an inventory directory, a role directory, a single file) into place with two renames,
recorded in a journal first. A render killed at any instant leaves either the previous tree or
the new one once the journal is replayed: every render, and ``railplan render --recover``,
replays it first (`recover_tree`), before it reads or writes anything else. No temporary file or
directory outlives a call that returns or raises; one that cannot be removed is an error.

Confinement: nothing inside the root is followed. A symlink on the way to a file railplan
writes or reads (``inventories`` -> elsewhere, a symlinked role) refuses the render; staging
and old directories get unpredictable names and are created exclusively; the manifest and
journal are validated input (`infra.render.tree_state`); special files (FIFOs, devices,
sockets) in a rendered directory refuse the render instead of being read. The user's own
symlinks inside a rendered directory are carried over as links, never followed.

`.railplan-manifest.json` at the root records a SHA-256 per rendered file. A file whose bytes
no longer match it was edited by the user, and a file railplan would write where an unmanaged
file with other content stands belongs to the user: either refuses the render (`RenderConflict`,
naming the files) unless ``force``. Files a unit holds that railplan does not render are
carried over into the new unit; a file changed while the tree was staged refuses the swap, so
an edit is never lost. Files and directories get the modes a plain ``open()`` and ``mkdir()``
would (the user's umask), never a temporary file's 0600.
"""

# Descriptor-level opens (O_NOFOLLOW, O_EXCL) and lstat are the point here.
# ruff: noqa: PTH115, PTH211

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from infra.errors import RailplanError
from infra.files import is_temp_name, replace_entry, user_umask
from infra.render.tree_state import (
    JOURNAL,
    MANIFEST,
    MANIFEST_LIMIT,
    checked_path,
    locked,
    read_journal,
    read_manifest,
    read_regular,
)
from infra.signals import raising_on_signals
from infra.wording import plural

__all__ = [
    "MANIFEST",
    "RenderConflict",
    "RenderError",
    "WriteReport",
    "recover_tree",
    "write_tree",
]

_STAGING = ".railplan-staging"
_OLD = ".railplan-old"
_SPLIT_UNITS = {"inventories": 2, "playbooks/roles": 3}  # prefix -> depth of its units
_SYMLINK_HINT = "railplan never writes through a symlink inside its root: replace it or move it"
# What a file on disk is, for the conflict check: its SHA-256, or one of these.
_ABSENT, _FOREIGN = None, ""
Snapshot = dict[str, tuple[int, int, int, int]]


class RenderError(RailplanError):
    """A tree cannot be written (a path escapes the root, the root is not a directory, ...)."""


class RenderConflict(RailplanError):
    """Files the user edited (or owns) would be overwritten; re-run with --force."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = sorted(files)
        shown = ", ".join(self.files[:5]) + (
            f" and {len(self.files) - 5} more" * (len(self.files) > 5)
        )
        super().__init__(
            f"{plural(len(self.files), 'file')} changed since the last render would be overwritten: {shown}",
            hint="keep your edits elsewhere (group_vars of your own), or re-run with --force",
        )


@dataclass(frozen=True)
class WriteReport:
    """What a write did: files written, unchanged, stale files removed, edits replaced."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    replaced: tuple[str, ...] = ()  # files the user had edited, overwritten under --force


@dataclass(frozen=True)
class _Plan:
    """One write, decided under the lock before anything is staged."""

    paths: Mapping[str, bytes]
    units: list[str]
    created: list[str]  # units that do not exist yet: a rollback removes them
    stale: set[str]
    manifest: str
    before: dict[str, str | None]  # rendered path -> digest on disk before the render
    conflicts: list[str]  # edited files: only with force does a plan get this far
    written: tuple[str, ...]  # rendered files whose bytes differ from what is on disk


def write_tree(root: Path, files: Mapping[str, bytes], *, force: bool = False) -> WriteReport:
    """Write ``files`` (relative POSIX path -> bytes) under ``root`` atomically.

    Raises:
        RenderError: a path is absolute or escapes the root, the root is not a directory, a
            symlink or special file stands in the way, or the file system refuses a write.
        RenderConflict: user-edited files would be overwritten and ``force`` is false.
        TreeStateError: the root's manifest or journal is forged or damaged, or another
            render holds the root's lock.
    """
    paths = {_checked(p): data for p, data in files.items()}
    root = _prepared_root(root)
    try:
        with locked(root):
            _recover(root)
            plan = _decide(root, paths, force)
            try:
                with raising_on_signals():  # SIGTERM/SIGHUP/SIGINT unwind through the finally
                    _write(root, plan)
            finally:
                _recover(root)  # rolls back a swap that did not commit; drops what is left
    except OSError as exc:  # a read-only or full file system is the user's to fix, not a bug
        raise _os_error(root, exc) from None
    unchanged = sorted(set(paths) - set(plan.written))  # a set: a list was quadratic here
    return WriteReport(
        plan.written, tuple(unchanged), tuple(sorted(plan.stale)), tuple(plan.conflicts)
    )


def _write(root: Path, plan: _Plan) -> None:
    """Stage, check that nothing changed meanwhile, swap."""
    tag = f"{os.getpid()}-{secrets.token_hex(8)}"
    staging, old = root / f"{_STAGING}-{tag}", root / f"{_OLD}-{tag}"
    snapshot = _snapshot(root, plan)
    _stage(root, staging, plan)
    _same_files_or_refuse(root, plan, snapshot)
    _swap(root, staging, old, plan)


def recover_tree(root: Path) -> str:
    """Finish what a killed render left under ``root``: roll its swap back or forward.

    Returns what it did, in words, for the CLI to print.
    """
    if not root.is_dir():
        raise RenderError(f"{root} is not a directory", hint="give --root a rendered tree")
    try:
        with locked(root):
            return _recover(root)
    except OSError as exc:
        raise _os_error(root, exc) from None


def _decide(root: Path, paths: Mapping[str, bytes], force: bool) -> _Plan:
    """Check the root and work out the write: conflicts, stale files, the new manifest."""
    old_manifest = read_manifest(root)
    units = _units(paths)
    owned = set(units)
    mine = sorted(set(paths) | {p for p in old_manifest if _unit_of(p) in owned})
    _refuse_symlinks(root, [*units, *mine])
    before = {p: _disk_digest(root / p) for p in mine}
    new = {p: _digest(data) for p, data in paths.items()}  # each rendered file hashed once
    conflicts = [
        p
        for p in mine
        if before[p] is not _ABSENT
        and before[p] != old_manifest.get(p, new.get(p))
        and before[p] != new.get(p)
    ]
    if conflicts and not force:
        raise RenderConflict(conflicts)
    stale = {
        p
        for p in old_manifest
        if p not in paths and _unit_of(p) in owned and before[p] is not _ABSENT
    }
    created = [u for u in units if not os.path.lexists(root / u)]
    manifest = _manifest_text(root, old_manifest, new, stale)
    written = tuple(sorted(p for p in paths if before.get(p) != new[p]))
    return _Plan(paths, units, created, stale, manifest, before, conflicts, written)


def _checked(path: str) -> str:
    """``path`` if it is a plain relative path inside the root, else RenderError."""
    checked = checked_path(path)
    if checked is None:
        raise RenderError(f"rendered path {path!r} would escape or clobber the output root")
    return checked


def _prepared_root(root: Path) -> Path:
    if root.exists() and not root.is_dir():
        raise RenderError(f"{root} is not a directory", hint="give --root a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RenderError(f"cannot create {root}: {exc.strerror or exc}") from None
    return root.resolve()


def _os_error(root: Path, exc: OSError) -> RenderError:
    return RenderError(
        f"cannot write the tree under {root}: {exc.strerror or exc}",
        hint="render into a writable directory with free space",
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _disk_digest(path: Path) -> str | None:
    """The SHA-256 of a regular file, `_ABSENT`, or `_FOREIGN` for anything else.

    A symlink, a directory, a FIFO or a device is never opened for reading.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return _ABSENT
    except OSError:
        return _FOREIGN
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return _FOREIGN
    with os.fdopen(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _refuse_symlinks(root: Path, relpaths: Iterable[str]) -> None:
    """RenderError if a symlink is on the way to one of ``relpaths`` or is one of its units.

    Each directory is looked at once, so this is linear in the tree.
    """
    seen: set[str] = set()
    for rel in relpaths:
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in seen:
                continue
            seen.add(prefix)
            try:
                mode = os.lstat(root / prefix).st_mode
            except FileNotFoundError:
                break
            if stat.S_ISLNK(mode) and (depth < len(parts) or rel == _unit_of(rel)):
                raise RenderError(f"{root / prefix} is a symlink", hint=_SYMLINK_HINT)


def _unit_of(path: str) -> str:
    for prefix, depth in _SPLIT_UNITS.items():
        if path.startswith(prefix + "/"):
            parts = path.split("/")
            if len(parts) > depth:
                return "/".join(parts[:depth])
    return path


def _units(paths: Iterable[str]) -> list[str]:
    return sorted({_unit_of(p) for p in paths})


def _stage(root: Path, staging: Path, plan: _Plan) -> None:
    """Write the new tree under ``staging``, with the user's own files of each unit kept."""
    staging.mkdir(mode=0o700)  # exclusive: an existing name (a planted link) is an error
    mask = user_umask()
    made = {staging}  # directories known to exist: one mkdir each, no stat per file
    for path, data in sorted(plan.paths.items()):
        _write_file(staging / path, data, 0o666 & ~mask, _Dirs(made, 0o777 & ~mask))
    for unit in plan.units:
        for rel in _user_files(root, unit):
            # plan.before holds every file of the unit the last render made or this one makes
            if rel not in plan.before:
                _carry_over(root / rel, staging / rel, _Dirs(made, 0o777 & ~mask))
    os.sync()  # one flush for the whole tree: an fsync per file costs minutes at 16,384 hosts


def _user_files(root: Path, unit: str) -> list[str]:
    """Every file, symlink or special file inside the directory ``unit``, relative to ``root``."""
    unit_dir = root / unit
    if not unit_dir.is_dir() or unit_dir.is_symlink():
        return []
    found = []
    for directory, dirs, names in os.walk(unit_dir):  # does not follow symlinked directories
        base = Path(directory).relative_to(root).as_posix()
        found += [f"{base}/{name}" for name in names]
        found += [f"{base}/{d}" for d in dirs if (Path(directory) / d).is_symlink()]
    return sorted(found)


def _carry_over(source: Path, destination: Path, dirs: _Dirs) -> None:
    """Copy one of the user's files into the new unit: a file by content, a link as a link."""
    mode = os.lstat(source).st_mode
    dirs.parents_of(destination)
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(source), destination)
    elif stat.S_ISREG(mode):
        shutil.copy2(source, destination, follow_symlinks=False)
    else:  # reading /dev/zero or a FIFO would fill the disk or hang the render
        raise RenderError(
            f"{source} is a special file (FIFO, device or socket) inside a rendered directory",
            hint="move it out of the tree; railplan carries over only files and symlinks",
        )


@dataclass(frozen=True)
class _Dirs:
    """Creates the directories of the staging tree, each once (``made``: known to exist)."""

    made: set[Path]
    mode: int

    def parents_of(self, path: Path) -> None:
        missing = []
        parent = path.parent
        while parent not in self.made:
            if parent == parent.parent:  # not under the staging tree: never for a checked path
                raise RenderError(f"{path} is outside the staging tree")
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            directory.mkdir(mode=self.mode)
            self.made.add(directory)


def _write_file(path: Path, data: bytes, mode: int, dirs: _Dirs) -> None:
    dirs.parents_of(path)
    with path.open("xb") as f:  # staging is fresh: each file is created, never reopened
        f.write(data)
        os.fchmod(f.fileno(), mode)


def _snapshot(root: Path, plan: _Plan) -> Snapshot:
    """inode, size, mtime and mode of every file the swap will move, user files included."""
    found: Snapshot = {}
    for rel in [*plan.before, *(f for u in plan.units for f in _user_files(root, u))]:
        try:
            info = os.lstat(root / rel)
        except FileNotFoundError:
            continue
        found[rel] = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)
    return found


def _same_files_or_refuse(root: Path, plan: _Plan, snapshot: Snapshot) -> None:
    """RenderError if a file the swap moves changed while the tree was staged.

    Called right before the swap: an edit or a new file would be lost with the unit it is
    in, so the render stops instead (the edit stays, nothing is swapped).
    """
    changed = sorted(set(snapshot.items()) ^ set(_snapshot(root, plan).items()))
    if changed:
        names = sorted({rel for rel, _ in changed})
        raise RenderError(
            f"{plural(len(names), 'file')} changed while the tree was rendered: "
            + ", ".join(names[:5]),
            hint="render again once nobody edits the tree",
        )


def _swap(root: Path, staging: Path, old: Path, plan: _Plan) -> None:
    """Move each unit into place, then commit by replacing the manifest.

    The journal, written first, names the units, those that are new and the new manifest's
    digest, so `_recover` can tell a committed swap (roll forward) from a half-done one (roll
    back, removing the new units too).
    """
    journal = {
        "old": old.name,
        "units": plan.units,
        "created": plan.created,
        "manifest": _digest(plan.manifest.encode()),
    }
    old.mkdir(mode=0o700)
    replace_entry(str(root / JOURNAL), json.dumps(journal, sort_keys=True).encode())
    for unit in plan.units:
        target = root / unit
        if os.path.lexists(target):
            (old / unit).parent.mkdir(parents=True, exist_ok=True)
            target.rename(old / unit)
        target.parent.mkdir(parents=True, exist_ok=True)
        (staging / unit).rename(target)
    replace_entry(str(root / MANIFEST), plan.manifest.encode())  # the commit point


def _recover(root: Path) -> str:
    """Undo the swap of a render killed half-way, then drop what a killed render left.

    Returns what it did, in words. Safe to be killed itself: each step leaves a state the
    next `_recover` finishes.
    """
    journal = read_journal(root)
    done = "nothing to recover"
    if journal is not None:
        manifest = read_regular(root / MANIFEST, MANIFEST_LIMIT)
        if manifest is None or _digest(manifest) != journal.manifest:
            _roll_back(root, root / journal.old, journal.units, journal.created)
            done = "rolled back a render killed before its commit: the previous tree is back"
        else:
            done = "finished a render killed after its commit: the new tree stays"
        (root / JOURNAL).unlink()
    swept = _sweep(root)
    return done + (f"; removed {plural(swept, 'leftover')}" if swept else "")


def _roll_back(root: Path, old: Path, units: Iterable[str], created: Iterable[str]) -> None:
    if os.path.lexists(old) and not stat.S_ISDIR(os.lstat(old).st_mode):
        raise RenderError(f"{old} is not a directory railplan made", hint=_SYMLINK_HINT)
    _refuse_symlinks(root, [*units, *created])
    for unit in created:
        if not os.path.lexists(old / unit):
            _remove(root / unit)
    for unit in units:
        if os.path.lexists(old / unit):
            _remove(root / unit)
            (old / unit).rename(root / unit)


def _sweep(root: Path) -> int:
    """Remove staging and old directories and temporary files of killed renders; how many.

    Under the lock none of them belongs to a running render; a link is removed, not followed.
    """
    names = [
        entry.name
        for entry in os.scandir(root)
        if entry.name.startswith((_STAGING, _OLD))
        or is_temp_name(entry.name)
        # temporary names the tree writer used before it shared `infra.files`'s
        or (entry.name.startswith(".railplan-") and entry.name.endswith(".tmp"))
    ]
    for name in names:
        _remove(root / name)
    return len(names)


def _remove(path: Path) -> None:
    """Remove a file, a link or a whole directory.

    Errors propagate (EMFILE included): a render never reports success with leftovers.
    """
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # fd-based on Linux: a link inside is removed, not followed
    elif os.path.lexists(path):
        path.unlink()


def _manifest_text(
    root: Path, old: Mapping[str, str], new: Mapping[str, str], stale: set[str]
) -> str:
    """The manifest after this render: other renders' files kept, this one's updated.

    ``new``: rendered path -> SHA-256.
    """
    files = {p: d for p, d in old.items() if p not in stale and os.path.lexists(root / p)}
    files.update(new)
    document = {"format": 1, "files": dict(sorted(files.items()))}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"
