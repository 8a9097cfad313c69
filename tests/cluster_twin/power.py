"""A twin host's power: the boot loop that runs it, and the chassis program its BMC calls.

A host is "on" while its boot loop runs. The loop boots the host's root with
``systemd-nspawn --boot`` (the OS's own systemd as PID 1, in the host's network namespace
and in a time namespace whose boot clock starts at power-on: ``fresh_boot_clock``)
and boots it again when the OS reboots (nspawn exits 133); any other exit is a power-off.
Before each boot it reads the kernel command line the host's boot loader would pass (the
stand-in ``update-grub`` writes ``/boot/railplan-twin/cmdline``) and picks the cgroup
hierarchy from it as the kernel would: ``systemd.unified_cgroup_hierarchy=0`` boots the
legacy (v1) hierarchy, anything else the OS's default (unified, v2, on Ubuntu 22.04).

``ipmi_sim`` runs ``power.py chassis HOSTDIR get power`` and ``... set power 1|0``,
``set shutdown 1`` (ACPI soft-off: the OS powers itself off cleanly) and ``set reset 1``
(``chassis_control`` in ipmi_lan(5); the answer to ``get`` is ``power:<0|1>``). A host whose
directory holds ``acpi-ignored`` (a scenario's fault) ignores the soft power-off.

This machine's kernel has every cgroup controller on the v1 hierarchy, so a host booted
unified sees a cgroup2 file system without controllers: enough for systemd and for slurmd to
choose its cgroup/v2 plugin (which Ubuntu 22.04's Slurm 21.08 does not have), not enough to
confine jobs with it. Ubuntu 24.04 hosts therefore boot the v1 hierarchy (Slurm 23.11 has
both plugins; on real 24.04 hardware it uses v2): docs/twin.md, "What the twin cannot show".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CMDLINE = "boot/railplan-twin/cmdline"
BOOTED_CMDLINE = "var/lib/railplan-twin/booted-cmdline"
REBOOT_EXIT = 133
# A DGX takes minutes to POST; the twin's hosts wait this long before booting, so that
# "powered on" and "up" are distinct states a scheduler's ResumeTimeout can see.
POST_S = float(os.environ.get("RAILPLAN_TWIN_POST_S", "3"))


def host_config(hostdir: Path) -> dict[str, str]:
    config: dict[str, str] = json.loads((hostdir / "host.json").read_text())
    return config


def loop_pid(hostdir: Path) -> int | None:
    """The boot loop's pid while the host is on, else None."""
    try:
        pid = int((hostdir / "power.pid").read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def container_init(hostdir: Path) -> int | None:
    """PID 1 of the running container (the OS's systemd), seen from here; None if none.

    Found when asked, not recorded at boot: nspawn forks an intermediate child that forks
    the container's init and exits, so "nspawn's first child" read at boot could be the
    intermediate one (a pid that is gone a moment later: a power-off that signalled it
    failed, and ipmi_sim answered "Unspecified error"). The init is the child whose pid is
    1 in its own PID namespace (the last field of ``NSpid``).
    """
    try:
        nspawn = int((hostdir / "nspawn.pid").read_text())
        children = Path(f"/proc/{nspawn}/task/{nspawn}/children").read_text().split()
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    for child in children:
        if pid_in_own_namespace(int(child)) == 1:
            return int(child)
    return None


def pid_in_own_namespace(pid: int) -> int | None:
    """PID's number in its innermost PID namespace (``NSpid`` in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def signal_init(hostdir: Path, signum: int) -> bool:
    """Send SIGNUM to the container's init; False if there is none (it is off, or just
    went: a power command racing a shutdown is not an error, as on a real BMC)."""
    init = container_init(hostdir)
    if init is None:
        return False
    try:
        os.kill(init, signum)
    except ProcessLookupError:
        return False
    return True


def own_cgroups(machine: str) -> list[str]:
    """Move this boot loop into a cgroup of its own in every hierarchy; what could not be.

    ``systemd-nspawn --keep-unit`` runs the container in its caller's cgroup, as machined's
    per-machine scope would give each a subtree of its own. Without this every host shared
    the root one: each host's systemd made and removed ``/system.slice/<unit>`` in the same
    directories, so one host's clean-up removed another's unit cgroup as it started
    ("Failed to attach to cgroup ...: No such file or directory", 219/CGROUP at boot).
    """
    missed = []
    for mount in cgroup_mounts():
        path = mount
        try:
            for part in ("railplan-twin", machine):
                parent, path = path, path / part
                path.mkdir(exist_ok=True)
                for name in ("cpuset.cpus", "cpuset.mems"):  # an empty cpuset takes no task
                    if (path / name).exists() and not (path / name).read_text().strip():
                        (path / name).write_text((parent / name).read_text())
            (path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as err:
            missed.append(f"{path}: {err}")
    return missed


# A process at nice 0 weighs 1024 in cgroup v1's ``cpu.shares`` (100 in v2's
# ``cpu.weight``); each kernel caps its own knob.
SHARES_PER_HOST = {"cpu.shares": (1024, 262144), "cpu.weight": (100, 10000)}


def weigh_hosts(host_count: int) -> list[str]:
    """Give the twin's cgroup one nice-0 process's CPU weight per host; what was set.

    Every host's boot loop joins ``railplan-twin/<machine>`` (`own_cgroups`), so the whole
    twin competed for the CPU as one nice-0 process against Ansible's forks and everything
    else in the root cgroup. On the 21-host SU twin that starved the hosts: raising the
    weight by hand to 8192 took the green-field install from 3,050 s to about 1,500 s on
    2 cores. Each host now weighs what it would as one process of its own.
    """
    done = []
    for mount in cgroup_mounts():
        twin = mount / "railplan-twin"
        for knob, (per_host, cap) in SHARES_PER_HOST.items():
            with contextlib.suppress(OSError):  # no such controller here: nothing to weigh
                twin.mkdir(exist_ok=True)
                if (twin / knob).exists():
                    (twin / knob).write_text(f"{min(cap, per_host * host_count)}\n")
                    done.append(f"{twin / knob} = {(twin / knob).read_text().strip()}")
    return done


def trim_cgroups(machine: str) -> None:
    """Remove what the last boot's systemd left in the host's cgroups, deepest first.

    A reboot's fresh kernel has no cgroups but the root; the boot loop itself stays in the
    host's own directory, which is kept.
    """
    for mount in cgroup_mounts():
        base = mount / "railplan-twin" / machine
        left = [p for p in base.rglob("*") if p.is_dir()] if base.is_dir() else []
        for path in sorted(left, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):  # still has a task: it outlived the last boot
                path.rmdir()


def cgroup_mounts() -> list[Path]:
    """Where each cgroup hierarchy (v1 controller or v2) is mounted, from mountinfo."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            mounts.append(Path(fields[4]))
    return sorted(set(mounts))


def boot_loop(hostdir: Path) -> int:
    """Run the host until it powers off; reboots go round again."""
    (hostdir / "power.pid").write_text(str(os.getpid()))
    (hostdir / "power-off").unlink(missing_ok=True)
    config = host_config(hostdir)
    with (hostdir / "console.log").open("a") as console:
        for missed in own_cgroups(config["machine"]):
            console.write(f"--- cgroup of its own not joined: {missed}\n")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # `set power 0` and `shutdown` go to init
    try:
        while not (hostdir / "power-off").exists():
            time.sleep(POST_S)
            trim_cgroups(config["machine"])
            if boot_once(hostdir, config) != REBOOT_EXIT:
                break
    finally:
        (hostdir / "power.pid").unlink(missing_ok=True)
        (hostdir / "nspawn.pid").unlink(missing_ok=True)
    return 0


def boot_once(hostdir: Path, config: dict[str, str]) -> int:
    root = Path(config["root"])
    cmdline = read_cmdline(root, config)
    booted = root / BOOTED_CMDLINE
    booted.parent.mkdir(parents=True, exist_ok=True)
    booted.write_text(cmdline + "\n")
    unified = (
        "systemd.unified_cgroup_hierarchy=0" not in cmdline.split()
        and config["cgroup_default"] == "unified"
    )
    env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1" if unified else "0")
    argv = [
        *fresh_boot_clock(),
        "systemd-nspawn", "--boot", "--quiet", "-D", str(root),
        "--machine", config["machine"], "--register=no", "--keep-unit",
        "--timezone=off", "--console=passive",
        # its own network namespace: the OS may configure its links, as on a real server
        "--capability=CAP_NET_ADMIN",
        "--network-namespace-path", f"/run/netns/{config['netns']}",
    ]  # fmt: skip
    with (hostdir / "console.log").open("a") as console:
        console.write(
            f"--- power on {time.time():.0f} {time.strftime('%H:%M:%S')} cmdline: {cmdline}\n"
        )
        console.flush()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=console, stderr=console, env=env
        )
        (hostdir / "nspawn.pid").write_text(str(proc.pid))
        rc = proc.wait()
        console.write(f"--- nspawn exited {rc} {time.strftime('%H:%M:%S')}\n")
    (hostdir / "nspawn.pid").unlink(missing_ok=True)
    return rc


def fresh_boot_clock() -> list[str]:
    """``unshare`` into a time namespace whose boot clock starts now, as a real boot's does.

    slurmd reports its node's boot time as now minus ``sysinfo()``'s uptime, and slurmctld
    ignores a powering-up node's registrations until that boot time is later than its
    power-up request (``waiting_for_node_boot``). Every twin host shares this machine's
    kernel, so without this each would report the machine's boot, hours before any resume:
    Slurm's power saving (and the rolling update's power-up) would never see a node come
    back. ``unshare`` execs nspawn in place (same PID); the container inherits the clock.
    """
    seconds = int(float(Path("/proc/uptime").read_text().split()[0]))
    return ["unshare", "--time", f"--boottime=-{seconds}"]


def read_cmdline(root: Path, config: dict[str, str]) -> str:
    try:
        return (root / CMDLINE).read_text().strip()
    except FileNotFoundError:
        return config["cmdline_default"]


def power_on(hostdir: Path) -> None:
    if loop_pid(hostdir) is not None:
        return
    subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "boot", str(hostdir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(100):
        if loop_pid(hostdir) is not None:
            return
        time.sleep(0.05)


def power_off(hostdir: Path, *, soft: bool) -> None:
    """Soft: the OS shuts itself down (systemd's SIGRTMIN+4, as on an ACPI power button).
    Hard: the power is cut (the container's init is killed; the loop stops)."""
    if soft:
        # a scenario's fault: the OS ignores the ACPI power button (hung, or ACPI disabled)
        if container_init(hostdir) is not None and not (hostdir / "acpi-ignored").exists():
            (hostdir / "power-off").touch()
            signal_init(hostdir, signal.SIGRTMIN + 4)
        return
    (hostdir / "power-off").touch()
    signal_init(hostdir, signal.SIGKILL)


def reset(hostdir: Path) -> None:
    signal_init(hostdir, signal.SIGKILL)  # nspawn exits non-133: the loop would stop; restart
    for _ in range(200):
        if loop_pid(hostdir) is None:
            break
        time.sleep(0.05)
    power_on(hostdir)


def chassis(hostdir: Path, verb: str, args: list[str]) -> int:
    """ipmi_sim's chassis_control program: get power; set power 0|1; set shutdown|reset 1."""
    values = dict(zip(args[::2], (a.strip('"') for a in args[1::2]), strict=False))
    if verb == "get":
        print(f"power:{1 if loop_pid(hostdir) is not None else 0}")
        return 0
    if values.get("power") == "1":
        power_on(hostdir)
    elif values.get("power") == "0":
        power_off(hostdir, soft=False)
    elif values.get("shutdown") == "1":
        power_off(hostdir, soft=True)
    elif values.get("reset") == "1":
        reset(hostdir)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "boot":
        return boot_loop(Path(argv[1]))
    if len(argv) >= 3 and argv[0] == "chassis":
        return chassis(Path(argv[1]), argv[2], argv[3:])
    print("usage: power.py boot HOSTDIR | chassis HOSTDIR get|set NAME VALUE...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
