"""The base of every spec model (strict, frozen, unknown keys refused) and shared name patterns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict

from infra.errors import escape_char, is_control, shorten

__all__ = [
    "DNS_LABEL",
    "GENERATED_GROUP_KINDS",
    "ONE_LINE",
    "ONE_LINE_OR_EMPTY",
    "ONE_LINE_RULE",
    "RESERVED_GROUPS",
    "RESERVED_GROUP_HINT",
    "Precision",
    "StrictModel",
    "TextRule",
    "inventory_group",
    "name_pattern",
    "one_line",
    "reserved_group",
]

# Inventory groups the rendered tree defines itself (Ansible's own and railplan's): a node
# group of that name would merge into them (lint RP005, render refuses it too). The renderer
# (infra.render.ansible) names its role groups from this set and refuses to define a group twice.
RESERVED_GROUPS = frozenset(
    {
        "all",
        "ungrouped",
        "gpu_servers",
        "nvswitch_servers",
        "mig_servers",
        "subnet_managers",
        "slurm_controllers",
        "control_hosts",
    }
)

# Kinds of the inventory groups railplan derives from SU and rack names (`inventory_group`):
# `su_<group>_suNN`, `rack_<group>_suNN_cN`. A node group named `<kind>_...` could take the
# name of one of them (group `su_train_su01` beside group `train`), and Ansible merges
# same-named groups, so each kind's prefix is reserved as a whole.
GENERATED_GROUP_KINDS = ("su", "rack")

RESERVED_GROUP_HINT = (
    f"rename the group; reserved: {', '.join(sorted(RESERVED_GROUPS))}, and names starting "
    + " or ".join(f"'{kind}_'" for kind in GENERATED_GROUP_KINDS)
    + " (railplan's SU and rack groups, e.g. su_train_su01, rack_train_su01_c1)"
)


def inventory_group(kind: str, name: str) -> str:
    """The inventory group of an SU or a rack: ``su_train_su01``, ``rack_train_su01_c1``."""
    assert kind in GENERATED_GROUP_KINDS, kind
    return f"{kind}_{name.replace('-', '_')}"


def reserved_group(name: str) -> bool:
    """Whether a node group of this name would meet an inventory group railplan makes itself.

    >>> [reserved_group(n) for n in ("control_hosts", "su_train_su01", "rack_a", "train")]
    [True, True, True, False]
    """
    return name in RESERVED_GROUPS or name.startswith(
        tuple(f"{kind}_" for kind in GENERATED_GROUP_KINDS)
    )


def name_pattern(inner: str, *, first: str = "a-z", max_length: int = 63) -> str:
    """The one rule for spec names that reach other tools; a regex of ``inner`` characters.

    Group, layout, cluster and tenant names become Kubernetes label values (at most 63
    characters of ``(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?``), Slurm partition and
    node names, hostnames (with ``_`` made ``-``: RFC 1123 labels), Ansible groups and file
    names. What all of them take: lowercase, at most 63 characters, starting with ``first``
    (a letter unless said otherwise) and ending with a letter or digit, never with
    ``-``, ``_`` or ``.``. Each kind of name narrows ``inner`` to what its own consumers
    take on top (no ``-`` in Ansible group names, no ``_`` in DNS labels).

    >>> import re
    >>> bool(re.match(name_pattern("a-z0-9_", max_length=32), "infer_"))
    False
    """
    assert 2 <= max_length <= 63 and not set(inner) - set("a-z0-9_.-")
    return rf"^[{first}]([{inner}]{{0,{max_length - 2}}}[a-z0-9])?$"


# A Kubernetes namespace or object name that is also a safe path and shell word.
DNS_LABEL = name_pattern("a-z0-9-", max_length=40)


# Free text (a budget's claim, a trace path, a MIG layout's description): one rule, two forms.
# The pattern is what the JSON Schema shows and catches C0 controls and DEL; `one_line` adds the
# rest of what `infra.errors.is_control` escapes on every echo (C1 controls, the bidirectional
# overrides such as U+202E, zero-width characters, line separators), since a free-text field
# also reaches outputs where no terminal escaping applies (the HTML report).
ONE_LINE = r"^[^\x00-\x1f\x7f]+$"
"""One line of text without control characters."""
ONE_LINE_OR_EMPTY = r"^[^\x00-\x1f\x7f]*$"
"""`ONE_LINE`, or nothing (a field whose default is the empty text)."""
ONE_LINE_RULE = "must be one line of text, without control characters"


def one_line(text: str) -> str:
    r"""``text`` when no character of it is one `is_control` escapes, else a ValueError.

    >>> one_line("H100 day layout")
    'H100 day layout'
    >>> one_line("a\u202eb")
    Traceback (most recent call last):
    ValueError: 'a\u202eb' must be one line of text, without control characters (\u202e at character 2)
    """
    if text.isprintable():  # the usual case, checked in C (spaces other than ' ' fail it too)
        return text
    for at, ch in enumerate(text, start=1):
        if is_control(ch):
            raise ValueError(
                f"{shorten(text)!r} {ONE_LINE_RULE} ({escape_char(ch)} at character {at:,})"
            )
    return text


TextRule = AfterValidator(one_line)
"""The validator of a free-text field (annotate ``Annotated[str, TextRule]``)."""


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors and values are not coerced.

    Strict mode keeps YAML's loose typing from slipping through: ``count: true`` or
    ``count: "4"`` are errors, not 1 and 4. Fields that parse text (sizes, CIDRs, enums)
    convert it themselves before validation. Numbers must be finite: YAML's ``.inf`` and
    ``.nan`` would pass every ``gt``/``le`` bound or none and turn limits into ``+nan%``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Precision(StrEnum):
    """Numeric formats a workload can ask of a GPU (the catalog says which each supports)."""

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"


_Item = TypeVar("_Item", str, int)


def repeated(values: Iterable[_Item]) -> list[_Item]:
    """The values that occur more than once, sorted; one pass (a uniqueness check stays linear).

    >>> repeated(["b", "a", "b", "c", "a"])
    ['a', 'b']
    """
    return sorted(v for v, n in Counter(values).items() if n > 1)


# Names other tools take (label values, hostnames, Slurm, Ansible, files): see name_pattern.
CLUSTER_NAME = name_pattern("a-z0-9-")  # a DNS label (and a label value)
GROUP_NAME = name_pattern("a-z0-9_", max_length=32)  # an Ansible group: no '-'
LAYOUT_NAME = name_pattern("a-z0-9._-", first="a-z0-9")  # a mig-parted config name
