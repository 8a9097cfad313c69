"""`ClusterTwin`: a spec's rendered deployment stood up as a cluster on this machine.

``up()`` renders the spec (``railplan render``), builds or reuses the OS root and the site
mirror, creates the networks, mounts and provisions one root per planned server, starts its
BMC and powers it on through the BMC (``ipmitool chassis power on``, as an operator would),
then waits for every host's sshd. ``down()`` powers everything off and removes what ``up``
made, also after a killed run (`network.teardown_all`, mounts found by prefix).

Scenarios drive it with `playbook` (the rendered entry playbook, real ``ansible-playbook``
over SSH), `ssh` (a command on a host, as the operator), `ipmitool`, `set_faults` (the
hardware stand-ins' fault file) and `slurm` (a Slurm client command on the controller).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from ipaddress import IPv4Network
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import yaml

from infra.catalog.distro_slurm import distro_slurm
from tests.cluster_twin import bmc, hosts, mirror, network, power, roots
from tests.cluster_twin.ansible_run import (
    BMC_USER,
    PlayResult,
    run_playbook,
    site_vars,
    twin_slurm_files,
    write_overrides,
    write_vault,
)
from tests.cluster_twin.hosts import TwinHost
from tests.cluster_twin.proc import TwinError, run, tool

REPO = Path(__file__).resolve().parents[2]
TOOLS = ["systemd-nspawn", "ipmi_sim", "ipmitool", "apt-ftparchive", "dpkg-deb", "gpg",
         "ansible-playbook", "ansible-vault", "ssh", "chroot"]  # fmt: skip


LOCK = Path("/run/railplan-twin.lock")
# A green-field install is each host's own package work, and on two cores the hosts share
# them: the one-SU twin (22 hosts) did not finish its install within the lab's one hour with
# the machine at a load of 25 (6 December); 6 minutes per host gives it 2.2 hours.
PLAY_S_PER_HOST = 360.0


def exclusive() -> IO[str]:
    """This process's claim on the machine's twin: twins share the bridge, the namespaces'
    names and the service address, so a second one would tear the first one's network down
    (``make test``'s smoke test beside ``make cluster-twin`` did)."""
    handle = LOCK.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "another process"
        handle.close()
        raise TwinError(
            f"twin: a twin already runs on this machine ({owner}); wait for it to end", 2
        ) from None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}\n")
    handle.flush()
    return handle


def _keypair(key: Path, comment: str) -> Path:
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
    return key


def _kill_left_over(hosts_dir: Path) -> None:
    """Every boot loop and container still running from HOSTS_DIR (loops first, so none
    boots again): the backstop for a host whose loop `down` did not see (once after the
    smoke test, one host's loop and its nspawn outlived the twin)."""
    for pattern in ("power.py boot", "systemd-nspawn"):
        for proc in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError, ValueError):
                argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if pattern in argv and str(hosts_dir) in argv:
                    os.kill(int(proc.name), signal.SIGKILL)
        time.sleep(0.5)


def preflight() -> None:
    if os.geteuid() != 0:
        raise TwinError("twin: needs root (namespaces, mounts, nspawn)", 2)
    missing = [t for t in TOOLS if tool(t) is None]
    if not os.access(roots.DEBOOTSTRAP, os.X_OK):
        missing.append("debootstrap")
    if missing:
        raise TwinError(f"twin: missing {' '.join(missing)} (make tools installs them)", 2)


class ClusterTwin:
    """The twin of one spec; a context manager (``with ClusterTwin(...) as twin``)."""

    def __init__(
        self,
        spec: Path,
        workdir: Path,
        *,
        extra_drivers: Iterable[str] = (),
        openibd_reload_s: int = 150,
        openibd_later_s: int | None = None,
    ) -> None:
        preflight()
        self.lock = exclusive()
        self.openibd_reload_s = openibd_reload_s
        self.openibd_later_s = openibd_later_s
        self.spec_path = spec.resolve()
        self.workdir = workdir.resolve()
        self.extra_drivers = tuple(extra_drivers)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.hosts: dict[str, TwinHost] = {}
        self.timings: dict[str, float] = {}

    # --- up -------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        if not os.environ.get("RAILPLAN_TWIN_KEEP"):
            self.down()

    def up(self) -> None:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tree = self.render()
        self.inventory = next(p for p in (self.tree / "inventories").iterdir() if p.is_dir())
        self.all_vars = self.group_vars("all")
        self.spec = yaml.safe_load(self.spec_path.read_text())
        self.os_name = self.spec.get("software", {}).get("os", "ubuntu-22.04")
        self.image = roots.ensure_root(self.os_name, self.workdir / "debootstrap.log")
        self.timings["image_s"] = time.monotonic() - started
        self.versions = self.pinned_versions()
        mirror.build_mirror(self.workdir / "mirror", self.versions, roots.cache_dir() / "gpg")
        self.key = self.ssh_key()
        self.hosts = self.plan_hosts()
        self.start_network()
        self.bmc_password = secrets.token_hex(8)  # IPMI 2.0 passwords hold at most 20 bytes
        self.bmc_password_file = self.workdir / "bmc-password"
        self.bmc_password_file.write_text(self.bmc_password + "\n")
        self.fabric_dump = self.discover_fabric()
        for host in self.hosts.values():
            self.create_host(host)
        hosts.trust_each_other(list(self.hosts.values()), self.cluster_key())
        self.record_pids()
        self.write_ansible_inputs()
        self.raise_inotify_limit()
        for weighed in power.weigh_hosts(len(self.hosts)):
            print(f"twin: {weighed}", file=sys.stderr)
        self.power_all("on")
        self.wait_ssh(self.hosts.values())
        self.on_all(
            "apt-get -qq update"
        )  # provisioning's last step, as cloud-init's package_update
        self.timings["up_s"] = time.monotonic() - started

    def raise_inotify_limit(self) -> None:
        """Room for every host's inotify instances (`hosts.raise_inotify_limit`), or why not."""
        try:
            raised = hosts.raise_inotify_limit(len(self.hosts))
        except OSError as err:  # a read-only /proc/sys: a small twin still fits the default
            print(f"twin: fs.inotify.max_user_instances not raised: {err}", file=sys.stderr)
            return
        if raised is not None:
            print(
                f"twin: fs.inotify.max_user_instances {raised[0]} -> {raised[1]}", file=sys.stderr
            )

    def resume(self) -> None:
        """Attach to a twin that ``up`` left running in the same work directory."""
        self.tree = self.workdir / "tree"
        self.inventory = next(p for p in (self.tree / "inventories").iterdir() if p.is_dir())
        self.all_vars = self.group_vars("all")
        self.spec = yaml.safe_load(self.spec_path.read_text())
        self.os_name = self.spec.get("software", {}).get("os", "ubuntu-22.04")
        self.image = roots.root_path(self.os_name)
        self.versions = self.pinned_versions()
        self.key = self.workdir / "id_ed25519"
        self.hosts = self.plan_hosts()
        self.bmc_password_file = self.workdir / "bmc-password"
        self.bmc_password = self.bmc_password_file.read_text().strip()
        self.overrides = self.workdir / "overrides"
        self.vault = (self.workdir / "vault.yml", self.workdir / "vault-password")

    def rerender(self, spec_text: str) -> None:
        """The operator's day-2 step: an edited spec, rendered over the same tree."""
        edited = self.workdir / f"{self.spec_path.stem}-edited.yaml"
        edited.write_text(spec_text)
        self.spec_path = edited
        self.render()
        self.all_vars = self.group_vars("all")
        self.write_ansible_inputs()

    def render(self) -> Path:
        tree = self.workdir / "tree"
        railplan = os.environ.get("RAILPLAN_TWIN_RAILPLAN") or tool("railplan") or "railplan"
        cmd = [railplan, "render", str(self.spec_path), "--root", str(tree), "--force"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise TwinError(f"twin: railplan render failed: {proc.stdout}{proc.stderr}")
        return tree

    def group_vars(self, group: str) -> dict[str, Any]:
        path = self.inventory / "group_vars" / f"{group}.yml"
        data: dict[str, Any] = yaml.safe_load(path.read_text()) if path.exists() else {}
        return data or {}

    def pinned_versions(self) -> mirror.Versions:
        v = self.all_vars
        driver = str(v.get("nvidia_driver_version", "550.90.07"))
        return mirror.Versions(
            drivers=(driver, *self.extra_drivers),
            dcgm=str(v.get("dcgm_version", "3.3.6")),
            nccl=str(v.get("nccl_version", "2.21.5")),
            cuda=str(v.get("nccl_cuda_version", "12.4")),
            doca=str(v.get("rdma_doca_version", "2.7.0")),
        )

    def ssh_key(self) -> Path:
        """The operator's key (the inventory's connection)."""
        return _keypair(self.workdir / "id_ed25519", "railplan-twin")

    def discover_fabric(self) -> str:
        """What ``ibnetdiscover -p`` shows on the planned fabric: the fabric twin's real
        ibsim, opensm and infiniband-diags on the rendered netlist (the hosts' stand-in
        ibnetdiscover prints it)."""
        from infra.catalog import load_catalog
        from tests.fabric_twin import FabricTwin

        workdir = self.workdir / "fabric"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir()
        with FabricTwin(self.spec_path.read_text(), load_catalog(), workdir) as fabric:
            fabric.opensm()
            return fabric.dump("ibnetdiscover-p.txt", "ibnetdiscover", "-p").read_text()

    def cluster_key(self) -> Path:
        """Root's key on every host (hosts.trust_each_other), not the operator's."""
        return _keypair(self.workdir / "cluster_id_ed25519", "twin-cluster")

    def plan_hosts(self) -> dict[str, TwinHost]:
        site = self.spec.get("site", {})
        cidr = IPv4Network(site.get("management_cidr", "10.0.0.0/16"))
        block_prefix = self.block_prefix(cidr)
        found: dict[str, TwinHost] = {}
        with (self.inventory / "files" / "hosts.csv").open() as rows:
            for index, row in enumerate(csv.DictReader(rows), start=1):
                gateway = network.block_gateway(row["mgmt_ip"], cidr, block_prefix)
                net = network.HostNet(index, row["mgmt_ip"], gateway, cidr.prefixlen)
                hostdir = self.workdir / "hosts" / row["name"]
                found[row["name"]] = TwinHost(row["name"], row["group"], row["su"], net,
                                              row["bmc_ip"], hostdir, self.os_name)  # fmt: skip
        return found

    def block_prefix(self, cidr: IPv4Network) -> int | None:
        from infra.spec import load_spec_text
        from infra.topology.addressing import blocks

        spec = load_spec_text(self.spec_path.read_text(), str(self.spec_path)).spec
        found = blocks(cidr, spec)
        return found[0].network.prefixlen if found else None

    def start_network(self) -> None:
        network.teardown_all()
        gateways = [h.net.gateway for h in self.hosts.values()]
        prefix = next(iter(self.hosts.values())).net.prefix
        network.create_links(gateways, prefix, [h.bmc_ip for h in self.hosts.values()])
        for host in self.hosts.values():
            network.create_host(host.net)
        self.procs.append(mirror.start_proxy(self.workdir))
        self.procs.append(mirror.start_http(self.workdir / "mirror", self.workdir / "http.log"))
        self.procs.append(mirror.start_git(self.workdir / "mirror", self.workdir / "git.log"))

    def create_host(self, host: TwinHost) -> None:
        if host.hostdir.exists():
            hosts.unmount_root(host)
            shutil.rmtree(host.hostdir)
        host.hostdir.mkdir(parents=True)
        hosts.mount_root(host, self.image)
        mirror_key = roots.cache_dir() / "gpg" / "railplan-twin-mirror.asc"
        hosts.provision(
            host, self.key.with_suffix(".pub").read_text(), mirror_key, self.hardware(host)
        )
        (host.root / "etc/railplan-twin/ibnetdiscover-p.txt").write_text(self.fabric_dump)
        (host.hostdir / "host.json").write_text(json.dumps(hosts.host_config(host), indent=1))
        self.procs.append(
            bmc.start(host.name, host.bmc_ip, BMC_USER, self.bmc_password, host.hostdir)
        )

    def hardware(self, host: TwinHost) -> dict[str, Any]:
        """The host's hardware as planned: a healthy server of its node group."""
        g = self.group_vars(host.group)
        devices = list(g.get("nccl_ib_hca", []))
        rate = int(g.get("acceptance_ib_rate_gbps", 200))
        return {
            "host": host.name,
            "gpu": {"count": int(g.get("railplan_gpus_per_node", 8)),
                    "name": g.get("acceptance_gpu_name", "NVIDIA A100-SXM4-80GB"),
                    "nvlinks": int(g.get("acceptance_nvlink_links_per_gpu", 12)), "nvlink_GBps": 25},
            "hcas": [{"name": d, "rate_gbps": rate, "lid": 100 * host.net.index + i,
                      "guid": f"0x{0x1070fd0300000000 + (host.net.index << 8) + i:016x}"}
                     for i, d in enumerate(devices)],
            "mgmt_on_connectx": True,  # DGX: in-band management on the ConnectX storage/in-band NICs
            "mgmt_gateway": host.net.gateway,  # what the host's netplan routes through (openibd)
            "openibd_reload_s": self.openibd_outage_s(host.name),
            "nccl": {"node_busbw_GBps": float(g.get("acceptance_node_expected_busbw_gbytes_per_s", 0)),
                     "su_busbw_GBps": float(g.get("acceptance_su_expected_busbw_gbytes_per_s", 0))},
        }  # fmt: skip

    def openibd_outage_s(self, name: str) -> int:
        """How long openibd's restart keeps NAME off the network: ``openibd_reload_s`` on the
        first host the roll-out reaches (the first that is not a control host), and
        ``openibd_later_s`` (when given) on the others, since one outage longer than ssh's
        keep-alive shows what the rest would repeat (each long one costs a batch its length)."""
        if "RAILPLAN_TWIN_OPENIBD_RELOAD_S" in os.environ:
            return int(os.environ["RAILPLAN_TWIN_OPENIBD_RELOAD_S"])
        control = set(self.control_hosts())
        first = next((h for h in self.hosts if h not in control), None)
        if self.openibd_later_s is None or name == first:
            return self.openibd_reload_s
        return self.openibd_later_s

    def write_ansible_inputs(self) -> None:
        self.overrides = self.workdir / "overrides"
        slurm_files = self.inventory / "files" / "slurm"
        extra = site_vars(self.versions)
        railplan = os.environ.get("RAILPLAN_TWIN_RAILPLAN") or tool("railplan") or "railplan"
        extra["acceptance_fabric_verify_command"] = [railplan, "verify", str(self.spec_path)]
        if slurm_files.is_dir():
            extra["slurm_files_dir"] = str(
                twin_slurm_files(slurm_files, self.workdir / "slurm-files")
            )
        write_overrides(self.overrides, self.key, extra)
        if not (self.workdir / "vault.yml").exists():
            write_vault(self.workdir, self.bmc_password)
        self.vault = (self.workdir / "vault.yml", self.workdir / "vault-password")

    # --- power and reachability --------------------------------------------------------------

    def ipmitool(
        self, host: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        address = self.hosts[host].bmc_ip
        return run(bmc.ipmitool(address, BMC_USER, self.bmc_password_file, *args), check=check)

    def power_all(self, state: str) -> None:
        for host in self.hosts.values():
            bmc.wait_ready(host.bmc_ip, BMC_USER, self.bmc_password_file)
            self.ipmitool(host.name, "chassis", "power", state)

    def powered(self, host: str) -> bool:
        return power.loop_pid(self.hosts[host].hostdir) is not None

    def wait_ssh(self, targets: Iterable[TwinHost], timeout: float = 300) -> None:
        pending = {h.name for h in targets}
        deadline = time.monotonic() + timeout
        while pending:
            for name in sorted(pending):
                if self.ssh(
                    name, "systemctl is-system-running --wait", check=False, timeout=30
                ).returncode in (0, 1):
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise TwinError(f"twin: no SSH after {timeout:.0f} s: {', '.join(sorted(pending))}")
            if pending:
                time.sleep(1)

    def ssh_argv(self, host: str, command: str) -> list[str]:
        return ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", "-o", "BatchMode=yes",
                f"root@{self.hosts[host].net.mgmt_ip}", command]  # fmt: skip

    def ssh(
        self, host: str, command: str, *, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = self.ssh_argv(host, command)
        try:
            return run(argv, check=check, timeout=timeout)
        except subprocess.TimeoutExpired:
            if check:
                raise
            return subprocess.CompletedProcess(argv, 255, "", "timeout")

    def on_all(self, command: str, timeout: float = 300) -> None:
        """Run COMMAND on every host at once; raise naming the hosts where it failed."""
        procs = {name: subprocess.Popen(self.ssh_argv(name, command), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
                 for name in self.hosts}  # fmt: skip
        failed = []
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                failed.append(f"{name}: {out.strip()[-300:]}")
        if failed:
            raise TwinError(f"twin: `{command}` failed on " + "; ".join(failed))

    # --- scenarios' tools -------------------------------------------------------------------

    def playbook(self, *args: str, name: str = "play", timeout: float | None = None) -> PlayResult:
        """One run of the entry playbook; by default it may take PLAY_S_PER_HOST per host, at
        least an hour (the lab's install takes 16-20 minutes, most of it the hosts' own work)."""
        limit = timeout if timeout is not None else max(3600.0, PLAY_S_PER_HOST * len(self.hosts))
        return self._timed(name, list(args), timeout=limit)

    def playbook_adhoc(
        self, pattern: str, module: str, args: str = "", name: str = "adhoc"
    ) -> PlayResult:
        """An ad-hoc module run, as ``ansible PATTERN -m MODULE``, through the same inventory."""
        play = self.workdir / f"{name}.yml"
        task = {"name": f"Run {module}.", module: args or None}
        play.write_text(json.dumps([{"name": "Ad-hoc.", "hosts": pattern, "gather_facts": False,
                                     "tasks": [task]}]))  # fmt: skip
        return self._timed(name, [], play=play)

    def play_roles(self, pattern: str, roles: list[str], name: str) -> PlayResult:
        """One play of the tree's roles on PATTERN, as the entry playbook's own play does it
        (an operator re-applying one stage: ``roles: [slurm]`` after a changed slurm.conf)."""
        play = self.workdir / f"{name}.yml"
        play.write_text(json.dumps([{"name": f"Apply {', '.join(roles)}.", "hosts": pattern,
                                     "become": True, "roles": [{"role": r} for r in roles]}]))  # fmt: skip
        return self._timed(name, [], play=play)

    def _timed(self, name: str, args: list[str], **kwargs: Any) -> PlayResult:
        """Run a playbook, its log in logs/NAME.log and its wall time in timings.json."""
        log = self.workdir / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        result = run_playbook(self.tree, self.inventory, self.overrides, self.vault, log, args,
                              **kwargs)  # fmt: skip
        self.timings[f"play_{name}_s"] = round(result.seconds, 1)
        (self.workdir / "timings.json").write_text(json.dumps(self.timings, indent=1) + "\n")
        return result

    def controller(self) -> str:
        """The Slurm controller: the rendered inventory's slurm_controllers host."""
        hosts = json.loads((self.inventory / "hosts.yml").read_text())["all"]["children"]
        return next(iter(hosts["slurm_controllers"]["hosts"]))

    def expected_slurm_version(self) -> str:
        """The Slurm version the target OS's archive ships (infra.catalog.distro_slurm)."""
        found = distro_slurm(self.os_name)
        assert found is not None, self.os_name
        return found.version

    def control_hosts(self) -> list[str]:
        hosts = json.loads((self.inventory / "hosts.yml").read_text())["all"]["children"]
        return list(hosts.get("control_hosts", {}).get("hosts", {}))

    def slurm_conf(self) -> str:
        return (self.inventory / "files" / "slurm" / "slurm.conf").read_text()

    def power_on_times(self, host: str, since: float) -> float:
        """When the host was last powered on after SINCE (its console log), as a timestamp."""
        found = 0.0
        for line in (self.hosts[host].hostdir / "console.log").read_text().splitlines():
            if line.startswith("--- power on "):
                stamp = float(line.split()[3])
                if stamp >= since - 1:
                    found = stamp
        return found

    def first_host(self) -> str:
        return next(iter(self.hosts))

    def set_faults(self, host: str, faults: dict[str, Any]) -> None:
        path = self.hosts[host].root / "etc/railplan-twin/faults.json"
        path.write_text(json.dumps(faults) + "\n")

    def calls(self, host: str) -> list[str]:
        """The stand-ins' call log of HOST (time, tool, arguments), oldest first."""
        path = self.hosts[host].root / "var/log/railplan-twin/calls.log"
        return path.read_text().splitlines() if path.exists() else []

    # --- down -----------------------------------------------------------------------------

    def record_pids(self) -> None:
        (self.workdir / "pids").write_text("".join(f"{p.pid}\n" for p in self.procs))

    def down(self) -> None:
        pids = self.workdir / "pids"
        if pids.exists():  # a twin that `up` left running in an earlier process
            for line in pids.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGTERM)
            pids.unlink()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            live = [h for h in self.hosts.values() if power.loop_pid(h.hostdir)]
            if not live:
                break
            # again while any loop lives: a host that was rebooting when the power was cut
            # boots once more before its loop sees the cut (it outlived `down` once)
            for host in live:
                with contextlib.suppress(ProcessLookupError):
                    power.power_off(host.hostdir, soft=False)
            time.sleep(1)
        _kill_left_over(self.workdir / "hosts")
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for host in self.hosts.values():
            hosts.unmount_root(host)
        network.teardown_all()
        self.lock.close()  # releases the claim
