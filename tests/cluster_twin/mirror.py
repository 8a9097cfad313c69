"""The site mirror the twin's hosts install from: stand-in vendor packages, and a proxy.

A real cluster installs NVIDIA's and NVIDIA Networking's packages from their repositories
(or a site mirror of them); the twin builds packages of the same names and versions whose
programs are the hardware stand-ins (`standins/hw.py`), in signed flat apt repositories
served over HTTP on `network.SERVICE_IP`:

- ``cuda/``: the CUDA repository's driver (``nvidia-headless-<branch>[-open]``,
  ``nvidia-utils-<branch>``), Fabric Manager, DCGM, NCCL, ``cuda-toolkit-<x-y>``;
- ``doca/``: DOCA-Host's ``doca-ofed`` (``openibd``, the MLNX_OFED kernel modules' marker) and
  its ``infiniband-diags`` and ``perftest``, versioned above Ubuntu's as DOCA's are;
- ``mig/``: the ``nvidia-mig-manager`` .deb of mig-parted's GitHub release;
- ``git/nccl-tests.git``: a repository whose Makefile installs the ``all_reduce_perf``
  stand-in, at the tag the nccl role checks out, served by ``git daemon`` (shallow clones,
  which the role makes, need a smart protocol);
- ``kernel/``: ``linux-headers-<this kernel>``, which no archive has for this machine's
  kernel; provisioning adds it to every host's sources (as a site's kernel repository).

The key is made once per cache (``gpg --quick-gen-key``, no passphrase: it signs test data).
Everything else (Ubuntu's own packages: munge, Slurm, ipmitool, ...) comes from the Ubuntu
archive through ``apt-cacher-ng`` on port 3142, which caches it for every host and run.
Which overrides point the roles at these URLs: `ansible_run.site_vars`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster_twin.network import SERVICE_IP
from tests.cluster_twin.proc import TwinError, run

HTTP_PORT = 8080
PROXY_PORT = 3142
HW = "/usr/lib/railplan-twin/hw.py"
INSTALLED = "/usr/lib/railplan-twin/installed"
MIRROR_URL = f"http://{SERVICE_IP}:{HTTP_PORT}"
# The dcgm role's default dcgm_exporter_package_version (DCGM 4's exporter).
EXPORTER_VERSION = "4.1.3-1"
PROXY_URL = f"http://{SERVICE_IP}:{PROXY_PORT}"


@dataclass
class Deb:
    """One stand-in package: files (path -> text), symlinks to the stand-in, scripts."""

    name: str
    version: str
    description: str
    tools: list[str] = field(default_factory=list)  # usr/bin/<tool> (or usr/sbin/...) -> hw.py
    files: dict[str, str] = field(default_factory=dict)
    postinst: str = ""
    postrm: str = ""
    depends: str = ""
    conflicts: str = ""

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_amd64.deb"


def record(component: str, version: str, **extra: str) -> str:
    """postinst lines that record an installed component for the stand-ins."""
    fields = ", ".join([f'"version": "{version}"', *(f'"{k}": "{v}"' for k, v in extra.items())])
    return f"mkdir -p {INSTALLED}\necho '{{{fields}}}' > {INSTALLED}/{component}.json\n"


def unit(name: str, exec_start: str, description: str, kind: str = "simple") -> dict[str, str]:
    text = f"""\
        [Unit]
        Description={description} (railplan twin stand-in)
        After=railplan-twin-kernel.service

        [Service]
        Type={kind}
        ExecStart={exec_start}

        [Install]
        WantedBy=multi-user.target
        """
    return {f"/lib/systemd/system/{name}.service": textwrap.dedent(text)}


def driver_debs(version: str) -> list[Deb]:
    branch = version.split(".")[0]
    debs = []
    for flavour, suffix in (("proprietary", ""), ("open", "-open")):
        other = f"nvidia-headless-{branch}" + ("" if suffix else "-open")
        debs.append(Deb(
            f"nvidia-headless-{branch}{suffix}", f"{version}-0ubuntu1",
            f"NVIDIA driver {version}, {flavour} kernel modules (DKMS)",
            tools=["nvidia-persistenced"],
            files=unit("nvidia-persistenced", "/usr/bin/nvidia-persistenced --user "
                       "nvidia-persistenced --no-persistence-mode --verbose", "NVIDIA Persistence Daemon"),
            postinst=(record("nvidia-driver", version, flavour=flavour)
                      + "getent passwd nvidia-persistenced >/dev/null || useradd --system "
                        "--no-create-home nvidia-persistenced\n"
                      + "/usr/lib/railplan-twin/bin/railplan-twin-build-peermem\nsystemctl daemon-reload || true\n"),
            postrm=f'[ "$1" = remove ] || [ "$1" = purge ] && rm -f {INSTALLED}/nvidia-driver.json\nexit 0\n',
            conflicts=other,
        ))  # fmt: skip
    debs.append(
        Deb(
            f"nvidia-utils-{branch}",
            f"{version}-0ubuntu1",
            f"NVIDIA driver {version} utilities",
            tools=["nvidia-smi"],
        )
    )
    debs.append(Deb(
        f"nvidia-fabricmanager-{branch}", f"{version}-1", f"NVIDIA Fabric Manager {version}",
        tools=["nv-fabricmanager"],
        files=unit("nvidia-fabricmanager", "/usr/bin/nv-fabricmanager -c "
                   "/usr/share/nvidia/nvswitch/fabricmanager.cfg", "NVIDIA fabric manager service"),
        postinst=record("fabricmanager", version) + "systemctl daemon-reload || true\n",
    ))  # fmt: skip
    return debs


def dcgm_debs(version: str, cuda_major: str = "12") -> list[Deb]:
    tools = ["dcgmi", "nv-hostengine"]
    service = unit("nvidia-dcgm", "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm",
                   "NVIDIA DCGM service")  # fmt: skip
    post = record("dcgm", version) + "systemctl daemon-reload || true\n"
    if int(version.split(".")[0]) < 4:
        return [
            Deb("datacenter-gpu-manager", f"1:{version}", f"DCGM {version}", tools, service, post)
        ]
    return [
        Deb(
            "datacenter-gpu-manager-4-core",
            f"1:{version}-1",
            f"DCGM {version}",
            tools,
            service,
            post,
        ),
        Deb(
            f"datacenter-gpu-manager-4-cuda{cuda_major}", f"1:{version}-1", "DCGM CUDA diagnostics"
        ),
        Deb("datacenter-gpu-manager-4-proprietary", f"1:{version}-1", "DCGM profiling modules"),
        Deb(
            "datacenter-gpu-manager-exporter", EXPORTER_VERSION, "DCGM exporter", ["dcgm-exporter"]
        ),
    ]


def nccl_debs(nccl: str, cuda: str) -> list[Deb]:
    version = f"{nccl}-1+cuda{cuda}"
    nvcc = f"/usr/local/cuda-{cuda}/bin/nvcc"
    return [
        Deb("libnccl2", version, f"NCCL {nccl} runtime", postinst=record("nccl", nccl)),
        Deb("libnccl-dev", version, f"NCCL {nccl} headers", depends=f"libnccl2 (= {version})"),
        Deb(f"cuda-toolkit-{cuda.replace('.', '-')}", f"{cuda}.0-1", f"CUDA {cuda} toolkit",
            files={nvcc: "#!/bin/sh\necho 'nvcc: railplan twin stand-in, builds nothing' >&2\nexit 1\n"}),
    ]  # fmt: skip


OPENIBD = """\
#!/bin/sh
### BEGIN INIT INFO
# Provides:          openibd
# Required-Start:    $local_fs
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: openibd (railplan twin stand-in)
### END INIT INFO
# openibd (railplan twin stand-in): unloads (stop) and loads (start) the MLNX_OFED/DOCA kernel
# modules; `systemctl restart openibd` runs both. While they reload, the host's ConnectX
# netdevs are gone, as with the real one: when the in-band management network rides a
# ConnectX port (hardware.json "mgmt_on_connectx"), so is every connection to the host, for
# hardware.json "openibd_reload_s" (default 150 s: a DGX's ten ConnectX ports reloading and the
# in-band LACP bond renegotiating at its default slow rate; more than the ServerAlive budget
# of the rendered ansible.cfg, which drops a connection after 3 unanswered 30 s probes).
hw() { # hw KEY DEFAULT: the key of hardware.json ("" for false)
  python3 -c 'import json,sys; print(json.load(open("/etc/railplan-twin/hardware.json")).get(sys.argv[1], sys.argv[2]) or "")' "$1" "$2"
}
mgmt_on_cx() {
  [ -n "$(hw mgmt_on_connectx '')" ]
}
link_down() {
  ip link set eth0 down
}
link_up() { # networkd applies the host's configuration again when the link returns: its
  # default route (hardware.json "mgmt_gateway"), which the link lost when it went down, at
  # shutdown's stop too (the routes the link had are gone after a reboot)
  ip link set eth0 up
  gateway="$(hw mgmt_gateway '')"
  if [ -n "$gateway" ]; then ip route replace default via "$gateway" dev eth0; fi
}
case "$1" in
  stop)
    if mgmt_on_cx; then link_down; fi
    touch /run/railplan-twin/openibd-stopped ;;
  start)
    # the inbox modules are loaded but DOCA's are installed: start unloads them first
    if [ -e /run/railplan-twin/openibd-stopped ] || { [ -e /usr/lib/railplan-twin/installed/doca.json ] && ! grep -q mofed /run/railplan-twin/ib-stack.json 2>/dev/null; }; then
      if mgmt_on_cx; then link_down; fi
      sleep "$(hw openibd_reload_s 150)"
      rm -f /run/railplan-twin/openibd-stopped
    fi
    link_up
    /usr/lib/railplan-twin/bin/railplan-twin-openibd-reload ;;
esac
exit 0
"""


# ordered as DOCA's own unit: it brings the ConnectX ports up before network.target, so
# nothing that needs the network (slurmd's registration, sshd's clients) starts before them.
# Started later (multi-user.target, as this stand-in first was), a powered-up node's slurmd
# started while its link was still down (docs/twin.md, run 11).
OPENIBD_UNIT = """\
[Unit]
Description=openibd - configure Mellanox devices (railplan twin stand-in)
Documentation=file:/etc/infiniband/openib.conf
After=railplan-twin-kernel.service local-fs.target
Before=network.target remote-fs-pre.target
DefaultDependencies=false

[Service]
Type=oneshot
TimeoutSec=180
RemainAfterExit=yes
ExecStart=/etc/init.d/openibd start
ExecStop=/etc/init.d/openibd stop

[Install]
WantedBy=sysinit.target
"""


def openibd_unit() -> dict[str, str]:
    return {"/lib/systemd/system/openibd.service": OPENIBD_UNIT}


def doca_debs(version: str) -> list[Deb]:
    mlnx = "9999mlnx-1.twin"  # above Ubuntu's, as DOCA's own versions (e.g. 2404mlnx51) are
    return [
        Deb("doca-ofed", f"{version}-1", f"DOCA-Host {version} OFED profile",
            files={"/etc/init.d/openibd": OPENIBD, "/usr/src/ofa_kernel/default/Module.symvers": "",
                   **openibd_unit()},
            # enabled at install as DOCA's own package does: a host boots with its stack loaded
            # (left disabled, a rebooted host came back with its ConnectX management link down);
            # the init script's LSB header lets systemctl's SysV sync enable it
            postinst=record("doca", version)
            + "systemctl daemon-reload || true\nsystemctl enable openibd.service\n",
            postrm=f'[ "$1" = remove ] || [ "$1" = purge ] && rm -f {INSTALLED}/doca.json\nexit 0\n'),
        Deb("infiniband-diags", mlnx, "InfiniBand diagnostics (DOCA)", tools=["usr/sbin/ibstat", "usr/sbin/ibnetdiscover"]),
        Deb("perftest", mlnx, "RDMA performance tests (DOCA)", tools=["ib_write_bw"]),
        Deb("ibverbs-utils", mlnx, "verbs utilities (DOCA)", tools=["ibv_devinfo"]),
        # DOCA-Host ships NVIDIA's OpenSM 5 as `opensm`, its service named opensmd
        Deb("opensm", "5.18.0.MLNX20240128.3f266a48-0.1.2404066", "NVIDIA OpenSM (DOCA)",
            tools=["usr/sbin/opensm"], files=unit("opensmd", "/usr/sbin/opensm --config /etc/opensm/opensm.conf",
                                         "OpenSM InfiniBand subnet manager")),
    ]  # fmt: skip


def mig_deb(version: str, revision: str) -> Deb:
    return Deb(
        "nvidia-mig-manager",
        f"{version}-{revision}",
        f"NVIDIA MIG manager {version}",
        tools=["nvidia-mig-parted"],
        files=unit("nvidia-mig-manager", "/bin/true", "Apply the MIG configuration", "oneshot"),
        postinst="mkdir -p /etc/nvidia-mig-manager\nsystemctl daemon-reload || true\n",
    )


def build_deb(deb: Deb, out: Path, staging: Path) -> Path:
    root = staging / deb.name
    if root.exists():
        shutil.rmtree(root)
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        f"Package: {deb.name}",
        f"Version: {deb.version}",
        "Architecture: amd64",
        "Maintainer: railplan twin <twin@railplan.invalid>",
        f"Description: {deb.description}",
    ]
    control += [f"Depends: {deb.depends}"] if deb.depends else []
    control += [f"Conflicts: {deb.conflicts}"] if deb.conflicts else []
    (root / "DEBIAN/control").write_text("\n".join(control) + "\n")
    for name, body in (("postinst", deb.postinst), ("postrm", deb.postrm)):
        if body:
            (root / "DEBIAN" / name).write_text("#!/bin/sh\nset -e\n" + body)
            (root / "DEBIAN" / name).chmod(0o755)
    for path, text in deb.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(0o755 if text.startswith("#!") else 0o644)
    for tool in deb.tools:
        link = root / (tool if "/" in tool else f"usr/bin/{tool}")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(HW)
    target = out / deb.filename
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(target)])
    return target


# --- the repositories ---------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """What the rendered tree pins (group_vars/all.yml), plus the drivers a scenario rolls to."""

    drivers: tuple[str, ...]
    dcgm: str
    nccl: str
    cuda: str
    doca: str
    mig_parted: str = "0.14.5"
    mig_revision: str = "1"
    nccl_tests: str = "v2.13.10"


def signing_key(home: Path) -> Path:
    """The mirror's public key (ASCII armour), made once per cache directory."""
    public = home / "railplan-twin-mirror.asc"
    if public.exists():
        return public
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    gpg = ["gpg", "--batch", "--homedir", str(home)]
    run([*gpg, "--passphrase", "", "--quick-gen-key", "railplan twin mirror <twin@railplan.invalid>",
         "rsa3072", "sign", "never"])  # fmt: skip
    armour = run([*gpg, "--armor", "--export", "twin@railplan.invalid"]).stdout
    public.write_text(armour)
    return public


def write_repo(repo: Path, debs: list[Deb], gpg_home: Path, staging: Path) -> None:
    """A flat, signed apt repository (``deb [signed-by=...] URL ./``) of DEBS in REPO."""
    repo.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        build_deb(deb, repo, staging)
    listing = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    (repo / "Packages").write_text(listing)
    release = subprocess.run(
        ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=railplan-twin", "release", "."],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (repo / "Release").write_text(release)
    gpg = [
        "gpg",
        "--batch",
        "--yes",
        "--homedir",
        str(gpg_home),
        "--local-user",
        "twin@railplan.invalid",
    ]
    run([*gpg, "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")])
    run([*gpg, "-abs", "-o", str(repo / "Release.gpg"), str(repo / "Release")])
    shutil.copy(gpg_home / "railplan-twin-mirror.asc", repo / "railplan-twin-mirror.asc")


NCCL_TESTS_MAKEFILE = """\
# nccl-tests (railplan twin stand-in): `make` installs the all_reduce_perf stand-in into
# $(BUILDDIR), which is what the nccl role builds and the acceptance role runs.
BUILDDIR ?= build
all:
\tmkdir -p $(BUILDDIR)
\tln -sf /usr/lib/railplan-twin/hw.py $(BUILDDIR)/all_reduce_perf
"""


def write_git_repo(path: Path, tag: str) -> None:
    """A bare repository served over dumb HTTP, with TAG on its one commit."""
    if path.exists():
        shutil.rmtree(path)
    work = path.with_suffix(".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "Makefile").write_text(NCCL_TESTS_MAKEFILE)
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="twin",
        GIT_AUTHOR_EMAIL="twin@railplan.invalid",
        GIT_COMMITTER_NAME="twin",
        GIT_COMMITTER_EMAIL="twin@railplan.invalid",
        GIT_AUTHOR_DATE="2024-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2024-01-01T00:00:00Z",
    )
    for argv in (
        ["git", "init", "-q", "-b", "master"],
        ["git", "add", "Makefile"],
        ["git", "commit", "-q", "-m", "nccl-tests stand-in"],
        ["git", "tag", tag],
    ):
        subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(path)], check=True, capture_output=True
    )
    subprocess.run(["git", "update-server-info"], cwd=path, check=True, capture_output=True)
    shutil.rmtree(work)


def build_mirror(root: Path, versions: Versions, gpg_home: Path) -> None:
    """Every repository the site vars point at, under ROOT (served as MIRROR_URL)."""
    if root.exists():
        shutil.rmtree(root)
    staging = root.parent / (root.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    signing_key(gpg_home)
    cuda = [d for v in versions.drivers for d in driver_debs(v)]
    cuda += dcgm_debs(versions.dcgm) + nccl_debs(versions.nccl, versions.cuda)
    write_repo(root / "cuda", cuda, gpg_home, staging)
    headers = Deb(f"linux-headers-{os.uname().release}", "1.0-1", "headers of the twin's kernel")
    write_repo(root / "kernel", [headers], gpg_home, staging)
    write_repo(root / "doca", doca_debs(versions.doca), gpg_home, staging)
    (root / "mig").mkdir(parents=True)
    build_deb(mig_deb(versions.mig_parted, versions.mig_revision), root / "mig", staging)
    write_git_repo(root / "git" / "nccl-tests.git", versions.nccl_tests)
    shutil.rmtree(staging)


# --- the servers ------------------------------------------------------------------------


def start_http(root: Path, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        ["python3", "-m", "http.server", str(HTTP_PORT), "--bind", SERVICE_IP, "--directory", str(root)],
        stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
    )  # fmt: skip


def start_git(root: Path, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--listen={SERVICE_IP}",
         f"--base-path={root / 'git'}", str(root / "git")],
        stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
    )  # fmt: skip


def start_proxy(workdir: Path) -> subprocess.Popen[bytes]:
    """apt-cacher-ng for the Ubuntu archive, its cache shared by every run on this machine."""
    binary = shutil.which("apt-cacher-ng") or "/usr/sbin/apt-cacher-ng"
    if not os.access(binary, os.X_OK):
        raise TwinError("twin: apt-cacher-ng not installed (make tools installs it)", 2)
    cache = Path(os.environ.get("RAILPLAN_TWIN_APT_CACHE", "/var/cache/apt-cacher-ng"))
    cache.mkdir(parents=True, exist_ok=True)
    shutil.chown(cache, "apt-cacher-ng", "apt-cacher-ng")
    logdir = workdir / "apt-cacher-ng"
    logdir.mkdir(parents=True, exist_ok=True)
    shutil.chown(logdir, "apt-cacher-ng", "apt-cacher-ng")
    out = (workdir / "apt-cacher-ng.out").open("ab")
    return subprocess.Popen(
        [binary, "-c", "/etc/apt-cacher-ng", "ForeGround=1", f"BindAddress={SERVICE_IP}",
         f"Port={PROXY_PORT}", f"CacheDir={cache}", f"LogDir={logdir}", "PidFile=",
         f"SocketPath={workdir / 'apt-cacher-ng.socket'}"],
        stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
    )  # fmt: skip
