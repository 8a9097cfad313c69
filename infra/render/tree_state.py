"""The render tree's own state files, read as untrusted input, and the lock on a root.

A render root holds two files railplan writes and reads back: ``.railplan-manifest.json`` (a
SHA-256 per rendered file) and ``.railplan-journal.json`` (the units of a swap in progress); a
render holds a ``flock`` on the root directory while it writes (`infra.render.tree_swap` says
how the journal is used). Anyone who can write to the
root (a GitOps repository, a pull request) can forge both files, and railplan often runs as
root, so both are read like any other input: opened without following a symlink and without
waiting on a FIFO, only when they are regular files, bounded in size, and validated against
their schema; every path they name must be a plain relative path inside the root. A state file
that breaks any of that is refused with one line naming it (`TreeStateError`, exit 2); it is
never trusted to name a file outside the root.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infra.errors import RailplanError

__all__ = [
    "JOURNAL",
    "MANIFEST",
    "Journal",
    "TreeStateError",
    "checked_path",
    "digest",
    "forged_journal",
    "journal_text",
    "locked",
    "manifest_text",
    "read_journal",
    "read_manifest",
    "read_manifest_file",
    "read_regular",
]

MANIFEST = ".railplan-manifest.json"
JOURNAL = ".railplan-journal.json"
# A manifest holds one line of about 100 bytes per rendered file: 64 MiB is some 600,000
# files, six times the tree of a 100,000-GPU cluster. A journal names units, not files.
MANIFEST_LIMIT = 64 << 20
JOURNAL_LIMIT = 1 << 20
_DIGEST = re.compile(r"^[0-9a-f]{64}\Z")
OLD_NAME = re.compile(r"^\.railplan-old-[0-9]+-[0-9a-f]{16}\Z")
STAGING_NAME = re.compile(r"^\.railplan-staging-[0-9]+-[0-9a-f]{16}\Z")
SWAPPING, COMMITTED = "swapping", "committed"
_STATE_HINT = "railplan writes this file itself; if you did not edit it, delete it and render again"


class TreeStateError(RailplanError):
    """A state file of the render root is not what railplan writes (forged, damaged, special)."""


def _bad(path: Path, why: str) -> TreeStateError:
    return TreeStateError(why, file=str(path), hint=_STATE_HINT)


@dataclass(frozen=True)
class Journal:
    """A swap in progress: where the replaced and the staged units are, the units, the state.

    ``committed`` says whether the swap passed its commit point. A journal of an earlier
    railplan (no ``format``, `infra.render.tree_legacy`) has no state and does not name its
    staging directory, which had the old directory's tag: it named the new manifest's digest
    (``manifest``) instead, which its swap wrote last.
    """

    old: str
    staging: str
    units: tuple[str, ...]  # the manifest is the last unit of a swap this railplan writes
    created: tuple[str, ...]  # units the swap adds: a rollback removes them
    committed: bool | None  # None: an earlier railplan's journal (`tree_legacy` decides)
    manifest: str | None = None


def digest(data: bytes) -> str:
    """The SHA-256 of ``data``, as the manifest records it."""
    return hashlib.sha256(data).hexdigest()


def checked_path(path: str) -> str | None:
    """``path`` in normal form if it is a plain relative path inside the root, else None.

    Refused: empty, absolute, backslashes, NUL, ``.``/``..``/empty parts, and anything under
    railplan's own ``.railplan-*`` names, which a rendered file must never clobber.
    """
    # Plain string tests, no PurePosixPath (a render checks every one of its paths): a path
    # with no empty, "." or ".." part is relative and already in normal form.
    parts = path.split("/")
    bad = (
        "" in parts
        or "." in parts
        or ".." in parts
        or "\\" in path
        or "\x00" in path
        or parts[0].startswith(".railplan-")
    )
    return None if bad else path


def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    None when nothing is there. A symlink, a directory, a FIFO, a device or a socket, or a
    larger file, is a `TreeStateError`: none of them is opened for reading (``O_NOFOLLOW``
    refuses the link, ``O_NONBLOCK`` keeps a FIFO from blocking the open).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise _bad(path, f"cannot be read: {why}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _bad(path, "not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _bad(path, f"larger than {limit >> 20} MiB")
    return data


def _json_object(path: Path, limit: int) -> dict[str, object] | None:
    data = read_regular(path, limit)
    if data is None:
        return None
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(path, f"not JSON ({exc})") from None
    except RecursionError:  # arrays nested deeper than the parser's stack, within the size cap
        raise _bad(path, "not JSON (nested too deeply)") from None
    if not isinstance(document, dict):
        raise _bad(path, "not a JSON object")
    return document


def read_manifest(root: Path) -> dict[str, str]:
    """Rendered path -> SHA-256 of the last render; empty when the root has no manifest."""
    return read_manifest_file(root / MANIFEST)


def read_manifest_file(path: Path) -> dict[str, str]:
    """`read_manifest` of the manifest at ``path`` (one a swap staged, say)."""
    document = _json_object(path, MANIFEST_LIMIT)
    if document is None:
        return {}
    files = document.get("files")
    if document.get("format") != 1 or not isinstance(files, dict):
        raise _bad(path, "not a railplan manifest (format 1, files)")
    for name, digest in files.items():
        if checked_path(name) != name:
            raise _bad(path, f"names {name[:80]!r}, which is not a path inside the root")
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            raise _bad(path, f"{name!r} has no SHA-256 digest")
    return dict(files)


def read_journal(root: Path) -> Journal | None:
    """The journal of a swap that did not finish, or None."""
    path = root / JOURNAL
    document = _json_object(path, JOURNAL_LIMIT)
    if document is None:
        return None
    old = document.get("old")
    if not isinstance(old, str) or not OLD_NAME.match(old):
        raise _bad(path, "'old' is not a railplan directory name")
    units, created = _paths(document, "units", path), _paths(document, "created", path)
    if not set(created) <= set(units):
        raise _bad(path, "'created' names a path that is not one of its 'units'")
    if "format" not in document:
        manifest = document.get("manifest")
        if not isinstance(manifest, str) or not _DIGEST.match(manifest):
            raise _bad(path, "'manifest' is not a SHA-256 digest")
        tag = old.removeprefix(".railplan-old-")  # its staging directory had the same
        return Journal(old, ".railplan-staging-" + tag, units, created, None, manifest)
    staging, state = document.get("staging"), document.get("state")
    if document["format"] != 2 or state not in (SWAPPING, COMMITTED):
        raise _bad(path, f"not a railplan journal (format 2, state {SWAPPING} or {COMMITTED})")
    if not isinstance(staging, str) or not STAGING_NAME.match(staging):
        raise _bad(path, "'staging' is not a railplan directory name")
    if MANIFEST not in units or units.index(MANIFEST) != len(units) - 1:
        raise _bad(path, f"'units' does not end with {MANIFEST}, as every swap does")
    return Journal(old, staging, units, created, state == COMMITTED)


def forged_journal(root: Path, why: str) -> TreeStateError:
    """The error for a journal no railplan run leaves: nothing was done by its account."""
    return TreeStateError(
        why,
        file=str(root / JOURNAL),
        hint="no render leaves a journal so: it is forged or damaged, and nothing was "
        "done; inspect the tree, then remove the journal",
    )


def manifest_text(files: dict[str, str]) -> str:
    """The manifest naming ``files`` (rendered path -> SHA-256), as railplan writes it."""
    document = {"format": 1, "files": dict(sorted(files.items()))}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def journal_text(journal: Journal) -> bytes:
    """The journal as railplan writes it (format 2), for `read_journal`."""
    document = {
        "format": 2,
        "old": journal.old,
        "staging": journal.staging,
        "units": list(journal.units),
        "created": list(journal.created),
        "state": COMMITTED if journal.committed else SWAPPING,
    }
    return json.dumps(document, sort_keys=True).encode()


def _paths(document: dict[str, object], key: str, path: Path) -> tuple[str, ...]:
    value = document.get(key)
    if not isinstance(value, list) or not all(
        isinstance(u, str) and (checked_path(u) == u or u == MANIFEST) for u in value
    ):
        raise _bad(path, f"'{key}' must be a list of paths inside the root")
    if len(set(value)) != len(value):
        raise _bad(path, f"'{key}' names a path twice")
    return tuple(value)


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the root's advisory lock: one render per root at a time.

    The lock is a ``flock`` on the root directory itself, so no lock file lands in the
    user's tree, and it dies with the process that holds it, ``kill -9`` included. A second
    render does not wait: it fails at once with one line (`TreeStateError`, exit 2), so a CI
    job never hangs behind a stuck one.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise TreeStateError(f"cannot be opened: {exc.strerror or exc}", file=str(root)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TreeStateError(
                "another railplan render is writing this tree",
                file=str(root),
                hint="wait for it to finish, then render again",
            ) from None
        if os.fstat(fd).st_nlink == 0:  # a failed first render removed the empty root meanwhile
            raise TreeStateError(
                "another railplan render removed this directory as this one started",
                file=str(root),
                hint="render again",
            )
        yield
    finally:
        os.close(fd)
