"""Build step: a wheel carries the templates and static roles as package data.

DESIGN.md keeps `templates/` and `playbooks/roles/` at the top of the repository, outside the
`infra` package, so setuptools would leave them out of a wheel and an installed `railplan
render` would find nothing. This build_py also copies them into `infra/_data/` of the build,
where `infra.project_data` finds them. An editable install (`pip install -e .`, what `make`
does) reads the checkout's directories instead, so nothing is copied then. MANIFEST.in puts
the directories into the sdist, which a wheel may be built from. Everything else is in
pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = {"templates": Path("templates"), "roles": Path("playbooks/roles")}


class BuildPyWithData(build_py):
    """build_py, then the project directories into ``infra/_data/<name>/`` of the build."""

    def run(self) -> None:
        """Build the package, then add the copies (not in an editable install)."""
        super().run()
        if self.editable_mode:
            return
        for name, source in DATA.items():
            target = Path(self.build_lib) / "infra" / "_data" / name
            shutil.rmtree(target, ignore_errors=True)  # a stale build must not keep old files
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
