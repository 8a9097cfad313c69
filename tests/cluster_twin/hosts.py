"""One twin host: its root (an overlay on the cached OS root), its hardware, its first boot.

The root is an overlayfs mount: the cached OS image read-only below, the host's own changes
above (``upper/``), so 22 hosts cost one image plus what each host installs. Before the
first boot the twin writes what provisioning leaves on a real server and nothing more: SSH
host keys and the operator's authorized key, the site's apt proxy, a provisioning hostname
(not the planned name: naming the host is the deployment's job), and the hardware layer
(`standins/`): the stand-in kernel (modules, boot loader, DKMS), its boot unit, the Python
shim for the /proc files this machine's kernel lacks, and ``hardware.json``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster_twin.mirror import MIRROR_URL, PROXY_URL, SERVICE_IP
from tests.cluster_twin.network import HostNet
from tests.cluster_twin.proc import run

STANDINS = Path(__file__).resolve().with_name("standins")
TWIN_LIB = "usr/lib/railplan-twin"
# Kernel-level tools the stand-in answers for; each is a dpkg diversion of the real path, so
# a package that ships the real one later installs it beside, not over, the stand-in.
KERNEL_TOOLS = {
    "usr/sbin/modprobe": "modprobe", "usr/sbin/rmmod": "rmmod", "usr/sbin/lsmod": "lsmod",
    "usr/sbin/modinfo": "modinfo", "usr/sbin/dkms": "dkms",
    "usr/sbin/update-initramfs": "update-initramfs", "usr/sbin/update-grub": "update-grub",
}  # fmt: skip
# What the image's boot loader passes before any role changes it (Ubuntu's default).
DEFAULT_CMDLINE = "BOOT_IMAGE=/vmlinuz root=/dev/twin ro quiet splash"
GRUB_DEFAULT = 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n'
# The last ExecStart: systemd-nspawn mounts the cgroup v1 controllers read-only (it makes
# them writable only with user namespaces), where a real machine's are writable: slurmd's
# proctrack/cgroup and task/cgroup create their hierarchy in them on the legacy hierarchy.
# (The unit's 219/CGROUP boots came from every host sharing one cgroup, fixed by
# `power.own_cgroups`, not by this order.)
# Wants=network.target: the twin addresses a host's eth0 from outside, standing in for
# netplan's systemd-networkd, and networkd pulls network.target into every boot. Without it
# nothing did, so its order meant nothing: slurmd (After=network-online.target) started before
# openibd (Before=network.target) brought the ConnectX management link up (run 11).
KERNEL_UNIT = """\
[Unit]
Description=railplan twin: the stand-in kernel's boot (modules, /proc/cmdline)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target network-pre.target openibd.service
Wants=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/mount --bind /var/lib/railplan-twin/booted-cmdline /proc/cmdline
ExecStart=/usr/lib/railplan-twin/bin/railplan-twin-boot
ExecStart=/bin/sh -c 'for d in $$(findmnt -rn -t cgroup -o TARGET); do mount -o remount,bind,rw "$$d"; done'

[Install]
WantedBy=sysinit.target
"""


@dataclass(frozen=True)
class TwinHost:
    """A planned server as the twin runs it."""

    name: str
    group: str
    su: str
    net: HostNet
    bmc_ip: str
    hostdir: Path
    os_name: str

    @property
    def root(self) -> Path:
        return self.hostdir / "root"

    @property
    def machine(self) -> str:
        return f"rptw{self.net.index}"


def mount_root(host: TwinHost, image: Path) -> None:
    for part in ("upper", "work", "root"):
        (host.hostdir / part).mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={image},upperdir={host.hostdir / 'upper'},workdir={host.hostdir / 'work'}"
    run(["mount", "-t", "overlay", "overlay", "-o", options, str(host.root)])


def unmount_root(host: TwinHost) -> None:
    run(["umount", "-l", str(host.root)], check=False)


def provision(
    host: TwinHost, authorized_key: str, mirror_key: Path, hardware: dict[str, Any]
) -> None:
    """Write what a provisioned server has before the deployment runs (module docstring)."""
    root = host.root
    for key in root.glob("etc/ssh/ssh_host_*"):
        key.unlink()
    run(["ssh-keygen", "-A", "-f", str(root)])
    ssh = root / "root/.ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh / "authorized_keys").write_text(authorized_key)
    (ssh / "authorized_keys").chmod(0o600)
    (root / "etc/hostname").write_text(f"twin-{host.net.index:04d}\n")
    (root / "etc/hosts").write_text(
        "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
    )
    (root / "etc/apt/apt.conf.d/01railplan-twin-proxy").write_text(
        f'Acquire::http::Proxy "{PROXY_URL}";\nAcquire::http::Proxy::{SERVICE_IP} "DIRECT";\n'
    )
    keyring = root / "etc/apt/keyrings/railplan-twin-kernel.asc"
    keyring.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(mirror_key, keyring)
    (root / "etc/apt/sources.list.d/railplan-twin-kernel.sources").write_text(
        f"Types: deb\nURIs: {MIRROR_URL}/kernel/\nSuites: ./\nSigned-By: /etc/apt/keyrings/railplan-twin-kernel.asc\n"
    )
    (root / "etc/default").mkdir(exist_ok=True)
    if not (root / "etc/default/grub").exists():
        (root / "etc/default/grub").write_text(GRUB_DEFAULT)
    install_hardware_layer(host, hardware)


def trust_each_other(hosts: list[TwinHost], key: Path) -> None:
    """Root on every host may SSH to every other by name or address with one cluster key, and
    knows their host keys: what mpirun over SSH needs (the acceptance role's SU test), and
    what a site sets up for its MPI users (a shared home, ssh_known_hosts)."""
    known = []
    for host in hosts:
        public = (host.root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
        known.append(f"{host.name},{host.net.mgmt_ip} {public[0]} {public[1]}\n")
    for host in hosts:
        ssh = host.root / "root/.ssh"
        shutil.copy(key, ssh / "id_ed25519")
        (ssh / "id_ed25519").chmod(0o600)
        with (ssh / "authorized_keys").open("a") as keys:
            keys.write(key.with_suffix(".pub").read_text())
        (host.root / "etc/ssh/ssh_known_hosts").write_text("".join(known))


def install_hardware_layer(host: TwinHost, hardware: dict[str, Any]) -> None:
    """The stand-ins (module docstring); re-run on an existing host, it refreshes them."""
    root = host.root
    lib = root / TWIN_LIB
    (lib / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDINS / "hw.py", lib / "hw.py")
    (lib / "hw.py").chmod(0o755)
    for tool in {
        *KERNEL_TOOLS.values(),
        "railplan-twin-boot",
        "railplan-twin-build-peermem",
        "railplan-twin-openibd-reload",
    }:
        link = lib / "bin" / tool
        link.unlink(missing_ok=True)
        link.symlink_to("../hw.py")
    divert_kernel_tools(root)
    (root / "etc/railplan-twin").mkdir(parents=True, exist_ok=True)
    (root / "etc/railplan-twin/hardware.json").write_text(json.dumps(hardware, indent=1) + "\n")
    for site in root.glob("usr/lib/python3*/"):
        dist = root / "usr/local/lib" / site.name / "dist-packages"
        dist.mkdir(parents=True, exist_ok=True)
        shutil.copy(STANDINS / "proc_shim.py", dist / "railplan_twin_proc.py")
        (dist / "railplan-twin-proc.pth").write_text("import railplan_twin_proc\n")
    unit = root / "etc/systemd/system/railplan-twin-kernel.service"
    unit.write_text(KERNEL_UNIT)
    wants = root / "etc/systemd/system/sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / unit.name).unlink(missing_ok=True)
    (wants / unit.name).symlink_to(f"/etc/systemd/system/{unit.name}")
    modules = root / "lib/modules" / os.uname().release  # the kernel's own module index files
    modules.mkdir(parents=True, exist_ok=True)
    for name in ("modules.builtin", "modules.order", "modules.dep"):
        (modules / name).touch()
    booted = root / "var/lib/railplan-twin/booted-cmdline"
    booted.parent.mkdir(parents=True, exist_ok=True)
    booted.touch()


def divert_kernel_tools(root: Path) -> None:
    for path in KERNEL_TOOLS:
        target = root / path
        if target.is_symlink() and str(target.readlink()).endswith("railplan-twin/hw.py"):
            continue
        run(["chroot", str(root), "dpkg-divert", "--quiet", "--local", "--rename",
             "--divert", f"/{path}.distrib", "--add", f"/{path}"])  # fmt: skip
        target.unlink(missing_ok=True)
        target.symlink_to(f"/{TWIN_LIB}/hw.py")


def host_config(host: TwinHost) -> dict[str, str]:
    """What power.py needs to boot the host (hostdir/host.json)."""
    unified = host.os_name == "ubuntu-22.04"  # see power.py: 24.04 boots v1 on this kernel
    return {
        "root": str(host.root),
        "machine": host.machine,
        "netns": host.net.netns,
        "cgroup_default": "unified" if unified else "legacy",
        "cmdline_default": DEFAULT_CMDLINE,
    }


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
# Each host's systemd, journald, logind, dbus and udev hold inotify instances (about 8 a host
# here), counted against one user (root) on this machine: at the kernel's default 128 the
# 22 hosts of an SU booted with path units failed ("Result: resources") and logind's "Too
# many open files". Container hosts raise it the same way (LXD's production setup: 1024+).
INOTIFY_PER_HOST = 16
INOTIFY_BASE = 256  # this machine's own users of inotify


def raise_inotify_limit(host_count: int) -> tuple[int, int] | None:
    """Raise ``fs.inotify.max_user_instances`` for ``host_count`` hosts; (old, new) if raised.

    Left raised afterwards, as a container host keeps it: lowering it under another user's
    running containers would break them.
    """
    need = INOTIFY_BASE + INOTIFY_PER_HOST * host_count
    current = int(INOTIFY_INSTANCES.read_text())
    if current >= need:
        return None
    INOTIFY_INSTANCES.write_text(f"{need}\n")
    return current, need
