"""Golden rendered trees: `railplan render` output must match tests/golden/expected/ exactly.

Regenerate with `make golden` and review the diff. Roles are checked separately: the tree
holds them byte-identical to playbooks/roles/.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

GOLDEN = Path(__file__).parent / "golden"
ROLES = Path(__file__).parents[1] / "playbooks" / "roles"  # the checkout's, not a copy
_spec = importlib.util.spec_from_file_location("regenerate", GOLDEN / "regenerate.py")
assert _spec and _spec.loader
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)

INPUTS = sorted((GOLDEN / "inputs").glob("*.yaml"))


@pytest.mark.parametrize("spec_file", INPUTS, ids=[p.stem for p in INPUTS])
def test_rendered_tree_matches_the_golden_files(spec_file: Path) -> None:
    expected_dir = GOLDEN / "expected" / spec_file.stem
    expected = {
        p.relative_to(expected_dir).as_posix(): p.read_bytes()
        for p in sorted(expected_dir.rglob("*"))
        if p.is_file()
    }
    got = regenerate.golden_tree(spec_file)
    assert sorted(got) == sorted(expected), "files differ: run `make golden` and review"
    for path, data in got.items():
        assert data == expected[path], f"{path} differs from the golden file: `make golden`"


def test_roles_are_copied_byte_identical() -> None:
    spec = load_spec(str(INPUTS[0])).spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    roles = {p: d for p, d in tree.items() if p.startswith("playbooks/roles/")}
    on_disk = {
        f"playbooks/roles/{p.relative_to(ROLES).as_posix()}": p.read_bytes()
        for p in ROLES.rglob("*")
        if p.is_file()
    }
    assert roles == on_disk
