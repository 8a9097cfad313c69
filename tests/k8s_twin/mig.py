"""The MIG schedule's change run against the twin: the rendered script, and a MIG manager.

`run_change` runs what the rendered CronJob of one change runs: the script of the rendered
ConfigMap ``railplan-mig-scheduler`` with the CronJob container's environment (its GROUP,
CONFIG, SUS, timeouts; only POLL_SECONDS shortened), ``sh`` on this machine, with a
``kubectl`` that acts as the CronJob's ServiceAccount (impersonation by the admin
credentials, so the rendered ClusterRole is what allows or refuses each call). The script
cordons the group's nodes batch by batch, evicts their GPU pods, sets
``nvidia.com/mig.config`` and waits for ``nvidia.com/mig.config.state=success``.

`MigManager` is the GPU Operator's part, which the twin cannot run: a thread that watches the
MIG group's Nodes and, for a node whose ``nvidia.com/mig.config`` is set and whose state
label is gone (the script removes it with the same patch), reports the new layout as the
node would: the device plugin's capacity and allocatable (`nodes.gpu_resources` of that
config's per-GPU layout; a resource no longer advertised reads 0, as the kubelet reports a
device plugin's resources once they are gone), GPU feature discovery's MIG count labels,
and ``nvidia.com/mig.config.state=success``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any, Self

import yaml

from tests.k8s_twin import nodes, versions
from tests.k8s_twin.kubectl import KubectlError, kubectl

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = nodes.MIG_CONFIG_STATE
SCRIPT_KEY = "mig-change.sh"


def change_job(k8s_dir: Path, config: str) -> tuple[str, dict[str, str]]:
    """(script, environment) of the rendered CronJob that applies `config`."""
    script, env = "", {}
    for path in sorted(k8s_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "ConfigMap" and SCRIPT_KEY in doc.get("data", {}):
                script = doc["data"][SCRIPT_KEY]
            if doc.get("kind") == "CronJob" and _env(doc).get("CONFIG") == config:
                env = _env(doc)
    assert script and env, f"no rendered CronJob applies {config} in {k8s_dir}"
    return script, env


def _env(cronjob: dict[str, Any]) -> dict[str, str]:
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", [])}


def _kubectl_as(workdir: Path, kubeconfig: Path, namespace: str, account: str) -> Path:
    """A folder holding ``kubectl`` that runs the twin's kubectl as that ServiceAccount."""
    folder = workdir / "mig-change-bin"
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "kubectl"
    user = f"system:serviceaccount:{namespace}:{account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    as_groups = " ".join(f"--as-group={g}" for g in [*groups, "system:authenticated"])
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec "{versions.bin_dir() / "kubectl"}" --kubeconfig="{kubeconfig}" '
        f'--as="{user}" {as_groups} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return folder


def run_change(
    workdir: Path, kubeconfig: Path, k8s_dir: Path, config: str, timeout_s: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """Run the rendered change to `config` as its CronJob would; the finished process."""
    script, env = change_job(k8s_dir, config)
    path = workdir / f"mig-change-{config}.sh"
    path.write_text(script)
    folder = _kubectl_as(workdir, kubeconfig, "railplan-system", "railplan-mig-scheduler")
    run_env = {
        **{k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TZ")},
        **env,
        "POLL_SECONDS": "1",
        "HOME": str(workdir),
        "PATH": f"{folder}:/usr/bin:/bin",
    }
    return subprocess.run(
        ["sh", str(path)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


class MigManager:
    """The MIG manager's (and device plugin's) reports for one node group's Nodes."""

    def __init__(self, kubeconfig: Path, planned: nodes.Planned, group: str) -> None:
        self.kubeconfig, self.planned, self.group = kubeconfig, planned, group
        states = planned.plan.groups[group].mig.states
        self.layouts = {s.config: s.per_gpu for s in states}
        self.servers = {s.name: s for s in planned.plan.servers if s.group == group}
        every = [self.resources(c) for c in self.layouts]
        self.names = sorted({r for found in every for r in found})
        self.applied: list[tuple[str, str]] = []  # (node, config), in the order reported
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mig-manager", daemon=True)
        self.error: Exception | None = None

    def resources(self, config: str, server: str | None = None) -> dict[str, int]:
        """The GPU resources a node of the group advertises under `config`."""
        any_server = self.servers[server] if server else next(iter(self.servers.values()))
        split = dataclasses.replace(any_server, mig=self.layouts[config])
        return nodes.gpu_resources(self.planned, split)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
            except (KubectlError, ValueError, KeyError) as err:  # reported by the test
                self.error = err
                return
            self._stop.wait(1.0)

    def reconcile(self) -> None:
        """Apply the config asked of every node whose state label the change removed."""
        listing = kubectl(
            self.kubeconfig,
            ["get", "nodes", "-l", f"railplan.dev/node-group={self.group}", "-o", "json"],
        )
        for node in json.loads(listing)["items"]:
            labels = node["metadata"]["labels"]
            config = labels.get(CONFIG_LABEL)
            if config in self.layouts and STATE_LABEL not in labels:
                self.report(node["metadata"]["name"], config)

    def report(self, name: str, config: str) -> None:
        """Node `name` now has the layout of `config`: its capacity, then GFD's labels."""
        found = self.resources(config, name)
        advertised = {r: str(found.get(r, 0)) for r in self.names}
        status = {"status": {"capacity": advertised, "allocatable": advertised}}
        args = ["patch", "node", name, "--type=merge"]
        kubectl(self.kubeconfig, [*args, "--subresource=status", "-p", json.dumps(status)])
        counts: dict[str, str | None] = {
            f"{r}.count": (str(found[r]) if found.get(r) else None)
            for r in self.names
            if r.startswith("nvidia.com/mig-")
        }
        labels = {**counts, STATE_LABEL: "success"}
        kubectl(self.kubeconfig, [*args, "-p", json.dumps({"metadata": {"labels": labels}})])
        self.applied.append((name, config))


def node_resources(kubeconfig: Path, name: str) -> dict[str, str]:
    """The Node's allocatable now."""
    node = json.loads(kubectl(kubeconfig, ["get", "node", name, "-o", "json"]))
    return dict(node["status"]["allocatable"])
