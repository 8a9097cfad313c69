"""Shipped text never cites railplan's own issue numbers: a reader cannot follow them.

Code comments, docstrings, docs and rendered templates once said "issue 33's case" or
"(issue 12)" where they meant a reason (what was measured, what a limit protects against). A
reader outside the project has no tracker to look them up in, so the text must state the reason
itself. Upstream issues stay citable in forms that lead somewhere: ``kueue#4848``, a
github.com URL, or ``NVIDIA/mig-parted issue #120`` (the repository named before it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import ROOT

SCANNED = ("infra", "tools", "templates", "playbooks", "docs", "bench", "README.md")
"""What railplan ships or publishes: code (and its tools), rendered templates, playbooks, docs and
the README."""

INTERNAL = re.compile(r"\b[Ii]ssues?\s*(?:no\.\s*)?#?\s*\d+")
"""``issue 33``, ``Issue 24's``, ``issues 11``, ``issue #12``, ``issue no. 5``."""

UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+\s+$")
"""An ``owner/name`` repository just before the match names whose issue it is."""


def _files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        found += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [p for p in found if "__pycache__" not in p.parts]


def internal_refs(text: str) -> list[str]:
    """Each ``line: text`` citing an issue number with no upstream repository named."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in INTERNAL.finditer(line):
            before = line[: match.start()]
            if UPSTREAM.search(before):
                continue
            hits.append(f"{number}: {line.strip()[:120]}")
    return hits


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("# the verdict tests the bound (issue 33)", True),
        ("Issue 24's rule: held-out rows are never fitted.", True),
        ("one 300,000-character line (issue #12's trial)", True),
        ("issues 11 and 24", True),
        ('title: "NVIDIA/mig-parted issue #120: nvidia-smi mig -lgip"', False),
        ("see kueue#4848 and torchtitan#1301", False),
        ("https://github.com/NVIDIA/nccl/issues/320", False),
        ("tissue 3 is not an issue reference", False),
    ],
)
def test_the_pattern_tells_internal_from_upstream(text: str, cited: bool) -> None:
    assert bool(internal_refs(text)) is cited


def test_shipped_text_cites_no_internal_issue_number() -> None:
    offenders = []
    for path in _files():
        raw = path.read_bytes()
        if b"\0" in raw:
            continue  # binary
        for hit in internal_refs(raw.decode("utf-8", errors="replace")):
            offenders.append(f"{path.relative_to(ROOT)}:{hit}")
    assert not offenders, "state the reason instead of an issue number:\n" + "\n".join(offenders)
