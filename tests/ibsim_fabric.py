"""Run Debian's real opensm on a simulated InfiniBand fabric built from a plan's cabling.

ibsim (package ibsim-utils) simulates the switches and HCAs of a netlist; ``ibsim-run``
preloads libumad2sim so that opensm and the infiniband-diags tools talk to it instead of a
HCA. Only the hardware is simulated: the SM, its config parser and its routing engines are
the packaged ones. `tools_or_skip` skips without the tools, and fails under CI=true.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infra.render.ibsim_netlist import ibsim_netlist, sim_limits
from infra.topology.model import Plan

TOOLS = ("opensm", "ibsim", "ibsim-run", "ibnetdiscover", "iblinkinfo", "ibtracert", "smpquery")


def tools_or_skip() -> None:
    """Skip (fail under CI=true) unless opensm, ibsim-utils and infiniband-diags are here."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        message = f"missing {', '.join(missing)} (Debian opensm, ibsim-utils, infiniband-diags)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _socket(workdir: Path) -> str:
    # ibsim's socket name (IBSIM_SOCKNAME, default "ibsim0"): one per fabric, so test runs
    # sharing a machine do not attach to each other's simulator
    return "railplan-" + hashlib.sha256(str(workdir).encode()).hexdigest()[:12]


@contextmanager
def simulated(plan: Plan, workdir: Path) -> Iterator[Path]:
    """Start ibsim on the plan's compute fabric; yields the working directory."""
    net = workdir / "ibsim.net"
    net.write_text(ibsim_netlist(plan))
    limits = [f"-{flag}{n}" for flag, n in zip("NSP", sim_limits(plan), strict=True)]
    log = (workdir / "ibsim.log").open("w")
    # ibsim reads commands from stdin: keep it open (a pipe) so it does not exit.
    proc = subprocess.Popen(
        ["ibsim", "-s", *limits, str(net)],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "IBSIM_SOCKNAME": _socket(workdir)},
    )
    try:
        time.sleep(1.0)  # ibsim loads the netlist before it accepts clients
        assert proc.poll() is None, (workdir / "ibsim.log").read_text()
        yield workdir
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def run_sim(args: list[str], sim_host: str, workdir: Path, timeout: int = 60) -> str:
    """Run one command under ibsim-run as `sim_host`; returns stdout and stderr."""
    env = {
        **os.environ,
        "SIM_HOST": sim_host,
        "IBSIM_SOCKNAME": _socket(workdir),
        "OSM_TMP_DIR": str(workdir),
        "OSM_CACHE_DIR": str(workdir),
    }
    done = subprocess.run(
        ["ibsim-run", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.stdout + done.stderr


def run_opensm(conf: Path, sim_host: str, workdir: Path) -> tuple[str, str]:
    """One sweep of the real opensm (``-o``) with `conf`; returns (console output, log)."""
    log = workdir / f"{conf.stem}.log"
    log.unlink(missing_ok=True)
    out = run_sim(["opensm", "-F", str(conf), "-f", str(log), "-o"], sim_host, workdir)
    return out, log.read_text() if log.exists() else ""


_PORT_LINE = re.compile(r"^(SW|CA)\s+(\d+)\s+\d+\s+(0x[0-9a-f]{16}) .*?'([^']+)'")


def discovered(sim_host: str, workdir: Path) -> dict[str, tuple[str, int]]:
    """Node name -> (GUID, LID) per `ibnetdiscover -p` (switch node GUID, HCA port GUID)."""
    found: dict[str, tuple[str, int]] = {}
    for line in run_sim(["ibnetdiscover", "-p"], sim_host, workdir).splitlines():
        match = _PORT_LINE.match(line)
        if match:
            found.setdefault(match[4], (match[3], int(match[2])))
    return found
