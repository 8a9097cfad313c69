"""The rendered Slurm files run in the real slurmctld, and Slurm sees the planned cluster.

For every Slurm example and golden input, plus the single-leaf lab variant and a spec whose
hostnames have text after the index (listed one by one: Slurm's hostlists take nothing after
``]``), the test renders the Slurm files, starts Debian's munged (a test key, its socket in a
temporary directory) and slurmctld on 127.0.0.1 with them, and asks ``scontrol``: the
topology's switches and their node sets, and each node's CPUs, sockets, cores, threads,
memory and GRES must be the plan's. The test copy changes only what a test host needs:
SlurmctldHost (this host), ports, state, log and pid paths, ``SlurmUser`` (this user), the
munge socket, the Include path, the power-saving programs' directory (wrappers of the slurm
role's script) and ``NodeAddr=127.0.0.1`` on every node line (the planned names do not
resolve here). No slurmd runs: there are no GPUs here, so
nodes stay unresponsive, which scontrol still reports in full. With power saving, slurmctld
also powers a node down through the role's script, against a fake ipmitool (no BMC here).

Without munged, slurmctld or scontrol the test skips, saying why; under CI (``CI`` set) that is
a failure (`make unit` installs them as root: the Makefile's ``slurm`` target).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infra.catalog import Catalog
from infra.render import slurm, slurm_conf, slurm_power
from infra.spec import Spec, load_spec_text
from infra.spec.scheduling import duration_seconds
from infra.topology import Plan, expand
from infra.topology.power_saving import kept_powered, suspendable

from . import test_slurm_power as power_fakes
from .conftest import ROOT
from .test_render_files import expand_hostlist

TOOLS = ("munged", "slurmctld", "scontrol")
INPUTS = [
    *(
        f"examples/{p.name}"
        for p in sorted((ROOT / "examples").glob("*.yaml"))
        if yaml.safe_load(p.read_text()).get("scheduler", {}).get("kind") == "slurm"
    ),
    *(
        f"tests/golden/inputs/{p.name}"
        for p in sorted((ROOT / "tests/golden/inputs").glob("*.yaml"))
        if yaml.safe_load(p.read_text()).get("scheduler", {}).get("kind") == "slurm"
    ),
    "tests/data/slurm/a100-lab-slurm.yaml",
    "tests/data/slurm/suffix-hostnames.yaml",  # names with text after the index
]
POWER_SCRIPT = ROOT / "playbooks/roles/slurm/files/railplan-power.sh"
START_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 30.0


def _tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t, path=f"{os.environ['PATH']}:/usr/sbin") is None]
    if not missing:
        return
    why = f"{', '.join(missing)} missing (Debian packages munge, slurmctld, slurm-client)"
    if os.environ.get("CI"):
        pytest.fail(f"slurmctld test cannot run on CI: {why}")
    pytest.skip(why)


def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{os.environ['PATH']}:/usr/sbin")
    assert found is not None
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _test_copy(files: dict[str, str], tmp: Path, port: int) -> Path:
    """The rendered files, changed only where a test host needs it (module docstring)."""
    etc = tmp / "etc"
    etc.mkdir()
    for name, text in files.items():
        (etc / name).write_text(text)
    conf = files["slurm.conf"]
    user = (
        os.environ.get("USER")
        or subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    )
    changes = {
        r"^SlurmctldHost=.*$": f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
        r"^SlurmUser=.*$": f"SlurmUser={user}",
        r"^SlurmctldPort=.*$": f"SlurmctldPort={port}",
        r"^StateSaveLocation=.*$": f"StateSaveLocation={tmp / 'state'}",
        r"^SlurmctldPidFile=.*$": f"SlurmctldPidFile={tmp / 'slurmctld.pid'}",
        r"^SlurmctldLogFile=.*$": f"SlurmctldLogFile={tmp / 'slurmctld.log'}",
        r"^Include /etc/slurm/": f"Include {etc}/",
    }
    for pattern, repl in changes.items():
        conf, n = re.subn(pattern, repl, conf, flags=re.MULTILINE)
        assert n == 1, pattern  # the rendered file has each setting exactly once
    conf = _local_power_programs(conf, tmp)
    (etc / "slurm.conf").write_text(conf + f"AuthInfo=socket={tmp / 'munge.socket'}\n")
    nodes = re.sub(
        r"^(NodeName=(\S+) .*)$",
        lambda m: f"{m[1]} NodeAddr={','.join(['127.0.0.1'] * len(expand_hostlist(m[2])))}",
        files["nodes.conf"],
        flags=re.MULTILINE,
    )
    (etc / "nodes.conf").write_text(nodes)
    (tmp / "state").mkdir()
    return etc / "slurm.conf"


def _local_power_programs(conf: str, tmp: Path) -> str:
    """Power programs moved to ``tmp/bin``: wrappers of the slurm role's script.

    slurmctld checks that each program exists, is executable and not group- or
    world-writable, and disables power saving otherwise. Each wrapper (the rendered name)
    points the script at ``tmp/power`` (its map and credentials) and puts ``tmp/fakebin``
    first on PATH (where a test puts a fake ipmitool), then runs the role's script under the
    same name from ``tmp/programs``: the script reads its action from that name.
    """
    bin_dir, programs = tmp / "bin", tmp / "programs"
    for match in re.finditer(r"^\w+Program=/etc/slurm/(\S+)$", conf, flags=re.MULTILINE):
        bin_dir.mkdir(exist_ok=True)
        programs.mkdir(exist_ok=True)
        shutil.copy(POWER_SCRIPT, programs / match[1])
        (programs / match[1]).chmod(0o755)
        (bin_dir / match[1]).write_text(
            "#!/bin/sh\n"
            f"export RAILPLAN_POWER_DIR='{tmp / 'power'}' PATH='{tmp / 'fakebin'}':\"$PATH\"\n"
            f"export FAKE_IPMI_LOG='{tmp / 'ipmi.log'}' FAKE_LOGGER_LOG='{tmp / 'logger.log'}'\n"
            f"exec '{programs / match[1]}' \"$@\"\n"
        )
        (bin_dir / match[1]).chmod(0o755)
    return re.sub(r"^(\w+Program)=/etc/slurm/", rf"\1={bin_dir}/", conf, flags=re.MULTILINE)


def _stop(pid_file: Path) -> None:
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)


def _running(
    path: str, tmp: Path, catalog: Catalog
) -> Iterator[tuple[Plan, Spec, dict[str, str], Path]]:
    spec = load_spec_text((ROOT / path).read_text()).spec
    plan = expand(spec, catalog)
    files = slurm_conf.slurm_files(plan, spec, catalog)
    conf = _test_copy(files, tmp, _free_port())
    key = tmp / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge = [
        _tool("munged"),
        "--force",
        f"--key-file={key}",
        f"--socket={tmp / 'munge.socket'}",
        f"--pid-file={tmp / 'munged.pid'}",
        f"--log-file={tmp / 'munged.log'}",
        f"--seed-file={tmp / 'munged.seed'}",
    ]
    subprocess.run(munge, check=True, timeout=COMMAND_TIMEOUT_S, capture_output=True)
    ctld = subprocess.Popen(
        [_tool("slurmctld"), "-D", "-i", "-f", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )
    try:
        _wait_ready(conf, ctld, tmp)
        yield plan, spec, files, conf
    finally:
        ctld.terminate()
        try:
            ctld.wait(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            ctld.kill()
            ctld.wait()
        _stop(tmp / "munged.pid")


def _wait_ready(conf: Path, ctld: subprocess.Popen[bytes], tmp: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ctld.poll() is not None:
            log = (tmp / "slurmctld.log").read_text() if (tmp / "slurmctld.log").exists() else ""
            pytest.fail(f"slurmctld exited with {ctld.returncode}:\n{log[-3000:]}")
        done = subprocess.run(
            [_tool("scontrol"), "ping"],
            check=False,
            capture_output=True,
            text=True,
            env={**os.environ, "SLURM_CONF": str(conf)},
            timeout=COMMAND_TIMEOUT_S,
        )
        if "is UP" in done.stdout:
            return
        time.sleep(0.5)
    pytest.fail(f"slurmctld did not answer within {START_TIMEOUT_S:.0f} s")


def scontrol(conf: Path, *args: str) -> list[dict[str, str]]:
    """``scontrol -o`` records as key=value maps (values may hold spaces only at the end)."""
    out = subprocess.run(
        [_tool("scontrol"), "-o", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=COMMAND_TIMEOUT_S,
    ).stdout
    return [
        dict(field.split("=", 1) for field in line.split() if "=" in field)
        for line in out.splitlines()
        if line.strip()
    ]


# The inputs that power idle nodes off: the power-saving tests run slurmctld on these only.
POWERED = [
    p
    for p in INPUTS
    if (yaml.safe_load((ROOT / p).read_text()).get("scheduler") or {}).get("power_saving")
]


@pytest.fixture(scope="module", params=POWERED)
def powered(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    catalog: Catalog,
) -> Iterator[tuple[Plan, Spec, dict[str, str], Path]]:
    yield from _started(request, tmp_path_factory, catalog)


@pytest.fixture(scope="module", params=INPUTS)
def running(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    catalog: Catalog,
) -> Iterator[tuple[Plan, Spec, dict[str, str], Path]]:
    yield from _started(request, tmp_path_factory, catalog)


def _started(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory, catalog: Catalog
) -> Iterator[tuple[Plan, Spec, dict[str, str], Path]]:
    """slurmctld running on the rendered files of the fixture's input spec."""
    _tools()
    yield from _running(request.param, factory.mktemp("slurmctld"), catalog)


def _expected_switches(plan: Plan) -> dict[str, list[str]]:
    """Lowest-level switch -> servers, from the plan (not from the rendered text)."""
    leaves = plan.switches_in("compute", "leaf")
    if len(leaves) == 1:  # the whole compute fabric is one switch
        return {leaves[0].name: sorted(s.name for s in plan.servers if s.su is not None)}
    rails = {w.rail for w in leaves}
    if rails == {None}:  # not rail-optimized: whole servers on a leaf
        first: dict[str, str] = {}
        for c in plan.cables_in("compute", "node_leaf"):
            first.setdefault(c.a, c.b)
        out: dict[str, list[str]] = {}
        for server, leaf in first.items():
            out.setdefault(leaf, []).append(server)
        return {k: sorted(v) for k, v in out.items()}
    return {su.name: sorted(su.servers) for su in plan.sus}


def test_topology_is_the_plans(running: tuple[Plan, Spec, dict[str, str], Path]) -> None:
    plan, _, _, conf = running
    switches = {r["SwitchName"]: r for r in scontrol(conf, "show", "topology")}
    level0 = {
        name: sorted(expand_hostlist(r["Nodes"]))
        for name, r in switches.items()
        if r["Level"] == "0" and name not in {g.name for g in plan.servers}
    }
    in_fabric = {k: v for k, v in level0.items() if k not in {s.group for s in plan.servers}}
    assert in_fabric == _expected_switches(plan)
    tops = [r for r in switches.values() if r["Level"] != "0"]
    if len(in_fabric) == 1:
        assert not tops, "one leaf domain needs no switch above it"
    else:
        assert tops, "several leaf domains need a common switch"


def test_nodes_have_the_catalogs_cpus_memory_and_gres(
    running: tuple[Plan, Spec, dict[str, str], Path], catalog: Catalog
) -> None:
    plan, spec, _, conf = running
    nodes = {r["NodeName"]: r for r in scontrol(conf, "show", "node")}
    assert sorted(nodes) == sorted(s.name for s in plan.servers)
    for server in plan.servers:
        host = catalog.nodes[server.node].host
        seen = nodes[server.name]
        assert int(seen["CPUTot"]) == host.cpus == 2 * host.cores_per_socket * host.threads_per_core
        assert int(seen["Sockets"]) == host.sockets
        assert int(seen["CoresPerSocket"]) == host.cores_per_socket
        assert int(seen["ThreadsPerCore"]) == host.threads_per_core
        assert int(seen["RealMemory"]) == slurm.real_memory_mib(host)
        assert 0.9 * host.memory_gib * 1024 < int(seen["RealMemory"]) < host.memory_gib * 1024
        gres = {
            g.split(":")[1]: int(g.split(":")[2].split("(")[0]) for g in seen["Gres"].split(",")
        }
        assert gres == slurm.gres_counts(server, spec, catalog)


def test_partitions_are_the_node_groups(running: tuple[Plan, Spec, dict[str, str], Path]) -> None:
    plan, spec, _, conf = running
    parts = {r["PartitionName"]: r for r in scontrol(conf, "show", "partition")}
    assert sorted(parts) == sorted(g.name for g in spec.node_groups)
    for group in spec.node_groups:
        names = expand_hostlist(parts[group.name]["Nodes"])
        assert sorted(names) == sorted(s.name for s in plan.servers_in(group.name))
    assert parts[spec.node_groups[0].name]["Default"] == "YES"


def _show_config(conf: Path) -> dict[str, str]:
    """`scontrol show config` of the running slurmctld, as key -> value."""
    out = subprocess.run(
        [_tool("scontrol"), "show", "config"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=COMMAND_TIMEOUT_S,
    ).stdout
    return dict(re.findall(r"^(\w+)\s+=\s+(.*?)\s*$", out, flags=re.MULTILINE))


def test_config_is_what_was_rendered(running: tuple[Plan, Spec, dict[str, str], Path]) -> None:
    _, spec, _, conf = running
    config = _show_config(conf)
    assert config["ClusterName"] == spec.name
    assert config["SelectType"] == "select/cons_tres"
    assert config["SelectTypeParameters"] == "CR_CORE_MEMORY"
    assert config["TopologyPlugin"] == "topology/tree"
    assert config["ProctrackType"] == "proctrack/cgroup"
    assert config["TaskPlugin"] == "task/cgroup,task/affinity"
    assert config["AuthType"] == "auth/munge"
    assert config["GresTypes"] == "gpu"
    assert config["Epilog"] == slurm_conf.HEALTH_SCRIPT
    # a job the health Prolog refused goes back to the queue for another node, not on hold
    assert "nohold_on_prolog_fail" in config["SchedulerParameters"].split(",")


def test_power_saving_is_what_was_rendered(
    powered: tuple[Plan, Spec, dict[str, str], Path],
) -> None:
    """slurmctld takes the power-saving lines: times, programs, rates and excluded nodes."""
    plan, spec, _, conf = powered
    saving = spec.scheduler.power_saving
    assert saving is not None
    config = _show_config(conf)
    assert config["SuspendTime"] == f"{duration_seconds(saving.suspend_time)} sec"
    assert config["SuspendTimeout"] == f"{duration_seconds(saving.suspend_timeout)} sec"
    assert config["ResumeTimeout"] == f"{duration_seconds(saving.resume_timeout)} sec"
    assert config["SuspendProgram"].endswith("/railplan-suspend.sh")
    assert config["ResumeProgram"].endswith("/railplan-resume.sh")
    assert config["ResumeFailProgram"].endswith("/railplan-resume-fail.sh")
    assert config["SuspendRate"] == f"{saving.suspend_rate} nodes/min"
    assert config["ResumeRate"] == f"{slurm_power.resume_rate(plan, spec)} nodes/min"
    kept = sorted(expand_hostlist(config["SuspendExcNodes"]))
    assert kept == sorted(s.name for s in kept_powered(plan, spec))
    assert plan.servers[0].name in kept  # the controller never powers itself off
    log = (conf.parent.parent / "slurmctld.log").read_text()
    for refusal in ("power_save program", "Invalid SuspendExcNodes", "power_save module disabled"):
        assert refusal not in log, log[-3000:]


def _update(conf: Path, *args: str) -> None:
    subprocess.run(
        [_tool("scontrol"), "update", *args],
        check=True,
        capture_output=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=COMMAND_TIMEOUT_S,
    )


def _ipmi_calls(log: Path, count: int) -> list[list[str]]:
    """The fake ipmitool's argument lists, once there are ``count`` (slurmctld is async)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= count:
            return [json.loads(line)["argv"] for line in lines]
        time.sleep(0.5)
    pytest.fail(f"slurmctld ran no power program within {START_TIMEOUT_S:.0f} s")


def test_slurmctld_runs_the_power_programs_on_the_bmc(
    powered: tuple[Plan, Spec, dict[str, str], Path],
) -> None:
    """slurmctld itself runs the role's SuspendProgram: a node powered down through its BMC.

    A node without slurmd stays UNKNOWN, which power saving leaves alone; marked DOWN it may
    be powered down. Powering it up again needs it POWERED_DOWN, which takes SuspendTimeout
    (minutes, as rendered), so the resume programs are run by tests/test_slurm_power.py. Fake, as nothing here has a BMC or syslog: ipmitool and logger
    (test_slurm_power's fakes, first on the programs' PATH through the wrappers).
    """
    plan, spec, files, conf = powered
    assert spec.scheduler.power_saving is not None
    tmp = conf.parent.parent
    power, fakebin = tmp / "power", tmp / "fakebin"
    power.mkdir()
    (power / "bmc-hosts").write_text(files["bmc-hosts"])
    (power / "railplan-bmc.user").write_text(power_fakes.USER + "\n")
    (power / "railplan-bmc.password").write_text(power_fakes.PASSWORD + "\n")
    fakebin.mkdir()
    for name, text in (
        ("ipmitool", power_fakes.FAKE_IPMITOOL),
        ("logger", power_fakes.FAKE_LOGGER),
    ):
        (fakebin / name).write_text(text)
        (fakebin / name).chmod(0o755)
    node = suspendable(plan, spec)[0]
    _update(conf, f"nodename={node.name}", "state=down", "reason=power-saving test")
    _update(conf, f"nodename={node.name}", "state=power_down")
    calls = _ipmi_calls(tmp / "ipmi.log", 1)
    assert calls == [
        ["-I", "lanplus", "-H", node.bmc_ip, "-U", power_fakes.USER,
         "-f", str(power / "railplan-bmc.password"), "chassis", "power", "soft"]
    ]  # fmt: skip
    log = (tmp / "slurmctld.log").read_text()
    assert "power_save: program exit status" not in log, log[-3000:]
