"""The one writer of rendered trees: atomic, deterministic, confined to its root, edit-aware.

A render is a mapping of relative POSIX paths to bytes. `write_tree` stages the whole tree in
a hidden directory under the root, then swaps each *unit* (an inventory directory, a role
directory, a single file) into place with two renames, recorded in a journal first. A render
killed while staging leaves the previous tree untouched; one killed during the swap is rolled
back by the next `write_tree` on the same root, before anything else happens. No temporary
file or directory outlives a call that returns or raises.

`.railplan-manifest.json` at the root records a SHA-256 per rendered file. A file whose bytes
no longer match it was edited by the user, and a file railplan would write where an unmanaged
file with other content stands belongs to the user: either refuses the render (`RenderConflict`,
naming the files) unless ``force``. Files a unit holds that railplan does not render are
carried over into the new unit. Files and directories get the modes a plain ``open()`` and
``mkdir()`` would (the user's umask), never a temporary file's 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from infra.errors import RailplanError
from infra.files import pid_running
from infra.signals import raising_on_signals
from infra.wording import plural

__all__ = ["MANIFEST", "RenderConflict", "RenderError", "WriteReport", "user_umask", "write_tree"]

MANIFEST = ".railplan-manifest.json"
_JOURNAL = ".railplan-journal.json"
_STAGING = ".railplan-staging"
_OLD = ".railplan-old"
_SPLIT_UNITS = {"inventories": 2, "playbooks/roles": 3}  # prefix -> depth of its units


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
    """What a write did: files written, files unchanged, stale files removed."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]


def write_tree(root: Path, files: Mapping[str, bytes], *, force: bool = False) -> WriteReport:
    """Write ``files`` (relative POSIX path -> bytes) under ``root`` atomically.

    Raises:
        RenderError: a path is absolute or escapes the root, or the root is not a directory.
        RenderConflict: user-edited files would be overwritten and ``force`` is false.
    """
    paths = {_checked(p): data for p, data in files.items()}
    root = _prepared_root(root)
    _recover(root)
    old_manifest = _read_manifest(root)
    conflicts = _conflicts(root, paths, old_manifest)
    if conflicts and not force:
        raise RenderConflict(conflicts)
    stale = _stale(root, paths, old_manifest)
    units = _units(paths)
    staging, old = root / f"{_STAGING}-{os.getpid()}", root / f"{_OLD}-{os.getpid()}"
    manifest = _manifest_text(root, old_manifest, paths, stale)
    try:
        with raising_on_signals():  # SIGTERM/SIGHUP/SIGINT unwind through the finally below
            _stage(root, staging, paths, units, old_manifest, stale)
            _swap(root, staging, old, units, manifest)
    except OSError as exc:  # a read-only or full file system is the user's to fix, not a bug
        raise RenderError(
            f"cannot write the tree under {root}: {exc.strerror or exc}",
            hint="render into a writable directory with free space",
        ) from None
    finally:
        _recover(root)  # rolls back a swap that did not commit; drops what is left over
    written = [p for p in sorted(paths) if old_manifest.get(p) != _digest(paths[p])]
    unchanged = [p for p in sorted(paths) if p not in written]
    return WriteReport(tuple(written), tuple(unchanged), tuple(sorted(stale)))


def _checked(path: str) -> str:
    """``path`` if it is a plain relative path inside the root, else RenderError."""
    pure = PurePosixPath(path)
    bad = (
        not path
        or "\\" in path
        or "\x00" in path
        or pure.is_absolute()
        or any(part in ("", ".", "..") for part in path.split("/"))
        or pure.parts[0].startswith(".railplan-")
    )
    if bad:
        raise RenderError(f"rendered path {path!r} would escape or clobber the output root")
    return pure.as_posix()


def _prepared_root(root: Path) -> Path:
    if root.exists() and not root.is_dir():
        raise RenderError(f"{root} is not a directory", hint="give --root a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RenderError(f"cannot create {root}: {exc.strerror or exc}") from None
    return root.resolve()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return _digest(path.read_bytes()) if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def _read_manifest(root: Path) -> dict[str, str]:
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        files = data["files"]
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError):
        raise RenderError(
            f"{root / MANIFEST} is unreadable", hint="delete it to adopt the tree again"
        ) from None
    if not isinstance(files, dict):
        raise RenderError(f"{root / MANIFEST} is not a railplan manifest")
    return {str(k): str(v) for k, v in files.items()}


def _conflicts(root: Path, paths: Mapping[str, bytes], manifest: Mapping[str, str]) -> list[str]:
    """Files on disk that differ both from the last render and from the new one."""
    found = []
    owned = set(_units(paths))
    for path in sorted(set(paths) | {p for p in manifest if _unit_of(p) in owned}):
        target = root / path
        if not target.exists() and not target.is_symlink():
            continue
        on_disk = _file_digest(target)
        new = _digest(paths[path]) if path in paths else None
        if on_disk is None or (on_disk != manifest.get(path, new) and on_disk != new):
            found.append(path)
    return found


def _stale(root: Path, paths: Mapping[str, bytes], manifest: Mapping[str, str]) -> set[str]:
    """Files of the last render, in units this render owns, that it no longer renders."""
    owned = _units(paths)
    return {p for p in manifest if p not in paths and _unit_of(p) in owned and (root / p).exists()}


def _unit_of(path: str) -> str:
    for prefix, depth in _SPLIT_UNITS.items():
        if path.startswith(prefix + "/"):
            parts = path.split("/")
            if len(parts) > depth:
                return "/".join(parts[:depth])
    return path


def _units(paths: Iterable[str]) -> list[str]:
    return sorted({_unit_of(p) for p in paths})


def user_umask() -> int:
    """The process's umask (read without changing it for longer than a call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stage(
    root: Path,
    staging: Path,
    paths: Mapping[str, bytes],
    units: list[str],
    manifest: Mapping[str, str],
    stale: set[str],
) -> None:
    """Write the new tree under ``staging``, with the user's own files of each unit kept."""
    mask = user_umask()
    for path, data in sorted(paths.items()):
        _write_file(staging / path, data, 0o666 & ~mask, 0o777 & ~mask)
    for unit in units:
        for rel in _user_files(root, unit):
            if rel not in paths and rel not in manifest and rel not in stale:
                destination = staging / rel
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, destination, follow_symlinks=False)
    os.sync()  # one flush for the whole tree: an fsync per file costs minutes at 16,384 hosts


def _user_files(root: Path, unit: str) -> list[str]:
    """Every file (or symlink) inside the directory ``unit``, relative to ``root``."""
    unit_dir = root / unit
    if not unit_dir.is_dir() or unit_dir.is_symlink():
        return []
    found = []
    for directory, dirs, names in os.walk(unit_dir):  # does not follow symlinked directories
        base = Path(directory).relative_to(root).as_posix()
        found += [f"{base}/{name}" for name in names]
        found += [f"{base}/{d}" for d in dirs if (Path(directory) / d).is_symlink()]
    return sorted(found)


def _write_file(path: Path, data: bytes, mode: int, dir_mode: int) -> None:
    for parent in reversed(path.parents):
        if not parent.exists():
            parent.mkdir(mode=dir_mode)
    with path.open("wb") as f:
        f.write(data)
        os.fchmod(f.fileno(), mode)


def _swap(root: Path, staging: Path, old: Path, units: list[str], manifest: str) -> None:
    """Move each unit into place, then commit by replacing the manifest.

    The journal, written first, names the units and the new manifest's digest, so
    `_recover` can tell a committed swap (roll forward) from a half-done one (roll back).
    """
    journal = {"old": old.name, "units": units, "manifest": _digest(manifest.encode())}
    _atomic_text(root / _JOURNAL, json.dumps(journal, sort_keys=True))
    for unit in units:
        target = root / unit
        if target.exists() or target.is_symlink():
            (old / unit).parent.mkdir(parents=True, exist_ok=True)
            target.rename(old / unit)
        target.parent.mkdir(parents=True, exist_ok=True)
        (staging / unit).rename(target)
    _atomic_text(root / MANIFEST, manifest)  # the commit point


def _recover(root: Path) -> None:
    """Undo the swap of a render killed half-way, then drop what a killed render left."""
    journal_path = root / _JOURNAL
    if journal_path.exists():
        journal = json.loads(journal_path.read_text(encoding="utf-8"))
        old = root / journal["old"]
        committed = _file_digest(root / MANIFEST) == journal["manifest"]
        for unit in journal["units"] if not committed else []:
            if (old / unit).exists() or (old / unit).is_symlink():
                _remove(root / unit)
                (old / unit).rename(root / unit)
        journal_path.unlink()
    for leftover in root.glob(".railplan-*"):
        if _live_other(leftover.name):
            continue  # another render on this root is still running
        if leftover.name.startswith((_STAGING, _OLD)):
            shutil.rmtree(leftover, ignore_errors=True)
        elif leftover.name.endswith(".tmp"):
            leftover.unlink(missing_ok=True)


def _live_other(name: str) -> bool:
    """Whether ``name`` (``.railplan-staging-PID``, ...) belongs to another running process."""
    match = re.search(r"[-.](\d+)(?:\.tmp)?$", name)
    return (
        match is not None
        and pid_running(int(match.group(1)))
        and int(match.group(1)) != os.getpid()
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _manifest_text(
    root: Path, old: Mapping[str, str], paths: Mapping[str, bytes], stale: set[str]
) -> str:
    """The manifest after this render: other renders' files kept, this one's updated."""
    files = {p: d for p, d in old.items() if p not in stale and (root / p).exists()}
    files.update((p, _digest(data)) for p, data in paths.items())
    document = {"format": 1, "files": dict(sorted(files.items()))}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        _write_file(tmp, text.encode(), 0o666 & ~user_umask(), 0o777 & ~user_umask())
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
