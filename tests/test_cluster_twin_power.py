"""The cluster twin's CPU weighting of its hosts' cgroup, on stand-in cgroup directories.

No kernel cgroup is touched: `power.cgroup_mounts` is pointed at temporary directories that
hold the knobs a v1 ``cpu`` hierarchy (``cpu.shares``) or a v2 one (``cpu.weight``) would
show in a new child, and at one (``memory``) that has neither.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster_twin import power


def _hierarchy(root: Path, name: str, knob: str | None) -> Path:
    mount = root / name
    twin = mount / "railplan-twin"
    twin.mkdir(parents=True)
    if knob:  # the kernel puts a controller's knobs into every new child directory
        (twin / knob).write_text("1024\n" if knob == "cpu.shares" else "100\n")
    return mount


@pytest.fixture
def mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    found = [
        _hierarchy(tmp_path, "cpu", "cpu.shares"),
        _hierarchy(tmp_path, "unified", "cpu.weight"),
        _hierarchy(tmp_path, "memory", None),
    ]
    monkeypatch.setattr(power, "cgroup_mounts", lambda: found)
    return found


def test_each_host_weighs_one_nice_zero_process(mounts: list[Path]) -> None:
    done = power.weigh_hosts(21)
    cpu, unified, memory = mounts
    assert (cpu / "railplan-twin/cpu.shares").read_text() == "21504\n"
    assert (unified / "railplan-twin/cpu.weight").read_text() == "2100\n"
    assert not (memory / "railplan-twin/cpu.shares").exists()
    assert len(done) == 2


def test_weight_stops_at_the_kernels_cap(mounts: list[Path]) -> None:
    power.weigh_hosts(400)
    cpu, unified, _ = mounts
    assert (cpu / "railplan-twin/cpu.shares").read_text() == "262144\n"
    assert (unified / "railplan-twin/cpu.weight").read_text() == "10000\n"
