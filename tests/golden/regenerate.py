"""Regenerate the golden rendered trees: `make golden`, then review `git diff tests/golden`.

Each `tests/golden/inputs/<name>.yaml` is rendered and written to
`tests/golden/expected/<name>/`, without the static roles (a test checks those are copied
byte-identical) and without the manifest (its checksums cover the roles too).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from infra.catalog import load_catalog
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

ROLES_PREFIX = "playbooks/roles/"


def golden_tree(spec_file: Path) -> dict[str, bytes]:
    """The rendered tree of ``spec_file`` as the golden files hold it."""
    spec = load_spec(str(spec_file)).spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    return {p: data for p, data in tree.items() if not p.startswith(ROLES_PREFIX)}


def main() -> None:
    for spec_file in sorted((HERE / "inputs").glob("*.yaml")):
        target = HERE / "expected" / spec_file.stem
        shutil.rmtree(target, ignore_errors=True)
        for path, data in golden_tree(spec_file).items():
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(data)
        print(f"{target.relative_to(HERE.parents[1])}: regenerated")


if __name__ == "__main__":
    main()
