"""The rendered runbook (`infra.render.runbook`): complete, and true to the tree it sits in.

Every Ansible Vault variable a role of the tree reads is named in it (found by reading the
roles, so a new secret cannot be left out), and so is every Pulumi config secret of
``Pulumi.yaml`` for the spec's targets; every inventory, playbook, ``--limit`` and ``--tags``
its commands name exists in the rendered tree. Several specs: the goldens (Kubernetes with
MIG, Slurm with and without power saving), the AWS example and the tenants example.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import jinja2
import jinja2.nodes
import pytest
import yaml

from infra.catalog import load_catalog
from infra.render.runbook import playbook_roles, runbook_path, vault_path
from infra.render.runbook_data import PULUMI_CONFIG, VAULT_SECRETS
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand
from tests.cli_run import ROOT

SPECS = [
    *sorted((ROOT / "tests" / "golden" / "inputs").glob("*.yaml")),
    ROOT / "examples" / "aws-p4d.yaml",
    ROOT / "examples" / "k8s-tenants.yaml",
]
_NO_DEFAULT = re.compile(r"^# ([a-z_][a-z0-9_]*): \(no default", re.MULTILINE)
_MAGIC = {"item", "groups", "hostvars", "inventory_hostname", "omit", "lookup", "range"}


@cache
def _tree(spec_file: Path) -> tuple[str, dict[str, str]]:
    spec = load_spec(str(spec_file)).spec
    catalog = load_catalog()
    files = render_tree(spec, catalog, expand(spec, catalog))
    return spec.name, {p: data.decode("utf-8") for p, data in files.items()}


def _names(text: str) -> set[str]:
    """Variables a Jinja template string reads."""
    ast = jinja2.Environment().parse(text)
    return {n.name for n in ast.find_all(jinja2.nodes.Name) if n.ctx == "load"}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _defined(files: dict[str, str], role: str) -> set[str]:
    """What a role's defaults and vars define, and what its tasks register or set."""
    names: set[str] = set()
    for path, text in files.items():
        if not path.startswith(f"playbooks/roles/{role}/") or not path.endswith(".yml"):
            continue
        data = yaml.safe_load(text)
        if "/defaults/" in path or "/vars/" in path:
            names |= set(data or {})
        for task in data if isinstance(data, list) else []:
            if isinstance(task, dict):
                names |= {task["register"]} if "register" in task else set()
                names |= set(task.get("ansible.builtin.set_fact", {}) or {})
    return names


_SCANS: dict[int, dict[str, str]] = {}


def vault_variables(files: dict[str, str]) -> dict[str, str]:
    """`_vault_variables` of the tree's roles, scanned once per distinct set of role files."""
    roles = {p: t for p, t in files.items() if p.startswith("playbooks/roles/")}
    key = hash(tuple(sorted(roles.items())))
    if key not in _SCANS:
        _SCANS[key] = _vault_variables(roles)
    return _SCANS[key]


def _vault_variables(files: dict[str, str]) -> dict[str, str]:
    """Variable -> role, for every variable a role of the tree must get from a vault.

    Read in a ``no_log`` task with no default in the role, or documented in its defaults as
    ``# name: (no default ...)``.
    """
    found: dict[str, str] = {}
    defined: dict[str, set[str]] = {}
    for path, text in sorted(files.items()):
        parts = path.split("/")
        if path.startswith("playbooks/roles/") and "/defaults/" in path:
            found.update((name, parts[2]) for name in _NO_DEFAULT.findall(text))
        if not path.startswith("playbooks/roles/") or "/tasks/" not in path:
            continue
        role = parts[2]
        if role not in defined:
            defined[role] = _defined(files, role) | _MAGIC
        for task in yaml.safe_load(text) or []:
            if not (isinstance(task, dict) and task.get("no_log") is True):
                continue
            read = {n for s in _strings(task) if "{{" in s for n in _names(s)}
            found.update((n, role) for n in read - defined[role] if not n.startswith("ansible_"))
    return found


def test_the_role_scan_finds_the_secrets_the_table_lists() -> None:
    """The runbook's table and the roles agree, both ways: neither can drift alone."""
    _, files = _tree(SPECS[0])
    assert vault_variables(files) == {s.name: s.role for s in VAULT_SECRETS}


@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: p.stem)
def test_every_vault_variable_a_rendered_role_reads_is_named(spec_file: Path) -> None:
    name, files = _tree(spec_file)
    text = files[runbook_path(name)]
    for variable in vault_variables(files):
        assert f"`{variable}`" in text, variable


@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: p.stem)
def test_every_needed_secret_has_its_command(spec_file: Path) -> None:
    name, files = _tree(spec_file)
    text = files[runbook_path(name)]
    spec = load_spec(str(spec_file)).spec
    for secret in VAULT_SECRETS:
        roles = playbook_roles(yaml.safe_load(files[f"playbooks/{name}.yml"]))
        needed = secret.needed(spec) and secret.role in roles
        assert (f"--stdin-name {secret.name}" in text) == needed, secret.name
        if needed:
            assert f"-e @{vault_path(name)} --ask-vault-pass" in text


def test_pulumi_config_matches_pulumi_yaml_and_secrets_are_named() -> None:
    config = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    assert {k: bool(v.get("secret")) for k, v in config.items()} == {
        k.key: k.secret for k in PULUMI_CONFIG
    }
    for spec_file, target in (
        (SPECS[0], "kubernetes"),
        (ROOT / "examples" / "aws-p4d.yaml", "aws"),
    ):
        name, files = _tree(spec_file)
        text = files[runbook_path(name)]
        assert f"pulumi config set railplan:target {target}" in text
        for key in PULUMI_CONFIG:
            if key.secret and key.target == target:
                assert f"pulumi config set --secret {key.key}" in text


def _commands(text: str) -> list[list[str]]:
    """The runbook's shell commands, continuation lines joined, comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    joined = "\n".join(blocks).replace("\\\n", " ")
    commands = (shlex.split(line, comments=True) for line in joined.splitlines())
    return [words for words in commands if words]


def _inventory_names(files: dict[str, str], name: str) -> set[str]:
    """Every group and host of the rendered inventory."""
    names: set[str] = set()

    def walk(groups: dict[str, dict[str, object]]) -> None:
        for group, body in groups.items():
            names.add(group)
            names.update(body.get("hosts", {}) or {})  # type: ignore[arg-type]
            walk(body.get("children", {}) or {})  # type: ignore[arg-type]

    walk(yaml.safe_load(files[f"inventories/{name}/hosts.yml"]))
    return names


def _option(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == flag]


@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: p.stem)
def test_every_command_names_paths_groups_and_tags_of_the_tree(spec_file: Path) -> None:
    name, files = _tree(spec_file)
    text = files[runbook_path(name)]
    tags = {
        t for play in yaml.safe_load(files[f"playbooks/{name}.yml"]) for t in play.get("tags", [])
    }
    hosts = _inventory_names(files, name)
    ansible = [w for w in _commands(text) if w[0].startswith("ansible")]
    assert any(w[0] == "ansible-playbook" for w in ansible)
    for words in ansible:
        for inventory in _option(words, "-i"):
            assert f"{inventory}/hosts.yml" in files, words
        for playbook in (w for w in words if w.startswith("playbooks/")):
            assert playbook in files, words
        for limit in _option(words, "--limit"):
            assert limit in hosts, words
        for tag in _option(words, "--tags"):
            assert tag in tags, words
    # every rendered path the text names is in the tree (the fabric dump is saved later)
    for path in re.findall(r"`((?:inventories|playbooks)/[^`\s]+)`", text):
        if "/files/fabric/discovered/" not in path:
            assert path in files or any(f.startswith(path.rstrip("/") + "/") for f in files), path


def test_the_verify_step_reads_where_acceptance_saves_the_dump() -> None:
    name, files = _tree(ROOT / "tests" / "golden" / "inputs" / "h100-slurm-opensm.yaml")
    text = files[runbook_path(name)]
    (verify,) = [w for w in _commands(text) if w[:2] == ["railplan", "verify"]]
    dump = Path(verify[-1])
    assert dump.parent.as_posix() == f"inventories/{name}/files/fabric/discovered"
    # the acceptance role: the first subnet-manager host of the play runs ibnetdiscover
    sms = yaml.safe_load(files[f"inventories/{name}/hosts.yml"])["all"]["children"]
    assert dump.stem == next(iter(sms["subnet_managers"]["hosts"]))


def test_aws_runbook_provisions_first_and_renders_with_the_addresses() -> None:
    name, files = _tree(ROOT / "examples" / "aws-p4d.yaml")
    text = files[runbook_path(name)]
    order = ["pulumi up", "pulumi stack output hosts --json", "--addresses", "ansible-playbook"]
    assert [text.index(step) for step in order] == sorted(text.index(step) for step in order)
    assert "AWS credentials" in text


def test_no_role_tells_users_to_make_a_group_vars_all_directory() -> None:
    """A ``group_vars/all/`` directory hides the rendered ``group_vars/all.yml`` (ansible-core
    2.19 reads the directory, not the file): the roles point at the runbook's vault file."""
    _, files = _tree(SPECS[0])
    for path, text in files.items():
        if path.startswith("playbooks/roles/"):
            assert "group_vars/all/" not in text, path
