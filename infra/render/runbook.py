"""The rendered runbook, ``inventories/<name>/RUNBOOK.md``: from bare metal to acceptance.

`runbook` reads the spec, the plan and the files rendered beside it (the entry playbook parsed
for its plays, roles and tags; which files exist) and writes the steps in the order an
operator runs them: check the spec, rack and cable from the sheets, make the secrets, provision
cloud parts with Pulumi, the first install, Kubernetes cluster services, acceptance with
`railplan verify` on the saved fabric dump, and day-2 rolling updates. Every secret the tree
needs is named with where it comes from and the command that stores it
(`infra.render.runbook_data`); no value is. Commands name the rendered paths and groups, so
they work as written from the tree's root. Per cluster (several clusters may share one root,
`ansible.cfg` included); Ansible skips ``.md`` files in an inventory directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from infra.catalog import Catalog
from infra.render.opensm import sm_hosts
from infra.render.runbook_data import PULUMI_CONFIG, SITE_VALUES, VAULT_SECRETS
from infra.spec import Spec
from infra.spec.base import inventory_group
from infra.topology.control import control_roll_order, uses_opensm
from infra.topology.model import Plan
from infra.wording import plural

__all__ = ["playbook_roles", "runbook", "runbook_path", "vault_path"]


def runbook_path(name: str) -> str:
    """Where the runbook of cluster ``name`` is rendered."""
    return f"inventories/{name}/RUNBOOK.md"


def vault_path(name: str) -> str:
    """The operator's vault file, kept outside the inventory.

    A ``group_vars/all/`` directory there would hide the rendered ``group_vars/all.yml`` from
    Ansible (ansible-core reads the directory and skips the file of the same name).
    """
    return f"vault/{name}.yml"


@dataclass(frozen=True)
class _Tree:
    """What the runbook needs to know of the cluster and its rendered files."""

    spec: Spec
    plan: Plan
    files: Mapping[str, bytes]
    plays: list[dict[str, Any]]
    aws: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def inventory(self) -> str:
        return f"inventories/{self.name}"

    def has(self, rel: str) -> bool:
        return f"{self.inventory}/{rel}" in self.files

    @property
    def secrets(self) -> list[str]:
        """The vault variables of the roles the entry playbook runs, in table order."""
        roles = playbook_roles(self.plays)
        return [s.name for s in VAULT_SECRETS if s.role in roles]

    @property
    def needs_vault(self) -> bool:
        roles = playbook_roles(self.plays)
        return any(s.role in roles and s.needed(self.spec) for s in VAULT_SECRETS)

    def playbook(self, *extra: str) -> str:
        """An ``ansible-playbook`` line for the entry playbook, vault options included."""
        first = f"ansible-playbook -i {self.inventory} playbooks/{self.name}.yml"
        more = [f"-e @{vault_path(self.name)} --ask-vault-pass"] * self.needs_vault
        more += extra
        return " \\\n  ".join([first, " ".join(more)]) if more else first


def playbook_roles(plays: list[dict[str, Any]]) -> set[str]:
    """Every role a parsed playbook runs: ``roles:`` entries and imported or included roles."""
    roles: set[str] = set()
    for play in plays:
        roles.update(r["role"] if isinstance(r, dict) else r for r in play.get("roles", []))
        for task in [*play.get("pre_tasks", []), *play.get("post_tasks", [])]:
            for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if key in task:
                    roles.add(task[key]["name"])
    return roles


def runbook(spec: Spec, catalog: Catalog, plan: Plan, files: Mapping[str, bytes]) -> str:
    """The runbook of ``spec``'s tree; ``files`` are the tree's other rendered files."""
    plays = yaml.safe_load(files[f"playbooks/{spec.name}.yml"])
    aws = any(catalog.nodes[g.node].cloud == "aws" for g in spec.node_groups)
    tree = _Tree(spec, plan, files, plays, aws)
    sections = [
        _intro(tree),
        _check(tree),
        _hardware(tree),
        _secrets(tree),
        _provision(tree),
        _install(tree),
        _kubernetes(tree),
        _acceptance(tree),
        _day2(tree),
    ]
    numbered = [s for s in sections if s]
    body = [f"## {n}. {text}" for n, text in enumerate(numbered, 1)]
    return "\n\n".join([_title(tree), *body]) + "\n"


def _sh(*lines: str) -> str:
    return "```sh\n" + "\n".join(lines) + "\n```"


def _title(tree: _Tree) -> str:
    spec, plan = tree.spec, tree.plan
    groups = ", ".join(
        f"{g.name} ({plural(g.servers, 'server')} of {g.node})" for g in plan.groups.values()
    )
    return "\n".join(
        [
            f"# Runbook: {spec.name}",
            "",
            f"Rendered by railplan from spec `{spec.name}`: re-render it, do not edit it.",
            f"{plural(len(plan.servers), 'server')}, {plural(plan.gpus, 'GPU')}: {groups}.",
            f"Scheduler: {spec.scheduler.kind}.",
            "",
            "Run every command from this tree's root (the directory holding `ansible.cfg`),",
            "with `SPEC` set to the spec this tree was rendered from:",
            "",
            _sh(f"SPEC=path/to/{spec.name}.yaml"),
        ]
    )


def _intro(tree: _Tree) -> str:
    lines = [
        "What you need",
        "",
        "- railplan, and Ansible on the host you run it from (`pip install 'ansible>=12,<13'`:",
        "  ansible-core with the `community.general` collection the roles use).",
        "- SSH to every server at its management address (`host_vars/<host>.yml`,",
        "  `ansible_host`) as a user with sudo: your key, not in this tree.",
    ]
    if tree.needs_vault:
        lines.append(
            "- An Ansible Vault password of your own, kept in a password manager (Secrets)."
        )
    if tree.spec.scheduler.kind == "kubernetes":
        lines += [
            "- A Kubernetes cluster the servers join, and on this host a kubeconfig with",
            "  cluster-admin (the drain role runs `kubectl` here; Pulumi uses the same context).",
        ]
    if tree.aws or tree.spec.scheduler.kind == "kubernetes":
        lines.append("- Pulumi, and a checkout of railplan (its `Pulumi.yaml` and `__main__.py`).")
    if tree.aws:
        lines.append("- AWS credentials in the environment (`AWS_PROFILE`, `aws sso login`).")
    return "\n".join(lines)


def _check(tree: _Tree) -> str:
    return "\n".join(
        [
            "Check the spec and refresh this tree",
            "",
            "Lint must be clean and the budgets met before anything is deployed; the render",
            "rewrites this tree (commit it, and review `git diff` after every render).",
            "",
            _sh(
                'railplan lint "$SPEC"',
                'railplan plan "$SPEC"',
                'railplan budget "$SPEC"',
                'railplan render "$SPEC" --root .',
            ),
        ]
    )


def _hardware(tree: _Tree) -> str:
    inv = tree.inventory
    lines = [
        "Rack, cable and address the servers",
        "",
        f"- `{inv}/files/bom.csv`: what to order; `{inv}/files/cabling.csv`: every cable, both",
        "  ends (device, port, rack, unit) and its length.",
        f"- `{inv}/files/hosts.csv`: each server's rack, unit, management and BMC address; give",
        "  them out (DHCP reservations or static) before the first boot. `files/etc-hosts` is the",
        "  same plan as `/etc/hosts` lines (the os_tuning role installs it).",
    ]
    if tree.has("files/fabric/ACCEPTANCE.md"):
        lines += [
            f"- With the cables in and before any software: `{inv}/files/fabric/ACCEPTANCE.md`",
            "  (ibdiagnet against `topology.topo`, or the UFM Cable Validation Tool).",
        ]
    lines += _subnet_manager(tree)
    return "\n".join(lines)


def _subnet_manager(tree: _Tree) -> list[str]:
    compute = tree.spec.fabrics.compute
    if compute is None or not tree.has("files/subnet-manager/README.md"):
        return []
    readme = f"`{tree.inventory}/files/subnet-manager/README.md`"
    if uses_opensm(tree.spec):
        return [
            "- Subnet manager: OpenSM on the `subnet_managers` hosts, set up by the playbook;",
            f"  {readme} says how.",
        ]
    return [f"- Subnet manager ({compute.subnet_manager}): set it up as {readme} says, first."]


def _secrets(tree: _Tree) -> str:
    lines = ["Secrets", "", "Nothing secret is rendered into this tree.", *_vault(tree)]
    pulumi = [k for k in PULUMI_CONFIG if k.secret and k.target in _targets(tree)]
    if pulumi:
        lines += ["", "Pulumi config secrets (the stack's encrypted config, not this tree):", ""]
        lines += ["| key | what | set with |", "|---|---|---|"]
        lines += [
            f"| `{k.key}` | {k.what} | `pulumi config set --secret {k.key}` (prompts) |"
            for k in pulumi
        ]
    outside = ["the SSH key and sudo rights Ansible uses"]
    outside += ["the vault password"] * tree.needs_vault
    outside += ["the kubeconfig"] * (tree.spec.scheduler.kind == "kubernetes")
    outside += ["Pulumi's secrets provider (Pulumi Cloud, or `PULUMI_CONFIG_PASSPHRASE`)"] * bool(
        _targets(tree)
    )
    outside += ["the AWS credentials"] * tree.aws
    return "\n".join(
        [*lines, "", "Not railplan's, and never in this tree:", "", *_bullets(outside)]
    )


def _bullets(items: list[str]) -> list[str]:
    return [f"- {item}" for item in items]


def _vault(tree: _Tree) -> list[str]:
    """The Ansible Vault variables of the tree's roles, and how to make those the spec needs.

    Those of roles the playbook does not run are named too, as not needed.
    """
    roles = playbook_roles(tree.plays)
    used = [s for s in VAULT_SECRETS if s.role in roles]
    unused = [s for s in VAULT_SECRETS if s.role not in roles]
    lines = []
    if unused:
        names = ", ".join(f"`{s.name}` ({s.role})" for s in unused)
        lines += ["", f"Not needed: {names}: this cluster's playbook does not run that role."]
    if not used:
        return lines
    vault = vault_path(tree.name)
    lines += [
        "",
        f"Ansible Vault variables of the roles `playbooks/{tree.name}.yml` runs, kept in",
        f"`{vault}` (outside the inventory: a `group_vars/all/` directory would hide the",
        "rendered `group_vars/all.yml`) and passed to every `ansible-playbook` run:",
        "",
        "| variable | role | needed | what | comes from |",
        "|---|---|---|---|---|",
    ]
    for s in used:
        needed = "yes" if s.needed(tree.spec) else f"no: only with {s.when}"
        lines.append(f"| `{s.name}` | {s.role} | {needed} | {s.what} | {s.source} |")
    if not tree.needs_vault:
        return [*lines, "", "This spec needs none of them: the playbook runs without a vault."]
    lines += ["", "Create the file and add each secret this spec needs (each prompts for the"]
    lines += ["vault password: give the same one every time):", "", _sh(*_vault_commands(tree))]
    return lines


def _vault_commands(tree: _Tree) -> list[str]:
    vault = vault_path(tree.name)
    commands = ["mkdir -p vault"]
    for s in VAULT_SECRETS:
        if s.name in tree.secrets and s.needed(tree.spec):
            commands += [f"# {s.name}", *(c.format(vault=vault) for c in s.commands)]
    for name, what, needed in SITE_VALUES:
        if needed(tree.spec):
            commands += [f"# {name}: {what}", f"echo '{name}: <value>' >> {vault}"]
    return commands


def _targets(tree: _Tree) -> list[str]:
    """The Pulumi targets this spec has parts for, in the order they are brought up."""
    return ["aws"] * tree.aws + ["kubernetes"] * (tree.spec.scheduler.kind == "kubernetes")


def _stack(tree: _Tree, target: str) -> list[str]:
    """``pulumi config`` lines for one target's stack, from `PULUMI_CONFIG`."""
    lines = [f"pulumi stack init {tree.name}-{target}"]
    for key in PULUMI_CONFIG:
        if key.target not in ("any", target):
            continue
        if key.key == "railplan:spec":
            lines.append(f'pulumi config set {key.key} "$SPEC"')
        elif key.key == "railplan:target":
            lines.append(f"pulumi config set {key.key} {target}")
        elif key.secret:
            lines.append(f"pulumi config set --secret {key.key}   # {key.what}")
        elif key.key == "railplan:bastionCidrs":
            lines.append(f"pulumi config set --path '{key.key}[0]' {key.example}   # optional")
        else:
            optional = "" if key.required else "   # optional"
            lines.append(f"pulumi config set {key.key} {key.example}{optional}")
    return [*lines, "pulumi preview", "pulumi up"]


def _provision(tree: _Tree) -> str:
    if not tree.aws:
        return ""
    return "\n".join(
        [
            "Provision the AWS instances (Pulumi)",
            "",
            "From the railplan checkout (with `SPEC` an absolute path). The instances' addresses",
            "come back as a stack output; render this tree again with them:",
            "",
            _sh(
                "cd path/to/railplan   # the checkout holding Pulumi.yaml",
                *_stack(tree, "aws"),
                "pulumi stack output hosts --json > hosts.json",
                "cd -   # back to this tree",
                'railplan render "$SPEC" --root . --addresses path/to/hosts.json',
            ),
        ]
    )


def _install(tree: _Tree) -> str:
    inv = tree.inventory
    plays = "\n".join(f"- `{p['hosts']}`: {p['name']}" for p in tree.plays)
    lines = [
        "First install",
        "",
        "Check that the inventory is what you expect and that Ansible reaches every server:",
        "",
        _sh(f"ansible-inventory -i {inv} --graph", f"ansible -i {inv} all -m ansible.builtin.ping"),
        "",
        "Then the entry playbook. On a new cluster no scheduler runs yet and nothing needs",
        "draining, so roll every node group at once:",
        "",
        _sh(tree.playbook("-e railplan_green_field=true", "-e railplan_rolling_batch=100%")),
        "",
        f"Its plays, in order (`playbooks/{tree.name}.yml` says more at its top); every run ends",
        "with acceptance (next section):",
        "",
        plays,
    ]
    if tree.spec.scheduler.kind == "slurm":
        lines += ["", "Slurm is up when every node is idle:", ""]
        lines.append(_sh(f"ansible -i {inv} slurm_controllers -m ansible.builtin.command -a sinfo"))
    return "\n".join(lines)


def _kubernetes(tree: _Tree) -> str:
    if tree.spec.scheduler.kind != "kubernetes":
        return ""
    lines = [
        "Kubernetes cluster services",
        "",
        "Once the servers have joined the cluster: the GPU Operator, scheduler topology,",
        "tenants and monitoring. With Pulumi, from the railplan checkout:",
        "",
        _sh(
            "cd path/to/railplan   # the checkout holding Pulumi.yaml", *_stack(tree, "kubernetes")
        ),
    ]
    if tree.has("files/k8s/README.md"):
        lines += [
            "",
            f"Or, for a GitOps repository, the same objects as files: `{tree.inventory}/files/k8s/`,",
            "applied in the order its `README.md` gives.",
        ]
    return "\n".join(lines)


def _acceptance_tag(tree: _Tree) -> str:
    """The tag of the play that runs the acceptance role (the rendered playbook's own)."""
    for play in tree.plays:
        if "acceptance" in playbook_roles([play]):
            return str(play["tags"][0])
    raise ValueError("the entry playbook has no acceptance play")  # the template always has one


def _fabric_host(tree: _Tree) -> str:
    """Where the acceptance role runs ibnetdiscover (its ``acceptance_fabric_host``).

    The first subnet manager, else the play's first server.
    """
    if uses_opensm(tree.spec):
        return sm_hosts(tree.plan)[0]
    return tree.plan.servers_in(tree.spec.node_groups[0].name)[0].name


def _acceptance(tree: _Tree) -> str:
    tag = _acceptance_tag(tree)
    lines = [
        "Acceptance",
        "",
        "The playbook's last play checks every server against the plan and railplan's",
        "predictions, read-only: GPUs, NVLink, HCA ports and rates, GPUDirect RDMA, `dcgmi diag`,",
        "per-rail RDMA bandwidth, nccl-tests on each node and across each SU. The thresholds",
        f"are the `acceptance_*` values in `{tree.inventory}/group_vars/`. To run it alone",
        "(after a repair; `-e acceptance_dcgm_diag_level=1` for a quick pass):",
        "",
        _sh(tree.playbook(f"--tags {tag}")),
    ]
    if tree.has("files/fabric/ACCEPTANCE.md"):
        dump = f"{tree.inventory}/files/fabric/discovered/{_fabric_host(tree)}.txt"
        lines += [
            "",
            f"It saves the fabric as `ibnetdiscover -p` sees it to `{dump}`.",
            "Compare it with the plan: exit 0 as planned, 1 with one finding per wrong cable",
            "and its fix (`--format csv` for work orders):",
            "",
            _sh(f'railplan verify "$SPEC" {dump}'),
        ]
    return "\n".join(lines)


def _canary(tree: _Tree) -> str:
    control = set(control_roll_order(tree.plan, tree.spec))
    first = tree.spec.node_groups[0].name
    hosts = [s.name for s in tree.plan.servers_in(first) if s.name not in control]
    return hosts[0] if hosts else tree.plan.servers[0].name


def _day2(tree: _Tree) -> str:
    sus = tree.plan.sus
    su = inventory_group("su", sus[0].name) if sus else tree.spec.node_groups[0].name
    return "\n".join(
        [
            "Day 2: change the cluster with a rolling update",
            "",
            "Edit the spec, see what changes, render, review, then roll: each node group one SU",
            "at a time, each host drained in the scheduler before its driver, kernel or MIG",
            "change and resumed after; the control hosts last, one at a time; acceptance at the",
            "end of each run. Start with one server, then its SU, then the rest:",
            "",
            _sh(
                'railplan diff path/to/deployed.yaml "$SPEC"   # the spec as deployed, and the new one',
                'railplan render "$SPEC" --root .',
                "git diff",
                tree.playbook(f"--limit {_canary(tree)}"),
                tree.playbook(f"--limit {su}"),
                tree.playbook(),
            ),
        ]
    )
