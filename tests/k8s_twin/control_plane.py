"""Start and stop etcd and the three control-plane components on loopback.

`up` writes the certificates and kubeconfigs (`pki`), starts etcd, the API server, the
controller manager and the scheduler, each in its own session with its log in the work
directory, on free loopback ports, and waits until the API server's ``/readyz`` and the
others' ``/healthz`` answer ``ok``. It records each process's pid, command line and the
ports in ``state.json``, so ``down`` (in this process or a later one) stops exactly those
processes and nothing else: SIGTERM to each process group, SIGKILL after a grace period,
then a check that none is left. etcd speaks plain HTTP on loopback (only the API server
talks to it); everything else is TLS with client certificates.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.k8s_twin import pki, versions

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
READY_TIMEOUT_S = 300.0


class ControlPlaneError(RuntimeError):
    """The control plane did not come up (or go down); the message says which and why."""


def free_port() -> int:
    """A loopback TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _flags(workdir: Path, ports: dict[str, int]) -> dict[str, list[str]]:
    """Each component's command-line flags."""
    p, etcd_url = workdir / "pki", f"http://127.0.0.1:{ports['etcd']}"
    peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    auth = [
        "--authentication-kubeconfig={kc}",
        "--authorization-kubeconfig={kc}",
        "--kubeconfig={kc}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
    ]
    return {
        "etcd": [
            "--name=twin",
            f"--data-dir={workdir / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=twin={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['kube-apiserver']}",
            f"--cert-dir={workdir / 'apiserver-certs'}",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # The Service "kubernetes" would get a loopback endpoint, which validation refuses.
            "--endpoint-reconciler-type=none",
        ],
        "kube-controller-manager": [
            *[a.format(kc=workdir / "controller-manager.kubeconfig") for a in auth],
            f"--secure-port={ports['kube-controller-manager']}",
            f"--cert-dir={workdir / 'kcm-certs'}",
            f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--cluster-signing-cert-file={p / 'ca.crt'}",
            f"--cluster-signing-key-file={p / 'ca.key'}",
            "--use-service-account-credentials=true",
        ],
        "kube-scheduler": [
            *[a.format(kc=workdir / "scheduler.kubeconfig") for a in auth],
            f"--secure-port={ports['kube-scheduler']}",
        ],
    }


def _health_url(name: str, ports: dict[str, int]) -> str:
    if name == "etcd":
        return f"http://127.0.0.1:{ports['etcd']}/health"
    path = "/readyz" if name == "kube-apiserver" else "/healthz"
    return f"https://127.0.0.1:{ports[name]}{path}"


def _ssl_context(workdir: Path, name: str) -> ssl.SSLContext:
    """The API server is checked as the admin; the others' /healthz is open to anyone."""
    if name != "kube-apiserver":
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        return ctx
    ctx = ssl.create_default_context(cafile=str(workdir / "pki" / "ca.crt"))
    ctx.load_cert_chain(workdir / "pki" / "admin.crt", workdir / "pki" / "admin.key")
    return ctx


def _healthy(url: str, ctx: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
            body = resp.read().decode()
            return resp.status == 200 and (body.strip() == "ok" or '"health":"true"' in body)
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class ControlPlane:
    """One control plane in `workdir`; `up` then `down` (or `ControlPlane.load(dir).down()`)."""

    workdir: Path
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    cmdlines: dict[str, list[str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    @classmethod
    def load(cls, workdir: Path) -> ControlPlane:
        """The control plane a previous `up` recorded in `workdir`."""
        state = json.loads((workdir / "state.json").read_text())
        return cls(
            workdir, state["ports"], state["pids"], state["cmdlines"], state.get("timings", {})
        )

    def up(self) -> None:
        """Certificates, kubeconfigs, the four processes, each waited for in turn."""
        missing = versions.missing_binaries()
        if missing:
            raise ControlPlaneError(
                f"binaries not built: {', '.join(missing)} (run `make k8s-twin-build`)"
            )
        if self.state_file.exists() and any(
            _alive(p) for p in json.loads(self.state_file.read_text())["pids"].values()
        ):
            raise ControlPlaneError(f"{self.workdir} already runs a control plane: `down` it first")
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Every `up` is an empty cluster: a data directory left by an earlier run would
        # bring its objects back.
        shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
        pki.make_pki(self.workdir / "pki")
        self.ports = {n: free_port() for n in (*COMPONENTS, "etcd-peer")}
        server = f"https://127.0.0.1:{self.ports['kube-apiserver']}"
        for client in pki.CLIENTS:
            (self.workdir / f"{client}.kubeconfig").write_text(
                pki.kubeconfig(self.workdir / "pki", client, server)
            )
        self.timings["pki_s"] = round(time.monotonic() - started, 2)
        flags = _flags(self.workdir, self.ports)
        try:
            for name in COMPONENTS:
                self._start(name, flags[name])
                self._wait_healthy(name)
                self.timings[f"{name}_ready_s"] = round(time.monotonic() - started, 2)
        except BaseException:
            self.down()
            raise
        self.timings["up_s"] = round(time.monotonic() - started, 2)
        self._save()

    def _start(self, name: str, args: list[str]) -> None:
        self.start_process(name, [str(versions.bin_dir() / name), *args])

    def start_process(self, name: str, cmd: list[str]) -> None:
        """Start `cmd` as process `name` beside the control plane (a controller run against
        it): recorded like the four, so `down` stops it first, and logged to ``NAME.log``."""
        with (self.workdir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._procs[name], self.pids[name], self.cmdlines[name] = proc, proc.pid, cmd
        self._save()

    def _wait_healthy(self, name: str) -> None:
        url, ctx = _health_url(name, self.ports), _ssl_context(self.workdir, name)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if _healthy(url, ctx):
                return
            proc = self._procs[name]
            if proc.poll() is not None:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{tail}")
            time.sleep(0.25)
        raise ControlPlaneError(f"{name} not healthy at {url} within {READY_TIMEOUT_S:.0f} s")

    def _save(self) -> None:
        state = {
            "ports": self.ports,
            "pids": self.pids,
            "cmdlines": self.cmdlines,
            "timings": self.timings,
        }
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")

    def footprint(self) -> dict[str, dict[str, float]]:
        """Per process: resident memory now and at peak (MiB) and CPU seconds used so far."""
        out = {}
        tick = os.sysconf("SC_CLK_TCK")
        for name, pid in self.pids.items():
            status = _proc_status(pid)
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = {
                "rss_mib": round(status.get("VmRSS", 0) / 1024, 1),
                "peak_rss_mib": round(status.get("VmHWM", 0) / 1024, 1),
                "cpu_s": round((int(stat[11]) + int(stat[12])) / tick, 2),
            }
        return out

    def down(self, grace_s: float = 20.0) -> list[str]:
        """Stop the recorded processes in reverse start order, each waited for before the
        next (the API server shuts down cleanly only while etcd still answers); SIGKILL
        after `grace_s`. The names still alive afterwards (none)."""
        started = time.monotonic()
        for name in reversed(list(self.pids)):
            if not self._ours(name):
                continue
            _signal_group(self.pids[name], signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self._ours(name):
                time.sleep(0.05)
            if self._ours(name):
                _signal_group(self.pids[name], signal.SIGKILL)
                time.sleep(0.2)
            self.timings[f"{name}_stopped_s"] = round(time.monotonic() - started, 2)
        left = [n for n in self.pids if self._ours(n)]
        if not left and self.state_file.exists():
            self.state_file.unlink()
        return left

    def _ours(self, name: str) -> bool:
        """The recorded process is alive and still runs the recorded binary (no pid reuse)."""
        proc = self._procs.get(name)
        if proc is not None:
            return proc.poll() is None
        pid = self.pids[name]
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            return False
        return cmdline == self.cmdlines[name][0] and _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _proc_status(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            fields[key] = int(value.split()[0])
    return fields


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
