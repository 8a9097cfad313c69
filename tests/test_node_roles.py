"""Run node-role tasks for real with ansible-playbook against localhost and check the outcome.

What cannot exist on this machine is stood in for, and only that: the facts of a GPU server
(its kernel release, CPU vendor, virtualization role) come from a stand-in module in
``library/`` that returns them as ``ansible_facts`` (Ansible merges any module's
``ansible_facts`` into the host's facts, as ``setup`` does); packages, systemd units and
reboots are skipped through each role's ``<role>_sandbox`` switch, and every file a task
writes goes under ``tmp_path``. Handlers that the sandbox skips still show up in the run's
report as notified, which is how the reboot and restart handlers are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "playbooks" / "roles"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

STAND_IN_FACTS = '''#!/usr/bin/python
"""Stand-in facts of a GPU server this machine is not: returns its `facts` argument."""
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}})
module.exit_json(changed=False, ansible_facts=module.params["facts"])
'''


def run_play(
    tmp_path: Path,
    tasks: list[dict[str, Any]],
    facts: dict[str, Any] | None = None,
    gather_subset: list[str] | None = None,
    succeeds: bool = True,
) -> dict[str, Any]:
    """Run ``tasks`` on localhost (local connection) and return the json callback's report."""
    library = tmp_path / "library"
    library.mkdir(exist_ok=True)
    (library / "stand_in_facts.py").write_text(STAND_IN_FACTS)
    pre = [{"name": "Stand in for the GPU server's facts.", "stand_in_facts": {"facts": facts}}]
    play = {
        "name": "Run role tasks.",
        "hosts": "localhost",
        "gather_facts": True,
        "gather_subset": gather_subset or ["min", "hardware"],
        "tasks": (pre if facts else []) + tasks,
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_LIBRARY": str(library),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_INJECT_FACT_VARS": "False",
    }
    inventory = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (tmp_path / "hosts").write_text(inventory)
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts"), str(playbook)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert (result.returncode == 0) == succeeds, result.stdout[-4000:] + result.stderr[-2000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def task_results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The localhost result of every task and handler that ran, by name without the role."""
    return {
        task["task"]["name"].split(" : ", 1)[-1]: task["hosts"]["localhost"]
        for play in report["plays"]
        for task in play["tasks"]
        if "localhost" in task["hosts"]
    }


def role_tasks(role: str, tasks_from: str, **role_vars: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": f"Run {role} {tasks_from}.",
            "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
            "vars": role_vars,
        }
    ]


def show(var: str) -> dict[str, Any]:
    return {"name": f"Show {var}.", "ansible.builtin.debug": {"var": var}}


# --- rdma: GPUDirect RDMA from the kernel-module flavour ----------------------------------------


@pytest.mark.parametrize(
    ("flavour", "kernel", "mode"),
    [
        pytest.param("open", "6.8.0-45-generic", "dmabuf", marks=pytest.mark.slow),
        pytest.param("open", "5.12.0", "dmabuf", marks=pytest.mark.slow),
        # open modules but no RDMA dma-buf
        pytest.param("open", "5.4.0-150-generic", "peermem", marks=pytest.mark.slow),
        ("proprietary", "6.8.0-45-generic", "peermem"),  # the bug: was dmabuf, peermem removed
        pytest.param("proprietary", "5.4.0-150-generic", "peermem", marks=pytest.mark.slow),
    ],
)
def test_gpudirect_mode_follows_the_kernel_module_flavour(
    tmp_path: Path, flavour: str, kernel: str, mode: str
) -> None:
    peermem_conf = tmp_path / "modules-load.d" / "nvidia-peermem.conf"
    peermem_conf.parent.mkdir()
    peermem_conf.write_text("nvidia-peermem\n")  # as a previous peermem run left it
    tasks = role_tasks(
        "rdma",
        "gpudirect",
        rdma_sandbox=True,
        nvidia_driver_kernel_modules=flavour,
        nvidia_driver_version="550.90.07",
        rdma_peermem_modules_load_file=str(peermem_conf),
    )
    report = run_play(tmp_path, [*tasks, show("__rdma_gpudirect_mode")], facts={"kernel": kernel})
    assert task_results(report)["Show __rdma_gpudirect_mode."]["__rdma_gpudirect_mode"] == mode
    # nvidia-peermem stays loaded at boot whenever DMA-BUF cannot carry GPUDirect
    assert peermem_conf.exists() == (mode == "peermem")


def test_explicit_dmabuf_on_proprietary_modules_fails_instead_of_dropping_peermem(
    tmp_path: Path,
) -> None:
    peermem_conf = tmp_path / "nvidia-peermem.conf"
    peermem_conf.write_text("nvidia-peermem\n")
    tasks = role_tasks(
        "rdma",
        "gpudirect",
        rdma_sandbox=True,
        rdma_gpudirect="dmabuf",
        nvidia_driver_kernel_modules="proprietary",
        rdma_peermem_modules_load_file=str(peermem_conf),
    )
    report = run_play(tmp_path, tasks, facts={"kernel": "6.8.0-45-generic"}, succeeds=False)
    failed = task_results(report)["Check that DMA-BUF mode can work on this host."]
    assert failed.get("failed") and "open kernel modules" in failed["msg"]
    assert peermem_conf.exists()


# --- rdma: the ACS guard sees the virtualization role -------------------------------------------


def _acs_tasks(tmp_path: Path) -> list[dict[str, Any]]:
    return role_tasks(
        "rdma",
        "main",
        rdma_sandbox=True,
        rdma_stack="none",
        nvidia_driver_kernel_modules="proprietary",
        rdma_peermem_modules_load_file=str(tmp_path / "nvidia-peermem.conf"),
        rdma_acs_script_path=str(tmp_path / "railplan-disable-acs"),
        rdma_acs_unit_dir=str(tmp_path),
    )


def test_rdma_gathers_the_virtualization_fact_that_min_hardware_leaves_out(tmp_path: Path) -> None:
    """ansible.cfg gathers min,hardware; the ACS guard needs virtualization_role."""
    tasks = [
        *_acs_tasks(tmp_path),
        {
            "name": "Record whether the fact is known.",
            "ansible.builtin.set_fact": {
                "known": "{{ 'virtualization_role' in ansible_facts }}",
                "role": "{{ ansible_facts['virtualization_role'] | default('NA') }}",
            },
        },
        show("known"),
        show("role"),
    ]
    report = run_play(tmp_path, tasks, gather_subset=["min", "hardware"])
    results = task_results(report)
    assert results["Show known."]["known"] is True
    unit = tmp_path / "railplan-disable-acs.service"
    assert unit.exists() == (results["Show role."]["role"] != "guest")


@pytest.mark.parametrize(
    ("role", "installed"), [pytest.param("guest", False, marks=pytest.mark.slow), ("host", True)]
)
def test_acs_unit_is_installed_on_bare_metal_only(
    tmp_path: Path, role: str, installed: bool
) -> None:
    facts = {"virtualization_role": role, "virtualization_type": "kvm"}
    run_play(tmp_path, _acs_tasks(tmp_path), facts=facts)
    assert (tmp_path / "railplan-disable-acs.service").exists() == installed
    assert (tmp_path / "railplan-disable-acs").exists() == installed


# --- rdma: DOCA packages build against the running kernel; openibd restarts ----------------------


def _load(path: Path) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = yaml.safe_load(path.read_text())
    return tasks


@pytest.mark.parametrize("family", ["Debian", "RedHat"])
def test_doca_install_follows_the_kernel_headers_and_restarts_openibd(family: str) -> None:
    """Read, not run here: the cluster twin runs it (tests/test_cluster_twin.py). The new
    stack rebuilds nvidia-peermem first, and openibd restarts detached from Ansible's
    connection, which it would cut, then the host is waited for."""
    tasks = _load(ROLES / "rdma" / "tasks" / f"setup-{family}.yml")
    names = [t["name"] for t in tasks]
    headers = names.index("Ensure the kernel headers for the running kernel are installed.")
    stack = names.index("Ensure the RDMA stack and PCI tools are installed.")
    assert headers < stack
    header_vars = yaml.safe_load((ROLES / "rdma" / "vars" / f"{family}.yml").read_text())
    assert all("ansible_facts['kernel']" in p for p in header_vars["__rdma_kernel_header_packages"])
    notified = tasks[stack]["notify"]
    order = [
        "rebuild nvidia modules for the rdma stack",
        "unload nvidia-peermem for openibd",
        "restart openibd",
        "wait for the host after openibd",
        "wait for openibd to finish",
        "reload nvidia-peermem after openibd",
    ]
    assert notified == order
    handlers = [h["name"].split("  #")[0] for h in _load(ROLES / "rdma" / "handlers" / "main.yml")]
    assert [h for h in handlers if h in order] == order  # handlers run in file order
    by_name = {
        h["name"].split("  #")[0]: h for h in _load(ROLES / "rdma" / "handlers" / "main.yml")
    }
    restart = by_name["restart openibd"]["ansible.builtin.command"]["argv"]
    assert restart[0] == "systemd-run" and restart[-3:] == ["systemctl", "restart", "openibd"]
    assert "ansible.builtin.wait_for_connection" in by_name["wait for the host after openibd"]
    for name in order:
        assert "not rdma_sandbox | bool" in by_name[name]["when"]


# --- nvidia_driver: persistence mode, packages per flavour ---------------------------------------


@pytest.mark.slow
def test_persistenced_drop_in_forces_persistence_mode(tmp_path: Path) -> None:
    dropin = tmp_path / "nvidia-persistenced.service.d"
    tasks = role_tasks(
        "nvidia_driver",
        "persistenced",
        nvidia_driver_sandbox=True,
        nvidia_driver_persistenced_dropin_dir=str(dropin),
        __nvidia_driver_persistenced_service="nvidia-persistenced",
    )
    first = task_results(run_play(tmp_path, tasks))
    text = (dropin / "railplan.conf").read_text()
    assert (
        "[Service]\nExecStart=\nExecStart=/usr/bin/nvidia-persistenced --user "
        "nvidia-persistenced --persistence-mode --verbose\n" in text
    )
    assert "restart nvidia-persistenced" in first  # notified (skipped by the sandbox)
    second = task_results(run_play(tmp_path, tasks))
    assert "restart nvidia-persistenced" not in second
    assert not second["Ensure nvidia-persistenced runs with persistence mode on."]["changed"]


@pytest.mark.parametrize(
    ("family", "flavour", "packages", "stream"),
    [
        ("Debian", "open", ["nvidia-headless-570-open", "nvidia-utils-570"], "570-dkms"),
        pytest.param(
            "Debian",
            "proprietary",
            ["nvidia-headless-570", "nvidia-utils-570"],
            "570-dkms",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "RedHat", "open", ["kmod-nvidia-open-dkms"], "570-open", marks=pytest.mark.slow
        ),
        ("RedHat", "proprietary", ["kmod-nvidia-latest-dkms"], "570-dkms"),
    ],
)
def test_driver_packages_match_the_kernel_module_flavour(
    tmp_path: Path, family: str, flavour: str, packages: list[str], stream: str
) -> None:
    role = ROLES / "nvidia_driver"
    tasks = [
        {
            "name": "Load the role's defaults and OS variables.",
            "ansible.builtin.include_vars": {"file": str(path)},
        }
        for path in (role / "defaults" / "main.yml", role / "vars" / f"{family}.yml")
    ] + [
        {  # set_fact outranks include_vars, as the renderer's group_vars outrank role defaults
            "name": "Set what the inventory sets.",
            "ansible.builtin.set_fact": {
                "nvidia_driver_kernel_modules": flavour,
                "nvidia_driver_version": "570.86.15",
            },
        },
        {
            "name": "Record the choice.",
            "ansible.builtin.set_fact": {
                "chosen": "{{ __nvidia_driver_packages }}",
                "stream": "{{ nvidia_driver_rhel_module_stream }}",
            },
        },
        show("chosen"),
        show("stream"),
    ]
    results = task_results(run_play(tmp_path, tasks))
    chosen = results["Show chosen."]["chosen"]
    assert set(packages) <= set(chosen)
    assert not any(p.startswith("cuda-drivers") for p in chosen)  # the desktop stack
    if family == "RedHat":
        assert results["Show stream."]["stream"] == stream


# --- os_tuning: kernel arguments, and the reboot that applies them ------------------------------


@pytest.mark.parametrize(
    ("vendor", "args"),
    [
        ("GenuineIntel", "intel_iommu=on iommu=pt"),
        pytest.param("AuthenticAMD", "iommu=pt", marks=pytest.mark.slow),
    ],
)
def test_kernel_arguments_are_valid_and_a_change_notifies_the_reboot(
    tmp_path: Path, vendor: str, args: str
) -> None:
    dropin = tmp_path / "grub.d" / "railplan.cfg"
    tasks = role_tasks(
        "os_tuning",
        "kernel-cmdline",
        os_tuning_sandbox=True,
        os_tuning_grub_dropin=str(dropin),
        os_tuning_kernel_args=["iommu=pt"],
        os_tuning_transparent_hugepage="",
    )
    facts = {"processor": ["0", vendor, "Some CPU"], "os_family": "Debian"}
    first = task_results(run_play(tmp_path, tasks, facts=facts))
    line = dropin.read_text().splitlines()[-1]
    assert sorted(line.split('"')[1].split()[1:]) == sorted(args.split())
    assert "amd_iommu" not in line
    assert "reboot for kernel arguments" in first  # notified; the sandbox skips the reboot
    second = task_results(run_play(tmp_path, tasks, facts=facts))
    assert "reboot for kernel arguments" not in second


# --- mig and dcgm: one owner on Kubernetes --------------------------------------------------------


@pytest.mark.slow
def test_mig_role_leaves_mig_to_the_gpu_operator(tmp_path: Path) -> None:
    config = tmp_path / "mig" / "railplan-config.yaml"
    common = {"mig_sandbox": True, "mig_config_file": str(config), "mig_parted_install": False}
    tasks = role_tasks("mig", "main", mig_manager_owner="gpu_operator", **common)
    results = task_results(run_play(tmp_path, tasks))
    assert "Ensure the mig-parted configuration file is written." not in results
    assert not config.exists()
    tasks = role_tasks("mig", "main", mig_manager_service_configure=False, **common)
    run_play(tmp_path, tasks)
    assert config.exists()  # the host owner (Slurm) still writes and applies it


def test_mig_stops_kubelet_and_nvsm_core_before_a_change() -> None:
    """Which units are present and running is read with service_facts at apply time; only
    the list is checked here (stopping units on this machine is not an option)."""
    defaults = yaml.safe_load((ROLES / "mig" / "defaults" / "main.yml").read_text())
    assert {"kubelet.service", "nvsm-core.service"} <= set(defaults["mig_gpu_clients"])


def test_dcgm_refuses_a_host_exporter_without_its_host_engine(tmp_path: Path) -> None:
    tasks = role_tasks(
        "dcgm",
        "main",
        dcgm_sandbox=True,
        dcgm_service_enabled=False,
        dcgm_exporter_enabled=True,
        dcgm_exporter_config_dir=str(tmp_path / "dcgm-exporter"),
        __dcgm_systemd_unit_dir=str(tmp_path / "units"),
    )
    results = task_results(run_play(tmp_path, tasks, succeeds=False))
    check = results["Check that the host dcgm-exporter has the host engine it connects to."]
    assert check.get("failed") and "dcgm_service_enabled is false" in check["msg"]


# --- nccl: nccl-tests builds one tree per MPI setting ---------------------------------------------

# Stands in for NVIDIA/nccl-tests at the pinned tag: the same BUILDDIR contract as its top-level
# Makefile (`BUILDDIR ?= build`, made absolute), and an all_reduce_perf that says how it was
# built. No CUDA here, so nothing is compiled; the role's build, `creates:` and link are real.
FAKE_NCCL_TESTS_MAKEFILE = """\
BUILDDIR ?= build
override BUILDDIR := $(abspath $(BUILDDIR))
all:
\tmkdir -p $(BUILDDIR)
\tprintf '#!/bin/sh\\necho MPI=$(MPI)\\n' > $(BUILDDIR)/all_reduce_perf
\tchmod +x $(BUILDDIR)/all_reduce_perf
"""


def _fake_nccl_tests_repo(tmp_path: Path, tag: str) -> Path:
    repo = tmp_path / "nccl-tests.git"
    repo.mkdir()
    (repo / "Makefile").write_text(FAKE_NCCL_TESTS_MAKEFILE)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "Makefile"], check=True)
    subprocess.run([*git, "commit", "-qm", "nccl-tests stand-in"], check=True)
    subprocess.run([*git, "tag", tag], check=True)
    return repo


@pytest.mark.slow
def test_turning_mpi_on_builds_an_mpi_tree_and_moves_the_current_link(tmp_path: Path) -> None:
    """The old role's `creates:` saw the single-node binary and never built the MPI one."""
    tag = "v2.13.10"
    repo = _fake_nccl_tests_repo(tmp_path, tag)
    install = tmp_path / "opt-nccl-tests"
    common = {
        "nccl_tests_repo": f"file://{repo}",
        "nccl_tests_version": tag,
        "nccl_tests_install_dir": str(install),
        "nccl_tests_install_cuda_toolkit": False,
        # packages are not this test's subject (and would need apt): nothing to install
        "__nccl_build_packages": [],
        "__nccl_mpi_packages": [],
        "__nccl_tests_mpi_home": "/usr",
        "__nccl_tests_mpi_include": "/usr/include",
    }
    for mpi in (False, True):
        tasks = role_tasks("nccl", "nccl-tests", **common, nccl_tests_mpi=mpi)
        run_play(tmp_path, tasks)
        out = subprocess.run(
            [str(install / "current/all_reduce_perf")], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == f"MPI={1 if mpi else 0}"
    assert (install / tag / "build/all_reduce_perf").exists()  # the old tree stays
    assert (install / "current").resolve() == install / tag / "build-mpi"
