"""Where the project's templates and static roles are: in the installed package, or the checkout.

DESIGN.md keeps them at the top of the repository (`templates/`, `playbooks/roles/`), outside
the `infra` package. A wheel (`pip install .`, `pipx install .`) carries copies as package data
under `infra/_data/` (setup.py's build step puts them there); an editable install (`pip
install -e .`, what `make` does) and a plain checkout have no such copies and read the
directories themselves. Both are `importlib.resources` Traversables, so a zipped install reads
them too; nothing here depends on the working directory.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from infra.errors import RailplanError

__all__ = ["CHECKOUT", "roles_dir", "templates_dir"]

CHECKOUT = Path(__file__).resolve().parents[1]  # the repository root, when running from one
_CHECKOUT_DIRS = {"templates": CHECKOUT / "templates", "roles": CHECKOUT / "playbooks" / "roles"}


@cache
def _data_dir(name: str) -> Traversable:
    """The packaged copy if this is a built install, else the checkout's directory."""
    packaged = resources.files("infra") / "_data" / name
    if packaged.is_dir():
        return packaged
    checkout = _CHECKOUT_DIRS[name]
    if not checkout.is_dir():
        raise RailplanError(
            f"railplan's {name} are missing from its installation",
            hint="reinstall railplan (pip install .) or run it from a checkout",
        )
    return checkout


def templates_dir() -> Traversable:
    """The Jinja templates (`templates/` of the repository)."""
    return _data_dir("templates")


def roles_dir() -> Traversable:
    """The static Ansible roles (`playbooks/roles/` of the repository)."""
    return _data_dir("roles")
