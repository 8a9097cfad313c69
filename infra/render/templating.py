"""Where rendered files come from: the project's Jinja templates and static roles.

Templates live in the project's `templates/` directory and render with `StrictUndefined`
(a missing value is an error, never an empty string) and `keep_trailing_newline`. Values
that reach YAML go through the `yaml_str` filter (a JSON string is a valid, fully quoted YAML
scalar) and values that reach a shell through `shell_quote`. HTML templates (`*.html.j2`,
the report) render in their own environment with autoescape on: every value is escaped
unless it is `markupsafe.Markup` built by an escaping helper. The static roles are read from
`playbooks/roles/` and copied byte-identical.
"""

from __future__ import annotations

import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from infra.render.writer import RenderError

__all__ = ["PROJECT_ROOT", "render_html", "render_template", "role_files"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = PROJECT_ROOT / "templates"
ROLES = PROJECT_ROOT / "playbooks" / "roles"


def _loader() -> jinja2.FileSystemLoader:
    if not TEMPLATES.is_dir():
        raise RenderError(
            f"templates not found at {TEMPLATES}",
            hint="railplan render runs from a checkout of the project (pip install -e .)",
        )
    return jinja2.FileSystemLoader(TEMPLATES)


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_loader(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # YAML, INI and shell, not HTML
    )
    env.filters["yaml_str"] = lambda value: json.dumps(str(value))
    env.filters["shell_quote"] = lambda value: shlex.quote(str(value))
    return env


@cache
def _html_environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=_loader(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=True,  # spec names and free text reach the page
    )


def render_template(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``."""
    return _environment().get_template(template).render(**context)


def render_html(template: str, **context: Any) -> str:
    """Render the HTML template ``templates/<template>`` with autoescape."""
    return _html_environment().get_template(template).render(**context)


def role_files() -> dict[str, bytes]:
    """Every file of the static roles, as ``playbooks/roles/<role>/...`` -> bytes."""
    if not ROLES.is_dir():
        raise RenderError(f"roles not found at {ROLES}", hint="run from a project checkout")
    files = {}
    for path in sorted(ROLES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"playbooks/roles/{path.relative_to(ROLES).as_posix()}"] = path.read_bytes()
    return files
