"""Where rendered files come from: the project's Jinja templates and static roles.

Templates live in the project's `templates/` directory and render with `StrictUndefined`
(a missing value is an error, never an empty string) and `keep_trailing_newline`. Values
that reach YAML go through the `yaml_str` filter (a JSON string is a valid, fully quoted YAML
scalar) and values that reach a shell through `shell_quote`. HTML templates (`*.html.j2`,
the report) render in their own environment with autoescape on: every value is escaped
unless it is `markupsafe.Markup` built by an escaping helper, and a string's control and
bidirectional characters (a trace's tenant may hold ESC) are shown as escapes. The static
roles are read from `playbooks/roles/` and copied byte-identical. Both directories are found by
`infra.project_data`: the copies a wheel ships, or the checkout's own.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator
from functools import cache
from importlib.resources.abc import Traversable
from typing import Any

import jinja2
import markupsafe
from jinja2.loaders import split_template_path

from infra.errors import escape_controls
from infra.project_data import roles_dir, templates_dir

__all__ = ["render_html", "render_template", "role_files"]


class _TraversableLoader(jinja2.BaseLoader):
    """Templates from a directory of an installed package or of the checkout."""

    def __init__(self, root: Traversable) -> None:
        self.root = root

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool]]:
        node = self.root.joinpath(*split_template_path(template))
        if not node.is_file():
            raise jinja2.TemplateNotFound(template)
        # The environment is cached for the process and the files are not edited under it.
        return node.read_text(encoding="utf-8"), None, lambda: True


def _loader() -> jinja2.BaseLoader:
    return _TraversableLoader(templates_dir())


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
        finalize=_shown,  # and names from traces, whose control characters it shows escaped
    )


def _shown(value: Any) -> Any:
    r"""A plain string with its control characters as escapes (``\x1b``), before autoescape."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return escape_controls(value)
    return value


def render_template(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``."""
    return _environment().get_template(template).render(**context)


def render_html(template: str, **context: Any) -> str:
    """Render the HTML template ``templates/<template>`` with autoescape."""
    return _html_environment().get_template(template).render(**context)


def role_files() -> dict[str, bytes]:
    """Every file of the static roles, as ``playbooks/roles/<role>/...`` -> bytes."""
    return {f"playbooks/roles/{rel}": node.read_bytes() for rel, node in _walk(roles_dir())}


def _walk(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """The files under ``node`` as (relative POSIX path, file), in path order."""
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name == "__pycache__":
            continue
        if child.is_dir():
            yield from _walk(child, f"{prefix}{child.name}/")
        elif child.is_file():
            yield f"{prefix}{child.name}", child
