"""A real Slurm cluster on this machine: Debian's slurmctld and one slurmd per planned node.

Each node is a network namespace (`ip netns add`) joined to a Linux bridge by a veth pair,
with its own UTS namespace (`unshare --uts`) holding the node's host name; slurmd runs there
with ``SlurmdParameters=config_overrides``, so a node presents the catalog DGX's cores,
memory and eight GPUs (device files made with `mknod`) on a 2-core machine. slurmctld and
munged run in the root namespace on the bridge's address. The files are the ones railplan
renders for the spec (`infra.render.slurm_conf.slurm_files`), changed only where a test host
needs it: host names and addresses, ports, paths, ``SlurmUser=root``, process tracking and
task plugins that need no cgroup (`proctrack/linuxproc`, `task/none`), `/bin/true` as
Prolog and Epilog (the GPU health script needs GPUs; an epilog must stay configured, as it
decides how a job's end reaches the main scheduler), and `jobcomp/filetxt`, which records
each job's submit, start and end. Scheduling lines (select, scheduler and its parameters,
partitions, node lines, topology) are railplan's as rendered.

Needs root, iproute2, util-linux, munge, slurmctld, slurmd and slurm-client (the Makefile's
``tools`` target installs the Debian packages). Names carry a tag per cluster (the process
id), so two clusters can run at once: namespaces ``rps<tag>-n<i>``, bridge ``rps<tag>-br``,
addresses in ``10.213.<tag mod 250>.0/24``, all removed on exit.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Self

from infra.catalog import Catalog
from infra.render.slurm_conf import slurm_files
from infra.spec import Spec
from infra.topology import Plan

__all__ = ["TOOLS", "SlurmCluster", "missing_tools"]

TOOLS = ("ip", "nsenter", "unshare", "mknod", "munged", "slurmctld", "slurmd", "sbatch", "scontrol")
START_TIMEOUT_S = 90.0


def missing_tools() -> list[str]:
    """The tools this needs that the machine lacks (root counts as one)."""
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    out = [t for t in TOOLS if shutil.which(t, path=path) is None]
    if os.geteuid() != 0:
        out.append("root")
    return out


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), check=True, capture_output=True, text=True, timeout=60, env=env
    )


Plans = dict[int, dict[int, tuple[int, tuple[int, ...]]]]
"""Backfill plans by the wall second their cycle began in: job id -> (start, node indices)."""


class SlurmCluster:
    """The cluster, started by `__enter__` and torn down by `__exit__`."""

    def __init__(self, spec: Spec, plan: Plan, catalog: Catalog, root: Path) -> None:
        self.spec, self.plan, self.catalog, self.root = spec, plan, catalog, root
        self.nodes = [s.name for s in plan.servers]
        self.conf = root / "etc" / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ctld_started = 0.0
        tag = os.getpid() % 1000
        self.prefix, self.net = f"rps{tag}", f"10.213.{tag % 250}"
        self.bridge = f"{self.prefix}-br"
        # slurmstepd's socket is <spool>/<node>_<job>.<step>, and a Unix socket path holds
        # 108 bytes: under a deep temporary root (pytest-xdist's) every job failed to launch
        # and was requeued, so the spool lives in a short directory of its own
        self.spool = Path(tempfile.mkdtemp(prefix="rps-spool-"))

    # --- set-up -------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self._files()
            self._munge()
            self._network()
            self._slurmctld()
            self._slurmds()
            self._wait_idle()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _files(self) -> None:
        etc = self.root / "etc"
        for sub in ("etc", "state", "log", "run", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        files = slurm_files(self.plan, self.spec, self.catalog)
        for name, text in files.items():
            (etc / name).write_text(text)
        (etc / "slurm.conf").write_text(self._conf(files["slurm.conf"]))
        (etc / "nodes.conf").write_text(self._node_lines(files["nodes.conf"]))
        (etc / "gres.conf").write_text(
            files["gres.conf"].replace("File=/dev/", f"File={self.root / 'dev'}/")
        )
        for k in range(8):  # the GPUs' device files (major 195, NVIDIA's), shared by all
            dev = self.root / "dev" / f"nvidia{k}"
            if not dev.exists():
                _run("mknod", str(dev), "c", "195", str(k))

    def _conf(self, conf: str) -> str:
        r = self.root
        changes = {
            r"^SlurmctldHost=.*$": f"SlurmctldHost={os.uname().nodename}({self.net}.1)",
            r"^SlurmUser=.*$": "SlurmUser=root",
            r"^SlurmctldPort=.*$": f"SlurmctldPort={_free_port()}",  # two clusters may run
            r"^StateSaveLocation=.*$": f"StateSaveLocation={r / 'state'}",
            r"^SlurmdSpoolDir=.*$": f"SlurmdSpoolDir={self.spool}/%n",
            r"^SlurmctldPidFile=.*$": f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            r"^SlurmdPidFile=.*$": f"SlurmdPidFile={r / 'run'}/slurmd-%n.pid",
            r"^SlurmctldLogFile=.*$": f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            r"^SlurmdLogFile=.*$": f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            r"^ProctrackType=.*$": "ProctrackType=proctrack/linuxproc",
            r"^TaskPlugin=.*$": "TaskPlugin=task/none",
            # with an Epilog, slurmd reports a job's end as MESSAGE_EPILOG_COMPLETE and
            # slurmctld runs its main scheduler at once; without one the end comes back on
            # the kill RPC and only queues it (`batch_sched_delay`): keep the rendered path
            r"^(Prolog|Epilog)=.*$": r"\1=/bin/true",
            r"^SlurmctldDebug=.*$": "SlurmctldDebug=verbose",  # DebugFlags print at verbose
            r"^Include /etc/slurm/": f"Include {r / 'etc'}/",
        }
        for pattern, repl in changes.items():
            conf, n = re.subn(pattern, repl, conf, flags=re.MULTILINE)
            assert n >= 1, pattern  # the rendered file has each of these
        return conf + (
            "SlurmdParameters=config_overrides\n"
            "JobCompType=jobcomp/filetxt\n"
            f"JobCompLoc={r / 'jobcomp.txt'}\n"
            f"AuthInfo=socket={r / 'munge.socket'}\n"
            "MpiDefault=none\n"
            # each backfill cycle's start, and each job's epilog completion (it holds its
            # nodes until then), in the log, to the millisecond
            "DebugFlags=Backfill,TraceJobs\n"
        )

    def _node_lines(self, text: str) -> str:
        address = {name: f"{self.net}.{11 + i}" for i, name in enumerate(self.nodes)}
        out = []
        for line in text.splitlines():
            match = re.match(r"^NodeName=(\S+) (.*)$", line)
            if not match:
                out.append(line)
                continue
            rest = re.sub(r"\s*NodeAddr=\S+", "", match[2])  # the plan's, not this harness's
            for name in _expand(match[1]):  # one line per node, each with its address
                out.append(f"NodeName={name} NodeAddr={address[name]} {rest}")
        return "\n".join(out) + "\n"

    def _munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        r = self.root
        _run(
            "munged",
            "--force",
            f"--key-file={key}",
            f"--socket={r / 'munge.socket'}",
            f"--pid-file={r / 'run' / 'munged.pid'}",
            f"--log-file={r / 'log' / 'munged.log'}",
            f"--seed-file={r / 'munged.seed'}",
        )

    def _network(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.net}.1/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i, _ in enumerate(self.nodes):
            ns, veth = f"{self.prefix}-n{i}", f"{self.prefix}-v{i}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", veth, "master", self.bridge)
            _run("ip", "link", "set", veth, "up")
            _run(
                "ip",
                "netns",
                "exec",
                ns,
                "ip",
                "addr",
                "add",
                f"{self.net}.{11 + i}/24",
                "dev",
                "eth0",
            )
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def _slurmctld(self) -> None:
        self.ctld_started = time.time()
        log = (self.root / "log" / "slurmctld.out").open("wb")
        self.procs.append(
            subprocess.Popen(
                ["slurmctld", "-D", "-i", "-f", str(self.conf)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        self._wait(lambda: "is UP" in self._ctl("ping"), "slurmctld to answer")

    def _slurmds(self) -> None:
        for i, name in enumerate(self.nodes):
            (self.spool / name).mkdir(parents=True, exist_ok=True)
            script = f"hostname {name} && exec slurmd -D -N {name} -f {self.conf}"
            log = (self.root / "log" / f"slurmd-{name}.out").open("wb")
            self.procs.append(
                subprocess.Popen(
                    [
                        "nsenter",  # not `ip netns exec`, which remounts /sys and so hides
                        f"--net=/run/netns/{self.prefix}-n{i}",  # the cgroups slurmd needs
                        "unshare",
                        "--uts",
                        "sh",
                        "-c",
                        script,
                    ],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def _wait_idle(self) -> None:
        def idle() -> bool:
            out = _run("sinfo", "-h", "-N", "-o", "%N %t", env=self.env).stdout.split()
            states = dict(zip(out[::2], out[1::2], strict=True))
            return sorted(states) == sorted(self.nodes) and set(states.values()) == {"idle"}

        self._wait(idle, "every slurmd to register idle")

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.SubprocessError):
                if ready():
                    return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{proc.args!r} exited with {proc.returncode} ({self.root}/log)"
                    )
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what} ({self.root}/log)")

    def _ctl(self, *args: str) -> str:
        return _run("scontrol", *args, env=self.env).stdout

    # --- use ----------------------------------------------------------------------------

    def submit(self, name: str, gpus: int, per_node: int, limit_min: int, sleep_s: float) -> None:
        """sbatch a job of ``gpus`` GPUs that sleeps ``sleep_s`` under a ``limit_min`` limit."""
        nodes = max(1, -(-gpus // per_node))
        _run(
            "sbatch",
            "--parsable",
            f"--job-name={name}",
            f"--nodes={nodes}",
            f"--gpus-per-node={min(gpus, per_node)}",
            f"--time={limit_min}",
            "--output=/dev/null",
            f"--wrap=sleep {sleep_s:g}",
            env=self.env,
        )

    def finished(self) -> list[dict[str, str]]:
        """jobcomp/filetxt's records so far, as field maps."""
        path = self.root / "jobcomp.txt"
        if not path.exists():
            return []
        return [
            dict(f.split("=", 1) for f in line.split() if "=" in f)
            for line in path.read_text().splitlines()
            if line.strip()
        ]

    def log_times(self) -> dict[str, dict[int, float]]:
        """From slurmctld's log, to the millisecond: per job id its submit, start and end
        (``submit``, ``start``, ``end``) and its last epilog completion (``epilog``); the
        backfill cycles and the main scheduler's passes that started a job (``cycles``,
        ``main``, by number); slurmctld's start (``ctld``), its
        background loop's first pass of the main scheduler (``loop``) and how long each
        backfill cycle that tested jobs took (``cycle_s``, seconds, by the cycle's number)."""
        out: dict[str, dict[int, float]] = {
            "submit": {},
            "start": {},
            "end": {},
            "cycles": {},
            "main": {},
            "epilog": {},
            "ctld": {},
            "loop": {},
            "cycle_s": {},
        }
        text = (self.root / "log" / "slurmctld.log").read_text(errors="replace")
        for line in text.splitlines():
            stamp = re.match(r"^\[(\S+)\] ", line)
            if stamp is not None:
                at = datetime.fromisoformat(stamp[1]).timestamp()
                _job_times(out, line, at)
                _daemon_times(out, line, at)
        return out

    def plans(self) -> Plans:
        """Each backfill cycle's plans, from slurmctld's log (`_dump_job_sched`, written with
        `DebugFlags=Backfill`): by the wall second the cycle began in, job id -> (the
        planned start, wall seconds; its nodes' indices in plan order)."""
        index = {name: i for i, name in enumerate(self.nodes)}
        out: Plans = {}
        begun: int | None = None
        text = (self.root / "log" / "slurmctld.log").read_text(errors="replace")
        for line in text.splitlines():
            if "_attempt_backfill: beginning" in line:
                begun = math.floor(datetime.fromisoformat(line[1 : line.index("]")]).timestamp())
                out.setdefault(begun, {})
            found = PLANNED.search(line)
            if found is not None and begun is not None:
                start = round(datetime.fromisoformat(found[2]).timestamp())
                nodes = tuple(sorted(index[n] for n in _expand(found[3])))
                out[begun][int(found[1])] = (start, nodes)
        return out

    # --- tear-down ----------------------------------------------------------------------

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()
        _stop_pid(self.root / "run" / "munged.pid")
        for i, _ in enumerate(self.nodes):
            subprocess.run(
                ["ip", "netns", "del", f"{self.prefix}-n{i}"], capture_output=True, check=False
            )
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
        shutil.rmtree(self.spool, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _stop_pid(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(path.read_text().split()[0]), signal.SIGTERM)


def _expand(hostlist: str) -> Iterator[str]:
    """``node[01-04]`` -> node01 .. node04 (one bracket, as railplan renders node lines)."""
    match = re.fullmatch(r"(.*)\[(.*)\](.*)", hostlist)
    if match is None:
        yield hostlist
        return
    head, body, tail = match.groups()
    for part in body.split(","):
        low, _, high = part.partition("-")
        for n in range(int(low), int(high or low) + 1):
            yield f"{head}{n:0{len(low)}d}{tail}"


JOB_PATTERNS = {
    "submit": re.compile(r"_slurm_rpc_submit_batch_job: JobId=(\d+) "),
    "start": re.compile(r"(?:sched: Allocate|_start_job: Started) JobId=(\d+) "),
    "end": re.compile(r"_job_complete: JobId=(\d+) done"),
}
EPILOG = re.compile(r"job_epilog_complete: enter JobId=(\d+)")
PLANNED = re.compile(r"_dump_job_sched: JobId=(\d+) to start at (\S+), end at \S+ on nodes (\S+)")
CYCLE_TOOK = re.compile(r"_attempt_backfill: completed testing .* usec=(\d+)")


def _job_times(out: dict[str, dict[int, float]], line: str, at: float) -> None:
    """A job's submit, start and end (the first line of each) and its last epilog."""
    for kind, pattern in JOB_PATTERNS.items():
        found = pattern.search(line)
        if found is not None:
            out[kind].setdefault(int(found[1]), at)
    found = EPILOG.search(line)
    if found is not None:  # a job's last node to finish its epilog frees it
        out["epilog"][int(found[1])] = at


def _daemon_times(out: dict[str, dict[int, float]], line: str, at: float) -> None:
    """slurmctld's own moments: its start, backfill cycles, main-scheduler passes."""
    if "slurmctld version" in line and " started" in line:
        out["ctld"][0] = at
    if "backfill" in line and "beginning" in line:
        out["cycles"][len(out["cycles"])] = at
    if "sched: Allocate" in line:  # the main scheduler's passes that started a job
        out["main"][len(out["main"])] = at
    if "SchedulerParameters=" in line:  # the loop's first main-scheduler pass
        out["loop"].setdefault(0, at)
    took = CYCLE_TOOK.search(line)
    if took is not None and out["cycles"]:  # the last cycle's own run time, seconds
        out["cycle_s"][len(out["cycles"]) - 1] = int(took[1]) / 1e6
