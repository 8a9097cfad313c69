"""The cluster twin's scenarios: the rendered deployment run as a cluster (docs/twin.md).

One twin per spec under ``tests/cluster_twin/specs/`` (a 4-node lab and one DGX A100 SU with
its control hosts, on Ubuntu 22.04 and 24.04). ``make cluster-twin`` runs every scenario
(``RAILPLAN_CLUSTER_TWIN=full``; ``RAILPLAN_TWIN_SPECS`` picks specs); ``make test`` runs
`test_smoke` on the lab only: its hosts boot, answer over SSH at the rendered
``ansible_host``, Ansible reaches them through the rendered inventory, and their BMCs power
them off and on.

Mocked, and only at the hardware boundary: GPUs, HCAs, the kernel's modules and boot loader,
the NVIDIA and DOCA packages that drive them (`tests/cluster_twin/standins/hw.py`). Real: the
OS roots and their systemd, sshd, munge, slurmd and slurmctld from the Ubuntu archive,
ansible-playbook over SSH, ipmi_sim and ipmitool. Needs root, systemd-nspawn, debootstrap,
ipmi_sim and apt-cacher-ng (``make tools``); elsewhere the module skips, saying why, and under
CI=true a missing tool fails it.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster_twin.ansible_run import PlayResult
from tests.cluster_twin.proc import TwinError
from tests.cluster_twin.twin import ClusterTwin, exclusive, preflight
from tests.cluster_twin.watch import SlurmWatch

SPECS = Path(__file__).parent / "cluster_twin" / "specs"
FULL = os.environ.get("RAILPLAN_CLUSTER_TWIN") == "full"
TWIN_SPECS = os.environ.get("RAILPLAN_TWIN_SPECS", "lab-jammy,lab-noble,su-jammy,su-noble").split(
    ","
)
GREEN_FIELD = ["-e", "railplan_green_field=true", "-e", "railplan_rolling_batch=100%"]
WORK = Path(os.environ.get("RAILPLAN_TWIN_WORKDIR", "/var/tmp/railplan-twin/tests"))
POWER_SCAN_S = 10  # slurmctld's power_save_interval default
NEW_DRIVER = "550.127.05"  # the rolling update's target; the mirror carries it too


def _runnable() -> str | None:
    try:
        preflight()
    except TwinError as err:
        return str(err)
    return None


_WHY_NOT = _runnable()
pytestmark = pytest.mark.skipif(
    _WHY_NOT is not None and os.environ.get("CI") != "true", reason=str(_WHY_NOT)
)


def _twin(spec: str) -> ClusterTwin:
    workdir = WORK / spec
    shutil.rmtree(workdir, ignore_errors=True)
    # openibd's outage outlasts ssh's keep-alive on the lab on 22.04's first rolled host, the
    # scenario that shows the restart cannot cut the connection; 30 s elsewhere keeps the runs
    # short (three 150 s outages were 479 of the install's 1,504 task seconds in run 32)
    reload_s = 150 if spec == "lab-jammy" else 30
    return ClusterTwin(
        SPECS / f"{spec}.yaml",
        workdir,
        extra_drivers=[NEW_DRIVER],
        openibd_reload_s=reload_s,
        openibd_later_s=30,
    )


def _wait(ready: Callable[[], bool], timeout: float, what: str, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def test_smoke() -> None:
    """The lab's hosts boot, answer over SSH as the inventory says, and power-cycle via IPMI
    into a fresh boot (its clock counting from power-on)."""
    with _twin("lab-jammy") as twin:
        assert set(twin.hosts) == {"train01", "train02", "infer01", "infer02"}
        hostvars = (twin.inventory / "host_vars" / "train02.yml").read_text()
        assert f"ansible_host: {twin.hosts['train02'].net.mgmt_ip}" in hostvars
        result = twin.ssh("train02", "systemctl is-system-running; cat /etc/os-release")
        assert "running" in result.stdout and 'VERSION_ID="22.04"' in result.stdout
        assert "is on" in twin.ipmitool("train02", "chassis", "power", "status").stdout
        twin.ipmitool("train02", "chassis", "power", "off")
        _wait(lambda: not twin.powered("train02"), 60, "train02 powered off")
        assert "is off" in twin.ipmitool("train02", "chassis", "power", "status").stdout
        powered_on = time.monotonic()
        twin.ipmitool("train02", "chassis", "power", "on")
        twin.wait_ssh([twin.hosts["train02"]], timeout=120)
        # its boot clock starts at power-on, as a real server's: slurmd reports its boot time
        # from it, and Slurm ignores a resumed node that booted before the power-up request
        uptime = float(twin.ssh("train02", "cat /proc/uptime").stdout.split()[0])
        assert uptime <= time.monotonic() - powered_on + 1.0, uptime
        ping = twin.playbook_adhoc("all", "ansible.builtin.ping")
        assert ping.rc == 0 and set(ping.doc["stats"]) == set(twin.hosts), ping.problems()


def test_a_second_twin_on_the_machine_is_refused_with_who_holds_it() -> None:
    first = exclusive()
    try:
        with pytest.raises(TwinError, match=f"already runs on this machine \\(pid {os.getpid()}"):
            exclusive()
    finally:
        first.close()
    exclusive().close()  # released: the next twin may start


# --- the full scenarios (make cluster-twin) ----------------------------------------------

full = pytest.mark.skipif(not FULL, reason="full scenarios: make cluster-twin")
Installed = tuple[ClusterTwin, list[PlayResult]]


@pytest.fixture(scope="module", params=TWIN_SPECS)
def installed(request: pytest.FixtureRequest) -> Iterator[Installed]:
    """A twin after a green-field install and a second run of the same playbook."""
    if not FULL:
        pytest.skip("full scenarios: make cluster-twin")
    with _twin(request.param) as twin:
        first = twin.playbook(*GREEN_FIELD, name="install-1")
        before = os.environ.get("RAILPLAN_TWIN_BEFORE")
        if before:  # the scenarios on a tree rendered by an older railplan (docs/twin.md)
            os.environ["RAILPLAN_TWIN_RAILPLAN"] = before
            twin.rerender(twin.spec_path.read_text())
        # acceptance is read-only (its own scenario runs it): the second run configures
        again = [*GREEN_FIELD, "--skip-tags", "acceptance"]
        second = twin.playbook(*again, name="install-2") if first.rc == 0 else first
        yield twin, [first, second]


@full
def test_fresh_install_then_a_second_run_changes_nothing(installed: Installed) -> None:
    twin, (first, second) = installed
    assert first.rc == 0 and not first.failed_hosts(), first.problems()
    assert set(first.doc["stats"]) == set(twin.hosts)
    assert second.rc == 0 and second.changed() == {}, _changed_tasks(second)
    _assert_power_held_and_given_back(twin, second)


def _ran(result: PlayResult, task_name: str) -> bool:
    """Whether a task of that name ran (not skipped) on some host of the run."""
    return any(
        task["task"]["name"].endswith(task_name) and not r.get("skipped")
        for play in result.doc.get("plays", [])
        for task in play.get("tasks", [])
        for r in task["hosts"].values()
    )


def _assert_power_held_and_given_back(twin: ClusterTwin, run: PlayResult) -> None:
    """The second run finds Slurm running with power saving: on Slurm 23.02 and later each play
    held its hosts off power saving and the last play gave back all but slurm.conf's own
    SuspendExcNodes; before 23.02 the run said it could not hold them (run 26 lost 20 hosts
    to power saving 30 minutes into this run)."""
    controller = twin.controller()
    version = twin.ssh(controller, "scontrol --version").stdout
    release = [int(p) for p in re.findall(r"\d+", version)[:2]]
    if release >= [23, 2]:
        assert _ran(run, "Exclude the play's hosts from power saving for this run.")
        assert _ran(run, "Remove the run's hosts from the exclusion list.")
        conf = twin.ssh(controller, "sed -n 's/^SuspendExcNodes=//p' /etc/slurm/slurm.conf").stdout
        live = twin.ssh(controller, "scontrol show config").stdout
        (now,) = re.findall(r"^SuspendExcNodes\s*=\s*(\S+)", live, re.MULTILINE)

        def names(hostlist: str) -> set[str]:
            return set(twin.ssh(controller, f"scontrol show hostnames '{hostlist}'").stdout.split())

        assert names(now) == names(conf.strip()), (now, conf)
    else:
        assert _ran(run, "Say that this Slurm cannot hold power saving off a run's hosts.")


def _changed_tasks(result: PlayResult) -> str:
    lines = []
    for play in result.doc.get("plays", []):
        for task in play.get("tasks", []):
            lines += [
                f"{h}: {task['task']['name']}" for h, r in task["hosts"].items() if r.get("changed")
            ]
    return "\n".join(lines) or result.problems().__str__()


@full
def test_gpudirect_peermem_is_built_against_doca_before_it_loads(installed: Installed) -> None:
    """The driver comes first (its reboot), DOCA after: the rdma role rebuilds nvidia-peermem
    against DOCA (`dkms autoinstall`) before it loads it, on every host."""
    twin, _ = installed
    for name in twin.hosts:
        calls = [line.split(None, 2)[1:] for line in twin.calls(name)]
        tools = [" ".join(c) for c in calls]
        rebuilt = tools.index("dkms autoinstall")
        loaded = tools.index("modprobe nvidia-peermem")
        assert rebuilt < loaded, f"{name}: {tools}"
        info = twin.ssh(name, "modinfo nvidia-peermem; lsmod").stdout
        assert "built against mofed" in info and re.search(r"(?m)^nvidia_peermem ", info), info


@full
def test_openibd_restart_never_drops_ansibles_connection(installed: Installed) -> None:
    """openibd takes the in-band network down (the stand-in: longer than ssh's keep-alive)
    on every host while DOCA's modules load; no host is ever unreachable for it."""
    twin, (first, _) = installed
    restarted = first.results("rdma : restart openibd")
    assert set(restarted) == set(twin.hosts) and all(r.get("changed") for r in restarted.values())
    for name in twin.hosts:
        assert any("railplan-twin-openibd-reload" in line for line in twin.calls(name)), name
        assert first.stats(name).get("unreachable", 0) == 0
    # the first host rolled had the outage that outlasts ssh's keep-alive (ServerAliveInterval
    # 30 s x the default 3 probes), and the play waited it out
    long_host = next(h for h in twin.hosts if h not in twin.control_hosts())
    if twin.openibd_outage_s(long_host) > 90:
        waited = first.results("rdma : wait for the host after openibd")
        assert waited[long_host]["elapsed"] > 90, waited[long_host]


@full
def test_slurm_runs_every_node_idle_with_its_gpus(installed: Installed) -> None:
    twin, _ = installed
    controller = twin.controller()
    nodes = twin.ssh(controller, "sinfo --noheader --Node --format='%N %T %G'").stdout
    states = {line.split()[0]: line.split()[1:] for line in nodes.splitlines()}
    assert set(states) == set(twin.hosts), nodes
    for name, (state, gres) in states.items():
        assert state == "idle", f"{name}: {state}"
        assert gres.startswith("gpu:a100:8"), f"{name}: {gres}"
    version = twin.ssh(controller, "sinfo --version").stdout.split()
    assert version[1] == twin.expected_slurm_version(), version
    if twin.os_name == "ubuntu-22.04":  # Slurm 21.08 has no cgroup/v2: the legacy hierarchy
        host = twin.first_host()
        assert "systemd.unified_cgroup_hierarchy=0" in twin.ssh(host, "cat /proc/cmdline").stdout
        assert twin.ssh(host, "stat -fc %T /sys/fs/cgroup").stdout.strip() == "tmpfs"


@full
def test_a_gang_of_two_lands_within_one_leaf(installed: Installed) -> None:
    twin, _ = installed
    controller = twin.controller()
    gang = twin.ssh(controller, "srun -N2 --gres=gpu:8 --ntasks-per-node=1 hostname", timeout=180)
    assert gang.returncode == 0, gang.stderr
    hosts = sorted(gang.stdout.split())  # the steps ran: each node printed its planned name
    assert len(set(hosts)) == 2 and set(hosts) <= set(twin.hosts), (gang.stdout, gang.stderr)
    topology = twin.ssh(controller, "scontrol show topology").stdout
    leaves = [line for line in topology.splitlines() if "Level=0" in line]
    assert any(all(h in _leaf_nodes(leaf) for h in hosts) for leaf in leaves), (hosts, topology)


def _leaf_nodes(line: str) -> list[str]:
    from tests.cluster_twin.watch import expand_hostlist

    found = re.search(r"Nodes=(\S+)", line)
    return expand_hostlist(found.group(1)) if found else []


@full
def test_acceptance_measures_every_host_and_fails_a_bad_one_by_name(installed: Installed) -> None:
    """Healthy: every host passes, and each host's every rail was measured against its peer
    (linear strategy: no host is in dcgmi diag while its peer measures a link to it). A slow
    link and a lost GPU fail the hosts that have them, named."""
    twin, _ = installed
    healthy = twin.playbook("--tags", "acceptance", name="acceptance-healthy")
    assert healthy.rc == 0, healthy.problems()
    bandwidth = healthy.results("acceptance : Check the RDMA write bandwidth of every rail.")
    # every host: HCA k against HCA k of the next host of its SU (same leaf), and a server
    # alone in its SU (the SU twin's svc01; run 33 found it unmeasured) against its own next
    # HCA of the plane, through a spine; every twin spec has one plane of 8 rails
    assert set(bandwidth) == set(twin.hosts)
    for name, result in bandwidth.items():
        rails = result.get("results", [])
        assert rails and all(not r.get("failed") and not r.get("skipped") for r in rails), name
    # one host compares the fabric it discovered with the plan; the others skip the step
    verified = healthy.results("acceptance : Compare the discovered fabric with the plan.")
    ran = {h: r for h, r in verified.items() if not r.get("skipped")}
    assert len(ran) == 1, verified
    assert all(r["rc"] == 0 and "as planned" in r["stdout"] for r in ran.values()), ran
    slow, lost = _two_compute_hosts(twin)
    twin.set_faults(slow, {"ib_rate_gbps": {"mlx5_0": 100}})
    twin.set_faults(lost, {"gpu_lost": [3]})
    try:
        faulty = twin.playbook("--tags", "acceptance", name="acceptance-faults")
    finally:
        twin.set_faults(slow, {})
        twin.set_faults(lost, {})
    failed: dict[str, str] = {}
    for problem in faulty.problems():
        host = problem.split(":")[0]
        failed[host] = f"{failed.get(host, '')} {problem}"
    assert slow in failed and "mlx5_0" in failed[slow], faulty.problems()
    assert lost in failed and "GPU is lost" in failed[lost], faulty.problems()


def _two_compute_hosts(twin: ClusterTwin) -> tuple[str, str]:
    control = set(twin.control_hosts())
    compute = [h for h in twin.hosts if h not in control]
    return compute[0], compute[-1]


@full
def test_prolog_drains_a_node_with_a_lost_gpu_and_the_job_runs_elsewhere(
    installed: Installed,
) -> None:
    twin, _ = installed
    controller = twin.controller()
    bad, _ = _two_compute_hosts(twin)
    partition = twin.hosts[bad].group
    others = [h for h in twin.hosts if twin.hosts[h].group == partition and h != bad]
    twin.set_faults(bad, {"gpu_lost": [0]})
    try:
        # every other node of the partition is busy, so the scheduler tries the bad one first
        blockers = [
            _sbatch(twin, f"-p {partition} -w {h} --gres=gpu:8 --wrap 'sleep 20'") for h in others
        ]
        job = _sbatch(twin, f"-p {partition} -N1 --gres=gpu:8 --wrap 'hostname'")
        _wait(lambda: "JobState=COMPLETED" in _job(twin, job), 240, f"job {job} to complete", 3)
        shown = _job(twin, job)
        ran_on = re.search(r"\bNodeList=(\S+)", shown)
        assert ran_on and ran_on.group(1) != bad, shown
        assert re.search(r"Restarts=[1-9]", shown), shown  # requeued after the prolog failed
        node = twin.ssh(controller, f"scontrol show node {bad}").stdout
        assert "DRAIN" in node and "railplan gpu health (prolog)" in node, node
        del blockers
    finally:
        twin.set_faults(bad, {})
        twin.ssh(controller, f"scontrol update nodename={bad} state=resume", check=False)


def _sbatch(twin: ClusterTwin, args: str) -> str:
    out = twin.ssh(twin.controller(), f"sbatch --parsable -o /dev/null {args}").stdout.strip()
    return out.split(";")[0]


def _resume_count(earlier: list[float], at: float) -> float:
    """Slurm's count of recent resumes at ``at`` (`power_save.c`, `_do_power_work`).

    Every scan (`power_save_interval`, 10 s) multiplies it by (60 - 10) / 60, and a node
    resumes only while it rounds below ResumeRate: with ResumeRate=1 the second power-on
    comes 40 s after the first, not a minute. One scan of slack covers the scans' phase and
    the BMC's delay; power-ons at once count nearly 1 each.
    """
    return sum((50 / 60) ** ((at - t + POWER_SCAN_S) / POWER_SCAN_S) for t in earlier)


def _job(twin: ClusterTwin, job: str) -> str:
    return twin.ssh(twin.controller(), f"scontrol show job {job}", check=False).stdout


@full
def test_rolling_driver_update_one_su_at_a_time_with_the_control_hosts_last(
    installed: Installed,
) -> None:
    """A driver change on a running cluster: each batch is one SU's compute hosts, drained
    with the real scontrol (waiting for the job that runs there) before its reboot, resumed
    after; a host that power saving switched off is powered on and updated, not failed; the
    control hosts roll last, one at a time; a job submitted meanwhile never starts on a
    draining node."""
    twin, _ = installed
    controller = twin.controller()
    busy, off = _two_compute_hosts(twin)
    # long enough to outlast the batch's wait for ``off``'s power cycle (on the SU twin the
    # batch waited 31 s for its power-down and 11 s for it to come back before any drain,
    # and a 40 s job had ended: run 36 saw the node drained, never draining)
    running = _sbatch(twin, f"-w {busy} -p {twin.hosts[busy].group} --wrap 'sleep 150'")
    _wait(lambda: "JobState=RUNNING" in _job(twin, running), 60, "the job to run")
    twin.ssh(controller, f"scontrol update nodename={off} state=power_down")
    _wait(lambda: not twin.powered(off), 120, f"{off} powered off by Slurm")
    spec = twin.spec_path.read_text().replace('driver: "550.90.07"', f'driver: "{NEW_DRIVER}"')
    twin.rerender(spec)
    with SlurmWatch(twin, controller) as watch:
        outcome: dict[str, PlayResult] = {}
        play = threading.Thread(
            target=lambda: outcome.setdefault("run", twin.playbook(name="rolling"))
        )
        play.start()
        time.sleep(20)
        during = _sbatch(twin, "-N1 --wrap 'sleep 5'")
        play.join()
    result = outcome["run"]
    assert result.rc == 0 and not result.failed_hosts(), result.problems()
    for name in twin.hosts:
        version = twin.ssh(
            name, "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
        ).stdout
        assert set(version.split()) == {NEW_DRIVER}, f"{name}: {version}"
    # the drain waited for the job (slurmctld forgets a job MinJobAge after it ends: the
    # watch kept what squeue showed)
    assert watch.last_state_of(running) == "COMPLETED", watch.last_state_of(running)
    assert any(s.startswith(("drng", "draining")) for s in watch.states_of(busy))
    assert any(s.endswith("~") for s in watch.states_of(off)), watch.states_of(off)
    assert watch.draining_when_started() == []
    assert watch.last_state_of(during) == "COMPLETED", watch.last_state_of(during)
    _assert_batches(twin, watch)


def _assert_batches(twin: ClusterTwin, watch: SlurmWatch) -> None:
    """Never two SUs' compute hosts, nor two control hosts, out of service at once; the
    control hosts only after every compute host is back; the first one out is compute."""
    control = twin.control_hosts()
    out_of_service = [{n for n, s in sample.nodes.items() if s.startswith(("drain", "drng", "down"))}
                      for sample in watch.samples]  # fmt: skip
    first = next((s for s in out_of_service if s), set())
    assert first and not first & set(control), first
    for down in out_of_service:
        assert len(down & set(control)) <= 1, down
        compute = down - set(control)
        assert len({twin.hosts[h].su for h in compute}) <= 1, down
        if down & set(control):
            assert not compute, down


@full
def test_power_saving_suspends_idle_nodes_through_their_bmcs_and_resumes_them(
    installed: Installed,
) -> None:
    """After SuspendTime an idle compute node is powered off (Slurm -> railplan-suspend.sh ->
    ipmitool -> ipmi_sim); the control hosts never are; a job powers nodes on again at no
    more than ResumeRate a minute; an OS that ignores the soft power-off is cut off."""
    twin, _ = installed
    controller = twin.controller()
    control = twin.control_hosts()
    compute = [h for h in twin.hosts if h not in control]
    ignored = compute[-1]
    # the operator shortens SuspendTime: the spec, rendered, and the Slurm play applied
    spec = re.sub(r"suspend_time: \w+", "suspend_time: 2m", twin.spec_path.read_text())
    twin.rerender(spec)
    applied = twin.play_roles("gpu_servers:slurm_controllers", ["slurm"], name="slurm-suspend-2m")
    assert applied.rc == 0, applied.problems()
    assert "SuspendTime=120" in twin.ssh(controller, "cat /etc/slurm/slurm.conf").stdout
    (twin.hosts[ignored].hostdir / "acpi-ignored").touch()
    try:
        _wait(
            lambda: not any(twin.powered(h) for h in compute),
            600,
            "the compute nodes to power off",
            5,
        )
    finally:
        (twin.hosts[ignored].hostdir / "acpi-ignored").unlink()
    assert all(twin.powered(h) for h in control)

    def slurm_states() -> dict[str, str]:
        out = twin.ssh(controller, "sinfo --noheader --Node --format='%N %T'").stdout
        return dict(line.split() for line in out.splitlines())

    # "idle%" (powering down) turns "idle~" once SuspendTimeout has passed
    _wait(lambda: all(slurm_states()[h].endswith("~") for h in compute), 420, "idle~", 5)
    for name, state in slurm_states().items():
        assert state.endswith("~") == (name in compute), (name, state)
    log = twin.ssh(controller, "journalctl -t railplan-power --no-pager").stdout
    assert f"{ignored}: BMC" in log and "still on after the soft power-off" in log, log
    rate = int(re.search(r"ResumeRate=(\d+)", twin.slurm_conf()).group(1))  # type: ignore[union-attr]
    started = time.time()
    jobs = [_sbatch(twin, f"-w {h} -p {twin.hosts[h].group} --wrap hostname") for h in compute]
    for job in jobs:
        _wait(lambda job=job: "JobState=COMPLETED" in _job(twin, job), 600, f"job {job}", 5)  # type: ignore[misc]
    ons = sorted(twin.power_on_times(h, since=started) for h in compute)
    assert all(_resume_count(ons[:i], t) < rate - 0.5 for i, t in enumerate(ons)), (ons, rate)


def _slurm_release(twin: ClusterTwin) -> list[int]:
    version = twin.ssh(twin.controller(), "scontrol --version").stdout
    return [int(p) for p in re.findall(r"\d+", version)[:2]]


@full
def test_a_run_longer_than_suspend_time_keeps_its_hosts_then_gives_them_back(
    installed: Installed,
) -> None:
    """Run 26 lost 20 idle hosts 30 minutes into a re-run: Slurm powered them off under it.
    With SuspendTime=120 (the scenario before this one), a configuration run of several
    minutes: each play holds its hosts off power saving (Slurm 23.02+), so none is powered off
    during the run and it passes; the last play gives them back, and the idle compute hosts
    are powered off after it."""
    twin, _ = installed
    controller = twin.controller()
    if "SuspendTime=120" not in twin.ssh(controller, "cat /etc/slurm/slurm.conf").stdout:
        pytest.skip("needs SuspendTime=120 from the power-saving scenario before it")
    if _slurm_release(twin) < [23, 2]:
        pytest.skip("Slurm before 23.02 cannot hold a run's hosts off power saving (RP093)")
    compute = [h for h in twin.hosts if h not in twin.control_hosts()]
    # start from every compute host off: the run powers them on (each play holds its hosts
    # first), so without the hold each would be off again SuspendTime after its power-on
    _wait(lambda: not any(twin.powered(h) for h in compute), 600, "idle hosts off", 5)
    started = time.time()
    run = twin.playbook(*GREEN_FIELD, "--skip-tags", "acceptance", name="held")
    ended = time.time()
    assert run.rc == 0 and not run.failed_hosts(), run.problems()
    assert all(twin.power_on_times(h, since=started) for h in compute)
    powered_on = max(twin.power_on_times(h, since=started) for h in compute)
    # the window below must hold a whole SuspendTime after the last power-on; its last 30 s
    # are left out, since the last play gives the hosts back
    assert ended - 30 > powered_on + 120 + 2 * POWER_SCAN_S, (started, powered_on, ended)
    log = twin.ssh(
        controller,
        f"journalctl -t railplan-power --no-pager --since @{started:.0f} --until @{ended - 30:.0f}",
    ).stdout
    assert not re.search(r"chassis power (soft|off)", log), log
    _wait(lambda: not any(twin.powered(h) for h in compute), 600, "idle hosts given back", 5)
