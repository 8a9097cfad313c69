"""The tree writer's system calls per file: what a large tree's write costs the kernel.

A render of 16,384 servers writes 16,612 files, and the kernel's work per file is most of
the write's CPU. Each file is created with its final mode (no fchmod after), and the checks
before the write look at each path once at most: nothing below a directory that does not
exist yet, and one lstat per path for the two checks (things in the way, symlinks) together.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.render.writer import write_tree

HOSTS = 200
TREE = {
    "ansible.cfg": b"[defaults]\n",
    "inventories/lab/hosts.yml": b"{}\n",
    **{f"inventories/lab/host_vars/n{i:04d}.yml": f"n: {i}\n".encode() for i in range(HOSTS)},
    "playbooks/roles/nccl/tasks/main.yml": b"---\n",
}


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, under: Path) -> Callable[[], list[str]]:
    """Count calls of ``os.<name>`` on paths under ``under`` (descriptors count too)."""
    calls: list[str] = []
    original = getattr(os, name)
    top = os.fspath(under)

    def counted(target: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(target, int) or os.fspath(target).startswith(top):
            calls.append(str(target))
        return original(target, *args, **kwargs)

    monkeypatch.setattr(os, name, counted)
    return lambda: calls


def test_files_are_created_with_their_mode_and_never_chmod_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch, "fchmod", tmp_path)
    old = os.umask(0o027)
    try:
        write_tree(tmp_path / "t", TREE)
    finally:
        os.umask(old)
    assert len(calls()) < 5  # the journal's own writes (infra.files), never one per file
    assert (tmp_path / "t/inventories/lab/host_vars/n0007.yml").stat().st_mode & 0o777 == 0o640


def test_no_directory_is_world_writable_under_umask_000(tmp_path: Path) -> None:
    # ``playbooks/`` above a role's unit was made 0777 less the umask (pathlib's parents),
    # unless a playbook file sorting before ``roles`` had made it first; so were the
    # directories above a new root
    old = os.umask(0o000)
    try:
        write_tree(tmp_path / "new/dirs/t", TREE)
    finally:
        os.umask(old)
    modes = {p.stat().st_mode & 0o777 for p in (tmp_path / "new").rglob("*")}
    assert modes == {0o664, 0o775}


def test_a_first_render_looks_at_no_path_below_a_missing_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    root.mkdir()
    calls = _counting(monkeypatch, "lstat", root)
    write_tree(root, TREE)
    looked_below = [c for c in calls() if "/host_vars/" in c]
    assert looked_below == []  # 400 before: each file twice, though host_vars was not there


def test_a_second_render_looks_at_each_rendered_path_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    write_tree(root, TREE)
    calls = _counting(monkeypatch, "lstat", root)
    write_tree(root, TREE)
    host_files = [c for c in calls() if "/host_vars/n" in c]
    # the checks before staging and the new manifest: once each (twice before); the
    # conflict check and the swap list a unit by scandir, not by lstat per file
    assert len(host_files) == HOSTS
