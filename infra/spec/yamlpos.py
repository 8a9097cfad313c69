r"""YAML loading that keeps positions: plain Python data plus a map from dotted path to line/column.

Specs (and mig-parted files) are parsed with libyaml's composer into nodes, then walked once to
build plain data and a `SourceMap` so every later error can point at ``file:line:column``. The
walk also enforces what a spec loader must: one document, UTF-8 text, no duplicate keys,
string-like mapping keys (``on:`` stays the string "on"), a size limit and an expansion budget
(so an alias bomb is refused instead of eating memory).

Paths look like ``node_groups[0].mig`` or ``mig-configs["all-1g.5gb"][0]``: plain keys are
joined with dots, other keys are JSON-quoted in brackets, list items are ``[N]``.

>>> data, src = load_yaml_text("a:\n  - b: 1\n", "x.yaml")
>>> data, src.position("a[0].b")
({'a': [{'b': 1}]}, Position(line=2, column=5))
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from infra.errors import InputError, Position, shorten
from infra.reading import byte_position, read_bounded, text_position

MAX_BYTES = 8 * 1024 * 1024
MAX_NODES = 100_000  # a large spec has a few thousand; this refuses alias bombs fast
_TOO_MANY_NODES = f"document expands to more than {MAX_NODES:,} nodes"
# both causes: a huge document, or aliases that expand (each use counts)
_NODES_HINT = (
    "give repeated node groups a count instead of one entry each; an alias counts once per use"
)
_EVENT_COUNT_FROM = 256 * 1024  # characters; a spec is a few kilobytes
_NODE_EVENTS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)
MAX_INT_DIGITS = 1000  # the largest bound in the spec has 19 digits; int() stops at 4,300
_INT_TAG = "tag:yaml.org,2002:int"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
_LAST_SEGMENT = re.compile(r'(\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])\Z')
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_BOOL_TAG = "tag:yaml.org,2002:bool"
# YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution): the numbers and
# booleans an editor reads; a plain scalar YAML 1.1 types otherwise is refused.
_YAML12_BOOL = re.compile(r"^(true|True|TRUE|false|False|FALSE)\Z")
_YAML12_INT = re.compile(r"^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_YAML12_FLOAT = re.compile(
    r"^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))\Z"
)
# Line breaks in YAML 1.1 (this reader) that YAML 1.2 (editors) reads as ordinary characters.
_YAML11_BREAKS = re.compile("[\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f]")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def join_path(parent: str, key: str | int) -> str:
    """Append a mapping key or list index to a dotted path."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def parent_path(path: str) -> str | None:
    """Drop the last segment of ``path``; ``None`` for the root."""
    if not path:
        return None
    m = _LAST_SEGMENT.search(path)
    if m is None:
        return ""
    return path[: m.start()]


@dataclass
class SourceMap:
    """Positions of the paths in one parsed file, and its lines for quoting."""

    file: str
    lines: tuple[str, ...] = ()
    positions: dict[str, Position] = field(default_factory=dict)

    def position(self, path: str) -> Position:
        """Position of ``path``, else of its nearest known parent, else line 1 column 1."""
        current: str | None = path
        while current is not None:
            if current in self.positions:
                return self.positions[current]
            current = parent_path(current)
        return Position(1, 1)


def _pos(node: Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    """Walks composed nodes into plain data, recording positions and enforcing limits."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[str, Position] = {}
        self.visited = 0
        self.last: Node | None = None
        self._constructor = yaml.SafeLoader("")

    def fail(self, node: Node, message: str, hint: str | None = None) -> InputError:
        return InputError(message, file=self.file, position=_pos(node), hint=hint)

    def build(self, node: Node, path: str) -> Any:
        self.visited += 1
        self.last = node  # where a RecursionError is reported
        if self.visited > MAX_NODES:
            raise InputError(_TOO_MANY_NODES, file=self.file, position=_pos(node), hint=_NODES_HINT)
        if isinstance(node, MappingNode):
            return self.mapping(node, path)
        if isinstance(node, SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                # assigned, not set by default: a list the mapping states itself replaces the
                # positions of one a merge brought under the same key (`mapping`)
                self.positions[join_path(path, i)] = _pos(item)
                items.append(self.build(item, join_path(path, i)))
            return items
        return self.scalar(node, path)

    def scalar(self, node: Node, path: str = "") -> Any:
        if node.tag == _TIMESTAMP_TAG:  # specs hold no dates; keep "2024-01-02" as written
            return str(node.value)
        if node.tag in (_INT_TAG, _FLOAT_TAG, _BOOL_TAG):
            self.refuse_yaml11_number(node, path)
        if node.tag == _INT_TAG and len(str(node.value)) > MAX_INT_DIGITS:
            # before int(): Python refuses over 4,300 digits with advice meant for programmers
            raise self.fail(
                node,
                f"a number with {len(str(node.value)):,} digits is too large for any spec value",
                hint=f"railplan's numbers have at most {MAX_INT_DIGITS} digits",
            )
        try:
            return self._constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise self.fail(
                node,
                f"cannot read value {shorten(str(node.value), 40)!r}: {shorten(reason)}",
                hint="plain numbers, strings, booleans, lists and mappings only",
            ) from None

    def refuse_yaml11_number(self, node: Node, path: str = "") -> None:
        """Refuse a plain number or boolean YAML 1.1 (this reader) and 1.2 (editors) read apart.

        YAML 1.2's core schema (what yaml-language-server and the JSON Schema see) takes fewer
        forms: ``0b10``, ``1_000``, ``0x_1F``, ``-0x1F``, ``1:30`` and ``yes``/``on`` are numbers
        or booleans here and strings there, and ``010`` is 8 here and 10 there. A value whose
        two readings differ is refused; ``04``, ``0x10`` or ``true`` mean the same in both.
        """
        text = str(node.value)  # a quoted scalar gets here only tagged (!!int '010'): refused too
        if node.tag == _BOOL_TAG:
            if not _YAML12_BOOL.match(text):
                raise self.fail(
                    node,
                    f"{shorten(text, 40)} is a boolean in YAML 1.1 (this reader) but a string in "
                    "YAML 1.2 (editors)",
                    hint=f"write true or false, or quote the value if it is text ({_quoted(path, text)})",
                )
            return
        yaml12 = _YAML12_INT if node.tag == _INT_TAG else _YAML12_FLOAT
        if not yaml12.match(text):
            raise self.fail(
                node,
                f"{shorten(text, 40)} is {self._yaml11_reading(node, text)} in YAML 1.1 (this "
                "reader) but a string in YAML 1.2 (editors)",
                hint="write the number in decimal digits, or quote the value if it is text "
                f"({_quoted(path, text)})",
            )
        digits = text.lstrip("+-")
        if (
            node.tag == _INT_TAG
            and 1 < len(digits) <= MAX_INT_DIGITS
            and digits[0] == "0"
            and digits.isdigit()
            and int(digits, 8) != int(digits)
        ):
            raise self.fail(
                node,
                f"{text} is octal {int(digits, 8)} in YAML 1.1 (this reader) but {int(digits)} in "
                "YAML 1.2 (editors)",
                hint=f"write it without the leading zero ({int(text)}), or quote it if it is text",
            )

    def _yaml11_reading(self, node: Node, text: str) -> str:
        """What YAML 1.1 makes of ``text``, in words ("the number 90", "a base-60 number")."""
        if ":" in text:
            return "a base-60 number (as 1:30 is 90)"
        if len(text) > MAX_INT_DIGITS:
            return "a number"
        try:
            value = self._constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError):
            return "a number"
        digits = text.lstrip("+-").replace("_", "")
        octal = len(digits) > 1 and digits[0] == "0" and digits.isdigit()
        return f"octal {value}" if octal else f"the number {value}"

    def mapping(self, node: MappingNode, path: str) -> dict[str, Any]:
        """A mapping's data; its own keys win over merged ones, in value and in position.

        Merges (``<<: *base``) are built first, wherever they are written, so the positions of
        the keys the mapping states itself are recorded last: an error about its ``count: 0``
        points at that line, not at the anchor's ``count: 2`` that a later merge brought.
        """
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.update(self.merge_sources(value_node, path))
        out: dict[str, Any] = {}
        explicit: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if not isinstance(key_node, ScalarNode):
                raise self.fail(
                    key_node,
                    "mapping keys must be plain scalars",
                    hint="write the key as a word before ':' (count: 2); a list or mapping "
                    "cannot be a key (no '? ' keys, no [a, b]: or {a: b}: keys)",
                )
            key = str(key_node.value)
            if key in explicit:
                raise self.fail(
                    key_node,
                    f"duplicate key {key!r}",
                    hint="YAML keeps only the last value; remove one of them",
                )
            explicit.add(key)
            child = join_path(path, key)
            self.positions[child] = _pos(key_node)
            out[key] = self.build(value_node, child)
        return {**{k: v for k, v in merged.items() if k not in explicit}, **out}

    def merge_sources(self, node: Node, path: str) -> dict[str, Any]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for src in reversed(sources):  # earlier sources win, as in YAML's merge-key spec
            if not isinstance(src, MappingNode):
                raise self.fail(
                    src,
                    "a merge key (<<) must reference a mapping",
                    hint="merge an anchored mapping (<<: *base) or a list of them "
                    "(<<: [*a, *b]); write any other value under its own key",
                )
            for key, value in self.mapping(src, path).items():
                merged[key] = value
        return merged


def _decode(raw: str | bytes, file: str) -> str:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_BYTES:
        raise _too_large(file, len(raw))
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError(
            "binary data (a NUL byte)",
            file=file,
            position=byte_position(raw, nul),
            hint="expected a UTF-8 YAML text file",
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x})",
            file=file,
            position=byte_position(raw, exc.start),
            hint="save the file as UTF-8",
        ) from None
    _refuse_yaml11_breaks(text, file)
    _refuse_controls(text, file)
    return text


def _refuse_controls(text: str, file: str) -> None:
    """Refuse a raw control character where it stands (libyaml refuses it without a line).

    YAML allows tab, newline and carriage return, and NEL (refused above); any other C0 or C1
    control (ESC, U+009B) or DEL in a file is an error an editor would not show.
    """
    found = _CONTROLS.search(text)
    if found is None:
        return
    raise InputError(
        f"a raw control character U+{ord(found.group()):04X} in the file: YAML does not allow it",
        file=file,
        position=text_position(text, found.start()),
        hint="remove it; in text, write it as an escape in a double-quoted string "
        f'("\\x{ord(found.group()):02x}")',
    )


def _quoted(path: str, text: str) -> str:
    """``key: "text"``: how to write ``text`` at ``path`` as a string."""
    key = path.rsplit(".", 1)[-1]
    shown = f'"{shorten(text, 40)}"'
    return f"{key}: {shown}" if key and not key.endswith("]") else shown


def _refuse_yaml11_breaks(text: str, file: str) -> None:
    """Refuse NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR: line breaks to YAML 1.1 only.

    This reader ends a line at each; an editor (YAML 1.2) does not, so the two see different
    documents (a whole file of NEL-separated lines is one comment line to an editor).
    """
    found = _YAML11_BREAKS.search(text)
    if found is None:
        return
    raise InputError(
        f"U+{ord(found.group()):04X} is a line break in YAML 1.1 (this reader) but not in YAML "
        "1.2 (editors)",
        file=file,
        position=text_position(text, found.start()),
        hint="end lines with a plain newline; in text, write the character as an escape in a "
        'double-quoted string ("\\u2028")',
    )


def _refuse_many_nodes(text: str, file: str) -> None:
    """Refuse a large text of more than `MAX_NODES` nodes before composing it.

    libyaml's events cost a fifth of its composed nodes: a 5 MB flow mapping of 500,000
    keys is refused in seconds, not after a minute of composing what the node budget
    refuses anyway (a composed node is at least one node the build counts).
    """
    if len(text) < _EVENT_COUNT_FROM:
        return
    nodes = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, _NODE_EVENTS):
                nodes += 1
                if nodes > MAX_NODES:
                    mark = event.start_mark
                    raise InputError(
                        _TOO_MANY_NODES,
                        file=file,
                        position=Position(mark.line + 1, mark.column + 1) if mark else None,
                        hint=_NODES_HINT,
                    )
    except yaml.YAMLError:
        return  # composing reports it, located


def _compose(text: str, file: str) -> Node | None:
    _refuse_many_nodes(text, file)
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.composer.ComposerError as exc:
        if "expected a single document" in str(exc):
            mark = exc.problem_mark
            raise InputError(
                "more than one YAML document in the file",
                file=file,
                position=Position(mark.line + 1, mark.column + 1) if mark else None,
                hint="remove the '---' separator; one file holds one spec",
            ) from None
        raise _yaml_error(exc, file) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None


def _yaml_error(exc: yaml.YAMLError, file: str) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    position = Position(mark.line + 1, mark.column + 1) if mark is not None else None
    context = getattr(exc, "context", None)
    first = getattr(exc, "context_mark", None)
    if context and "duplicate anchor" in context and first is not None:
        # libyaml's composer names neither the anchor nor, in its text, where it came first
        return InputError(
            "not valid YAML: an anchor is defined a second time here "
            f"(first at line {first.line + 1}, column {first.column + 1})",
            file=file,
            position=position,
            hint="give each '&anchor' its own name",
        )
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    message = f"not valid YAML: {problem}" + (f" ({context})" if context else "")
    return InputError(
        message, file=file, position=position, hint="check indentation, quotes and ':' separators"
    )


def load_yaml_text(raw: str | bytes, file: str) -> tuple[Any, SourceMap]:
    """Parse one YAML document into plain data and its `SourceMap`.

    Returns ``(None, source)`` for an empty document.

    Raises:
        InputError: too large, binary, not UTF-8, not YAML, several documents, duplicate keys,
            non-scalar keys or an expansion beyond the node budget.
    """
    text = _decode(raw, file)
    source = SourceMap(file=file, lines=tuple(text.splitlines()))
    root = _compose(text, file)
    if root is None:
        return None, source
    builder = _Builder(file)
    builder.positions[""] = _pos(root)
    try:
        data = builder.build(root, "")
    except yaml.YAMLError as exc:  # a scalar the constructor rejects (bad timestamp, ...)
        raise _yaml_error(exc, file) from None
    except RecursionError:
        raise InputError(
            "document is nested too deeply",
            file=file,
            position=_pos(builder.last) if builder.last is not None else None,
            hint="a spec needs a few levels of nesting; flatten or remove this structure",
        ) from None
    source.positions = builder.positions
    return data, source


def read_yaml_file(path: str | os.PathLike[str]) -> tuple[Any, SourceMap]:
    """Read and parse ``path`` (see `load_yaml_text`); unreadable files raise `InputError`.

    At most `MAX_BYTES` + 1 bytes are read (`infra.reading.read_bounded`): devices, directories
    and named FIFOs are refused, and no size the file system reports is trusted.
    """
    file = os.fspath(path)
    return load_yaml_text(read_bounded(file, MAX_BYTES), file)


def _too_large(file: str, size: int) -> InputError:
    return InputError(
        f"file is {size / 1e6:.1f} MB; railplan refuses inputs above "
        f"{MAX_BYTES // (1024 * 1024)} MiB",
        file=file,
        hint="a cluster spec is a few kilobytes; check that this is the right file",
    )
