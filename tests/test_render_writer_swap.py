"""The tree writer killed at every rename: the tree after recovery is the old one or the new one.

A kill-at-call-K harness: a forked child runs `write_tree` with ``os.rename``, ``os.replace``
and ``os.link`` wrapped so that it SIGKILLs itself right after its K-th call; K runs from 1
until a render finishes. After each kill the parent recovers the root as ``railplan render
--recover`` does and compares the *whole* root (rendered files, the manifest, the user's own
files and links inside units) with the tree before the render and with the tree a render that
was not killed leaves: it must be exactly one of them. The next render then brings it to the
new tree with the user's files intact. Scenarios: a changed spec, the same spec over its own
tree (the manifest does not change), and ``--force`` over a user's edit. Before the journal
had a commit point of its own, 9 of the 42 kill points of these scenarios (all in the two
same-spec ones) lost a unit: the whole inventory with the user's vault file, ``ansible.cfg``,
the entry playbook, a role.
"""

# Links and directories are made and read at the os level, with directory descriptors.
# ruff: noqa: PTH115, PTH208

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.errors import RailplanError
from infra.render import writer
from infra.render.tree_fs import remove
from infra.render.tree_state import MANIFEST, TreeStateError
from infra.render.writer import RenderError, recover_tree, write_tree
from infra.signals import Interrupted, raising_on_signals

Tree = dict[str, bytes]


def _rendered(tag: bytes, hosts: int = 6) -> Tree:
    files = {f"inventories/c/host_vars/n{i:02d}.yml": tag * 8 for i in range(hosts)}
    files["inventories/c/hosts.yml"] = b"all: " + tag + b"\n"
    files["inventories/c/group_vars/all.yml"] = b"a: " + tag + b"\n"
    files["playbooks/c.yml"] = tag
    files["playbooks/roles/r/tasks/main.yml"] = tag
    files["ansible.cfg"] = b"[defaults]\n" + tag
    return files


A = _rendered(b"a")
B = {**_rendered(b"b", hosts=5), "playbooks/roles/new/tasks/main.yml": b"new\n"}


VAULT, VAULT_TEXT = "inventories/c/group_vars/vault.yml", b"$ANSIBLE_VAULT;1.1\nsecret\n"


def _user_files(root: Path) -> None:
    """What a user keeps inside rendered units: a vault file, a note, a link."""
    (root / VAULT).write_bytes(VAULT_TEXT)
    (root / "inventories/c/notes").mkdir()
    (root / "inventories/c/notes/mine.txt").write_bytes(b"mine\n")
    (root / "inventories/c/group_vars/site.yml").symlink_to("all.yml")
    (root / "playbooks/roles/r/files").mkdir()
    (root / "playbooks/roles/r/files/local.conf").write_bytes(b"local\n")


def _edit(root: Path) -> None:
    (root / "ansible.cfg").write_bytes(b"[defaults]\n# my edit\n")
    (root / "inventories/c/hosts.yml").write_bytes(b"all: mine\n")


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: a file's bytes, a link's target, a directory as None."""
    found: dict[str, object] = {}
    for directory, dirs, names in os.walk(root):
        base = Path(directory)
        for name in [*dirs, *names]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = None
            else:
                found[rel] = path.read_bytes()
    return found


@dataclass(frozen=True)
class Scenario:
    before: Tree
    after: Tree
    force: bool
    edit: Callable[[Path], None] | None = None


SCENARIOS = {
    "changed spec": Scenario(A, B, force=False),
    "same spec": Scenario(A, A, force=False),
    "force over an edit, same spec": Scenario(A, A, force=True, edit=_edit),
    "force over an edit, changed spec": Scenario(A, B, force=True, edit=_edit),
}


def _prepared(root: Path, scenario: Scenario) -> None:
    if root.exists():
        shutil.rmtree(root)
    write_tree(root, scenario.before)
    _user_files(root)
    if scenario.edit is not None:
        scenario.edit(root)


def _killed_at(root: Path, files: Mapping[str, bytes], force: bool, n: int) -> bool:
    """Render in a child killed right after its ``n``-th rename/replace/link; False if the
    render finished first."""
    return _killed_in_child(
        lambda: write_tree(root, files, force=force), ("rename", "replace", "link"), n
    )


def _killed_in_child(work: Callable[[], object], calls_of: tuple[str, ...], n: int) -> bool:
    """Run ``work`` in a child killed right after its ``n``-th call of the ``os`` functions
    ``calls_of``; False if it finished first (it must then have succeeded)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            calls = [0]
            for name in calls_of:
                real = getattr(os, name)

                def step(*args: object, _real: Callable[..., None] = real, **kw: object) -> None:
                    _real(*args, **kw)
                    calls[0] += 1
                    if calls[0] == n:
                        os.kill(os.getpid(), signal.SIGKILL)

                setattr(os, name, step)
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, "the work failed instead of finishing"
    return False


def sweep(tmp_path: Path, scenario: Scenario) -> tuple[int, list[str]]:
    """Kill at every call in turn; (kill points, descriptions of the bad ones)."""
    root, reference = tmp_path / "root", tmp_path / "reference"
    _prepared(reference, scenario)
    old = snapshot(reference)
    write_tree(reference, scenario.after, force=scenario.force)
    new = snapshot(reference)
    bad: list[str] = []
    kills = 0
    for n in range(1, 200):
        _prepared(root, scenario)
        if not _killed_at(root, scenario.after, scenario.force, n):
            break
        kills += 1
        recover_tree(root)
        state = snapshot(root)
        if state not in (old, new):
            lost = sorted(set(old) - set(state) - (set(old) - set(new)))
            vault = "" if state.get(VAULT) == VAULT_TEXT else "the user's vault file is gone; "
            bad.append(f"kill {n}: neither tree; {vault}missing {lost[:4]}")
            continue
        write_tree(root, scenario.after, force=scenario.force)
        if snapshot(root) != new:
            bad.append(f"kill {n}: the next render does not give the new tree")
    return kills, bad


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory for many small renders: in memory where there is a tmpfs, with syncs off
    (a SIGKILL loses no completed call; durability across power loss is not what is tested)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "sync", lambda: None)
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path
    directory = Path(tempfile.mkdtemp(dir=base, prefix="railplan-test-"))
    try:
        yield directory
    finally:
        # shutil.rmtree (pytest's clean-up too) recurses: a 1,200-level tree is too deep for it
        remove(directory)


def test_a_kill_after_any_rename_of_a_same_spec_render_leaves_the_old_or_the_new_tree(
    scratch: Path,
) -> None:
    """The representative case `make test` runs: the same spec over its own tree (before: 4
    of 10 kill points lost a unit, the inventory with the vault file among them)."""
    kills, bad = sweep(scratch, SCENARIOS["same spec"])
    assert kills >= 8, kills  # journal, every unit out and in, the commit: all were hit
    assert bad == [], f"{len(bad)} of {kills} kill points: " + "; ".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_kill_after_any_rename_leaves_the_old_or_the_new_tree(scratch: Path, name: str) -> None:
    kills, bad = sweep(scratch, SCENARIOS[name])
    assert kills >= 8, kills
    assert bad == [], f"{len(bad)} of {kills} kill points: " + "; ".join(bad)


# --- state planted in the root: read with the tree's no-follow rules --------------------------


@pytest.mark.parametrize("state", ["swapping", "committed", "legacy"])
def test_a_forged_journal_with_a_planted_old_directory_linking_out_is_not_followed(
    tmp_path: Path, state: str
) -> None:
    """Valid names throughout; the planted old directory's ``inventories`` is a link to a
    directory outside the root holding what the journal's units name."""
    victim = tmp_path / "victim"
    (victim / "c").mkdir(parents=True)
    (victim / "c/hosts.yml").write_bytes(b"precious\n")
    (victim / "ansible.cfg").write_bytes(b"precious\n")
    root = tmp_path / "root"
    write_tree(root, A)
    old = root / ".railplan-old-1-0123456789abcdef"
    old.mkdir()
    (old / "inventories").symlink_to(victim)
    (old / "playbooks").symlink_to(victim)
    journal: dict[str, object] = {"old": old.name, "units": ["inventories/c", "playbooks/c.yml"]}
    journal["created"] = []
    # as a swap writes it, with its staging directory (an earlier railplan's had the old
    # directory's tag and was not named): only the links are wrong
    (root / ".railplan-staging-1-0123456789abcdef").mkdir()
    if state == "legacy":  # the journal of an earlier railplan
        journal["manifest"] = "0" * 64
    else:
        journal.update(format=2, staging=".railplan-staging-1-0123456789abcdef", state=state)
        journal["units"] = [*journal["units"], MANIFEST]  # type: ignore[list-item]
    (root / ".railplan-journal.json").write_text(json.dumps(journal))
    for attempt in (
        lambda: recover_tree(root),
        lambda: write_tree(root, A),
        lambda: write_tree(root, B, force=True),
    ):
        try:
            attempt()
        except RailplanError as exc:
            assert "symlink" in exc.message, exc.message
        assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == [
            "ansible.cfg",
            "c",
            "c/hosts.yml",
        ]
        assert (victim / "c/hosts.yml").read_bytes() == b"precious\n"
        assert snapshot(root / "inventories/c")  # the unit was not replaced by the link's
        assert not (root / "inventories/c").is_symlink()


# --- edits made while a render runs --------------------------------------------------------

EDIT = b"a: mine\n"
EDITED = "inventories/c/group_vars/all.yml"


def test_an_edit_right_after_the_conflict_check_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the snapshot was taken after the check (and after hashing the whole tree), so
    an edit in between was in it: the swap went ahead, exit 0, the edit gone."""
    root = tmp_path / "root"
    write_tree(root, A)
    real = writer._decide

    def decide_then_user_edits(*args: object, **kwargs: object) -> object:
        plan = real(*args, **kwargs)  # type: ignore[arg-type]
        (root / EDITED).write_bytes(EDIT)
        return plan

    monkeypatch.setattr(writer, "_decide", decide_then_user_edits)
    with pytest.raises(RenderError, match="changed while the tree was rendered"):
        write_tree(root, B)
    assert (root / EDITED).read_bytes() == EDIT
    assert (root / "ansible.cfg").read_bytes() == A["ansible.cfg"]  # nothing was swapped


def test_an_edit_while_the_check_reads_the_tree_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check hashes every rendered file, which takes seconds for a large tree; an edit to
    a file it has already read (before: "an edit 0.5-3 s after the start is lost")."""
    root = tmp_path / "root"
    write_tree(root, A)
    target = os.lstat(root / EDITED).st_ino
    real = hashlib.file_digest
    read = []

    def digest_then_user_edits(f: Any, name: str) -> Any:
        found = real(f, name)
        read.append(os.fstat(f.fileno()).st_ino)
        if target in read[:-1] and len(read) == read.index(target) + 2:
            (root / EDITED).write_bytes(EDIT)  # in place: same inode, maybe same tick
        return found

    monkeypatch.setattr(hashlib, "file_digest", digest_then_user_edits)
    with pytest.raises(RenderError, match="changed while the tree was rendered"):
        write_tree(root, B)
    assert (root / EDITED).read_bytes() == EDIT
    assert len(read) > read.index(target) + 1  # the edit came after the check read the file


@pytest.mark.parametrize("how", ["in place", "new file", "removed", "replaced"])
def test_an_edit_during_the_swap_of_another_unit_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The edit lands after every check before the swap, while ``ansible.cfg`` (the first
    unit) is moved: the inventory is checked again once it is out of the user's reach."""
    root = tmp_path / "root"
    write_tree(root, A)
    (root / "inventories/c/group_vars/vault.yml").write_bytes(b"secret\n")
    real = os.rename
    target = root / "inventories/c/group_vars/vault.yml"

    def rename_then_user_edits(src: object, dst: object, **kwargs: object) -> None:
        real(src, dst, **kwargs)  # type: ignore[arg-type]
        if str(src).endswith("ansible.cfg") and target.parent.is_dir():
            monkeypatch.setattr(os, "rename", real)
            if how == "in place":
                target.write_bytes(b"secret, edited\n")
            elif how == "new file":
                (target.parent / "new.yml").write_bytes(b"new\n")
            elif how == "removed":
                target.unlink()
            else:
                (target.parent / "tmp").write_bytes(b"secret, saved by an editor\n")
                real(target.parent / "tmp", target)

    monkeypatch.setattr(os, "rename", rename_then_user_edits)
    with pytest.raises(RenderError, match="changed while the tree was rendered"):
        write_tree(root, B)
    monkeypatch.setattr(os, "rename", real)
    expected = {
        "in place": [b"secret, edited\n"],
        "new file": [b"secret\n", b"new\n"],
        "removed": [],
        "replaced": [b"secret, saved by an editor\n"],
    }[how]
    found = [p.read_bytes() for p in sorted(target.parent.glob("[nv]*.yml"))]
    assert sorted(found) == sorted(expected)
    assert (root / "ansible.cfg").read_bytes() == A["ansible.cfg"]  # rolled back as a whole


# --- deep directories the user keeps inside a unit --------------------------------------------


def _nest(top: Path, levels: int, name: str = "d") -> None:
    """``levels`` directories one in another under ``top``, a file in the deepest; made with
    directory descriptors, so the whole path may exceed PATH_MAX."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"deep\n")
        os.close(leaf)
    finally:
        os.close(fd)


def _deepest(top: Path, name: str = "d") -> bytes:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    while name in os.listdir(fd):
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    leaf = os.open("leaf.txt", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    with os.fdopen(leaf, "rb") as f:
        return f.read()


def test_a_user_directory_nested_1200_levels_in_a_unit_is_carried_over(scratch: Path) -> None:
    """Before: RecursionError (exit 3) from the recursive walk and removal."""
    root = scratch / "root"
    write_tree(root, A)
    _nest(root / "inventories/c", 1200)
    write_tree(root, B)
    assert _deepest(root / "inventories/c") == b"deep\n"
    assert snapshot(root / "playbooks/roles/new") and not list(root.glob(".railplan-*-*"))
    write_tree(root, A)  # and once more: the deep tree goes to the old unit and is removed
    assert _deepest(root / "inventories/c") == b"deep\n"


def test_a_user_directory_deeper_than_a_path_can_name_is_refused_with_one_line(
    scratch: Path,
) -> None:
    root = scratch / "root"
    write_tree(root, A)
    _nest(root / "inventories/c", 1500, name="dir")  # 6,000 bytes of path: past PATH_MAX
    with pytest.raises(RenderError) as caught:
        write_tree(root, B)
    assert "inventories/c/dir/dir/" in caught.value.message
    assert len(caught.value.message) < 400
    assert _deepest(root / "inventories/c", "dir") == b"deep\n"
    assert (root / "ansible.cfg").read_bytes() == A["ansible.cfg"]
    assert not list(root.glob(".railplan-*-*"))


def test_a_planted_deep_leftover_is_swept(scratch: Path) -> None:
    root = scratch / "root"
    write_tree(root, A)
    for name in (".railplan-old-1-0123456789abcdef", ".railplan-staging-1-0123456789abcdef"):
        (root / name).mkdir()
        _nest(root / name, 1500, name="dir")
    assert "removed 2 leftovers" in recover_tree(root)
    assert not list(root.glob(".railplan-*-*"))


def test_a_file_made_at_a_units_name_while_it_is_swapped_is_kept_with_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between a unit's two moves its name is free: a file the user saves there is neither
    replaced by the staged one nor removed by the rollback; the render stops, names both, and
    the journal stays until the user keeps one."""
    root = tmp_path / "root"
    write_tree(root, A)
    real = os.rename

    def rename_then_user_saves(src: object, dst: object, **kwargs: object) -> None:
        real(src, dst, **kwargs)  # type: ignore[arg-type]
        if str(src) == str(root / "ansible.cfg"):
            monkeypatch.setattr(os, "rename", real)
            (root / "ansible.cfg").write_bytes(b"# saved meanwhile\n")

    monkeypatch.setattr(os, "rename", rename_then_user_saves)
    with pytest.raises(RenderError, match="was made while a render swapped it"):
        write_tree(root, B)
    monkeypatch.setattr(os, "rename", real)
    assert (root / "ansible.cfg").read_bytes() == b"# saved meanwhile\n"
    (kept,) = root.glob(".railplan-old-*/ansible.cfg")
    assert kept.read_bytes() == A["ansible.cfg"]
    with pytest.raises(RenderError, match="was made while a render swapped it"):
        recover_tree(root)
    (root / "ansible.cfg").unlink()  # the user keeps the previous one
    assert recover_tree(root).startswith("rolled back")
    assert (
        snapshot(root / "inventories") and (root / "ansible.cfg").read_bytes() == A["ansible.cfg"]
    )
    assert not list(root.glob(".railplan-*-*"))


# --- catchable signals at every file-system call: the tree is whole when the render returns ----

_FS_CALLS = ("rename", "replace", "link", "unlink", "rmdir", "mkdir", "symlink")
_INTERRUPTED = 7  # the child's exit code when the render ended by `Interrupted`


def _signalled_at(root: Path, files: Mapping[str, bytes], force: bool, at: set[int]) -> bool:
    """Render in a child that sends itself SIGTERM right before each of the file-system calls
    numbered in ``at``, inside `raising_on_signals` as the CLI runs; False if the render made
    fewer calls. The child must end by `Interrupted`, never by another error."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            calls = [0]
            for name in _FS_CALLS:
                real = getattr(os, name)

                def step(*args: object, _real: Callable[..., None] = real, **kw: object) -> None:
                    calls[0] += 1
                    if calls[0] in at:
                        os.kill(os.getpid(), signal.SIGTERM)
                    _real(*args, **kw)

                setattr(os, name, step)
            try:
                with raising_on_signals():
                    write_tree(root, files, force=force)
                code = 0 if calls[0] < min(at) else 4  # a signal that came must not be lost
            except Interrupted as exc:
                code = _INTERRUPTED if exc.signum == signal.SIGTERM else 5
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, _INTERRUPTED), f"the render ended with {code}, not by the signal"
    return code == _INTERRUPTED


def signal_sweep(tmp_path: Path, scenario: Scenario, signals: int) -> tuple[int, list[str]]:
    """SIGTERM (``signals`` of them, at consecutive calls) at every call in turn, no recovery
    afterwards: (signalled renders, descriptions of the bad ones)."""
    root, reference = tmp_path / "root", tmp_path / "reference"
    _prepared(reference, scenario)
    old = snapshot(reference)
    write_tree(reference, scenario.after, force=scenario.force)
    new = snapshot(reference)
    bad: list[str] = []
    runs = 0
    for n in range(1, 1000):
        _prepared(root, scenario)
        if not _signalled_at(root, scenario.after, scenario.force, set(range(n, n + signals))):
            break
        runs += 1
        left = sorted(p.name for p in root.iterdir() if p.name.startswith(".railplan-"))
        state = snapshot(root)
        if left != [".railplan-manifest.json"]:
            bad.append(f"call {n}: left {left}")
        elif state not in (old, new):
            bad.append(f"call {n}: neither tree")
    return runs, bad


# The same spec's single-SIGTERM sweep (about 7 s of CPU) is `make test-slow`'s: its kill
# points are swept here by the same-spec kill test above, its signal handling by the two
# changed-spec sweeps.
@pytest.mark.parametrize(
    ("name", "signals"),
    [
        ("changed spec", 1),
        pytest.param("same spec", 1, marks=pytest.mark.slow),
        ("changed spec", 2),
    ],
)
def test_a_sigterm_at_any_call_leaves_a_whole_tree_and_nothing_else(
    scratch: Path, name: str, signals: int
) -> None:
    """Before: a SIGTERM during the clean-up after the commit left the previous tree (the
    user's vault file in it) in ``.railplan-old-*``, and a second SIGTERM during the rollback
    left the tree half swapped with its journal; nothing said so."""
    runs, bad = signal_sweep(scratch, SCENARIOS[name], signals)
    assert runs >= 60, runs  # staging, the swap, the commit and the whole clean-up were hit
    assert bad == [], f"{len(bad)} of {runs} calls: " + "; ".join(bad)


# --- forged journals that would have the rollback remove what no render made -----------------

_OLD, _STAGED = ".railplan-old-1-0123456789abcdef", ".railplan-staging-1-0123456789abcdef"


def _forge(root: Path, unit: str, how: str) -> None:
    """A swapping journal that calls ``unit`` (the user's) new or moved in; ``how`` plants
    what a real swap would have left, more and more of it."""
    units, created = [unit], [unit]
    if how != "no directories, no manifest unit":
        units.append(MANIFEST)
    if not how.startswith("no directories"):
        (root / _OLD).mkdir()
        (root / _STAGED).mkdir()
    if how == "planted directories, manifest new too":
        created.append(MANIFEST)
    if how == "planted directories, manifest staged":
        shutil.copy(root / MANIFEST, root / _STAGED / MANIFEST)
    if how == "planted old unit, manifest staged":
        shutil.copy(root / MANIFEST, root / _STAGED / MANIFEST)
        (root / _OLD / unit).parent.mkdir(parents=True, exist_ok=True)
        (root / _OLD / unit).mkdir()
        created = []
    document = {"format": 2, "old": _OLD, "staging": _STAGED, "state": "swapping"}
    document.update(units=units, created=created)
    (root / ".railplan-journal.json").write_text(json.dumps(document))


@pytest.mark.parametrize("unit", ["inventories/c", "USER-README.md", "vault"])
@pytest.mark.parametrize(
    "how",
    [
        "no directories, no manifest unit",  # the trial's journal
        "no directories",
        "planted directories",
        "planted directories, manifest new too",
        "planted directories, manifest staged",
        "planted old unit, manifest staged",
    ],
)
def test_forged_created_deletes_nothing(tmp_path: Path, unit: str, how: str) -> None:
    """Before: ``render --recover`` (and any render) removed whatever the journal's units
    named, the user's own files and the whole inventory with its vault file among them."""
    root = tmp_path / "root"
    write_tree(root, A)
    _user_files(root)
    (root / "USER-README.md").write_bytes(b"mine\n")
    (root / "vault").mkdir()
    (root / "vault/c.yml").write_bytes(b"secret\n")
    _forge(root, unit, how)
    before = {k: v for k, v in snapshot(root).items() if not k.startswith(".railplan-")}
    for attempt in (lambda: recover_tree(root), lambda: write_tree(root, B, force=True)):
        with pytest.raises(TreeStateError) as caught:
            attempt()
        assert caught.value.file == str(root / ".railplan-journal.json")
        assert caught.value.hint and (
            "remove" in caught.value.hint or "delete" in caught.value.hint
        )
        after = {k: v for k, v in snapshot(root).items() if not k.startswith(".railplan-")}
        assert after == before


def _recovery_killed_at(root: Path, n: int) -> bool:
    """``recover_tree`` in a child killed right after its ``n``-th rename/replace/link/unlink
    /rmdir; False if the recovery finished first."""
    return _killed_in_child(
        lambda: recover_tree(root), ("rename", "replace", "link", "unlink", "rmdir"), n
    )


# The render is killed after its n-th rename and the recovery after its m-th step, n and m
# every `render_step` and `recovery_step` calls: `make test` walks every fourth render call and
# every tenth recovery step (28-30 pairs), `make test-slow` every second and every fifth (about 97).
KILL_GRIDS = [
    pytest.param(4, 10, id="sparse"),
    pytest.param(2, 5, id="dense", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("render_step", "recovery_step"), KILL_GRIDS)
def test_a_kill_during_the_recovery_of_a_killed_render_still_recovers(
    tmp_path: Path, render_step: int, recovery_step: int
) -> None:
    """A render killed mid-swap, then its recovery killed mid-rollback (a unit half removed:
    `remove` had moved its subdirectories up under ``.railplan-rm-*`` names), then recovered:
    the tree is the old or the new one. The rollback's own leftovers once read as files no
    render made, and the journal was refused as forged."""
    deep = {f"inventories/c/files/k8s/d{i}/x.yaml": b"x\n" for i in range(3)}  # a real tree's depth
    scenario = Scenario(A, {**B, **deep}, force=False)
    root, reference = tmp_path / "root", tmp_path / "reference"
    _prepared(reference, scenario)
    old = snapshot(reference)
    write_tree(reference, scenario.after)
    new = snapshot(reference)
    bad, pairs = [], 0
    for n in range(1, 40, render_step):
        for m in range(1, 200, recovery_step):
            _prepared(root, scenario)
            if not _killed_at(root, scenario.after, scenario.force, n):
                break
            if not _recovery_killed_at(root, m):
                break
            pairs += 1
            try:
                recover_tree(root)
            except TreeStateError as exc:
                bad.append(f"render {n}, recovery {m}: {exc}")
                continue
            if snapshot(root) not in (old, new):
                bad.append(f"render {n}, recovery {m}: neither tree")
    assert pairs >= 20, pairs
    assert not bad, f"{len(bad)} of {pairs}: {bad[:3]}"
