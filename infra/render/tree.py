"""The whole rendered tree of one cluster, as relative path -> bytes (written by `writer`).

Puts together the Ansible files (`infra.render.ansible`), the static roles, and the files a
deployment reads from `inventories/<name>/files/`: cabling, BOM and address plan (CSV),
Slurm's topology and GRES files, the subnet manager's and SHARP aggregation manager's
configuration, the NCCL environment per node group, and for a Kubernetes spec the manifests
of its cluster services (`infra.k8s`, the builder the Pulumi program declares); last, from
all of these, the runbook (`infra.render.runbook`). A pure function: the same spec and
catalog give the same bytes.
"""

from __future__ import annotations

from infra.catalog import Catalog
from infra.gc_pause import paused_gc
from infra.k8s import build_kubernetes
from infra.progress import Progress, quiet
from infra.render.ansible import ansible_files
from infra.render.fabric_validators import fabric_files
from infra.render.k8s_manifests import k8s_files, rules_file
from infra.render.nccl_env import nccl_env_files
from infra.render.runbook import runbook, runbook_path
from infra.render.sheets import bom_csv, cabling_csv, etc_hosts, hosts_csv
from infra.render.slurm_conf import slurm_files
from infra.render.subnet_manager import subnet_manager_files
from infra.render.templating import render_template, role_files
from infra.spec import Spec
from infra.topology.model import Plan

__all__ = ["render_tree"]


RENDER_STEPS = ("inventory and playbook", "sheets and fabric files", "manifests and roles")


def render_tree(
    spec: Spec, catalog: Catalog, plan: Plan, progress: Progress = quiet
) -> dict[str, bytes]:
    """Every file of the rendered tree of ``spec`` (``progress`` hears `RENDER_STEPS`)."""
    with paused_gc():  # millions of short-lived lists and tuples beside a large plan
        return _render_tree(spec, catalog, plan, progress)


def _render_tree(spec: Spec, catalog: Catalog, plan: Plan, progress: Progress) -> dict[str, bytes]:
    total = len(RENDER_STEPS)
    progress(RENDER_STEPS[0], 0, total)
    tree = _Files()
    tree.add_all("", ansible_files(spec, catalog, plan))
    progress(RENDER_STEPS[1], 1, total)
    tree.add(".ansible-lint", render_template("ansible/ansible-lint.j2"))
    tree.add(".gitignore", "# Ansible's fact cache and temporary files (ansible.cfg)\n.cache/\n")
    files_dir = f"inventories/{spec.name}/files"
    # the fabric files first: making them needs the most memory besides their text
    tree.add_all(f"{files_dir}/fabric/", fabric_files(plan, spec, catalog))  # ibdiagnet, UFM CVT
    tree.add(f"{files_dir}/cabling.csv", cabling_csv(plan))
    tree.add(f"{files_dir}/bom.csv", bom_csv(plan, catalog))
    tree.add(f"{files_dir}/hosts.csv", hosts_csv(plan))
    tree.add(f"{files_dir}/etc-hosts", etc_hosts(plan))
    sections = {
        "nccl": nccl_env_files(plan, spec, catalog),
        "subnet-manager": subnet_manager_files(plan, spec, catalog),
        "slurm": slurm_files(plan, spec, catalog) if spec.scheduler.kind == "slurm" else {},
        # every cluster: Slurm hosts run dcgm-exporter too, and their Prometheus loads this
        "monitoring": {"railplan-gpu.rules.yml": rules_file(spec)},
    }
    for section, named in sections.items():
        tree.add_all(f"{files_dir}/{section}/", named)
    progress(RENDER_STEPS[2], 2, total)
    if spec.scheduler.kind == "kubernetes":
        tree.add_all(f"{files_dir}/", k8s_files(build_kubernetes(spec, plan, catalog)))
    tree.add(runbook_path(spec.name), runbook(spec, catalog, plan, tree))
    tree.update(role_files())
    progress("rendered", total, total)
    return dict(sorted(tree.items()))


class _Files(dict[str, bytes]):
    """The tree as it is rendered, each text encoded as it comes.

    A large cluster's sheets and fabric files are tens of megabytes each; the tree holds
    each of them once, not as text and bytes both.
    """

    def add(self, path: str, text: str) -> None:
        self[path] = text.encode("utf-8")

    def add_all(self, prefix: str, texts: dict[str, str]) -> None:
        """Add ``texts`` under ``prefix``, letting go of each text once it is encoded."""
        for name in list(texts):
            self.add(prefix + name, texts.pop(name))
