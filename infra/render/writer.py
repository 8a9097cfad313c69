"""The one writer of rendered trees: atomic, deterministic, confined to its root, edit-aware.

A render is a mapping of relative POSIX paths to bytes. `write_tree` takes the root's lock
(one render per root; a second one fails at once, see `infra.render.tree_state.locked`),
stages the whole tree in a fresh private directory under the root, then swaps each *unit*
(an inventory directory, a role directory, a single file) into place behind a journal
(`infra.render.tree_swap`). A render killed at any instant leaves either the previous tree or
the new one once the journal is replayed: every render, and ``railplan render --recover``,
replays it first, before it reads or writes anything else. No temporary file or directory
outlives a call that returns or raises; one that cannot be removed is an error. A caught
signal (SIGTERM, SIGINT, SIGHUP) stops a write only between files or units, where the
rollback puts everything back, and never stops a rollback or clean-up: it is delivered once
the tree is whole again.

Confinement: nothing inside the root is followed (`infra.render.tree_fs`). A symlink on the
way to a file railplan writes or reads (``inventories`` -> elsewhere, a symlinked role)
refuses the render; staging and old directories get unpredictable names and are created
exclusively; the manifest and journal are validated input (`infra.render.tree_state`);
special files (FIFOs, devices, sockets) in a rendered directory refuse the render instead of
being read. The user's own symlinks inside a rendered directory are carried over as links.

`.railplan-manifest.json` at the root records a SHA-256 per rendered file. A file whose bytes
no longer match it was edited by the user, and a file railplan would write where an unmanaged
file with other content stands belongs to the user: either refuses the render (`RenderConflict`,
naming the files) unless ``force``. Files a unit holds that railplan does not render are
carried over into the new unit, and so is a file the last render made and this one does not
when the user edited it (it leaves the manifest: the user's own now, never deleted). The conflict check records what it saw of every file of a
unit (inode, size, times, mode; the content too for a file changed in the last seconds, whose
times may not show a second change); each unit is compared with that record once the swap
has moved it out of the user's reach, and any difference refuses the render and puts the
tree back, so an edit made after the check is never lost. Files and directories get the
modes a plain ``open()`` and ``mkdir()`` would (the user's umask), never a temporary file's
0600, and never world-writable (`infra.files.tree_umask`: Ansible ignores the ansible.cfg of
a world-writable directory).
"""

# Descriptor-level opens (O_NOFOLLOW, O_EXCL) and lstat are the point here; plain string
# paths in the loops over every file (pathlib's parsing was most of a write's CPU).
# ruff: noqa: PTH102, PTH115, PTH118, PTH211

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from infra.errors import RailplanError
from infra.files import make_dirs, tree_umask
from infra.gc_pause import paused_gc
from infra.render.tree_fs import (
    RenderError,
    cleanup_failed,
    entries,
    missing_directories,
    refuse_in_the_way,
    refuse_mounts,
    refuse_symlinks,
    remove_if_empty,
    unit_of,
    write_failed,
)
from infra.render.tree_state import (
    MANIFEST,
    Journal,
    checked_path,
    digest,
    locked,
    manifest_text,
    read_manifest,
)
from infra.render.tree_swap import OLD, STAGING, swap
from infra.render.tree_swap import recover as _recover
from infra.signals import Interrupted, deferring_signals
from infra.wording import plural

__all__ = [
    "MANIFEST",
    "RenderConflict",
    "RenderError",
    "WriteReport",
    "recover_tree",
    "write_tree",
]

# What a file on disk is, for the conflict check: its SHA-256, or one of these.
_ABSENT, _FOREIGN = None, ""
# A file changed this close to the check may change again within the same timestamp tick
# (coarse file-system clocks): its content is compared too, not only its times.
_RACY_NS = 2_000_000_000


class RenderConflict(RailplanError):
    """Files the user edited (or owns) would be overwritten; re-run with --force.

    ``foreign``: those of ``files`` that no render made (not in the manifest, or no manifest
    at all): the user's own files at a rendered name, not edits since a render, and said so.
    """

    def __init__(self, files: Iterable[str], foreign: Iterable[str] = ()) -> None:
        self.files = sorted(files)
        self.foreign = sorted(set(foreign) & set(self.files))
        edited = [f for f in self.files if f not in self.foreign]
        parts = [_conflict_part(edited, "changed since the last render")] * bool(edited)
        parts += [_conflict_part(self.foreign, "not written by railplan")] * bool(self.foreign)
        where = (
            "your edits elsewhere (group_vars of your own)" if edited else "your files elsewhere"
        )
        super().__init__(
            f"{plural(len(self.files), 'file')} would be overwritten: " + "; ".join(parts),
            hint=f"keep {where}, or re-run with --force",
        )


def _conflict_part(files: list[str], why: str) -> str:
    """``files`` (the first five shown) and why they are the user's, for `RenderConflict`."""
    shown = ", ".join(files[:5]) + f" and {len(files) - 5} more" * (len(files) > 5)
    return f"{shown} ({why})"


@dataclass(frozen=True)
class WriteReport:
    """What a write did: files written, unchanged, stale files removed, edits replaced."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    replaced: tuple[str, ...] = ()  # files the user had edited, overwritten under --force


class _Seen(NamedTuple):
    """One entry of a unit as the conflict check saw it."""

    stat: tuple[int, int, int, int, int]  # inode, size, mtime, mode, ctime
    content: str | None  # SHA-256 (a link: its target) when known
    racy: bool  # changed within `_RACY_NS` of the check: compare the content too


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
    seen: dict[str, dict[str, _Seen]]  # unit -> every entry in it, at the conflict check


def write_tree(root: Path, files: Mapping[str, bytes], *, force: bool = False) -> WriteReport:
    """Write ``files`` (relative POSIX path -> bytes) under ``root`` atomically.

    Raises:
        RenderError: a path is absolute or escapes the root, the root is not a directory, a
            symlink or special file stands in the way, a file changed while the tree was
            rendered, or the file system refuses a write.
        RenderConflict: user-edited files would be overwritten and ``force`` is false.
        TreeStateError: the root's manifest or journal is forged or damaged, or another
            render holds the root's lock.
    """
    with paused_gc():  # a large tree's listings and digests beside a large plan
        return _write_tree(root, files, force)


def _write_tree(root: Path, files: Mapping[str, bytes], force: bool) -> WriteReport:
    paths = {_checked(p): data for p, data in files.items()}
    made = missing_directories(root)
    root = _prepared_root(root)
    return _write_into(root, paths, force, made)


def _write_into(
    root: Path, paths: Mapping[str, bytes], force: bool, made: list[Path] | None = None
) -> WriteReport:
    committed = False
    try:
        with locked(root):
            try:
                _recover(root)
                plan = _decide(root, paths, force)
                # From the first staged file on, a signal stops the write only where the
                # clean-up below can put everything back; the clean-up itself runs to its end,
                # then the signal is delivered (a clean-up cut short left the previous tree).
                with deferring_signals() as held:
                    try:
                        _write(root, plan, held.raise_pending)
                        committed = True
                    finally:
                        _recover(root)  # rolls back a swap that did not commit
            except BaseException:
                # A first render that failed leaves no empty root behind, removed under the
                # lock: a render that found the root locked removes nothing, since the one
                # holding it may be writing into the root both of them saw missing.
                if not committed:
                    remove_if_empty(made or [])
                raise
    except OSError as exc:  # a read-only or full file system is the user's to fix, not a bug
        raise (cleanup_failed(root, exc) if committed else write_failed(root, exc)) from None
    except Interrupted as exc:
        if committed:  # held until the clean-up's end: the new tree is the one in the root
            raise Interrupted(exc.signum, f"after the new tree was in place at {root}") from None
        raise
    unchanged = sorted(set(paths) - set(plan.written))  # a set: a list was quadratic here
    return WriteReport(
        plan.written, tuple(unchanged), tuple(sorted(plan.stale)), tuple(plan.conflicts)
    )


def _write(root: Path, plan: _Plan, stop_if_asked: Callable[[], None]) -> None:
    """Stage, then swap unit by unit, each checked against the conflict check's record.

    ``stop_if_asked`` raises `Interrupted` for a signal held meanwhile: called between
    files and between units, where a rollback can put everything back.
    """
    tag = f"{os.getpid()}-{secrets.token_hex(8)}"
    staging, old = f"{STAGING}-{tag}", f"{OLD}-{tag}"
    _stage(root, root / staging, plan, stop_if_asked)
    units = (*plan.units, MANIFEST)
    created = (*plan.created, *[MANIFEST] * (not os.path.lexists(root / MANIFEST)))
    journal = Journal(old, staging, units, created, committed=False)

    def check(unit: str, moved: Path) -> None:
        stop_if_asked()
        _unchanged_or_refuse(plan, unit, moved)

    swap(root, journal, check)


def recover_tree(root: Path) -> str:
    """Finish what a killed render left under ``root``: roll its swap back or forward.

    Returns what it did, in words, for the CLI to print.
    """
    try:
        if not root.is_dir():
            raise RenderError(f"{root} is not a directory", hint="give --root a rendered tree")
        with locked(root):
            return _recover(root)
    except OSError as exc:
        raise write_failed(root, exc) from None


def _decide(root: Path, paths: Mapping[str, bytes], force: bool) -> _Plan:
    """Check the root and work out the write: conflicts, stale files, the new manifest.

    What the check sees of each unit is recorded (`_Plan.seen`) as it reads it, so that the
    swap can tell any later change.
    """
    start = time.time_ns()
    old_manifest = read_manifest(root)
    units = _units(paths)
    owned = set(units)
    mine = sorted(set(paths) | {p for p in old_manifest if unit_of(p) in owned})
    modes: dict[str, int] = {}  # one lstat per path for both checks
    refuse_in_the_way(root, paths, modes)
    refuse_symlinks(root, [*units, *mine], modes)
    refuse_mounts(root, units)
    device = os.lstat(root).st_dev
    rendered = set(mine)  # once: a set of every path per unit was quadratic in the tree
    looked = {unit: _look(root, unit, start, rendered, device) for unit in units}
    seen = {unit: found or {} for unit, found in looked.items()}
    top = os.path.join(root, "")  # plain strings below: a tree has tens of thousands of files
    # A unit that was absent when it was looked at has nothing to read: its files are
    # `_ABSENT` as of that look, and anything made there since differs from its empty
    # record, which refuses the swap (a first render opens no file it is about to create).
    before = {
        p: _ABSENT
        if looked[unit_of(p)] is None
        else _read_rendered(top + p, p, seen[unit_of(p)], start)
        for p in mine
    }
    new = {p: digest(data) for p, data in paths.items()}  # each rendered file hashed once
    edited = [
        p
        for p in mine
        if before[p] is not _ABSENT
        and before[p] != old_manifest.get(p, new.get(p))
        and before[p] != new.get(p)
    ]
    # An edited file this render no longer makes is the user's now: carried over, unlisted.
    kept = {p for p in edited if p not in paths}
    conflicts = [p for p in edited if p not in kept]
    if conflicts and not force:  # a file no render made is the user's own, not an edit
        raise RenderConflict(conflicts, [p for p in conflicts if p not in old_manifest])
    for p in kept:
        del before[p]  # not railplan's: `_stage` carries it over like any file of the user's
    stale = {
        p
        for p in old_manifest
        if p not in paths and unit_of(p) in owned and p not in kept and before[p] is not _ABSENT
    }
    created = [u for u in units if not os.path.lexists(root / u)]
    manifest = _manifest_text(root, old_manifest, new, stale | kept)
    written = tuple(sorted(p for p in paths if before.get(p) != new[p]))
    return _Plan(paths, units, created, stale, manifest, before, conflicts, written, seen)


def _look(
    root: Path, unit: str, start: int, rendered: set[str], device: int
) -> dict[str, _Seen] | None:
    """Every entry of ``unit`` as it is now, with the content of user files changed lately.

    None when the unit does not exist (nothing in it to record). `_read_rendered` reads
    the rendered files; a mount inside the unit is refused.
    """
    if not os.path.lexists(root / unit):
        return None
    found = {}
    for rel, info in entries(root / unit, unit, device).items():
        racy = _is_racy(info, start)
        content = _content(root / rel, info) if racy and rel not in rendered else None
        found[rel] = _Seen(_stat_key(info), content, racy)
    return found


def _read_rendered(path: str, rel: str, seen: dict[str, _Seen], start: int) -> str | None:
    """The digest of the file railplan renders at ``rel`` (``path``), or `_ABSENT`, `_FOREIGN`.

    Recorded in ``seen`` with the status of the very descriptor it was read from.
    """
    found, info = _disk_digest(path)
    if info is not None and stat.S_ISREG(info.st_mode):
        seen[rel] = _Seen(_stat_key(info), found, _is_racy(info, start))
    return found


def _stat_key(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode, info.st_ctime_ns)


def _is_racy(info: os.stat_result, start: int) -> bool:
    return max(info.st_mtime_ns, info.st_ctime_ns) >= start - _RACY_NS


def _content(path: Path, info: os.stat_result) -> str | None:
    """A file's SHA-256 or a link's target; None for what is never read (a FIFO, ...)."""
    if stat.S_ISLNK(info.st_mode):
        return "-> " + os.readlink(path)
    found, opened = _disk_digest(path)
    return found if opened is not None and stat.S_ISREG(opened.st_mode) else None


def _unchanged_or_refuse(plan: _Plan, unit: str, moved: Path) -> None:
    """RenderError if ``unit``, now at ``moved``, differs from what the conflict check saw.

    Called once the swap has moved the unit out of the root, where nobody edits it: an
    edit, a new or a removed file since the check would be lost with the unit, so the render
    stops instead (the recovery puts the unit back, edit included).
    """
    if unit == MANIFEST:
        return
    was, now = plan.seen[unit], entries(moved, unit)
    changed = sorted(
        rel
        for rel in was.keys() | now.keys()
        if rel not in was
        or rel not in now
        or not _same(was[rel], now[rel], moved, rel[len(unit) + 1 :])
    )
    if changed:
        raise RenderError(
            f"{plural(len(changed), 'file')} changed while the tree was rendered: "
            + ", ".join(changed[:5]),
            hint="render again once nobody edits the tree",
        )


def _same(was: _Seen, info: os.stat_result, moved: Path, inner: str) -> bool:
    """Whether an entry of the unit now at ``moved`` (``inner`` below it) is as it was.

    A unit that is a single file (``inner`` empty) changed its ctime by being moved: that
    ctime is not compared.
    """
    now = _stat_key(info)
    if was.stat[:4] != now[:4] or (inner and was.stat[4] != now[4]):
        return False
    # A link cannot change in place (a new one is a new inode): its content need not be known.
    if not was.racy or was.content is None:
        return True
    return _content(moved / inner if inner else moved, info) == was.content


def _checked(path: str) -> str:
    """``path`` if it is a plain relative path inside the root, else RenderError."""
    checked = checked_path(path)
    if checked is None:
        raise RenderError(f"rendered path {path!r} would escape or clobber the output root")
    return checked


def _prepared_root(root: Path) -> Path:
    # exists() raises too, not only mkdir(): a name over NAME_MAX or a path over PATH_MAX
    try:
        if root.exists() and not root.is_dir():
            raise RenderError(f"{root} is not a directory", hint="give --root a directory")
        make_dirs(root)
    except OSError as exc:
        raise RenderError(
            f"cannot create {root}: {exc.strerror or exc}",
            hint="give --root a directory you can create: on a writable file system, a name "
            "of at most 255 bytes",
        ) from None
    return root.resolve()


def _disk_digest(path: str | Path) -> tuple[str | None, os.stat_result | None]:
    """The SHA-256 of a regular file, `_ABSENT`, or `_FOREIGN` for anything else.

    With the status of the descriptor it was read from (None when nothing was opened).
    A symlink, a directory, a FIFO or a device is never opened for reading.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # nothing is under a file
        return _ABSENT, None
    except OSError:
        return _FOREIGN, None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return _FOREIGN, info
    with os.fdopen(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest(), info


def _units(paths: Iterable[str]) -> list[str]:
    return sorted({unit_of(p) for p in paths})


def _stage(root: Path, staging: Path, plan: _Plan, stop_if_asked: Callable[[], None]) -> None:
    """Write the new tree under ``staging``, with the user's own files of each unit kept."""
    staging.mkdir(mode=0o700)  # exclusive: an existing name (a planted link) is an error
    mask = tree_umask()
    top = os.fspath(staging)
    dirs = _Dirs(top, {top}, 0o777 & ~mask)  # plain strings: tens of thousands of files
    for path, data in sorted(plan.paths.items()):
        stop_if_asked()
        _write_file(dirs, path, data, 0o666 & ~mask)
    for unit in plan.units:
        for rel in sorted(plan.seen[unit]):
            # plan.before holds every file of the unit the last render made or this one makes
            if rel not in plan.before:
                stop_if_asked()
                _carry_over(root / rel, dirs, rel)
    _write_file(dirs, MANIFEST, plan.manifest.encode(), 0o666 & ~mask)
    os.sync()  # one flush for the whole tree: an fsync per file costs minutes at 16,384 hosts


def _carry_over(source: Path, dirs: _Dirs, rel: str) -> None:
    """Copy one of the user's files into the new unit at ``rel``.

    A file by content, a link as a link.
    """
    mode = os.lstat(source).st_mode
    destination = dirs.parents_of(rel)
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
    """Creates the directories of the staging tree at ``top``, each once.

    ``made``: directories known to exist (``top`` and those made), as plain strings.
    """

    top: str
    made: set[str]
    mode: int

    def parents_of(self, rel: str) -> str:
        """The path of ``rel`` (a checked path) under ``top``, its directories made."""
        path = f"{self.top}/{rel}"
        missing = []
        parent = path.rpartition("/")[0]
        while parent not in self.made:
            if len(parent) <= len(self.top):  # not under the staging tree: never for a checked path
                raise RenderError(f"{path} is outside the staging tree")
            missing.append(parent)
            parent = parent.rpartition("/")[0]
        for directory in reversed(missing):
            os.mkdir(directory, self.mode)
            self.made.add(directory)
        return path


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC  # open(path, "xb")'s flags


def _write_file(dirs: _Dirs, rel: str, data: bytes, mode: int) -> None:
    # staging is fresh: each file is created (exclusively), never reopened. ``mode`` is the
    # user's umask and no world write; created with it, as the directories are, the kernel
    # takes the umask off again, which leaves it as it is: no fchmod per file
    fd = os.open(dirs.parents_of(rel), _CREATE, mode)
    try:
        with memoryview(data) as view:
            written = 0
            while written < len(view):  # a write may stop short of a large file's end
                written += os.write(fd, view[written:])
    finally:
        os.close(fd)


def _manifest_text(
    root: Path, old: Mapping[str, str], new: Mapping[str, str], stale: set[str]
) -> str:
    """The manifest after this render: other renders' files kept, this one's updated.

    ``new``: rendered path -> SHA-256.
    """
    top = os.path.join(root, "")
    # this render's own files need no look: ``new`` replaces them all below
    files = {p: d for p, d in old.items() if p not in stale and (p in new or _kept(top + p))}
    files.update(new)
    return manifest_text(files)


def _kept(path: str) -> bool:
    """Whether another render's entry stays listed: something is there, and not a directory.

    A render never writes a directory as a file, so an entry naming one was forged (or the
    user made one there): it is dropped, as a file the user removed is.
    """
    try:
        return not stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:  # gone (or unreadable on the way): as os.path.lexists said before
        return False
