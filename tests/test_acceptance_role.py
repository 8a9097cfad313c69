"""Run the acceptance role for real with ansible-playbook against local hosts.

The executables ``nvidia-smi``, ``ibstat``, ``dcgmi``, ``all_reduce_perf``, ``mpirun``,
``ib_write_bw`` and ``ibnetdiscover`` are stand-ins: this machine has no GPU and no InfiniBand
HCA, so small scripts written into ``tmp_path`` print the tool outputs stored under
``tests/data/acceptance/`` (see its README for their origin) and append their arguments to
``calls.jsonl``, so the tests can check what the role ran. ``/proc/modules`` and
``/proc/driver/nvidia/version`` are stand-in files for the same reason. The ``ibnetdiscover -p``
outputs were produced by the real ``ibnetdiscover`` against ``ibsim`` (net files next to them).
Every inventory host uses ``ansible_connection=local``, which is safe because every tool path
points at a stand-in and the package task is turned off (``acceptance_packages: []``).

The old role failed these in these ways: it looked for ``/opt/nccl-tests/build/all_reduce_perf``
(the nccl role links ``/opt/nccl-tests/current``), ran ``dcgmi diag -r 1`` on a new build,
started ``mpirun`` as root without ``--allow-run-as-root``, and had no per-rail RDMA test, no
GPUDirect check and no fabric check.
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
DATA = ROOT / "tests" / "data" / "acceptance"
ROLES = ROOT / "playbooks" / "roles"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
NCCL_DEFAULTS = yaml.safe_load((ROLES / "nccl" / "defaults" / "main.yml").read_text())


def _stand_in(path: Path, body: str, log: Path | None = None) -> Path:
    """Write an executable Python script that stands in for a GPU/HCA tool and logs its call."""
    log = log or path.parent.parent / "calls.jsonl"
    path.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        f"    f.write(json.dumps([{path.name!r}] + sys.argv[1:]) + '\\n')\n{body}\n"
    )
    path.chmod(0o755)
    return path


def _print_file(name: str) -> str:
    return f"sys.stdout.write(open({str(DATA / name)!r}).read())"


def _nccl_tests_tree(tmp_path: Path) -> Path:
    """all_reduce_perf where the nccl role's nccl-tests.yml puts it: <dir>/<tag>/build, linked
    as <dir>/current."""
    install_dir = tmp_path / "opt-nccl-tests"
    build = install_dir / NCCL_DEFAULTS["nccl_tests_version"] / "build"
    build.mkdir(parents=True)
    _stand_in(
        build / "all_reduce_perf",
        _print_file("all_reduce_perf-8xA100-4G.txt"),
        tmp_path / "calls.jsonl",
    )
    (install_dir / "current").symlink_to(build)
    return install_dir


def _tools(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in(
        bin_dir / "nvidia-smi",
        "args = sys.argv[1:]\n"
        "if args[:2] == ['nvlink', '-s']:\n"
        f"    {_print_file('nvidia-smi-nvlink-s.txt')}\n"
        "elif args == ['--query-gpu=name', '--format=csv,noheader']:\n"
        f"    {_print_file('nvidia-smi-query-gpu-name.txt')}\n"
        "else:\n"
        "    sys.exit('stand-in nvidia-smi: unexpected arguments %r' % args)",
    )
    # ibstat <device>: the recorded mlx5_0 output with the CA name replaced; host "bad"'s
    # stand-in reports mlx5_1 at Rate 100.
    for host, slow in (("good", None), ("bad", "mlx5_1")):
        _stand_in(
            bin_dir / f"ibstat-{host}",
            "dev = sys.argv[1]\n"
            f"name = 'ibstat-mlx5_0-rate100.txt' if dev == {slow!r} else 'ibstat-mlx5_0-hdr200.txt'\n"
            f"text = open({str(DATA)!r} + '/' + name).read()\n"
            "sys.stdout.write(text.replace(\"CA 'mlx5_0'\", \"CA '%s'\" % dev))",
        )
    # dcgmi answers `discovery -l` only while the stand-in host engine runs (engine-up exists);
    # the host engine is up unless a test writes `no-engine` first (Kubernetes: none runs).
    engine = tmp_path / "engine-up"
    if not (tmp_path / "no-engine").exists():
        engine.touch()
    _stand_in(
        bin_dir / "dcgmi",
        f"import os\nup = os.path.exists({str(engine)!r})\n"
        "if sys.argv[1] == 'discovery':\n"
        "    sys.exit(0 if up else 'Error: unable to establish a connection to the host engine')\n"
        "if not up:\n"
        "    sys.exit('Error: unable to establish a connection to the host engine')\n"
        + _print_file("dcgmi-diag-r1.txt"),
    )
    _stand_in(
        bin_dir / "nv-hostengine",
        f"import os\nif sys.argv[1:] == ['--term']:\n    os.remove({str(engine)!r})\n"
        f"else:\n    open({str(engine)!r}, 'w').close()",
    )
    _stand_in(bin_dir / "mpirun", _print_file("all_reduce_perf-8xA100-4G.txt"))
    # ib_write_bw: a server (no peer argument) prints nothing and exits; a client prints the
    # HDR GPU-memory result, or the slow one for the device named in SLOW_RAIL.
    for host, slow in (("good", None), ("slow", "mlx5_1")):
        _stand_in(
            bin_dir / f"ib_write_bw-{host}",
            "args = sys.argv[1:]\n"
            "if args[-1].startswith('-') or args[-2] in ('-d', '-p'):\n"
            "    sys.exit(0)\n"
            "dev = args[args.index('-d') + 1]\n"
            f"name = 'ib_write_bw-client-hdr-cuda-slow.txt' if dev == {slow!r} else 'ib_write_bw-client-hdr-cuda.txt'\n"
            f"sys.stdout.write(open({str(DATA)!r} + '/' + name).read().replace('mlx5_0', dev))",
        )
    for name in ("ok", "swapped"):
        _stand_in(
            bin_dir / f"ibnetdiscover-{name}", _print_file(f"ibnetdiscover-p-rails-{name}.txt")
        )
    return {
        "acceptance_nvidia_smi": str(bin_dir / "nvidia-smi"),
        "acceptance_ibstat": str(bin_dir / "ibstat-good"),
        "acceptance_dcgmi": str(bin_dir / "dcgmi"),
        "acceptance_nv_hostengine": str(bin_dir / "nv-hostengine"),
        "acceptance_mpirun": str(bin_dir / "mpirun"),
        "acceptance_ib_write_bw": str(bin_dir / "ib_write_bw-good"),
        "acceptance_ibnetdiscover": str(bin_dir / "ibnetdiscover-ok"),
        "nccl_tests_install_dir": str(_nccl_tests_tree(tmp_path)),
        "acceptance_packages": [],
        "acceptance_proc_modules": str(DATA / "proc-modules-peermem.txt"),
        "acceptance_nvidia_version_file": str(DATA / "nvidia-version-open.txt"),
        "acceptance_gpu_count": 8,
        "acceptance_gpu_name": "NVIDIA A100-SXM4-80GB",
        "acceptance_nvlink_links_per_gpu": 12,
        "acceptance_ib_devices": ["mlx5_0", "mlx5_1"],
        "acceptance_ib_rate_gbps": 200,
        "acceptance_nccl_size": "4G",
        "acceptance_node_expected_busbw_gbytes_per_s": 230,
        "acceptance_su_expected_busbw_gbytes_per_s": 230,
        "acceptance_busbw_tolerance": 0.2,
        "acceptance_fabric_rail_optimized": True,
        "acceptance_nccl_environment": {"NCCL_DEBUG": "WARN"},
        "railplan_su": "su1",
    }


def _run(
    tmp_path: Path,
    hosts: dict[str, dict[str, Any]],
    overrides: dict[str, Any] | None = None,
    su: list[str] | None = None,
) -> dict[str, Any]:
    """Run the role on ``hosts`` (one SU, ``su1``, of ``su`` or all hosts); the JSON report."""
    common = {**_tools(tmp_path), **(overrides or {})}
    for host_vars in hosts.values():
        host_vars.update(ansible_connection="local", ansible_python_interpreter=sys.executable)
        for key in ("acceptance_ibstat", "acceptance_ib_write_bw"):
            if key in host_vars:
                host_vars[key] = str(tmp_path / "bin" / host_vars[key])
    inventory = {
        "all": {
            "children": {
                "gpu_servers": {"hosts": hosts, "vars": common},
                "su_su1": {"hosts": {h: {} for h in (su if su is not None else hosts)}},
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    playbook = tmp_path / "acceptance.yml"
    playbook.write_text(
        "- name: Accept GPU nodes.\n"
        "  hosts: gpu_servers\n"
        "  gather_facts: true\n"
        "  gather_subset: [min]\n"
        "  roles:\n"
        "    - acceptance\n"
    )
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 2), proc.stdout[-4000:] + proc.stderr[-4000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _calls(tmp_path: Path, tool: str) -> list[list[str]]:
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    return [call[1:] for call in map(json.loads, lines) if call[0].startswith(tool)]


def _failed_messages(report: dict[str, Any], host: str) -> list[str]:
    messages = []
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(host)
            if not result:
                continue
            for item in result.get("results", [result]):
                if item.get("failed"):
                    messages.append(" ".join(item.get("msg", "").split()))
    return messages


def _failures(report: dict[str, Any]) -> dict[str, int]:
    return {host: stats["failures"] for host, stats in report["stats"].items()}


@pytest.mark.slow
def test_ibstat_rate_fault_names_expected_and_measured(tmp_path):
    """Day-2 quick run (dcgmi level 1 by the documented switch), no SU: one slow HCA port."""
    report = _run(
        tmp_path,
        {"good": {"acceptance_ibstat": "ibstat-good"}, "bad": {"acceptance_ibstat": "ibstat-bad"}},
        {"acceptance_dcgm_diag_level": 1},
        su=[],
    )
    assert _failures(report) == {"good": 0, "bad": 1}, report["stats"]
    messages = _failed_messages(report, "bad")
    assert len(messages) == 1, messages
    assert "mlx5_1" in messages[0]
    assert "expected State Active at Rate 200 Gb/s, Link layer InfiniBand" in messages[0]
    assert "measured State Active at Rate 100 Gb/s, Link layer InfiniBand" in messages[0]
    assert {tuple(c) for c in _calls(tmp_path, "dcgmi") if c[0] == "diag"} == {("diag", "-r", "1")}


@pytest.mark.slow
def test_a_lost_gpu_fails_its_host_with_what_nvidia_smi_said(tmp_path):
    """Xid 79: nvidia-smi exits 15 naming the GPU; the check says so, not 'non-zero return code'."""
    (tmp_path / "lost").mkdir()
    lost = _stand_in(
        tmp_path / "lost" / "nvidia-smi",
        "sys.stderr.write('Unable to determine the device handle for GPU3: 00000000:37:00.0: '\n"
        "                 'GPU is lost.  Reboot the system to recover this GPU\\n')\n"
        "sys.exit(15)",
    )
    hosts = {"good": {}, "bad": {"acceptance_nvidia_smi": str(lost)}}
    report = _run(tmp_path, hosts, {"acceptance_dcgm_diag_level": 1}, su=[])
    assert _failures(report) == {"good": 0, "bad": 1}, report["stats"]
    (message,) = _failed_messages(report, "bad")
    assert message.startswith('GPUs: expected 8 × "NVIDIA A100-SXM4-80GB", measured 0'), message
    assert "nvidia-smi exited 15: Unable to determine the device handle for GPU3" in message
    assert "GPU is lost" in message


def test_green_field_run_passes_and_runs_what_the_nccl_role_built(tmp_path):
    report = _run(tmp_path, {"gpu001": {}, "gpu002": {}})
    assert _failures(report) == {"gpu001": 0, "gpu002": 0}, report["stats"]

    # all_reduce_perf is found under the nccl role's <dir>/current link.
    nccl_dir = tmp_path / "opt-nccl-tests"
    node_runs = _calls(tmp_path, "all_reduce_perf")
    assert node_runs == [["-b", "4G", "-e", "4G", "-g", "8"]] * 2
    # A green-field build runs the long DCGM diagnostic.
    assert {tuple(c) for c in _calls(tmp_path, "dcgmi") if c[0] == "diag"} == {("diag", "-r", "3")}
    # The SU test: once, as root with --allow-run-as-root, forwarding the NCCL environment.
    (mpirun,) = _calls(tmp_path, "mpirun")
    assert (os.geteuid() == 0) == ("--allow-run-as-root" in mpirun), mpirun
    assert mpirun[mpirun.index("-H") + 1] == "gpu001:8,gpu002:8"
    assert mpirun[mpirun.index("-x") + 1] == "NCCL_DEBUG"
    assert mpirun[-7:] == [f"{nccl_dir}/current/all_reduce_perf", "-b", "4G", "-e", "4G", "-g", "1"]


@pytest.mark.slow
def test_ib_write_bw_runs_per_rail_on_gpu_memory_and_fails_a_slow_rail(tmp_path):
    report = _run(
        tmp_path,
        {"gpu001": {}, "gpu002": {"acceptance_ib_write_bw": "ib_write_bw-slow"}},
        {"acceptance_gpudirect_mode": "dmabuf"},
    )
    assert _failures(report) == {"gpu001": 0, "gpu002": 1}, report["stats"]
    (message,) = _failed_messages(report, "gpu002")
    assert "ib_write_bw mlx5_1 to gpu001 mlx5_1 (GPU 1 memory, dmabuf)" in message
    assert "expected BW average >= 180.0 Gb/s (0.9 × 200 Gb/s), measured 150.94 Gb/s" in message
    clients = [c for c in _calls(tmp_path, "ib_write_bw") if not c[-1].startswith("-")]
    assert sorted(clients) == sorted(
        [
            "-d",
            dev,
            "-p",
            str(18515 + k),
            "--report_gbits",
            "-F",
            f"--use_cuda={k}",
            "--use_cuda_dmabuf",
            peer,
        ]
        for k, dev in enumerate(["mlx5_0", "mlx5_1"])
        for peer in ("gpu001", "gpu002")
    )
    servers = [c for c in _calls(tmp_path, "ib_write_bw") if c[-1].startswith("-")]
    assert len(servers) == 4, servers
    # One rail at a time: a server lives acceptance_ib_bw_timeout from its start, so no
    # rail's server may start before the clients of the rail before it have run. Within a
    # rail the order is not fixed: the servers start async (poll 0), so a client may log
    # before the other host's forked server does (the client's retries cover that).
    rails = [c[c.index("-d") + 1] for c in _calls(tmp_path, "ib_write_bw")]
    assert rails == ["mlx5_0"] * 4 + ["mlx5_1"] * 4, rails


@pytest.mark.slow
def test_a_host_alone_in_its_su_measures_each_hca_against_its_next_hca_of_the_plane(tmp_path):
    """No peer on its rails' leaves (a service server alone in its SU, as on the SU twin): HCA k
    sends to the next HCA of the same plane on the same host, so every HCA still sends and
    receives once. Before, the host was skipped and passed unmeasured."""
    devices = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    report = _run(
        tmp_path,
        {"solo": {"acceptance_ib_write_bw": "ib_write_bw-slow"}},
        {
            "acceptance_ib_devices": devices,
            "acceptance_ib_rails_per_plane": 2,
            "acceptance_fabric_enabled": False,  # the recorded fabric holds gpu001 and gpu002
        },
    )
    assert _failures(report) == {"solo": 1}, report["stats"]
    (message,) = _failed_messages(report, "solo")
    assert "ib_write_bw mlx5_1 to solo mlx5_0 (GPU 1 memory, peermem)" in message, message
    assert "measured 150.94 Gb/s" in message
    calls = _calls(tmp_path, "ib_write_bw")
    clients = [(c[1], c[3], c[-1]) for c in calls if not c[-1].startswith("-")]
    servers = [(c[1], c[3], c[c.index("-F") + 1]) for c in calls if c[-1].startswith("-")]
    # Two planes of two rails: 0 and 1 pair with each other, 2 and 3 likewise, never across.
    assert sorted(clients) == [
        ("mlx5_0", "18515", "solo"),
        ("mlx5_1", "18516", "solo"),
        ("mlx5_2", "18517", "solo"),
        ("mlx5_3", "18518", "solo"),
    ]
    assert sorted(servers) == [
        ("mlx5_0", "18516", "--use_cuda=0"),
        ("mlx5_1", "18515", "--use_cuda=1"),
        ("mlx5_2", "18518", "--use_cuda=2"),
        ("mlx5_3", "18517", "--use_cuda=3"),
    ]


@pytest.mark.slow
def test_a_host_alone_with_one_rail_per_plane_says_it_was_not_measured(tmp_path):
    overrides = {"acceptance_ib_rails_per_plane": 1, "acceptance_fabric_enabled": False}
    report = _run(tmp_path, {"solo": {}}, overrides)
    assert _failures(report) == {"solo": 0}, report["stats"]
    assert _calls(tmp_path, "ib_write_bw") == []
    said = [
        " ".join(task["hosts"]["solo"].get("msg", "").split())
        for play in report["plays"]
        for task in play["tasks"]
        if "Say that a host alone" in task["task"]["name"]
    ]
    assert said and said[0].startswith("ib_write_bw not run on solo: it is alone in su_su1"), said


@pytest.mark.slow
def test_gpudirect_check_follows_the_kernel_module_flavour(tmp_path):
    """peermem: nvidia_peermem must be loaded; dmabuf (open modules): the open module's line."""
    report = _run(
        tmp_path,
        {
            "peermem_ok": {"nvidia_driver_kernel_modules": "proprietary"},
            "peermem_missing": {
                "acceptance_proc_modules": str(DATA / "proc-modules-no-peermem.txt")
            },
            "dmabuf_ok": {"nvidia_driver_kernel_modules": "open"},
            "dmabuf_proprietary": {
                "nvidia_driver_kernel_modules": "open",
                "acceptance_nvidia_version_file": str(DATA / "nvidia-version-proprietary.txt"),
            },
        },
        {"acceptance_ib_bw_enabled": False, "acceptance_fabric_enabled": False},
        su=[],
    )
    assert _failures(report) == {
        "peermem_ok": 0,
        "peermem_missing": 1,
        "dmabuf_ok": 0,
        "dmabuf_proprietary": 1,
    }, report["stats"]
    (missing,) = _failed_messages(report, "peermem_missing")
    assert "expected module nvidia_peermem loaded, measured nvidia_peermem not loaded" in missing
    (proprietary,) = _failed_messages(report, "dmabuf_proprietary")
    assert "GPUDirect RDMA (dmabuf): expected the open NVIDIA kernel modules" in proprietary
    assert "measured NVRM version: NVIDIA UNIX x86_64 Kernel Module 550.90.07" in proprietary


@pytest.mark.slow
def test_fabric_is_saved_and_a_swapped_hca_pair_fails_the_rail_check(tmp_path):
    overrides = {
        "acceptance_ib_bw_enabled": False,
        "acceptance_ibnetdiscover": str(tmp_path / "bin" / "ibnetdiscover-swapped"),
    }
    report = _run(tmp_path, {"gpu001": {}, "gpu002": {}}, overrides)
    assert _failures(report) == {"gpu001": 1, "gpu002": 0}, report["stats"]
    saved = tmp_path / "files" / "fabric" / "discovered" / "gpu001.txt"
    assert saved.read_text() == (DATA / "ibnetdiscover-p-rails-swapped.txt").read_text()
    assert _calls(tmp_path, "ibnetdiscover") == [["-p"]]
    (message,) = _failed_messages(report, "gpu001")
    assert (
        "mlx5_0 on gpu001 → 0x0000000000200001 (leaf-su1-rail0), gpu002 → 0x0000000000200002 (leaf-su1-rail1)"
        in message
    )
    assert (
        "mlx5_1 on gpu001 → 0x0000000000200002 (leaf-su1-rail1), gpu002 → 0x0000000000200001 (leaf-su1-rail0)"
        in message
    )


@pytest.mark.slow
def test_rail_check_passes_on_the_planned_cabling(tmp_path):
    report = _run(tmp_path, {"gpu001": {}, "gpu002": {}}, {"acceptance_ib_bw_enabled": False})
    assert _failures(report) == {"gpu001": 0, "gpu002": 0}, report["stats"]
    passed = [
        task["hosts"]["gpu001"]["msg"]
        for play in report["plays"]
        for task in play["tasks"]
        if "reaches one leaf switch." in task["task"]["name"]
        and "msg" in task["hosts"].get("gpu001", {})
    ]
    assert passed == ["su_su1: each of 2 rails reaches one leaf switch from all 2 servers."]


@pytest.mark.slow
def test_dcgm_diag_starts_and_stops_a_host_engine_where_none_runs(tmp_path):
    """Kubernetes: the dcgm role leaves nvidia-dcgm stopped (the exporter embeds DCGM)."""
    overrides = {
        "acceptance_ib_bw_enabled": False,
        "acceptance_fabric_enabled": False,
        "acceptance_su_test_enabled": False,
    }
    (tmp_path / "no-engine").touch()
    report = _run(tmp_path, {"gpu001": {}}, overrides)
    assert _failures(report) == {"gpu001": 0}, report["stats"]
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    dcgm = [c[:2] for c in map(json.loads, lines) if c[0] in ("dcgmi", "nv-hostengine")]
    assert dcgm == [
        ["dcgmi", "discovery"],
        ["nv-hostengine"],
        ["dcgmi", "diag"],
        ["nv-hostengine", "--term"],
    ]
    assert not (tmp_path / "engine-up").exists()


@pytest.mark.slow
def test_dcgm_diag_uses_the_running_host_engine(tmp_path):
    """Slurm: nvidia-dcgm runs; acceptance starts and stops nothing."""
    overrides = {
        "acceptance_ib_bw_enabled": False,
        "acceptance_fabric_enabled": False,
        "acceptance_su_test_enabled": False,
    }
    report = _run(tmp_path, {"gpu001": {}}, overrides)
    assert _failures(report) == {"gpu001": 0}, report["stats"]
    assert _calls(tmp_path, "nv-hostengine") == []
    assert (tmp_path / "engine-up").exists()
