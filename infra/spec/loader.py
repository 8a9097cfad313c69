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
from infra.spec import base, mig, models, scheduling
from infra.spec.base import ONE_LINE, ONE_LINE_OR_EMPTY, ONE_LINE_RULE
from infra.spec.models import Spec
from infra.spec.schema_hints import fallback_hint
from infra.spec.yamlpos import (
    SourceMap,
    join_path,
    load_yaml_text,
    parent_path,
    read_yaml_file,
)

# Pattern-mismatch errors say which rule the value broke instead of echoing a regex.
_PATTERN_RULES = {
    base.CLUSTER_NAME: "must be a lowercase DNS label: a-z, 0-9 and '-', starting with a "
    "letter, not ending with '-'",
    base.DNS_LABEL: "must be at most 40 lowercase letters, digits and '-', starting with a "
    "letter and ending with a letter or digit (a Kubernetes object name)",
    r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$": "must be a CSI driver name: at most 63 lowercase "
    "letters, digits, '.' and '-', starting and ending with a letter or digit",
    r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$": "must be a parameter key: at most 63 letters, "
    "digits, '.', '_', '/' and '-', starting with a letter or digit",
    base.GROUP_NAME: "must be at most 32 lowercase letters, digits and '_' (Ansible group "
    "names cannot contain '-'), starting with a letter and ending with a letter or digit (it "
    "becomes a Kubernetes label value)",
    base.LAYOUT_NAME: "must be at most 63 lowercase letters, digits, '.', '_' and '-', "
    "starting and ending with a letter or digit (it becomes a Kubernetes label value)",
    models.VERSION: "must be a dotted version such as 550.90.07 (at most 8 digits a part)",
    models.OFED_VERSION: "must be a MLNX_OFED version such as 23.10-1.1.9.0 (at most 8 digits "
    "a part)",
    mig.MIG_PROFILE: "must be a MIG profile name such as 1g.10gb, 3g.40gb or 1g.10gb+me",
    r"^[1-9][0-9]{0,5}[smh]$": "must be a duration such as 90s, 30m or 2h (at most 6 digits)",
    ONE_LINE: ONE_LINE_RULE,
    ONE_LINE_OR_EMPTY: ONE_LINE_RULE,
    scheduling.HELM_RELEASE: "must be a Helm release name: lowercase letters, digits, '-' and "
    "'.', starting and ending with a letter or digit (helm install refuses any other)",
}


SCHEMA_RULE = "RP000"  # the rule id of "the spec does not match the schema", in every format


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
            rule=first.rule,
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
                    rule=SCHEMA_RULE,
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
                    rule=SCHEMA_RULE,
                )
            ]
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecValidationError(_translate(exc, data, source)) from None
    unresolved = [
        SpecError(
            message,
            file=file,
            path=path,
            position=source.position(path),
            hint=hint or None,
            rule=SCHEMA_RULE,
        )
        for path, message, hint in [*spec.name_clashes(), *spec.unresolved_references()]
    ]
    if unresolved:
        raise SpecValidationError(unresolved)
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
        if not _explained_by_typo(path, items, grouped) and not _other_branch(path, items, grouped)
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


# Errors that say only "not this branch's form" (wrong type, not the literal): dropped when
# another branch of the union got further into the value.
_BRANCH_ERRORS = frozenset(
    {
        "string_type",
        "list_type",
        "dict_type",
        "int_type",
        "float_type",
        "bool_type",
        "model_type",
        "model_attributes_type",
        "literal_error",
        "enum",
        "none_required",
    }
)


def _other_branch(
    path: str,
    items: list[tuple[ErrorDetails, bool]],
    grouped: dict[str, list[tuple[ErrorDetails, bool]]],
) -> bool:
    """True for a union branch's type error when the value took another branch's form.

    ``mig: [{gpus: 0:7, ...}]`` fails both forms of ``mig`` (a layout name, a list): the list
    form's error is inside the value, so "must be a string" (and its advice to quote) is the
    wrong branch and is dropped.
    """
    if not all(skipped and err["type"] in _BRANCH_ERRORS for err, skipped in items):
        return False
    inside = (f"{path}.", f"{path}[") if path else ("",)
    return any(other != path and other.startswith(inside) for other in grouped)


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
        forms = " or ".join(dict.fromkeys(_expected(e) for e, _ in items))
        wants_text = any(e["type"] == "string_type" for e, _ in items)
        message, hint = (
            f"must be {forms}, {_got(err)}",
            _quote_hint(err, path) if wants_text else None,
        )
    else:
        message, hint = _describe(err), _hint(err, path)
    position = source.position(path)
    hint = hint or fallback_hint(err, _key_of(path))
    return SpecError(
        message, file=source.file, path=path, position=position, hint=hint, rule=SCHEMA_RULE
    )


def _describe(err: ErrorDetails) -> str:
    """Pydantic's error in the spec's words: what the value must be, and what it is."""
    kind, ctx = err["type"], err.get("ctx") or {}
    name = str(err["loc"][-1]) if err["loc"] else "spec"
    if kind == "extra_forbidden":
        return f"unknown key {name!r}"
    if kind == "missing":
        return f"missing required key {name!r}"
    if kind == "string_pattern_mismatch":
        broken = _PATTERN_RULES.get(str(ctx.get("pattern")), f"must match {ctx.get('pattern')}")
        return f"{_shown(err['input'])} {broken}"
    if kind in {"value_error", "assertion_error"}:
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    rule = _constraint(kind, ctx, name)
    if rule is not None:
        return rule if kind in {"too_short", "too_long"} else f"{rule}, {_got(err)}"
    value = err["input"]
    if kind.startswith("float") and isinstance(value, int) and not isinstance(value, bool):
        return f"{_shown(value)} is too large for any limit"  # beyond a float's 1.8e308
    return f"must be {_expected(err)}, {_got(err)}"


# Why each bounded number stops where it does, said after "must be at most N".
_WHY_BOUND = {
    "count": "servers in one group (16,384 DGX nodes are 131,072 GPUs)",
    "gpus": "GPUs (over eight times the largest cluster railplan plans)",
    "first_index": "so hostnames keep at most ten index digits",
    "su_size": "servers per SU (a leaf has at most 128 ports)",
    "storage_ports": "ports (more than any storage fabric has)",
    "filesystem_gbps": "GB/s (a thousand times today's fastest filesystems)",
    "spines": "spines (every spine takes a link from every leaf: no more than a leaf's ports)",
}


def _constraint(kind: str, ctx: dict[str, Any], name: str) -> str | None:
    """``must be at most 16,384 ...`` for the bound or length errors; None for type errors."""
    bounds = {
        "greater_than": "must be above",
        "greater_than_equal": "must be at least",
        "less_than": "must be below",
        "less_than_equal": "must be at most",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        text = f"{bounds[kind]} {_number(limit)}"
        why = _WHY_BOUND.get(name) if kind.startswith("less") else None
        return f"{text} {why}" if why else text
    if kind in {"too_short", "too_long"}:
        few = kind == "too_short"
        n = ctx.get("min_length" if few else "max_length", "?")
        noun = "entr" if ctx.get("field_type") == "Dictionary" else "item"
        plural = ("y" if n == 1 else "ies") if noun == "entr" else ("" if n == 1 else "s")
        has = ctx.get("actual_length")
        return f"must list at {'least' if few else 'most'} {n} {noun}{plural}" + (
            f", got {has:,}" if isinstance(has, int) else ""
        )
    if kind in {"string_too_short", "string_too_long"}:
        few = kind == "string_too_short"
        n = ctx.get("min_length" if few else "max_length", "?")
        return f"must be at {'least' if few else 'most'} {n} character{'' if n == 1 else 's'}"
    return None


_WANTED = {  # Pydantic's type errors as the kind of value the spec needs
    "dict_type": "a mapping",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "none_required": "null",
    "set_type": "a list",
    "tuple_type": "a list",
}


def _expected(err: ErrorDetails) -> str:
    """What kind of value was wanted, as a noun phrase ("a mapping (rack)", "a list")."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in {"model_type", "model_attributes_type"}:
        return f"a mapping ({_words(str(ctx.get('class_name', '')))})"
    if kind in {"literal_error", "enum"}:
        return f"one of {ctx.get('expected', '?')}"
    if kind in _WANTED:
        return _WANTED[kind]
    msg = str(err["msg"]).removeprefix("Value error, ")
    for prefix in ("Input should be ", "Input is not ", "Input "):
        if msg.startswith(prefix):
            return ("not " if prefix == "Input is not " else "") + msg.removeprefix(prefix)
    return msg


def _words(class_name: str) -> str:
    """``ComputeFabric`` -> ``compute fabric``: a model's name as the spec's words."""
    out = "".join(f" {c.lower()}" if c.isupper() else c for c in class_name).strip()
    return out or "an object"


def _number(value: object) -> str:
    """A bound with thousands separators (16,384), as users write it in prose."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    return str(value)


def _shown(value: object) -> str:
    """``repr(value)``, cut to a readable length (a 7 MB value is not echoed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"a {len(str(abs(value))):,}-digit number"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}...({len(text):,} chars)"


def _got(err: ErrorDetails) -> str:
    value = err["input"]
    if isinstance(value, dict | list) or value is None:  # "got null", not "got null None"
        return f"got {_type_name(value)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"got {_shown(value)}"
    return f"got {_type_name(value)} {_shown(value)}"


def _hint(err: ErrorDetails, path: str) -> str | None:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "string_type":
        return _quote_hint(err, path)
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
    if kind in {"value_error", "assertion_error"}:  # a validator's own hint, if it gave one
        hint = getattr(ctx.get("error"), "hint", None)
        return hint if isinstance(hint, str) and hint else None
    return None


def _key_of(path: str) -> str | None:
    """The key ``path`` ends in (``count`` of ``node_groups[0].count``); None for a list item."""
    last = path.rsplit(".", 1)[-1]
    return None if not last or last.endswith("]") else last


def _quote_hint(err: ErrorDetails, path: str) -> str | None:
    """How to write a string YAML read as another type: quote it (YAML 1.1's surprises)."""
    value, name = err["input"], _key_of(path)
    key = f"{name}: " if name else ""
    if isinstance(value, bool):
        word = "yes" if value else "no"
        return (
            "YAML reads an unquoted yes/no/on/off/true/false as a boolean: quote the value "
            f'as written (e.g. {key}"{word}")'
        )
    if isinstance(value, int | float):
        return (
            f"YAML reads an unquoted {_shown(value)} as a number (12.10 even becomes 12.1): "
            f'quote the value as written (e.g. {key}"{_shown(value)}")'
        )
    if isinstance(value, dict):
        return (
            "an unquoted value starting with '{' is a YAML mapping: quote the value "
            f'(e.g. {key}"{{...}}")'
        )
    if isinstance(value, list):
        return "an unquoted value starting with '[' is a YAML list: quote the value"
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
