"""No-follow file-system steps of the tree writer: list a unit, remove a tree, refuse links.

Everything here works below a render root that others can write to, so nothing follows a
symlink: a listing records a link as an entry and never descends into it, a removal unlinks
it, and a path railplan is about to use must have no link on its way (`refuse_symlinks`),
whether it lies in the tree itself or in one of railplan's own staging and old directories.
Listings and removals are iterative, with at most two directories open at a time, so a
user's directory nested thousands of levels deep is carried over or removed (never a
RecursionError); one deeper than a path can name is refused with one line saying where.
"""

# Descriptor-level opens (O_NOFOLLOW, dir_fd) and lstat are the point here.
# ruff: noqa: PTH115, PTH118

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from infra.errors import RailplanError
from infra.files import write_hint

__all__ = [
    "RenderError",
    "cleanup_failed",
    "content",
    "content_at",
    "entries",
    "is_being_removed",
    "missing_directories",
    "refuse_in_the_way",
    "refuse_mounts",
    "refuse_symlinks",
    "remove",
    "remove_if_empty",
    "unit_of",
    "write_failed",
]

SYMLINK_HINT = "railplan never writes through a symlink inside its root: replace it or move it"
_SPLIT_UNITS = {"inventories": 2, "playbooks/roles": 3}  # prefix -> depth of its units
_SPLIT_PREFIXES = tuple((f"{prefix}/", depth) for prefix, depth in _SPLIT_UNITS.items())
REMOVING = ".railplan-rm-"
"""Prefix of the names `remove` gives the subdirectories it moves up while it empties a tree."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def is_being_removed(rel: str) -> bool:
    """Whether ``rel`` lies in a directory `remove` had moved up: its removal was under way."""
    return any(
        len(part) == len(REMOVING) + 16
        and part.startswith(REMOVING)
        and all(c in "0123456789abcdef" for c in part[len(REMOVING) :])
        for part in rel.split("/")
    )


class RenderError(RailplanError):
    """A tree cannot be written (a path escapes the root, the root is not a directory, ...)."""


def unit_of(path: str) -> str:
    """The unit a rendered path belongs to: its inventory, its role, or the file itself."""
    for prefix, depth in _SPLIT_PREFIXES:
        if path.startswith(prefix):
            parts = path.split("/", depth)
            if len(parts) > depth:
                return "/".join(parts[:depth])
    return path


def refuse_symlinks(
    base: Path, relpaths: Iterable[str], looked: dict[str, int] | None = None
) -> None:
    """RenderError if a symlink is on the way to one of ``relpaths`` under ``base``.

    A whole unit that is a symlink is refused too (a link inside a unit is the user's).
    Each directory is looked at once, so this is linear in the tree. ``looked``: what
    `refuse_in_the_way` saw of each path a moment before, reused (see `_on_the_way`).
    """
    for rel, prefix, mode in _on_the_way(base, relpaths, looked):
        if stat.S_ISLNK(mode) and (prefix != rel or rel == unit_of(rel)):
            raise RenderError(f"{base / prefix} is a symlink", hint=SYMLINK_HINT)


def refuse_in_the_way(
    root: Path, rendered: Iterable[str], looked: dict[str, int] | None = None
) -> None:
    """RenderError naming what stands where a rendered file or its directory goes.

    A user's file at the name of a directory railplan renders (a role, ``group_vars``), or
    a directory at the name of a rendered file (``ansible.cfg``): neither can be carried
    over into the new tree nor replaced without losing it, ``--force`` or not. Links are
    left to `refuse_symlinks`. ``looked`` gets what was seen of each path (`_on_the_way`).
    """
    for rel, prefix, mode in _on_the_way(root, rendered, looked):
        if stat.S_ISLNK(mode):
            continue
        if prefix != rel and not stat.S_ISDIR(mode):
            raise RenderError(
                f"{root / prefix} is a file where railplan renders a directory (for {rel})",
                hint="move or rename your file, then render again; --force replaces "
                "edited rendered files, never what stands in the way of a directory",
            )
        if prefix == rel and stat.S_ISDIR(mode):
            raise RenderError(
                f"{root / prefix} is a directory where railplan renders a file",
                hint="move or rename your directory, then render again; --force "
                "replaces edited rendered files, never a directory",
            )


def _on_the_way(
    base: Path, relpaths: Iterable[str], looked: dict[str, int] | None = None
) -> Iterator[tuple[str, str, int]]:
    """(path, prefix, lstat mode) for each existing prefix of each path, each prefix once.

    A prefix is looked at once however many paths pass through it, so a walk is linear in
    the tree; the walk of a path stops at the first prefix that does not exist, and below a
    file (nothing is under a file) or a link (nothing below it is followed), and so does
    every later walk through that prefix: a first render into an empty root looks at its
    few top names, not at each of its tens of thousands of files. ``looked`` (prefix ->
    lstat mode, `_MISSING` for none) is filled as prefixes are looked at; a prefix already
    in it is not looked at again, so two checks of one tree cost one lstat per path.
    """
    looked = {} if looked is None else looked
    walked: set[str] = set()
    top = os.path.join(os.fspath(base), "")  # plain strings: a tree has 100,000 prefixes
    for rel in relpaths:
        # ``walked`` holds every prefix of a prefix it holds: once a path's directory is in
        # it, the path itself is the only prefix left to look at
        parent = rel.rpartition("/")[0]
        if parent in walked:
            if not stat.S_ISDIR(looked[parent]):  # absent, a file or a link: nothing below
                continue
            prefixes = [rel]
        else:
            parts = rel.split("/")
            prefixes = ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]
        for prefix in prefixes:
            if prefix not in walked:
                walked.add(prefix)
                mode = looked.get(prefix)
                if mode is None:
                    mode = looked[prefix] = _mode(top + prefix)
                if mode != _MISSING:
                    yield rel, prefix, mode
            if not stat.S_ISDIR(looked[prefix]):
                break


_MISSING = 0
"""`_on_the_way`'s mode of a path that does not exist: no file type, never a real mode."""


def _mode(path: str) -> int:
    """The lstat mode of ``path``, `_MISSING` when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return _MISSING


def entries(top: Path, prefix: str, device: int | None = None) -> dict[str, os.stat_result]:
    """Everything below ``top`` that is not a directory, named ``prefix/...``, with its lstat.

    Files, links and special files; ``top`` itself under ``prefix`` if it is not a
    directory. A link to a directory is an entry, never descended into. Raises RenderError, naming
    where, for a directory that cannot be listed (too deep for a path, unreadable), and with
    ``device`` (the root's) for a directory on another file system (`refuse_mounts`).
    """
    try:
        info = os.lstat(top)
    except FileNotFoundError:
        return {}
    if not stat.S_ISDIR(info.st_mode):
        return {prefix: info}
    found: dict[str, os.stat_result] = {}
    pending = [(os.fspath(top), prefix)]
    while pending:
        directory, rel = pending.pop()
        for name, info in _listing(directory, rel):
            if stat.S_ISDIR(info.st_mode):
                if device is not None and info.st_dev != device:
                    raise _mounted(Path(directory, name))
                pending.append((os.path.join(directory, name), f"{rel}/{name}"))
            else:
                found[f"{rel}/{name}"] = info
    return found


def refuse_mounts(root: Path, units: Iterable[str]) -> None:
    """RenderError if a unit, or a directory on the way to one, is a mount point.

    A unit moves whole: renamed into the old copy, the new one renamed in. A file system
    mounted inside it would move with it, out of the user's sight, and its directory could
    never be removed; one mounted on the way makes a rename fail after the check (EBUSY).
    The directories inside units are checked as they are read (`entries` with ``device``).
    """
    device = os.lstat(root).st_dev
    for unit in units:
        parts = unit.split("/")
        for depth in range(1, len(parts) + 1):
            try:
                info = os.lstat(root.joinpath(*parts[:depth]))
            except (FileNotFoundError, NotADirectoryError):
                break
            if info.st_dev != device:
                raise _mounted(root.joinpath(*parts[:depth]))
            if not stat.S_ISDIR(info.st_mode):
                break


def _mounted(path: Path) -> RenderError:
    return RenderError(
        f"{path} is a mount point (another file system); railplan moves a rendered "
        "directory whole and will not move a mount",
        hint="unmount it, or mount it outside the rendered tree, then render again",
    )


def _listing(directory: str, rel: str) -> list[tuple[str, os.stat_result]]:
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        raise _unlistable(rel, exc) from None
    try:
        with os.scandir(fd) as found:
            return [(e.name, e.stat(follow_symlinks=False)) for e in found]
    except OSError as exc:
        raise _unlistable(rel, exc) from None
    finally:
        os.close(fd)


def _unlistable(rel: str, exc: OSError) -> RenderError:
    parts = rel.split("/")
    shown = rel if len(parts) <= 8 else "/".join(parts[:6]) + f"/... ({len(parts)} levels)"
    return RenderError(
        f"{shown}: cannot be listed: {exc.strerror or exc}",
        hint="railplan carries over the files you keep in a rendered directory: "
        "move this directory out of the tree",
    )


def remove(path: Path) -> None:
    """Remove a file, a link (not what it points to) or a whole directory; absent is fine.

    A directory is emptied level by level: each subdirectory's own subdirectories move up
    into it, so depth costs neither recursion nor descriptors nor path length. Errors
    propagate (EMFILE included): a render never reports success with leftovers.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        path.unlink()
        return
    top = os.open(path, _DIR_FLAGS)
    try:
        while _flatten(top):
            pass
    finally:
        os.close(top)
    path.rmdir()


def _flatten(top: int) -> bool:
    """Remove every entry of ``top``, each subdirectory's own subdirectories moved up first.

    Returns whether any were moved up (another pass is due).
    """
    moved = False
    for name, is_dir in _names(top):
        if not is_dir:
            os.unlink(name, dir_fd=top)
            continue
        fd = os.open(name, _DIR_FLAGS, dir_fd=top)
        try:
            for inner, inner_is_dir in _names(fd):
                if inner_is_dir:
                    fresh = f"{REMOVING}{secrets.token_hex(8)}"
                    os.rename(inner, fresh, src_dir_fd=fd, dst_dir_fd=top)
                    moved = True
                else:
                    os.unlink(inner, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=top)
    return moved


def _names(fd: int) -> list[tuple[str, bool]]:
    with os.scandir(fd) as found:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in found]


def content_at(saved_unit: Path, inner: str) -> str | None:
    """`content` of the entry at ``inner`` of the unit at ``saved_unit``, if any."""
    path = saved_unit / inner if inner else saved_unit
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return content(path, info)


def content(path: Path, info: os.stat_result) -> str | None:
    """A regular file's SHA-256, a link's target; None for anything else (never read)."""
    if stat.S_ISLNK(info.st_mode):
        return "link " + os.readlink(path)
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return "file " + hashlib.file_digest(f, "sha256").hexdigest()


def missing_directories(root: Path) -> list[Path]:
    """The directories a ``mkdir -p`` of ``root`` would create, deepest first."""
    made = []
    try:
        for path in (root, *root.parents):
            if os.path.lexists(path):
                break
            made.append(path)
    except OSError:  # a name over NAME_MAX: the mkdir says so
        return []
    return made


def remove_if_empty(directories: list[Path]) -> None:
    """Remove ``directories`` (deepest first) while they are empty; keep anything in use."""
    for path in directories:
        try:
            path.rmdir()
        except OSError:
            return


def write_failed(root: Path, exc: OSError) -> RenderError:
    """The file system refused a write of the tree (read-only, full): the user's to fix."""
    return RenderError(
        f"cannot write the tree under {root}: {exc.strerror or exc}",
        hint=write_hint(exc, "render into a writable directory with free space"),
    )


def cleanup_failed(root: Path, exc: OSError) -> RenderError:
    """The new tree is in place, but its old copy's remains could not be removed.

    An immutable or read-only entry in the old copy: "cannot write the tree" would be false.
    """
    where = f": {exc.filename}" if exc.filename else ""
    return RenderError(
        f"the new tree is in place under {root}, but its old copy could not be removed"
        f"{where}: {exc.strerror or exc}",
        hint="clear the immutable or read-only flag (chattr -i, chmod u+w); the next render "
        "or `railplan render --recover` removes what is left",
    )
