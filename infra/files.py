"""The one place railplan writes output files; it raises, never prints.

Reading input files is `infra.reading`'s (`read_bounded`).

Writing (`check_outputs`, `write_atomic`, `write_atomic_all` for a set of outputs that is
written whole or not at all): an output replaces a *regular* file or creates one,
atomically (temp file, fsync, rename, fsync of the directory), so a reader sees the old file or
the new one, never half of one. Decisions, each enforced here:

- ``-`` is standard output (the CLI writes it); any other non-regular target (a device such as
  ``/dev/null``, a directory, a FIFO, a socket) is refused, and so are ``/dev/stdout``,
  ``/dev/fd/N`` and ``/proc``/``/sys`` paths: replacing them would break the machine.
- A symlink is written *through*: its target is replaced and the link stays a link; but a
  link the kernel's ``fs.protected_symlinks`` rule would not follow (another user's link in a
  sticky world-writable directory such as ``/tmp``) is refused (`_resolve`).
- An existing target keeps its permission bits (and, for root, its owner); a new file gets
  0666 less the umask. A read-only target (no write bit, or not writable by the user) is
  refused: railplan does not replace a file someone protected.
- An output that is also an input, or that two options name, or whose directory is missing or
  not writable, is refused before any work (`check_outputs`), so no output is written when
  another cannot be.
- The temp file, ``.NAME.railplan-PID-XXXXXXXX.tmp`` next to the target (``NAME`` shortened so
  the whole stays within NAME_MAX), is removed on any error and on SIGINT, SIGTERM and SIGHUP
  (`infra.signals`). Temp files of that shape whose PID is no longer running (left by a
  ``kill -9``) are swept from the directory before each write.
"""

# This module works on file descriptors and os-level names (bytes from scandir included), where
# os.* is the precise tool; pathlib would hide the flags (O_NOFOLLOW, O_EXCL) this relies on.
# ruff: noqa: PTH100, PTH104, PTH108, PTH109, PTH112, PTH115, PTH116, PTH118, PTH120

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import signal
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from infra.errors import RailplanError
from infra.reading import file_kind
from infra.signals import CATCHABLE, deferring_signals, raising_on_signals

__all__ = [
    "TREE_DIR_MODE",
    "OutputError",
    "check_outputs",
    "is_temp_name",
    "make_dirs",
    "pid_running",
    "replace_entry",
    "sweep_stale_temps",
    "tree_umask",
    "user_umask",
    "write_atomic",
    "write_atomic_all",
    "write_hint",
]

_CHUNK = 1 << 20
_TEMP = re.compile(rb"^\..*\.railplan-([0-9]+)-[0-9a-f]{8}\.tmp\Z", re.DOTALL)
_FD_ALIASES = ("/dev/stdin", "/dev/stdout", "/dev/stderr")
_KERNEL_TREES = ("/dev/fd/", "/proc/", "/sys/")
_OUT_HINT = "name a regular file, or '-' for standard output"
_NOOP = ("", ".")
_MAX_LINKS = 40  # the kernel's MAXSYMLINKS: ELOOP beyond
_STICKY_SHARED = stat.S_ISVTX | stat.S_IWOTH


class OutputError(RailplanError):
    """An output cannot be written where it was asked to go."""


# --- checking outputs ----------------------------------------------------------------------


def check_outputs(outputs: Mapping[str, str], inputs: Iterable[str] = ()) -> None:
    """Refuse, before any work, outputs that cannot or must not be written.

    ``outputs`` maps an option (``--cabling``) to its path; ``-`` is standard output.

    Every output is checked before the caller writes the first, so an error leaves no half
    set of outputs behind.

    Raises:
        OutputError: an empty path, a target `write_atomic` would refuse, a directory that
            does not exist or is not writable, an output that is an input, or two outputs
            naming the same file.
    """
    seen: dict[object, str] = {}
    for path in inputs:
        key = _identity(path)
        if key is not None:
            seen[key] = f"input {path}"
    for option, path in outputs.items():
        if not path:
            raise OutputError(f"{option} needs a file name", hint=_OUT_HINT)
        if path != "-":
            _check_directory(path, _target(path)[0])
        key = _identity(path)
        if key in seen:
            raise OutputError(
                f"{option} is the same file as {seen[key]}",
                file=path,
                hint="give every output its own file, apart from the inputs",
            )
        if key is not None:
            seen[key] = option


def _identity(path: str) -> object:
    """What makes two names the same file: device and inode if it exists, else its real path."""
    if path == "-":
        return "-"
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


# --- writing -------------------------------------------------------------------------------


def _target(path: str) -> tuple[str, os.stat_result | None]:
    """The real path to replace (symlinks followed) and its stat, if it exists; or refuse."""
    absolute = os.path.abspath(path)
    try:
        real = _resolve(path)
    except OSError as exc:
        raise _write_error(path, exc) from None
    if absolute in _FD_ALIASES or any(p.startswith(_KERNEL_TREES) for p in (absolute, real)):
        raise OutputError(
            "names a kernel or file-descriptor path; railplan will not replace it",
            file=path,
            hint=_OUT_HINT,
        )
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real, None
    except OSError as exc:
        raise _write_error(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"is {file_kind(st.st_mode)}; railplan writes outputs only to regular files",
            file=path,
            hint=_OUT_HINT,
        )
    if not st.st_mode & 0o222 or not os.access(real, os.W_OK):
        raise OutputError(
            f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); railplan does not replace it",
            file=path,
            hint="make it writable (chmod u+w) or choose another file",
        )
    return real, st


def _resolve(path: str) -> str:
    """``os.path.realpath(path)``, following each symlink only where the kernel would.

    The kernel's ``fs.protected_symlinks`` rule (Documentation/admin-guide/sysctl/fs.rst; on
    by default in the distributions): a symlink in a sticky world-writable directory (``/tmp``)
    is followed only by its owner, or when the directory's owner owns it. railplan replaces
    the target by a rename in the target's directory, which that rule never sees, so it
    applies the rule itself, to every link on the path, whatever the sysctl says.

    Raises:
        OutputError: a link the rule refuses.
        OSError: a link loop, a file used as a directory, an unreadable directory, a missing
            directory on the way (`missing/../x`: the kernel refuses it, so does this).
    """
    pending = [p for p in reversed(os.path.join(os.getcwd(), path).split("/")) if p not in _NOOP]
    resolved, links = "/", 0
    while pending:
        part = pending.pop()
        if part == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, part)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            if pending:  # a missing directory: the kernel (and a shell) refuse `missing/../x`
                raise _MissingDirectory(
                    errno.ENOENT, os.strerror(errno.ENOENT), candidate
                ) from None
            return candidate  # the file itself is created (or refused) by the write
        if not stat.S_ISLNK(st.st_mode):
            resolved = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        _may_follow(path, resolved, candidate, st)
        target = os.readlink(candidate)
        resolved = "/" if target.startswith("/") else resolved
        pending += [p for p in reversed(target.split("/")) if p not in _NOOP]
    return resolved


class _MissingDirectory(FileNotFoundError):
    """A directory on an output's path that does not exist (``filename`` names it)."""


def _may_follow(path: str, directory: str, link: str, st: os.stat_result) -> None:
    """Refuse ``link`` (in ``directory``) as fs.protected_symlinks does (fs/namei.c)."""
    parent = os.stat(directory)
    if parent.st_mode & _STICKY_SHARED != _STICKY_SHARED:
        return
    if st.st_uid in (os.geteuid(), parent.st_uid):
        return
    what = "is" if link == os.path.abspath(path) else f"goes through {link},"
    raise OutputError(
        f"{what} a symbolic link of another user (uid {st.st_uid}) in the sticky "
        f"world-writable directory {directory}; railplan does not follow it "
        "(the kernel's fs.protected_symlinks rule)",
        file=path,
        hint="name the file the link points to, or write outside the shared directory",
    )


def _check_directory(path: str, real: str) -> None:
    """Refuse an output whose directory is missing or not writable (before any output)."""
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise OutputError(
            f"cannot write: directory {directory} does not exist",
            file=path,
            hint=_WRITE_HINTS[errno.ENOENT],
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(
            f"cannot write: directory {directory} is not writable",
            file=path,
            hint=_WRITE_HINTS[errno.EACCES],
        )


def write_atomic(path: str, data: bytes) -> None:
    """Replace (or create) the regular file ``path`` with ``data``, atomically and durably.

    Raises:
        OutputError: the target is refused (see the module docstring) or cannot be written
            (no such directory, no space, read-only file system, ...); nothing is left behind.
    """
    write_atomic_all([(path, data)])


def write_atomic_all(outputs: Sequence[tuple[str, bytes]]) -> None:
    """Write every ``(path, data)`` as `write_atomic` does, all of them or none.

    Each file is first staged whole in its temp file (written and fsynced); only when every
    one is on disk are they renamed into place, so no space, a quota or an I/O error on one
    output leaves the others as they were (`check_outputs` catches what can be seen before).

    Raises:
        OutputError: a target is refused or cannot be written; no target was replaced.
    """
    targets = [(path, *_target(path), data) for path, data in outputs]
    staged: list[tuple[str, str, str]] = []  # (path as given, temp file, real target)
    try:
        with raising_on_signals():
            for path, real, existing, data in targets:
                directory, name = os.path.split(real)
                mode = stat.S_IMODE(existing.st_mode) if existing else 0o666 & ~user_umask()
                try:
                    sweep_stale_temps(directory)
                    staged.append((path, _stage(directory, name, data, mode, existing), real))
                except OSError as exc:
                    raise _write_error(path, exc) from None
            # renamed all or, on an error, as far as it got: a signal waits for the last one
            with deferring_signals():
                for path, tmp, real in staged:
                    try:
                        os.rename(tmp, real)
                        _fsync_dir(os.path.dirname(real))
                    except OSError as exc:
                        raise _write_error(path, exc) from None
    finally:
        for _, tmp, _ in staged:  # renamed ones are gone already
            Path(tmp).unlink(missing_ok=True)


def replace_entry(path: str, data: bytes) -> None:
    """Replace the directory entry ``path`` by a new regular file of ``data``, atomically.

    Unlike `write_atomic`, a link at ``path`` is replaced, not followed, and nothing is
    refused: for the files railplan owns inside a tree it holds the lock of (the rendered
    tree's manifest and journal). Created with the tree's umask (`tree_umask`), flushed and renamed over,
    the directory synced. OSError propagates: the caller owns the transaction.
    """
    directory, name = os.path.split(os.path.abspath(path))
    _replace(directory, name, data, 0o666 & ~tree_umask(), None)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of railplan's temporary files (`temp_name`)."""
    return _TEMP.match(os.fsencode(name)) is not None


def _replace(
    directory: str, name: str, data: bytes, mode: int, existing: os.stat_result | None
) -> None:
    tmp = _stage(directory, name, data, mode, existing)
    try:
        os.rename(tmp, os.path.join(directory, name))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(directory)


def _stage(
    directory: str, name: str, data: bytes, mode: int, existing: os.stat_result | None
) -> str:
    """Write ``data`` to a new temp file for ``name`` (mode, owner, fsynced); return its path."""
    # A signal between creating the temp file and entering the try would leak it: hold the
    # signals over that gap; one that arrived meanwhile is raised inside the try.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
    try:
        fd, tmp = _create_temp(directory, name)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            if existing is not None:
                _keep_owner(fd, existing)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _create_temp(directory: str, name: str) -> tuple[int, str]:
    """Create ``.NAME.railplan-PID-RANDOM.tmp`` (0600, exclusive) within NAME_MAX."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = os.path.join(directory, temp_name(name, _name_max(directory)))
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue


def temp_name(name: str, name_max: int = 255) -> str:
    """The temp file's name for ``name``: recognisable, unique, at most ``name_max`` bytes."""
    suffix = f".railplan-{os.getpid()}-{secrets.token_hex(4)}.tmp".encode()
    stem = os.fsencode(name)[: max(0, name_max - len(suffix) - 1)]
    return os.fsdecode(b"." + stem + suffix)


def _name_max(directory: str) -> int:
    try:
        return os.pathconf(directory or ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:_CHUNK]) :]


def _keep_owner(fd: int, existing: os.stat_result) -> None:
    with contextlib.suppress(PermissionError):  # not root: the new file is the user's
        os.fchown(fd, existing.st_uid, existing.st_gid)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # some file systems cannot
            raise
    finally:
        os.close(fd)


def sweep_stale_temps(directory: str) -> list[str]:
    """Remove temp files of railplan processes that no longer run; return their names."""
    removed = []
    try:
        entries = list(os.scandir(os.fsencode(directory or ".")))
    except OSError:
        return []
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        if not pid_running(int(match.group(1))):
            try:
                os.unlink(entry.path)
            except OSError:
                continue
            removed.append(os.fsdecode(entry.name))
    return removed


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def user_umask() -> int:
    """The process's umask (read without changing it for longer than a call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


TREE_DIR_MODE = 0o775
"""The mode a directory of a rendered tree is made with (less the umask): never
world-writable, as `tree_umask` says."""


def make_dirs(path: Path) -> None:
    """``mkdir -p path``, every directory it makes at `TREE_DIR_MODE` (less the umask).

    pathlib's ``mkdir(parents=True)`` makes the directories above the last at 0777 less the
    umask: world-writable under ``umask 000`` (``playbooks/`` above a role's unit, or the
    directories above a new ``--root``).
    """
    missing = []
    for directory in (path, *path.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):
        directory.mkdir(mode=TREE_DIR_MODE, exist_ok=True)


def tree_umask() -> int:
    """The umask for a rendered tree's files: the user's, but never world-writable.

    Ansible ignores the ``ansible.cfg`` of a world-writable directory ("Ansible is being run
    in a world writable directory"), so the tree's roles and settings would be lost under
    ``umask 000``, and any local user could change the playbooks root runs on every node.
    Group write stays the user's choice (``umask 002`` for a team's checkout).
    """
    return user_umask() | 0o002


# Limits of the process or the system a write can hit: not a matter of space or permission.
_LIMIT_HINTS = {
    errno.EFBIG: "the file is larger than this process may write (see `ulimit -f`) or than "
    "the file system takes; raise the limit or write elsewhere",
    errno.EMFILE: "the process has too many files open: raise its limit (see `ulimit -n`)",
    errno.ENFILE: "the system has too many files open: close some and retry",
}
_WRITE_HINT = "write to a directory you can write to, with free space"
_WRITE_HINTS = {
    **_LIMIT_HINTS,
    errno.ENOSPC: "free space on that file system or write elsewhere",
    errno.EDQUOT: "free space within your quota or write elsewhere",
    errno.ENOENT: "create the directory first",
    errno.EROFS: "the file system is read-only; write elsewhere",
    errno.EACCES: "choose a directory you can write to",
    errno.ENAMETOOLONG: "use a shorter file name",
    errno.ELOOP: "the path is a symlink loop: point the link at a file",
    errno.ENOTDIR: "a part of the path is a file, not a directory: check the path",
}


def _write_error(path: str, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT:  # the missing directory on the way, where `_resolve` knows it
        known = isinstance(exc, _MissingDirectory) and exc.filename
        missing = exc.filename if known else os.path.dirname(os.path.abspath(path))
        reason = f"directory {missing} does not exist"
    hint = _WRITE_HINTS.get(exc.errno or 0, _WRITE_HINT)
    return OutputError(f"cannot write: {reason}", file=path, hint=hint)


def write_hint(exc: OSError, usual: str) -> str:
    """The hint for a write that failed with ``exc``: the limit it hit, if any, else ``usual``.

    A file-size limit (``ulimit -f``: EFBIG) or too many open files is neither a full nor a
    read-only file system, whatever the caller usually advises.
    """
    return _LIMIT_HINTS.get(exc.errno or 0, usual)
