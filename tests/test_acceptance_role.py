"""Run the acceptance role for real with ansible-playbook against two local hosts.

The executables ``nvidia-smi``, ``ibstat``, ``dcgmi`` and ``all_reduce_perf`` are stand-ins:
this machine has no GPU and no InfiniBand HCA, so small scripts written into ``tmp_path`` print
the tool outputs stored under ``tests/data/acceptance/`` (see its README for their origin).
Both inventory hosts use ``ansible_connection=local``, which is safe because the acceptance
role only runs read-only commands and every binary path points at a stand-in; the SU test is
disabled, so no mpirun runs. Host ``good`` sees HDR ports at Rate 200; host ``bad`` sees its
second HCA at Rate 100 and must fail with a message that names the expected and the measured
rate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "acceptance"
ROLES = ROOT / "playbooks" / "roles"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def _stand_in(path: Path, body: str) -> Path:
    """Write an executable Python script that stands in for a GPU/HCA tool."""
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return path


def _print_file(name: str) -> str:
    return f"sys.stdout.write(open({str(DATA / name)!r}).read())"


def _write_fixture(tmp_path: Path) -> Path:
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
    # ibstat <device>: the recorded mlx5_0 output with the CA name replaced; the bad host's
    # stand-in reports mlx5_1 at Rate 100.
    for host, slow in (("good", None), ("bad", "mlx5_1")):
        _stand_in(
            bin_dir / f"ibstat-{host}",
            "dev = sys.argv[1]\n"
            f"name = 'ibstat-mlx5_0-rate100.txt' if dev == {slow!r} else 'ibstat-mlx5_0-hdr200.txt'\n"
            f"text = open({str(DATA)!r} + '/' + name).read()\n"
            "sys.stdout.write(text.replace(\"CA 'mlx5_0'\", \"CA '%s'\" % dev))",
        )
    _stand_in(
        bin_dir / "dcgmi",
        "assert sys.argv[1:] == ['diag', '-r', '1'], sys.argv\n" + _print_file("dcgmi-diag-r1.txt"),
    )
    _stand_in(
        bin_dir / "all_reduce_perf",
        "assert sys.argv[1:] == ['-b', '4G', '-e', '4G', '-g', '8'], sys.argv\n"
        + _print_file("all_reduce_perf-8xA100-4G.txt"),
    )
    common = {
        "acceptance_nvidia_smi": str(bin_dir / "nvidia-smi"),
        "acceptance_dcgmi": str(bin_dir / "dcgmi"),
        "acceptance_all_reduce_perf": str(bin_dir / "all_reduce_perf"),
        "acceptance_mpirun": "/nonexistent/mpirun",
        "acceptance_gpu_count": 8,
        "acceptance_gpu_name": "NVIDIA A100-SXM4-80GB",
        "acceptance_nvlink_links_per_gpu": 12,
        "acceptance_ib_devices": ["mlx5_0", "mlx5_1"],
        "acceptance_ib_rate_gbps": 200,
        "acceptance_dcgm_diag_level": 1,
        "acceptance_nccl_size": "4G",
        "acceptance_node_expected_busbw_gbytes_per_s": 230,
        "acceptance_busbw_tolerance": 0.2,
        "acceptance_su_test_enabled": False,
        "railplan_su": "train-su01",
    }
    hosts = {
        host: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "acceptance_ibstat": str(bin_dir / f"ibstat-{host}"),
        }
        for host in ("good", "bad")
    }
    inventory = {
        "all": {
            "children": {
                "gpu_servers": {"hosts": hosts, "vars": common},
                "su_train_su01": {"hosts": {"good": {}, "bad": {}}},
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
    return playbook


def _failed_messages(report: dict, host: str) -> list[str]:
    messages = []
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(host)
            if not result:
                continue
            for item in result.get("results", [result]):
                if item.get("failed"):
                    messages.append(item.get("msg", ""))
    return messages


def test_acceptance_passes_good_host_and_names_expected_and_measured_on_bad(tmp_path):
    playbook = _write_fixture(tmp_path)
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
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    stats = report["stats"]
    assert stats["good"]["failures"] == 0, stats
    assert stats["good"]["changed"] == 0, stats
    assert stats["bad"]["failures"] == 1, stats
    assert stats["bad"]["changed"] == 0, stats

    messages = _failed_messages(report, "bad")
    assert len(messages) == 1, messages
    assert "mlx5_1" in messages[0]
    assert "expected State Active at Rate 200 Gb/s" in messages[0]
    assert "measured State Active at Rate 100 Gb/s" in messages[0]
    assert _failed_messages(report, "good") == []
