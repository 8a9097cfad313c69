"""Running the rendered playbook against the twin, and what the twin overrides.

The rendered tree is used as rendered. What the twin adds is what a real site adds, each
in an extra inventory directory (later ``-i`` sources win; a directory so its host_vars
outrank the rendered ones) or in the vault file, and listed here with the reason:

- connection: ``ansible_user: root`` with the twin's SSH key and no host-key checking
  (every twin host gets fresh host keys; a site has its own known_hosts);
- the site mirror (`mirror.py`): the CUDA, DOCA and mig-parted URLs, the signing keys'
  URLs and the nccl-tests repository, as an air-gapped site points them at its mirror;
- secrets through Ansible Vault, as the docs prescribe: ``slurm_munge_key`` and
  ``slurm_power_bmc_password`` (a vault file encrypted with a generated password);
  ``slurm_power_bmc_user``, the BMCs' operator account;
- ``slurm_files_dir``: the rendered ``files/slurm`` with one line added to slurm.conf,
  ``SlurmdParameters=config_overrides``, because a twin host has this machine's 2 cores and
  memory, not a DGX's: without it slurmd would register each node as drained (the hardware
  boundary; no other file changes).

The play's results come from the ``ansible.posix.json`` callback (one JSON document), as in
`make sandbox`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster_twin.mirror import MIRROR_URL, Versions
from tests.cluster_twin.network import SERVICE_IP
from tests.cluster_twin.proc import TwinError, run, tool

Doc = dict[str, Any]
BMC_USER = "railplan-power"


def site_vars(versions: Versions) -> dict[str, Any]:
    key = "railplan-twin-mirror.asc"
    return {
        "nvidia_driver_repo_url": f"{MIRROR_URL}/cuda/",
        "nvidia_driver_repo_gpg_key_url": f"{MIRROR_URL}/cuda/{key}",
        "rdma_doca_repo_url": f"{MIRROR_URL}/doca/",
        "rdma_doca_gpg_key_url": f"{MIRROR_URL}/doca/{key}",
        "mig_parted_package_url": (
            f"{MIRROR_URL}/mig/nvidia-mig-manager_{versions.mig_parted}-{versions.mig_revision}_amd64.deb"
        ),
        "nccl_tests_repo": f"git://{SERVICE_IP}/nccl-tests.git",
        "slurm_power_bmc_user": BMC_USER,
    }


def write_overrides(path: Path, key: Path, extra: dict[str, Any]) -> None:
    """An inventory source with no hosts of its own: its group_vars/all.yml applies to every
    host of the rendered inventory, whose hosts keep their inventory_dir (the rendered one:
    the roles find files/ through it)."""
    (path / "group_vars").mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(json.dumps({"all": {}}) + "\n")
    connection = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
    }
    (path / "group_vars" / "all.yml").write_text(
        json.dumps({**connection, **extra}, indent=1) + "\n"
    )


def write_vault(workdir: Path, bmc_password: str) -> tuple[Path, Path]:
    """The vault file with the munge key and BMC password, and its password file."""
    password_file = workdir / "vault-password"
    password_file.write_text(secrets.token_hex(16) + "\n")
    password_file.chmod(0o600)
    munge = subprocess.run(
        ["base64", "-w0"], input=os.urandom(1024), capture_output=True, check=True
    )
    plain = workdir / "vault.yml"
    plain.write_text(
        json.dumps(
            {"slurm_munge_key": munge.stdout.decode(), "slurm_power_bmc_password": bmc_password}
        )
    )
    run(
        [
            tool("ansible-vault") or "ansible-vault",
            "encrypt",
            "--vault-password-file",
            str(password_file),
            str(plain),
        ]
    )
    return plain, password_file


def twin_slurm_files(tree_files: Path, target: Path) -> Path:
    """files/slurm, with SlurmdParameters=config_overrides in slurm.conf (module docstring)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(tree_files, target)
    conf = target / "slurm.conf"
    text = conf.read_text()
    if not re.search(r"(?m)^SlurmdParameters=", text):
        text = text.replace(
            "\nInclude ",
            "\n# railplan twin: hosts have 2 cores\nSlurmdParameters=config_overrides\nInclude ",
            1,
        )
    conf.write_text(text)
    return target


@dataclass
class PlayResult:
    """One ansible-playbook run: its exit status, JSON document, log and wall time."""

    rc: int
    doc: Doc
    log: Path
    seconds: float

    def stats(self, host: str) -> dict[str, int]:
        stats: dict[str, int] = self.doc.get("stats", {}).get(host, {})
        return stats

    def failed_hosts(self) -> list[str]:
        stats = self.doc.get("stats", {})
        return sorted(h for h, s in stats.items() if s.get("failures") or s.get("unreachable"))

    def changed(self) -> dict[str, int]:
        return {
            h: s.get("changed", 0) for h, s in self.doc.get("stats", {}).items() if s.get("changed")
        }

    def results(self, task_name: str) -> dict[str, Doc]:
        """Per host, the result of every task named TASK_NAME (the last one wins)."""
        found: dict[str, Doc] = {}
        for play in self.doc.get("plays", []):
            for task in play.get("tasks", []):
                if task["task"]["name"] == task_name:
                    found.update(task.get("hosts", {}))
        return found

    def task_order(self, host: str) -> list[str]:
        """The tasks that ran on HOST (not skipped), in order, as "<play> / <task>"."""
        order = []
        for play in self.doc.get("plays", []):
            for task in play.get("tasks", []):
                result = task.get("hosts", {}).get(host)
                if result is not None and not result.get("skipped"):
                    order.append(f"{play['play']['name']} / {task['task']['name']}")
        return order

    def problems(self) -> list[str]:
        lines = []
        for play in self.doc.get("plays", []):
            for task in play.get("tasks", []):
                for host, result in sorted(task.get("hosts", {}).items()):
                    if result.get("failed") or result.get("unreachable"):
                        lines.append(f"{host}: {task['task']['name']}: {_message(result)}")
        return lines


def _message(result: dict[str, Any]) -> str:
    """A failed result's message; a loop's is its failed items' own (what the recap shows)."""
    items = [r for r in result.get("results", []) if isinstance(r, dict) and r.get("failed")]
    parts = [str(r.get("msg", "")) for r in items] or [str(result.get("msg", ""))]
    return "; ".join(p.strip().replace("\n", " ") for p in parts)[:400]


def run_playbook(
    tree: Path, inventory: Path, overrides: Path, vault: tuple[Path, Path], log: Path,
    args: list[str], timeout: float = 3600, play: Path | None = None,
) -> PlayResult:  # fmt: skip
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(tree / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_HOST_KEY_CHECKING="False",
    )
    env.pop("ANSIBLE_FORCE_COLOR", None)
    progress = log.with_suffix(".progress")
    progress.unlink(missing_ok=True)
    env.update(_progress_env(progress))
    cmd = [
        tool("ansible-playbook") or "ansible-playbook", "-i", str(inventory), "-i", str(overrides),
        "-e", f"@{vault[0]}", "--vault-password-file", str(vault[1]),
        str(play or tree / "playbooks" / f"{inventory.name}.yml"), *args,
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        try:
            proc = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=out,
                                  text=True, timeout=timeout, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            where = where_it_stopped(progress)
            out.write(f"\ntwin: killed after {timeout:.0f} s; {where}\n")
            raise TwinError(
                f"twin: ansible-playbook ran over its {timeout:.0f} s limit and was killed; "
                f"{where} (every task and result: {progress})"
            ) from None
        out.write(proc.stdout)
    seconds = time.monotonic() - started
    return PlayResult(proc.returncode, parse_json_output(proc.stdout, log), log, seconds)


def _progress_env(progress: Path) -> dict[str, str]:
    """Enable the twin's progress callback (tests/cluster_twin/callbacks), writing to ``progress``."""
    plugins = str(Path(__file__).resolve().parent / "callbacks")
    inherited = os.environ.get("ANSIBLE_CALLBACK_PLUGINS")
    return {
        "ANSIBLE_CALLBACK_PLUGINS": f"{plugins}:{inherited}" if inherited else plugins,
        "ANSIBLE_CALLBACKS_ENABLED": "railplan_twin_progress",
        "RAILPLAN_TWIN_PROGRESS": str(progress),
    }


def where_it_stopped(progress: Path) -> str:
    """From a progress file: the task running last and each host's last result, one line."""
    if not progress.exists():
        return "no task had started"
    running, results = "", {}
    for line in progress.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[1] in ("task", "handler"):
            running = f"running {fields[2]!r} since {fields[0]}"
        elif len(fields) == 4:
            stamp, status, host, task = fields
            results[host] = f"{host} {status} {task!r} at {stamp}"
    last = "; ".join(results[h] for h in sorted(results)) or "none"
    return f"{running or 'no task had started'}; last result per host: {last}"


def parse_json_output(text: str, log: Path) -> Doc:
    start = re.search(r"^\{", text, re.MULTILINE)
    if start is None:
        raise TwinError(f"twin: ansible-playbook printed no JSON document; see {log}")
    doc: Doc = json.JSONDecoder().raw_decode(text[start.start() :])[0]
    return doc
