"""The tree writer: atomic swaps, edit detection, confinement to the root, modes, recovery."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.render import tree_swap, writer
from infra.render.writer import MANIFEST, RenderConflict, RenderError, write_tree

TREE = {
    "ansible.cfg": b"[defaults]\n",
    "inventories/lab/hosts.yml": b"{}\n",
    "inventories/lab/group_vars/all.yml": b"---\na: 1\n",
    "playbooks/lab.yml": b"---\n",
    "playbooks/roles/nccl/tasks/main.yml": b"---\n",
}


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def test_writes_the_tree_and_a_manifest_of_checksums(tmp_path: Path) -> None:
    report = write_tree(tmp_path, TREE)
    assert _files(tmp_path) == TREE
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(TREE)
    assert report.written == tuple(sorted(TREE)) and report.unchanged == ()


def test_a_second_render_is_byte_identical_and_reports_nothing_written(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    before = {**_files(tmp_path), MANIFEST: (tmp_path / MANIFEST).read_bytes()}
    report = write_tree(tmp_path, TREE)
    after = {**_files(tmp_path), MANIFEST: (tmp_path / MANIFEST).read_bytes()}
    assert before == after
    assert report.written == () and len(report.unchanged) == len(TREE)


def test_an_edited_file_is_kept_unless_forced(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    edited = tmp_path / "inventories/lab/group_vars/all.yml"
    edited.write_bytes(b"---\na: 2  # mine\n")
    new = {**TREE, "inventories/lab/group_vars/all.yml": b"---\na: 3\n"}
    with pytest.raises(RenderConflict) as caught:
        write_tree(tmp_path, new)
    assert caught.value.files == ["inventories/lab/group_vars/all.yml"]
    assert "inventories/lab/group_vars/all.yml" in caught.value.message
    assert edited.read_bytes() == b"---\na: 2  # mine\n"
    write_tree(tmp_path, new, force=True)
    assert edited.read_bytes() == b"---\na: 3\n"


def test_an_unmanaged_file_in_the_way_is_a_conflict_but_an_identical_one_is_adopted(
    tmp_path: Path,
) -> None:
    (tmp_path / "ansible.cfg").write_bytes(b"# my own\n")
    with pytest.raises(RenderConflict):
        write_tree(tmp_path, TREE)
    (tmp_path / "ansible.cfg").write_bytes(TREE["ansible.cfg"])
    write_tree(tmp_path, TREE)
    assert _files(tmp_path) == TREE


def test_the_users_own_files_inside_a_rendered_directory_survive(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    mine = tmp_path / "inventories/lab/group_vars/site.yml"
    mine.write_bytes(b"---\nntp: pool\n")
    other = tmp_path / "inventories/other/hosts.yml"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"{}\n")
    write_tree(tmp_path, {**TREE, "inventories/lab/hosts.yml": b'{"all": {}}\n'})
    assert mine.read_bytes() == b"---\nntp: pool\n"
    assert other.read_bytes() == b"{}\n"


def test_files_no_longer_rendered_are_removed_from_their_unit(tmp_path: Path) -> None:
    write_tree(tmp_path, {**TREE, "inventories/lab/host_vars/n1.yml": b"{}\n"})
    report = write_tree(tmp_path, TREE)
    assert report.removed == ("inventories/lab/host_vars/n1.yml",)
    assert not (tmp_path / "inventories/lab/host_vars/n1.yml").exists()
    assert "inventories/lab/host_vars/n1.yml" not in (tmp_path / MANIFEST).read_text()


def test_two_clusters_share_a_root_without_touching_each_other(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    other = {"inventories/big/hosts.yml": b"{}\n", "playbooks/big.yml": b"---\n"}
    write_tree(tmp_path, other)
    assert _files(tmp_path) == {**TREE, **other}
    manifest = json.loads((tmp_path / MANIFEST).read_text())["files"]
    assert set(manifest) == set(TREE) | set(other)


@pytest.mark.parametrize(
    "path",
    ["../escape", "/etc/passwd", "a/../../b", "a//b", "./a", "", "a\\b", ".railplan-manifest.json"],
)
def test_paths_that_escape_or_clobber_the_root_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(RenderError):
        write_tree(tmp_path / "root", {path: b"x"})
    assert not (tmp_path / "escape").exists()


def test_modes_follow_the_users_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_tree(tmp_path / "t", TREE)
    finally:
        os.umask(old)
    assert (tmp_path / "t/ansible.cfg").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "t/inventories/lab").stat().st_mode & 0o777 == 0o750


def test_a_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(RenderError, match="not a directory"):
        write_tree(tmp_path / "f", TREE)


def test_a_failure_mid_swap_leaves_the_previous_tree_and_no_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path, TREE)
    before = _files(tmp_path)
    calls = {"n": 0}
    real_rename = os.rename

    def failing_rename(source: object, target: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # half-way through the swap
            raise OSError(28, "No space left on device")
        real_rename(source, target, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(RenderError, match="No space left on device"):  # exit 2, one line
        write_tree(tmp_path, {k: v + b"# new\n" for k, v in TREE.items()})
    monkeypatch.undo()
    assert _files(tmp_path) == before
    assert (
        not list(tmp_path.glob(".railplan-*-*"))
        and not (tmp_path / ".railplan-journal.json").exists()
    )


def test_a_render_killed_mid_swap_is_rolled_back_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No finally block runs in a killed process: model that by disabling the recovery."""
    write_tree(tmp_path, TREE)
    before = _files(tmp_path)
    real_replace = tree_swap.replace_entry

    def dying_commit(path: str, data: bytes) -> None:
        if b'"committed"' in data:  # every unit swapped, the commit not yet written
            raise KeyboardInterrupt
        real_replace(path, data)

    monkeypatch.setattr(tree_swap, "replace_entry", dying_commit)
    monkeypatch.setattr(writer, "_recover", lambda root: None)
    with pytest.raises(KeyboardInterrupt):
        write_tree(tmp_path, {k: v + b"# new\n" for k, v in TREE.items()})
    monkeypatch.undo()
    assert (tmp_path / ".railplan-journal.json").exists()
    writer._recover(tmp_path)
    assert _files(tmp_path) == before
    assert not list(tmp_path.glob(".railplan-*-*"))


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from infra.render.writer import write_tree
    tag = sys.argv[2].encode()
    files = {f"inventories/c/host_vars/n{i:05d}.yml": tag * 64 for i in range(3000)}
    files["playbooks/c.yml"] = tag
    write_tree(Path(sys.argv[1]), files, force=True)
    """
)


def test_sigkill_at_any_moment_leaves_one_whole_tree(tmp_path: Path) -> None:
    """A real render of 3,000 files killed with SIGKILL: afterwards (and after the next
    render's recovery) the tree is entirely the old one or entirely the new one."""
    root = tmp_path / "tree"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    subprocess.run([sys.executable, "-c", _KILL_SCRIPT, str(root), "a"], check=True, env=env)
    for delay in (0.1, 0.35, 0.6):
        proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(root), "b"], env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        writer._recover(root)
        tags = {p.read_bytes()[:1] for p in (root / "inventories/c/host_vars").iterdir()}
        assert len(tags) == 1 and len(list((root / "inventories/c/host_vars").iterdir())) == 3000
        assert (root / "playbooks/c.yml").read_bytes() == next(iter(tags))
        assert not [
            p for p in root.iterdir() if p.name.startswith(".railplan-") and p.name != MANIFEST
        ]
        subprocess.run([sys.executable, "-c", _KILL_SCRIPT, str(root), "a"], check=True, env=env)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet="ab/.", min_size=1, max_size=8), st.binary(max_size=4), max_size=5
    )
)
def test_any_path_is_written_inside_the_root_or_refused(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes]
) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "root"
    try:
        write_tree(root, files)
    except (RenderError, RenderConflict):
        pass
    except OSError:  # "a" and "a/b" both rendered: a file where a directory must go
        pass
    outside = [p for p in base.rglob("*") if root not in (p, *p.parents)]
    assert outside == []


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize(
    ("place", "kind", "words"),
    [
        ("playbooks/roles/nccl", "file", "is a file where railplan renders a directory"),
        ("inventories/lab/group_vars", "file", "is a file where railplan renders a directory"),
        ("ansible.cfg", "directory", "is a directory where railplan renders a file"),
    ],
)
def test_what_stands_in_the_way_of_a_rendered_path_is_named(
    tmp_path: Path, place: str, kind: str, words: str, force: bool
) -> None:
    """Before: "cannot write the tree under ROOT: Not a directory" (or "File exists" with
    --force), with a hint about free space; the user's entry was kept, but not named."""
    write_tree(tmp_path, TREE)
    path = tmp_path / place
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if kind == "file":
        path.write_bytes(b"mine\n")
    else:
        path.mkdir()
        (path / "mine.txt").write_bytes(b"mine\n")
    before = {p.as_posix() for p in tmp_path.rglob("*")}
    with pytest.raises(RenderError) as caught:
        write_tree(tmp_path, TREE, force=force)
    assert caught.value.message.startswith(f"{path} {words}"), caught.value.message
    assert caught.value.hint and "move or rename your" in caught.value.hint
    assert {p.as_posix() for p in tmp_path.rglob("*")} == before  # nothing left, nothing gone


def test_a_unit_absent_at_the_check_has_none_of_its_files_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first render reads no file it is about to create (16,612 failed opens at 16,384
    servers); a unit that exists still has every rendered file read."""
    opened: list[str] = []
    disk_digest = writer._disk_digest

    def counted(path: str | Path) -> tuple[str | None, os.stat_result | None]:
        opened.append(os.fspath(path))
        return disk_digest(path)

    monkeypatch.setattr(writer, "_disk_digest", counted)
    write_tree(tmp_path, TREE)
    assert opened == []
    write_tree(tmp_path, TREE)  # every unit there now: each rendered file is read
    checked = {os.path.relpath(p, tmp_path) for p in opened}  # and recent ones at the swap
    assert {p for p in checked if not p.startswith(".railplan-old-")} == set(TREE)


def test_a_unit_made_after_the_check_refuses_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit absent at the check but filled before the swap is never overwritten unread."""
    write_tree(tmp_path, {"ansible.cfg": b"[defaults]\n"})
    stage = writer._stage

    def user_fills_the_unit_meanwhile(root: Path, *args: object) -> None:
        (root / "inventories/lab").mkdir(parents=True)
        (root / "inventories/lab/hosts.yml").write_bytes(b"mine\n")
        stage(root, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_stage", user_fills_the_unit_meanwhile)
    with pytest.raises(RenderError, match="changed while the tree was rendered"):
        write_tree(tmp_path, TREE)
    assert (tmp_path / "inventories/lab/hosts.yml").read_bytes() == b"mine\n"
    assert not any(
        p.name.startswith(".railplan-") for p in tmp_path.iterdir() if p.name != MANIFEST
    )
