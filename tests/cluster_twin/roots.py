"""Cached target-OS roots: Ubuntu 22.04 (jammy) and 24.04 (noble) built with debootstrap.

A root is the site's OS image before railplan's roles run: a minimal Ubuntu with systemd,
sshd and Python (what Ansible needs), plus the toolchain and Open MPI that a DGX OS image
ships (the nccl role builds nccl-tests with them; installing them on 22 hosts through the
proxy would be most of the twin's run time). Everything railplan's roles install (munge,
Slurm, the NVIDIA and DOCA stand-in packages, ipmitool, perftest) is not in it, so a fresh
install really installs it.

Built once per (suite, mirror, package list, layout) into a sibling temp dir and renamed into
``$RAILPLAN_TWIN_CACHE`` (default ``/var/tmp/railplan-twin/cache``), so an interrupted build
leaves no half cache. Debian 12's debootstrap knows no ``noble`` script; Ubuntu's suites
since 7.10 share the ``gutsy`` script, which is passed explicitly. Debian packages no Ubuntu
keyring, hence ``--no-check-gpg`` (the archive is reached over plain HTTP either way; the
hosts' own apt then verifies with the keyring debootstrap installed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.cluster_twin.proc import TwinError, run

DEBOOTSTRAP = "/usr/sbin/debootstrap"
SCRIPT = "/usr/share/debootstrap/scripts/gutsy"
MIRROR = os.environ.get("RAILPLAN_TWIN_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu")
SUITES = {"ubuntu-22.04": "jammy", "ubuntu-24.04": "noble"}
# debootstrap's own dependency resolution handles these (all in main).
BASE = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt",
    "iproute2", "ca-certificates", "gnupg", "kmod", "iputils-ping", "less", "sudo",
    "python3-yaml",
]  # fmt: skip
# The site image's toolchain, installed with apt after debootstrap (universe for Open MPI).
IMAGE = ["build-essential", "git", "openmpi-bin", "libopenmpi-dev"]
# Bump when prepare() changes, so older caches are not reused.
LAYOUT = "1"
ATTEMPTS = 3


def cache_dir() -> Path:
    return Path(os.environ.get("RAILPLAN_TWIN_CACHE", "/var/tmp/railplan-twin/cache"))


def root_path(os_name: str) -> Path:
    """Where the cached root of OS_NAME (a spec's ``software.os``) lives."""
    suite = suite_of(os_name)
    key = hashlib.sha256(" ".join([suite, MIRROR, *BASE, *IMAGE, LAYOUT]).encode())
    return cache_dir() / f"{suite}-{key.hexdigest()[:12]}"


def suite_of(os_name: str) -> str:
    if os_name not in SUITES:
        known = ", ".join(sorted(SUITES))
        raise TwinError(f"twin: no root for os {os_name!r}; the twin builds {known}", 2)
    return SUITES[os_name]


def ensure_root(os_name: str, log: Path) -> Path:
    """The cached root of OS_NAME, built first if missing (about 3-5 minutes)."""
    target = root_path(os_name)
    if (target / "usr/bin/python3").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
    started = time.monotonic()
    try:
        root = build / "root"
        debootstrap(suite_of(os_name), root, log)
        install_image(root, log)
        prepare(root)
        root.rename(target)
    finally:
        remove_tree(build)
    print(f"twin: built {target.name} in {time.monotonic() - started:.0f} s", flush=True)
    return target


def debootstrap(suite: str, root: Path, log: Path) -> None:
    args = [
        DEBOOTSTRAP, "--variant=minbase", "--components=main,universe", "--no-check-gpg",
        "--include=" + ",".join(BASE), suite, str(root), MIRROR, SCRIPT,
    ]  # fmt: skip
    for attempt in range(1, ATTEMPTS + 1):  # a mirror hiccup should not fail CI
        remove_tree(root)
        with log.open("a") as out:
            if subprocess.call(args, stdout=out, stderr=subprocess.STDOUT) == 0:
                return
        print(f"twin: debootstrap {suite} attempt {attempt} failed (log {log})", flush=True)
    raise TwinError(f"twin: debootstrap {suite} from {MIRROR} failed; see {log}")


def install_image(root: Path, log: Path) -> None:
    """apt-get the image packages inside the root (nspawn as a chroot: /proc, /dev, network)."""
    nspawn = [
        "systemd-nspawn",
        "--quiet",
        "--register=no",
        "--keep-unit",
        "--resolv-conf=off",
        "-D",
        str(root),
    ]
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    setenv = [f"--setenv={k}={v}" for k, v in env.items()]
    sources = f"deb {MIRROR} {root_suite(root)} main universe\n"
    (root / "etc/apt/sources.list").write_text(sources)
    # The image's resolv.conf points at systemd-resolved, which does not run in a chroot:
    # use this machine's for the install, and put the image's link back afterwards.
    resolv = root / "etc/resolv.conf"
    link = resolv.readlink() if resolv.is_symlink() else None
    resolv.unlink(missing_ok=True)
    shutil.copy("/etc/resolv.conf", resolv)
    try:
        apt_install(nspawn + setenv, log)
    finally:
        resolv.unlink()
        if link is not None:
            resolv.symlink_to(link)


def apt_install(nspawn: list[str], log: Path) -> None:
    for attempt in range(1, ATTEMPTS + 1):
        with log.open("a") as out:
            rc = subprocess.call(
                [*nspawn, "sh", "-c",
                 "apt-get update -q && apt-get install -y -q --no-install-recommends "
                 + " ".join(IMAGE) + " && apt-get clean"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        if rc == 0:
            return
        print(f"twin: image packages attempt {attempt} failed (log {log})", flush=True)
    raise TwinError(f"twin: installing {' '.join(IMAGE)} failed; see {log}")


def root_suite(root: Path) -> str:
    for line in (root / "etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise TwinError(f"twin: {root}/etc/os-release names no VERSION_CODENAME")


def prepare(root: Path) -> None:
    """What every host of the image shares: no host keys (each host gets its own), no
    machine id (systemd makes one at first boot), no periodic apt runs that would take the
    dpkg lock in the middle of a play."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/machine-id").write_text("")
    for timer in ("apt-daily.timer", "apt-daily-upgrade.timer", "motd-news.timer"):
        link = root / "etc/systemd/system" / timer
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")


def remove_tree(path: Path) -> None:
    """rm -rf PATH, never through a mount point (a killed debootstrap leaves /proc mounted)."""
    if not path.exists():
        return
    out = run(["findmnt", "-rn", "-o", "TARGET"]).stdout
    prefix = str(path.resolve()).rstrip("/") + "/"
    mounted = [t for t in out.split() if t.startswith(prefix) or t == prefix[:-1]]
    for target in sorted(mounted, reverse=True):
        subprocess.call(["umount", "-l", target])
    shutil.rmtree(path)
