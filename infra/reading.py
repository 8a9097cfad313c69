"""The one place railplan reads input files (specs, dumps, traces, name maps); it raises, never prints.

`read_bounded` reads at most ``limit + 1`` bytes whatever ``st_size`` says, so ``/dev/zero``
or an endless pipe cannot grow memory. Only regular files and pipes the shell hands over
(``<(cmd)``, ``/dev/stdin`` fed by ``|``) are read; directories, devices, sockets and named
FIFOs are refused before they are opened (opening a FIFO waits for a writer, opening some
devices has effects), and the opened file is checked again. `byte_position` and
`text_position` locate an offset of what was read as an editor shows it (line, column).
Writing outputs is `infra.files`'s.
"""

# os-level calls on file descriptors, where the flags (O_NONBLOCK, O_NOCTTY) matter.
# ruff: noqa: PTH116

from __future__ import annotations

import codecs
import difflib
import errno
import os
import re
import stat
from pathlib import Path

from infra.errors import InputError, Position

__all__ = ["byte_position", "file_kind", "read_bounded", "text_position", "wide_encoding"]

_CHUNK = 1 << 20
_ANON_PIPE = re.compile(r"/fd/pipe:\[[0-9]+\]\Z")


def file_kind(mode: int) -> str:
    """A file type in words: 'a directory', 'a character device', ..."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((word for test, word in kinds if test(mode)), "not a regular file")


_SPEC_SIZE = "a cluster spec is a few kilobytes"


def read_bounded(path: str, limit: int, *, noun: str = "spec", usual: str = _SPEC_SIZE) -> bytes:
    """The bytes of ``path``, refusing more than ``limit`` bytes and non-file inputs.

    ``noun`` names what the file should be and ``usual`` how large one usually is, for the
    hints (``"fabric dump"``, ``"a dump of 100,000 nodes is tens of MB"``).

    Raises:
        InputError: missing or unreadable, a directory, device, socket or named FIFO, or
            longer than ``limit`` bytes.
    """
    try:
        return _read_checked(path, limit, noun, usual)
    except OSError as exc:
        raise InputError(
            f"cannot read file: {exc.strerror or exc}", file=path, hint=_read_hint(path, exc)
        ) from None


_READ_HINTS = {
    errno.ELOOP: "the path is a symlink loop (or too many links deep): point the link at a file",
    errno.ENOTDIR: "a part of the path is a file, not a directory: check the path",
    errno.ENAMETOOLONG: "the path or one of its names is too long for the file system",
    errno.EACCES: "you may not read it: check its permissions, or copy it where you can",
}


def _read_hint(path: str, exc: OSError) -> str:
    """What to do about ``exc``; for a missing file, the nearest name beside it if any."""
    if exc.errno != errno.ENOENT:
        return _READ_HINTS.get(exc.errno or 0, "check the path and that the file is readable")
    cwd = Path.cwd()
    missing = cwd / path
    if missing.is_symlink():
        return f"it is a symlink to {str(missing.readlink())!r}, which does not exist"
    while not missing.parent.is_dir() and missing.parent != missing:  # the deepest part there
        missing = missing.parent
    try:
        names = [p.name for p in missing.parent.iterdir()]
    except OSError:
        names = []
    near = difflib.get_close_matches(missing.name, names, n=1, cutoff=0.75)
    if near and near[0] != missing.name:
        guess = missing.parent / near[0]
        return (
            f"did you mean {str(guess.relative_to(cwd) if guess.is_relative_to(cwd) else guess)!r}?"
        )
    return f"check the path; relative paths start at {str(cwd)!r}"


def _read_checked(path: str, limit: int, noun: str, usual: str) -> bytes:
    pipe = _is_anonymous_pipe(path)
    _refuse_input(path, os.stat(path).st_mode, pipe, noun)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        _refuse_input(path, st.st_mode, pipe, noun)  # it may have changed since stat
        if st.st_size > limit:  # a cheap early refusal; the read below is bounded anyway
            raise _too_large(path, limit, f"is {st.st_size / 1e6:.1f} MB", usual)
        os.set_blocking(fd, True)
        data = _read_at_most(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _too_large(path, limit, f"holds more than {limit // (1024 * 1024)} MiB", usual)
    _refuse_wide_text(path, data, noun)
    return data


def wide_encoding(data: bytes) -> str | None:
    r"""``"UTF-16"`` or ``"UTF-32"`` when ``data`` is text in one of them, else None.

    Known by the byte-order mark Windows tools write (PowerShell's ``>`` writes UTF-16), or
    without one by ASCII text's shape: a NUL after (or before) every character. Every input
    railplan reads is UTF-8 text; read as bytes, such a file is "binary data (a NUL byte)",
    which does not tell the user what to do.

    >>> wide_encoding(b"\xff\xfen\x00a\x00"), wide_encoding("name".encode("utf-16-be"))
    ('UTF-16', 'UTF-16')
    >>> wide_encoding("name".encode("utf-32")), wide_encoding(b"name: a\n")
    ('UTF-32', None)
    """
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "UTF-32"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16"
    head = data[:256]
    head = head[: len(head) // 4 * 4]
    if len(head) < 4:
        return None
    for width, name in ((4, "UTF-32"), (2, "UTF-16")):
        for at in range(width):  # the one byte of each character that is not NUL
            if all(
                head[i + at] and not any(head[i : i + at] + head[i + at + 1 : i + width])
                for i in range(0, len(head), width)
            ):
                return name
    return None


def _refuse_wide_text(path: str, data: bytes, noun: str) -> None:
    encoding = wide_encoding(data)
    if encoding is not None:
        raise InputError(
            f"is {encoding} text; railplan reads UTF-8",
            file=path,
            position=Position(1, 1),
            hint=f"save the {noun} as UTF-8 (e.g. iconv -f {encoding} -t UTF-8 {path} > "
            f"{Path(path).stem or noun}-utf8{Path(path).suffix})",
        )


def _too_large(path: str, limit: int, what: str, usual: str) -> InputError:
    return InputError(
        f"file {what}; railplan refuses inputs above {limit // (1024 * 1024)} MiB",
        file=path,
        hint=f"{usual}; check that this is the right file",
    )


def _is_anonymous_pipe(path: str) -> bool:
    """True for a pipe reached through ``/dev/fd`` (``<(cmd)``, a piped ``/dev/stdin``)."""
    return bool(_ANON_PIPE.search(os.path.realpath(path)))


def _refuse_input(path: str, mode: int, pipe: bool, noun: str) -> None:
    if stat.S_ISREG(mode) or (pipe and stat.S_ISFIFO(mode)):
        return
    if stat.S_ISDIR(mode):
        raise InputError("is a directory, not a file", file=path, hint=f"name a {noun} file")
    raise InputError(
        f"is {file_kind(mode)}, not a regular file; railplan reads only files and pipes",
        file=path,
        hint=f"save the {noun} to a file and name that file",
    )


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def byte_position(raw: bytes, offset: int) -> Position:
    r"""The 1-based line and column (in characters) of byte ``offset`` of ``raw``.

    The bytes before ``offset`` on its line decode (the first bad byte is at ``offset``), so
    the column counts characters as an editor does; a UTF-8 byte-order mark is not counted.

    >>> byte_position(b"a: 1\nb: \xc3\xa9\xff", 10)
    Position(line=2, column=5)
    """
    start = raw.rfind(b"\n", 0, offset) + 1
    prefix = raw[start:offset].removeprefix(b"\xef\xbb\xbf" if start == 0 else b"")
    column = len(prefix.decode("utf-8", "replace")) + 1
    return Position(raw.count(b"\n", 0, offset) + 1, column)


def text_position(text: str, at: int) -> Position:
    r"""The 1-based line and column (in characters) of character ``at`` of ``text``.

    >>> text_position("a: 1\nb: \x1b", 8)
    Position(line=2, column=4)
    """
    return Position(text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at))
