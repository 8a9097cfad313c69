"""Load a spec file into a validated `Spec`, turning every schema problem into a located error.

`load_spec` reads YAML with positions (`infra.spec.yamlpos`), validates it with the Pydantic
models and, on failure, raises one `SpecValidationError` holding a `SpecError` per problem,
each with ``file:line:column``, the dotted path, the rule broken in plain words and, for a
misspelled key or value, "did you mean ...". Pydantic's ``loc`` tuples carry union-branch tags
(``str``, ``list[MigAssignment]``) that are not spec paths; they are resolved against the data
so the path a user sees is always one they can find in their file.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from infra.errors import SpecError, spelling_hint
from infra.spec import models
from infra.spec.models import Spec
from infra.spec.yamlpos import (
    SourceMap,
    join_path,
    load_yaml_text,
    parent_path,
    read_yaml_file,
)

# Pattern-mismatch errors say which rule the value broke instead of echoing a regex.
_PATTERN_RULES = {
    models.CLUSTER_NAME: "must be a lowercase DNS label: a-z, 0-9 and '-', starting with a "
    "letter, not ending with '-'",
    models.GROUP_NAME: "must be lowercase letters, digits and '_' (Ansible group names cannot "
    "contain '-'), starting with a letter",
    models.LAYOUT_NAME: "must be lowercase letters, digits, '.', '_' and '-'",
    models.VERSION: "must be a dotted version such as 550.90.07",
    models.OFED_VERSION: "must be a MLNX_OFED version such as 23.10-1.1.9.0",
    models.MIG_PROFILE: "must be a MIG profile name such as 1g.10gb, 3g.40gb or 1g.10gb+me",
}


class SpecValidationError(SpecError):
    """A spec that parsed as YAML but breaks the schema; ``errors`` lists every problem."""

    def __init__(self, errors: Sequence[SpecError]) -> None:
        first = errors[0]
        super().__init__(
            first.message,
            file=first.file,
            path=first.path,
            position=first.position,
            hint=first.hint,
        )
        self.errors = list(errors)


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with the source map its findings are located through."""

    spec: Spec
    source: SourceMap
    file: str


def load_spec(path: str | os.PathLike[str]) -> LoadedSpec:
    """Read and validate the spec at ``path``.

    Raises:
        InputError: the file cannot be read or is not YAML.
        SpecValidationError: the YAML does not describe a valid spec.
    """
    data, source = read_yaml_file(path)
    return validate_spec(data, source)


def load_spec_text(text: str | bytes, file: str = "<spec>") -> LoadedSpec:
    """Like `load_spec`, from text already in memory."""
    data, source = load_yaml_text(text, file)
    return validate_spec(data, source)


def validate_spec(data: Any, source: SourceMap) -> LoadedSpec:
    """Validate parsed YAML ``data`` as a spec (see `load_spec`)."""
    file = source.file
    if data is None:
        raise SpecValidationError(
            [
                SpecError(
                    "the file is empty",
                    file=file,
                    position=source.position(""),
                    hint="a spec needs at least `name` and `node_groups`; see `railplan schema`",
                )
            ]
        )
    if not isinstance(data, dict):
        raise SpecValidationError(
            [
                SpecError(
                    f"a spec is a mapping of keys (name, node_groups, ...), got {_type_name(data)}",
                    file=file,
                    position=source.position(""),
                    hint="start the file with `name: <cluster>` on its first line",
                )
            ]
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecValidationError(_translate(exc, data, source)) from None
    return LoadedSpec(spec=spec, source=source, file=file)


# --- pydantic error translation ---------------------------------------------------------------


def _translate(exc: ValidationError, data: Any, source: SourceMap) -> list[SpecError]:
    grouped: dict[str, list[tuple[ErrorDetails, bool]]] = defaultdict(list)
    for err in exc.errors(include_url=False):
        path, skipped = _resolve_loc(data, err["loc"], err["type"])
        grouped[path].append((err, skipped))
    errors = [
        _one_error(path, items, source)
        for path, items in grouped.items()
        if not _explained_by_typo(path, items, grouped)
    ]
    return sorted(
        errors, key=lambda e: (e.position.line, e.position.column) if e.position else (0, 0)
    )


def _explained_by_typo(
    path: str,
    items: list[tuple[ErrorDetails, bool]],
    grouped: dict[str, list[tuple[ErrorDetails, bool]]],
) -> bool:
    """True for "missing key k" when a sibling unknown key is a misspelling of k."""
    err = items[0][0]
    if err["type"] != "missing" or not err["loc"]:
        return False
    parent, key = parent_path(path), str(err["loc"][-1])
    for other_path, others in grouped.items():
        other = others[0][0]
        if other["type"] == "extra_forbidden" and parent_path(other_path) == parent:
            typo = str(other["loc"][-1])
            if difflib.get_close_matches(typo, [key], n=1, cutoff=0.6):
                return True
    return False


def _child(current: Any, seg: int | str) -> tuple[bool, Any]:
    """``(True, value)`` when ``seg`` is a key or index of ``current``."""
    if isinstance(current, dict) and isinstance(seg, str) and seg in current:
        return True, current[seg]
    if isinstance(current, list) and isinstance(seg, int) and 0 <= seg < len(current):
        return True, current[seg]
    return False, None


def _resolve_loc(data: Any, loc: tuple[int | str, ...], kind: str) -> tuple[str, bool]:
    """Map a pydantic loc onto the data, dropping union tags; return (path, tags_dropped)."""
    path, current, skipped = "", data, False
    for i, seg in enumerate(loc):
        found, child = _child(current, seg)
        if found:
            path, current = join_path(path, seg), child
        elif i == len(loc) - 1 and kind == "missing" and isinstance(seg, str):
            path = join_path(path, seg)
        else:
            skipped = True
    return path, skipped


def _one_error(path: str, items: list[tuple[ErrorDetails, bool]], source: SourceMap) -> SpecError:
    err = items[0][0]
    if len(items) > 1 and any(skipped for _, skipped in items):
        forms = " or ".join(_expected(e) for e, _ in items)
        message, hint = f"expected {forms}, {_got(err)}", None
    else:
        message, hint = _describe(err), _hint(err, path)
    position = source.position(path)
    return SpecError(message, file=source.file, path=path, position=position, hint=hint)


def _describe(err: ErrorDetails) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    name = str(err["loc"][-1]) if err["loc"] else "spec"
    if kind == "extra_forbidden":
        return f"unknown key {name!r}"
    if kind == "missing":
        return f"missing required key {name!r}"
    if kind == "string_pattern_mismatch":
        rule = _PATTERN_RULES.get(str(ctx.get("pattern")), f"must match {ctx.get('pattern')}")
        return f"{err['input']!r} {rule}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind in {"value_error", "assertion_error"}:
        return msg
    expected = _expected(err)
    if expected.startswith("not "):
        return f"{_got(err).removeprefix('got ')} is {expected}"
    return f"expected {expected}, {_got(err)}"


def _expected(err: ErrorDetails) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    for prefix in ("Input should be ", "Input is not ", "Input "):
        if msg.startswith(prefix):
            return ("not " if prefix == "Input is not " else "") + msg.removeprefix(prefix)
    return msg


def _got(err: ErrorDetails) -> str:
    value = err["input"]
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return (
        f"got {_type_name(value)} {text}"
        if not isinstance(value, dict | list)
        else (f"got {_type_name(value)}")
    )


def _hint(err: ErrorDetails, path: str) -> str | None:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = _allowed_keys(err["loc"][:-1])
        return spelling_hint(str(err["loc"][-1]), allowed, "allowed keys") or None
    if kind == "literal_error":
        expected = [
            s.strip(" '")
            for s in str(ctx.get("expected", "")).replace(" or ", ",").split(",")
            if s.strip()
        ]
        return spelling_hint(str(err["input"]), expected, "allowed values") or None
    return None


def _allowed_keys(loc: Sequence[int | str]) -> list[str]:
    """Field names of the model at ``loc`` (walking Spec's annotations), or [] if unknown."""
    model: type[BaseModel] | None = Spec
    for seg in loc:
        if model is None:
            return []
        field = model.model_fields.get(str(seg)) if isinstance(seg, str) else None
        if field is None:
            continue  # list index, dict key or union tag: stay on the item's model
        model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The first BaseModel class inside an annotation (through Optional, list, dict, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or args:
        for arg in reversed(args):  # dict[str, Model] / list[Model]: the model is last
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _type_name(value: Any) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)
