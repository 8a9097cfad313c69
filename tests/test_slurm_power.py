"""Slurm power saving: the rendered lines and map, the BMC power script run for real, the role.

The script (the slurm role's ``files/railplan-power.sh``) runs as slurmctld would run it, with
one hostlist argument, against the map railplan renders for a spec. Real here: bash, the
real ``scontrol`` expanding the hostlist (with a two-line slurm.conf), awk, shellcheck.
Mocked, because neither exists in a test container: ``ipmitool`` (there is no BMC; the fake
records its arguments, the password it read through ``-f`` and whether the password was in
its environment, and fails for the BMC addresses in ``FAKE_IPMI_FAIL``) and ``logger`` (no
syslog daemon, no /dev/log; the fake appends its arguments to a file). The role runs for real
with ansible-playbook against this host, writing only under ``tmp_path``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from infra.catalog import Catalog
from infra.errors import SpecError
from infra.render import slurm_conf, slurm_power
from infra.render.tree import render_tree
from infra.spec import Spec, load_spec_text
from infra.topology import Plan, expand
from infra.topology.power_saving import suspendable

from .conftest import ROOT
from .test_render_ansible import _group_vars
from .test_render_files import expand_hostlist
from .test_rules import rule_ids
from .test_slurm_role import _changed, _fixture, _run

SCRIPT = ROOT / "playbooks/roles/slurm/files/railplan-power.sh"
LAB = ROOT / "tests/data/slurm/a100-lab-slurm.yaml"  # train01 controller, infer excluded
PASSWORD = "s3cret-BMC-pw"
USER = "powerop"
POWER_LINE = "  power_saving: {suspend_time: 30m, exclude_groups: [infer]}\n"

FAKE_IPMITOOL = f"""#!{sys.executable}
import json, os, sys, time
argv = sys.argv[1:]
password = open(argv[argv.index("-f") + 1]).read().strip() if "-f" in argv else None
record = {{
    "argv": argv,
    "start": time.monotonic(),
    "password": password,
    "password_in_env": any({PASSWORD!r} in v for v in os.environ.values()),
}}
time.sleep(float(os.environ.get("FAKE_IPMI_SESSION_S", "0")))  # a BMC session's round trips
record["end"] = time.monotonic()
with open(os.environ["FAKE_IPMI_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
host = argv[argv.index("-H") + 1]
if host in os.environ.get("FAKE_IPMI_FAIL", "").split(","):
    print("Error: Unable to establish IPMI v2 / RMCP+ session", file=sys.stderr)
    sys.exit(1)
if argv[-1] == "status":
    on = host in os.environ.get("FAKE_IPMI_STAYS_ON", "").split(",")
    print("Chassis Power is " + ("on" if on else "off"))
else:
    print("Chassis Power Control: " + argv[-1].capitalize())
"""
FAKE_LOGGER = """#!/bin/sh
printf '%s\\n' "$*" >>"$FAKE_LOGGER_LOG"
"""


def _load(path: Path, catalog: Catalog) -> tuple[Spec, Plan]:
    spec = load_spec_text(path.read_text()).spec
    return spec, expand(spec, catalog)


def _spec_text(extra: str) -> str:
    """The lab spec with another power_saving line."""
    text = LAB.read_text()
    old = "power_saving: {suspend_time: 30m, exclude_groups: [infer]}"
    assert old in text
    return text.replace(old, extra)


# --- rendered lines and map -------------------------------------------------------------------


def _conf_values(spec: Spec, plan: Plan, catalog: Catalog) -> dict[str, str]:
    text = slurm_conf.slurm_conf(plan, spec, catalog)
    return dict(x.split("=", 1) for x in text.splitlines() if "=" in x.split(" ")[0])


def test_lines_follow_the_spec_and_keep_controller_and_excluded_groups(catalog: Catalog) -> None:
    spec, plan = _load(LAB, catalog)
    conf = _conf_values(spec, plan, catalog)
    assert conf["SuspendTime"] == "1800"  # 30m; seconds, slurm.conf(5)
    assert conf["SuspendTimeout"] == "300" and conf["ResumeTimeout"] == "900"  # the defaults
    assert conf["SuspendProgram"] == slurm_power.SUSPEND_PROGRAM
    assert conf["ResumeProgram"] == slurm_power.RESUME_PROGRAM
    assert conf["ResumeFailProgram"] == slurm_power.RESUME_FAIL_PROGRAM
    assert sorted(expand_hostlist(conf["SuspendExcNodes"])) == ["infer01", "infer02", "train01"]
    assert conf["SuspendRate"] == "60"
    files = slurm_conf.slurm_files(plan, spec, catalog)
    rows = [line.split() for line in files["bmc-hosts"].splitlines() if not line.startswith("#")]
    train02 = next(s for s in plan.servers if s.name == "train02")
    assert rows == [["train02", train02.bmc_ip]]


def test_the_map_is_the_inventorys_bmc_addresses(catalog: Catalog) -> None:
    """bmc-hosts and host_vars' railplan_bmc_ip (and hosts.csv) are one plan: they agree."""
    spec, plan = _load(ROOT / "tests/golden/inputs/h100-slurm-opensm.yaml", catalog)
    tree = {path: data.decode() for path, data in render_tree(spec, catalog, plan).items()}
    prefix = f"inventories/{spec.name}/"
    rows = [
        line.split()
        for line in tree[prefix + "files/slurm/bmc-hosts"].splitlines()
        if not line.startswith("#")
    ]
    assert len(rows) == len(plan.servers) - 2  # all but the controller and the standby SM
    sheet = {
        r["name"]: r["bmc_ip"]
        for r in csv.DictReader(io.StringIO(tree[prefix + "files/hosts.csv"]))
    }
    for name, bmc in rows:
        host_vars = yaml.safe_load(tree[f"{prefix}host_vars/{name}.yml"])
        assert host_vars["railplan_bmc_ip"] == bmc == sheet[name]


def test_no_power_saving_renders_no_lines_and_no_map(catalog: Catalog) -> None:
    spec = load_spec_text(LAB.read_text().replace(POWER_LINE, "")).spec
    plan = expand(spec, catalog)
    assert spec.scheduler.power_saving is None
    files = slurm_conf.slurm_files(plan, spec, catalog)
    assert "bmc-hosts" not in files
    assert not any(k in files["slurm.conf"] for k in ("Suspend", "Resume"))


def test_resume_rate_is_one_racks_servers_a_minute_unless_set(catalog: Catalog) -> None:
    spec, plan = _load(ROOT / "examples/dgx-h100-superpod.yaml", catalog)
    per_rack = Counter(s.rack for s in suspendable(plan, spec))
    assert len(per_rack) > 1 and None not in per_rack
    rate = int(_conf_values(spec, plan, catalog)["ResumeRate"])
    assert rate == max(per_rack.values())
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 0
    assert rate < su_size  # a whole SU can no longer power on in one minute (it was 32 of 32)
    spec = load_spec_text(_spec_text("power_saving: {resume_rate: 7, suspend_rate: 5}")).spec
    conf = _conf_values(spec, expand(spec, catalog), catalog)
    assert conf["ResumeRate"] == "7" and conf["SuspendRate"] == "5"
    assert conf["SuspendExcNodes"] == "train01"  # no exclude_groups: only the controller


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("resume_timeout", "20h", False),  # rendered ResumeTimeout=72000: slurmctld refuses
        ("suspend_timeout", "19h", False),
        ("resume_timeout", "999999s", False),
        ("resume_timeout", "65536s", False),
        ("resume_timeout", "65535s", True),
        ("suspend_timeout", "18h", True),
    ],
)
def test_slurm_timeouts_fit_slurms_sixteen_bits(key: str, value: str, ok: bool) -> None:
    """slurm.conf reads SuspendTimeout and ResumeTimeout as 16-bit seconds (at most 65535)."""
    text = _spec_text(f"power_saving: {{{key}: {value}}}")
    if ok:
        assert load_spec_text(text).spec.scheduler.power_saving is not None
        return
    with pytest.raises(SpecError) as error:
        load_spec_text(text, "lab.yaml")
    line = error.value.one_line()
    assert line.startswith("lab.yaml:") and "65535" in line and key in line, line


def test_cloud_instances_are_never_powered_off_and_lint_says_nothing_would_be(
    catalog: Catalog,
) -> None:
    """The plan gives cloud instances BMC addresses too; their BMC is the provider's."""
    text = (
        'name: cloudy\nsoftware: {dcgm: "4.2.3"}\nnode_groups:\n'
        "  - {name: gpu, node: aws-p5.48xlarge, count: 4}\n"
        "scheduler:\n  kind: slurm\n  power_saving: {}\n"
    )
    spec = load_spec_text(text).spec
    plan = expand(spec, catalog)
    assert all(s.bmc_ip is not None and s.rack is None for s in plan.servers)
    assert suspendable(plan, spec) == []
    assert rule_ids(text, catalog) == {"RP092"}


def test_group_vars_turn_the_roles_power_saving_on(catalog: Catalog) -> None:
    assert _group_vars(LAB.read_text())["all"]["slurm_power_saving"] is True
    off = _group_vars(LAB.read_text().replace(POWER_LINE, ""))
    assert "slurm_power_saving" not in off["all"]  # the role's default, false


# --- the script, run for real --------------------------------------------------------------------


@pytest.fixture
def power_env(tmp_path: Path, catalog: Catalog) -> tuple[Path, dict[str, str]]:
    """A power directory with the rendered lab map and credentials, fakes on PATH."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        if os.environ.get("CI"):
            pytest.fail("scontrol missing on CI (Debian package slurm-client)")
        pytest.skip("scontrol missing (Debian package slurm-client)")
    spec, plan = _load(LAB, catalog)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "bmc-hosts").write_text(slurm_power.bmc_hosts(plan, spec))
    (etc / "railplan-bmc.user").write_text(USER + "\n")
    (etc / "railplan-bmc.password").write_text(PASSWORD + "\n")
    (etc / "railplan-bmc.password").chmod(0o600)
    # No controller runs here: with MessageTimeout=1 the script's `scontrol show config` and
    # `show node` fail at once (connect refused) instead of retrying for 9 s each.
    (etc / "slurm.conf").write_text("ClusterName=test\nSlurmctldHost=localhost\nMessageTimeout=1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ipmitool", FAKE_IPMITOOL), ("logger", FAKE_LOGGER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for name in ("railplan-suspend.sh", "railplan-resume.sh", "railplan-resume-fail.sh"):
        shutil.copy(SCRIPT, bin_dir / name)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RAILPLAN_POWER_DIR": str(etc),
        "SLURM_CONF": str(etc / "slurm.conf"),
        "FAKE_IPMI_LOG": str(tmp_path / "ipmi.log"),
        "FAKE_LOGGER_LOG": str(tmp_path / "logger.log"),
        "RAILPLAN_POWER_POLL_S": "0.1",
        "RAILPLAN_POWER_SOFT_OFF_S": "1",
    }
    return tmp_path, env


def _power(
    power_env: tuple[Path, dict[str, str]], program: str, *args: str, **env: str
) -> tuple[int, list[dict[str, object]], list[str]]:
    tmp, base = power_env
    done = subprocess.run(
        [str(tmp / "bin" / program), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    ipmi = tmp / "ipmi.log"
    calls = [json.loads(x) for x in ipmi.read_text().splitlines()] if ipmi.exists() else []
    logged = (tmp / "logger.log").read_text().splitlines() if (tmp / "logger.log").exists() else []
    ipmi.unlink(missing_ok=True)
    (tmp / "logger.log").unlink(missing_ok=True)
    return done.returncode, calls, logged


def _lab_bmc(catalog: Catalog, name: str) -> str:
    _, plan = _load(LAB, catalog)
    bmc = next(s.bmc_ip for s in plan.servers if s.name == name)
    assert bmc is not None
    return bmc


@pytest.mark.parametrize(
    ("program", "action"),
    [
        ("railplan-suspend.sh", "soft"),
        ("railplan-resume.sh", "on"),
        ("railplan-resume-fail.sh", "off"),
    ],
)
def test_each_program_drives_the_servers_bmc(
    power_env: tuple[Path, dict[str, str]], catalog: Catalog, program: str, action: str
) -> None:
    status, calls, logged = _power(power_env, program, "train02")
    assert status == 0, logged
    base = [
        "-I", "lanplus", "-H", _lab_bmc(catalog, "train02"), "-U", USER,
        "-f", str(power_env[0] / "etc/railplan-bmc.password"), "chassis", "power",
    ]  # fmt: skip
    # a soft power-off is followed up: the BMC is asked until the server is off
    follow_up = [[*base, "status"]] if action == "soft" else []
    assert [c["argv"] for c in calls] == [[*base, action], *follow_up]
    assert calls[0]["password"] == PASSWORD  # ipmitool reads it from the 0600 file
    assert not calls[0]["password_in_env"]
    assert not any(PASSWORD in a for c in calls for a in c["argv"])  # type: ignore[union-attr]
    assert any("daemon.info" in x and "railplan-power" in x and "train02" in x for x in logged)


def test_a_server_still_on_after_the_soft_power_off_is_cut_off(
    power_env: tuple[Path, dict[str, str]], catalog: Catalog
) -> None:
    """An OS that ignores the ACPI request (hung, ACPI off) would stay on while slurmctld
    counts the node as powered down: the suspend program cuts the power once the grace is over."""
    status, calls, logged = _power(
        power_env, "railplan-suspend.sh", "train02", FAKE_IPMI_STAYS_ON=_lab_bmc(catalog, "train02")
    )
    assert status == 0, logged
    actions = [c["argv"][-1] for c in calls]  # type: ignore[index]
    assert actions[0] == "soft" and actions[-1] == "off" and set(actions[1:-1]) == {"status"}
    assert any("still on after the soft power-off" in x and "daemon.warning" in x for x in logged)


@pytest.mark.parametrize(
    ("state", "powered_off"),
    [
        ("IDLE+DRAIN", False),  # drained for the roll-out: Slurm 21.08 would suspend it
        # resumed after the roll-out: Slurm 23.11 keeps the last reason (the twin, Ubuntu 24.04)
        ("IDLE", True),
    ],
)
def test_a_node_drained_for_the_roll_out_is_left_on_a_resumed_one_is_not(
    power_env: tuple[Path, dict[str, str]], state: str, powered_off: bool
) -> None:
    tmp, _ = power_env
    real = shutil.which("scontrol")
    shown = tmp / "show-node.txt"
    shown.write_text(
        f"NodeName=train02 Arch=x86_64 CoresPerSocket=64\n   State={state} ThreadsPerCore=2\n"
        "   Reason=railplan rolling update [root@2026-12-05T22:30:34]\n"
    )
    # no controller runs here: `show node` answers from a file, the rest is the real scontrol
    (tmp / "bin" / "scontrol").write_text(
        f'#!/bin/sh\n[ "$1 $2" = "show node" ] && exec cat "{shown}"\nexec "{real}" "$@"\n'
    )
    (tmp / "bin" / "scontrol").chmod(0o755)
    status, calls, logged = _power(power_env, "railplan-suspend.sh", "train02")
    assert status == 0, logged
    assert bool(calls) == powered_off, (calls, logged)
    assert any("drained for a railplan roll-out" in x for x in logged) != powered_off, logged


def test_a_second_argument_node_features_is_ignored(
    power_env: tuple[Path, dict[str, str]], catalog: Catalog
) -> None:
    """slurmctld may pass the nodes' features after the hostlist (node_features plugins)."""
    status, calls, _ = _power(power_env, "railplan-resume.sh", "train02", "mig,nvlink")
    assert status == 0
    assert [c["argv"][3] for c in calls] == [_lab_bmc(catalog, "train02")]  # type: ignore[index]


def test_a_hostlist_is_expanded_and_a_node_outside_the_map_refused(
    power_env: tuple[Path, dict[str, str]], catalog: Catalog
) -> None:
    # train01 is the controller and infer01 an excluded group's: neither is in the map
    status, calls, logged = _power(power_env, "railplan-suspend.sh", "train[01-02],infer01")
    assert status == 1
    assert {c["argv"][3] for c in calls} == {_lab_bmc(catalog, "train02")}  # type: ignore[index]
    refused = [x for x in logged if "daemon.err" in x and "refused" in x]
    assert len(refused) == 2
    assert {n for n in ("train01", "infer01") for x in refused if n in x} == {"train01", "infer01"}


def test_a_failing_bmc_is_reported_and_does_not_stop_the_others(
    power_env: tuple[Path, dict[str, str]], catalog: Catalog, tmp_path: Path
) -> None:
    etc = power_env[0] / "etc"
    (etc / "bmc-hosts").write_text("train02 192.0.2.2\ntrain03 192.0.2.3\n")
    status, calls, logged = _power(
        power_env, "railplan-resume.sh", "train[02-03]", FAKE_IPMI_FAIL="192.0.2.2"
    )
    assert status == 1
    assert sorted(c["argv"][3] for c in calls) == ["192.0.2.2", "192.0.2.3"]  # type: ignore[index]
    failed = [x for x in logged if "daemon.err" in x]
    assert len(failed) == 1 and "train02" in failed[0] and "RMCP+" in failed[0]
    assert "failed (exit 1)" in failed[0], failed  # ipmitool's own status, not the shell's


@pytest.mark.parametrize("program", ["railplan-resume.sh", "railplan-suspend.sh"])
def test_every_servers_bmc_is_driven_at_once(
    power_env: tuple[Path, dict[str, str]], program: str
) -> None:
    """slurmctld hands one call a whole hostlist and counts ResumeTimeout for every node from
    its request; on the SU twin (Ubuntu 24.04, 11 s a BMC session) the last of 12 servers
    powered on one after another came up past the 90 s ResumeTimeout, and the suspend
    program was killed half-way. Every BMC session now runs at once."""
    etc = power_env[0] / "etc"
    (etc / "bmc-hosts").write_text("".join(f"gpu{i:02d} 192.0.2.{i}\n" for i in range(1, 9)))
    status, calls, logged = _power(power_env, program, "gpu[01-08]", FAKE_IPMI_SESSION_S="2")
    assert status == 0, logged
    first = [c for c in calls if c["argv"][-1] != "status"]  # type: ignore[index]
    assert sorted(c["argv"][3] for c in first) == [f"192.0.2.{i}" for i in range(1, 9)]  # type: ignore[index]
    # every session began before the first one ended: all eight were open at once
    assert max(c["start"] for c in first) < min(c["end"] for c in first)  # type: ignore[type-var]


@pytest.mark.parametrize(
    ("program", "args", "missing"),
    [
        ("railplan-resume.sh", (), None),  # no hostlist
        ("railplan-resume.sh", ("train02", "", "x"), None),  # three arguments
        ("railplan-resume.sh", ("train02",), "railplan-bmc.password"),
        ("railplan-resume.sh", ("train02",), "bmc-hosts"),
    ],
)
def test_usage_and_setup_errors_power_nothing(
    power_env: tuple[Path, dict[str, str]], program: str, args: tuple[str, ...], missing: str | None
) -> None:
    if missing:
        (power_env[0] / "etc" / missing).unlink()
    status, calls, logged = _power(power_env, program, *args)
    assert status == 2 and not calls
    assert any("daemon.err" in x for x in logged)


def test_an_unknown_program_name_does_nothing(power_env: tuple[Path, dict[str, str]]) -> None:
    shutil.copy(SCRIPT, power_env[0] / "bin" / "power.sh")
    status, calls, _ = _power(power_env, "power.sh", "train02")
    assert status == 2 and not calls


def test_the_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck missing on CI")
        pytest.skip("shellcheck missing (Debian package shellcheck)")
    done = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


# --- the role ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_role_installs_programs_and_map_in_the_sandbox_idempotently(
    tmp_path: Path, catalog: Catalog
) -> None:
    inventory, play = _fixture(tmp_path, catalog, railplan_sandbox=True, slurm_power_saving=True)
    first = _run(inventory, play)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    etc = tmp_path / "etc"
    for name in ("railplan-suspend.sh", "railplan-resume.sh", "railplan-resume-fail.sh"):
        assert (etc / name).read_text() == SCRIPT.read_text()
        assert stat.S_IMODE((etc / name).stat().st_mode) == 0o755
    rendered = tmp_path / "inventory/files/slurm/bmc-hosts"
    assert (etc / "bmc-hosts").read_text() == rendered.read_text()
    assert not (etc / "railplan-bmc.password").exists()  # SlurmUser's file: not in the sandbox
    second = _run(inventory, play)
    assert second.returncode == 0 and _changed(second) == 0


def test_role_writes_the_vault_password_for_slurmuser_only_and_never_logs_it(
    tmp_path: Path, catalog: Catalog
) -> None:
    """power.yml alone, out of the sandbox, SlurmUser this user (no slurm account here)."""
    inventory, _ = _fixture(
        tmp_path,
        catalog,
        slurm_power_saving=True,
        slurm_power_bmc_user=USER,
        slurm_power_bmc_password=PASSWORD,
        __slurm_user=subprocess.run(
            ["id", "-un"], capture_output=True, text=True, check=True
        ).stdout.strip(),
    )
    play = tmp_path / "power.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: slurm, tasks_from: power.yml}\n"
    )
    result = _run(inventory, play)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    password = tmp_path / "etc/railplan-bmc.password"
    assert password.read_text() == PASSWORD + "\n"
    assert stat.S_IMODE(password.stat().st_mode) == 0o600
    assert (tmp_path / "etc/railplan-bmc.user").read_text() == USER + "\n"
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("password", [None, "Too-long-for-IPMI-2.0"], ids=["unset", "too-long"])
def test_role_stops_without_a_usable_vault_password(
    tmp_path: Path, catalog: Catalog, password: str | None
) -> None:
    """Out of the sandbox, before any package: no password, or one longer than IPMI's 20 bytes."""
    extra = {} if password is None else {"slurm_power_bmc_password": password}
    inventory, play = _fixture(
        tmp_path,
        catalog,
        railplan_sandbox=False,
        slurm_munge_key="a2V5",
        slurm_power_saving=True,
        slurm_power_bmc_user=USER,
        **extra,
    )
    result = _run(inventory, play)
    assert result.returncode != 0
    assert "slurm_power_bmc_password is unset" in result.stdout
    assert "ansible-vault encrypt_string" in result.stdout
    assert not (tmp_path / "etc").exists()  # nothing installed before the check
    if password is not None:
        assert password not in result.stdout
