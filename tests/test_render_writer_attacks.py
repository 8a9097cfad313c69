"""The tree writer under hostile state: what someone who can write to the render root plants.

railplan renders as root in CI, into a directory a GitOps repository or a pull request can
fill. Each test plants one thing the 2026 adversarial trial used and checks the
render refuses with one line (exit 2) or goes on safely, and that nothing outside the root
changes. The victim is a directory next to the root, standing for /etc.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.errors import RailplanError
from infra.render import writer
from infra.render.tree_state import TreeStateError, locked
from infra.render.writer import MANIFEST, RenderConflict, RenderError, recover_tree, write_tree
from tests.cli_run import run_cli
from tests.test_render_writer import TREE

NEW = {k: v + b"# new\n" for k, v in TREE.items()}
REPO = Path(__file__).parents[1]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory outside the root with a file in it: must never change."""
    outside = tmp_path / "victim"
    outside.mkdir()
    (outside / "s.txt").write_text("secret\n")
    (outside / "hosts.yml").write_text("precious\n")
    return outside


def _untouched(victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == ["hosts.yml", "s.txt"]
    assert (victim / "s.txt").read_text() == "secret\n"
    assert (victim / "hosts.yml").read_text() == "precious\n"


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".railplan-")
    }


@pytest.mark.parametrize("planted", ["inventories", "inventories/lab", "playbooks/roles"])
@pytest.mark.parametrize("force", [False, True])
def test_a_planted_directory_symlink_is_never_written_through(
    tmp_path: Path, victim: Path, planted: str, force: bool
) -> None:
    root = tmp_path / "root"
    (root / planted).parent.mkdir(parents=True)
    (root / planted).symlink_to(victim)
    with pytest.raises(RenderError, match="is a symlink"):
        write_tree(root, TREE, force=force)
    _untouched(victim)


def test_a_symlink_in_place_of_a_rendered_file_is_replaced_not_followed(
    tmp_path: Path, victim: Path
) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    target = root / "inventories/lab/hosts.yml"
    target.unlink()
    target.symlink_to(victim / "hosts.yml")
    with pytest.raises(RenderConflict):  # not railplan's file any more: the user's to decide
        write_tree(root, NEW)
    write_tree(root, NEW, force=True)
    assert not target.is_symlink() and target.read_bytes() == NEW["inventories/lab/hosts.yml"]
    _untouched(victim)


@pytest.mark.parametrize("name", [".railplan-staging", ".railplan-old"])
def test_planted_staging_and_old_names_are_removed_as_links(
    tmp_path: Path, victim: Path, name: str
) -> None:
    """The names used to be `<name>-<PID>`: predictable in a container. Plant every PID
    near ours and the other shapes; the render goes on and unlinks them."""
    root = tmp_path / "root"
    write_tree(root, TREE)
    pid = os.getpid()
    for n in [*range(pid - 3, pid + 4), 1]:
        (root / f"{name}-{n}").symlink_to(victim)
    write_tree(root, NEW)
    assert _tree(root) == NEW
    assert not [p for p in root.iterdir() if p.name.startswith(name)]
    _untouched(victim)


FORGED_JOURNALS = {
    "unit outside": {"old": ".railplan-old-1-0123456789abcdef", "units": ["../victim"]},
    "absolute unit": {"old": ".railplan-old-1-0123456789abcdef", "units": ["/etc/passwd"]},
    "old outside": {"old": "../victim", "units": ["ansible.cfg"]},
    "units not a list": {"old": ".railplan-old-1-0123456789abcdef", "units": "ansible.cfg"},
    "a list": ["ansible.cfg"],
}


@pytest.mark.parametrize("forged", sorted(FORGED_JOURNALS))
def test_a_forged_journal_is_refused_with_one_line(
    tmp_path: Path, victim: Path, forged: str
) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    document = FORGED_JOURNALS[forged]
    if isinstance(document, dict):
        document = {"manifest": "0" * 64, "created": [], **document}
    (root / ".railplan-journal.json").write_text(json.dumps(document))
    with pytest.raises(TreeStateError) as caught:
        write_tree(root, NEW)
    assert caught.value.file == str(root / ".railplan-journal.json")
    _untouched(victim)
    assert _tree(root) == TREE


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe\x00binary",
        b'{"old": 1}',
        b"[]",
        b"{}",
        # nested deeper than json's stack, well inside the size cap (RecursionError before)
        b"[" * 400_000 + b"]" * 400_000,
        b'{"a":' * 200_000 + b"1" + b"}" * 200_000,
    ],
    ids=["text", "binary", "wrong-key", "array", "empty", "deep-array", "deep-object"],
)
def test_a_damaged_journal_is_a_located_error_not_an_internal_one(
    tmp_path: Path, content: bytes
) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    (root / ".railplan-journal.json").write_bytes(content)
    with pytest.raises(TreeStateError) as caught:
        write_tree(root, NEW)
    assert caught.value.file == str(root / ".railplan-journal.json")


def test_the_sweep_leaves_user_files_that_only_start_like_railplan_names(tmp_path: Path) -> None:
    """Only railplan's own `.railplan-old-<pid>-<hex>` / `-staging-` names are leftovers."""
    root = tmp_path / "root"
    write_tree(root, TREE)
    (root / ".railplan-oldnotes.txt").write_text("mine\n")
    (root / ".railplan-staging.bak").mkdir()
    (root / ".railplan-staging.bak" / "keep").write_text("mine too\n")
    leftover = root / ".railplan-old-123-0123456789abcdef"
    leftover.mkdir()
    write_tree(root, NEW)
    assert (root / ".railplan-oldnotes.txt").read_text() == "mine\n"
    assert (root / ".railplan-staging.bak" / "keep").read_text() == "mine too\n"
    assert not leftover.exists()


def test_a_directory_in_place_of_the_journal_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    (root / ".railplan-journal.json").mkdir()
    with pytest.raises(TreeStateError, match=r"not a regular file|cannot be read"):
        write_tree(root, NEW)


def test_a_manifest_that_is_a_fifo_does_not_hang_the_render(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / MANIFEST)
    result: list[BaseException] = []

    def attempt() -> None:
        try:
            write_tree(root, TREE)
        except TreeStateError as exc:
            result.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=30)  # a guard against a hang, not a speed check: it returns at once
    assert not thread.is_alive(), "render blocked opening the FIFO"
    assert result and "not a regular file" in str(result[0])


@pytest.mark.parametrize("target", ["/dev/zero", "victim"])
def test_a_manifest_symlink_is_not_read(tmp_path: Path, victim: Path, target: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / MANIFEST).symlink_to(victim / "s.txt" if target == "victim" else target)
    with pytest.raises(TreeStateError, match="a symlink"):
        write_tree(root, TREE)
    _untouched(victim)


def test_a_huge_forged_manifest_is_refused_without_reading_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with (root / MANIFEST).open("wb") as f:
        f.truncate(265 << 20)  # sparse: 265 MB of NULs costs no disk
    with pytest.raises(TreeStateError, match="larger than 64 MiB"):
        write_tree(root, TREE)


@pytest.mark.parametrize(
    "key",
    [
        "inventories/lab/../../../victim/s.txt",
        "/etc/passwd",
        "inventories/lab/./hosts.yml",
        ".railplan-journal.json",
    ],
)
def test_a_manifest_naming_a_path_outside_the_root_is_refused(
    tmp_path: Path, victim: Path, key: str
) -> None:
    """Before: the key was digested, so the render told whether a file exists outside."""
    root = tmp_path / "root"
    write_tree(root, TREE)
    manifest = json.loads((root / MANIFEST).read_text())
    manifest["files"][key] = "0" * 64
    (root / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(TreeStateError, match="not a path inside the root"):
        write_tree(root, NEW)
    _untouched(victim)


def test_a_special_file_in_a_rendered_directory_is_refused_not_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    os.mkfifo(root / "inventories/lab/pipe")
    if os.geteuid() == 0:  # a character device needs root: /dev/zero's numbers (1, 5)
        os.mknod(root / "inventories/lab/zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    with pytest.raises(RenderError, match="special file"):
        write_tree(root, NEW)
    assert _tree(root) == TREE
    assert not [p for p in root.iterdir() if p.name.startswith(".railplan-") and p.is_dir()]


def test_a_second_render_on_a_locked_root_fails_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    with locked(root), pytest.raises(TreeStateError, match="another railplan render"):
        write_tree(root, NEW)
    assert _tree(root) == TREE


_RENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from infra.render.tree_state import TreeStateError
    from infra.render.writer import write_tree
    tag = sys.argv[2].encode()
    files = {f"inventories/c/host_vars/n{i:04d}.yml": tag * 64 for i in range(800)}
    files["playbooks/roles/r/tasks/main.yml"] = tag
    files["ansible.cfg"] = tag
    try:
        write_tree(Path(sys.argv[1]), files, force=True)
    except TreeStateError:
        sys.exit(2)
    """
)


def _whole(root: Path) -> bytes:
    """The one tag every rendered file of the tree holds; fails on a mixed tree."""
    tags = {p.read_bytes()[:1] for p in (root / "inventories/c/host_vars").iterdir()}
    tags.add((root / "playbooks/roles/r/tasks/main.yml").read_bytes()[:1])
    tags.add((root / "ansible.cfg").read_bytes()[:1])
    assert len(tags) == 1, tags
    assert len(list((root / "inventories/c/host_vars").iterdir())) == 800
    return tags.pop()


def test_concurrent_renders_never_leave_a_mixed_tree(tmp_path: Path) -> None:
    """Six trials of two renders started together: each ends whole (before: 3 of 6 mixed);
    the one that found the root locked exits 2."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    root = tmp_path / "root"
    codes = []
    for _ in range(6):
        procs = [
            subprocess.Popen([sys.executable, "-c", _RENDER, str(root), tag], env=env)
            for tag in ("a", "b")
        ]
        codes += [p.wait() for p in procs]
        assert _whole(root) in (b"a", b"b")
        assert not [
            p for p in root.iterdir() if p.name.startswith(".railplan-") and ".json" not in p.name
        ]
    assert set(codes) <= {0, 2} and 0 in codes


def test_a_render_that_finds_the_root_locked_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two first renders both see the root missing; the one that loses the lock must not take
    the empty root from under the one writing into it (before: 1 of 20 concurrent first
    renders failed both, "No such file or directory", no tree left)."""
    root = tmp_path / "root"
    prepared = writer._prepared_root
    held: list[int] = []

    def made_then_taken(path: Path) -> Path:  # the other render locks it right after mkdir
        got = prepared(path)
        held.append(os.open(got, os.O_RDONLY | os.O_DIRECTORY))
        fcntl.flock(held[0], fcntl.LOCK_EX)
        return got

    monkeypatch.setattr(writer, "_prepared_root", made_then_taken)
    try:
        with pytest.raises(TreeStateError, match="another railplan render is writing"):
            write_tree(root, {"ansible.cfg": b"a"})
        assert root.is_dir()
    finally:
        os.close(held[0])


def test_a_root_removed_before_its_lock_was_taken_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A render that opened the root as a failed first render removed it writes nothing
    into the removed directory: it stops with one line (exit 2)."""
    root = tmp_path / "root"
    root.mkdir()
    flock = fcntl.flock

    def removed_first(fd: int, operation: int) -> None:
        root.rmdir()
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", removed_first)
    with pytest.raises(TreeStateError, match="removed this directory"), locked(root):
        pass


_KILL_AT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    n = int(sys.argv[3])
    calls = [0]
    for name in ("rename", "replace"):
        real = getattr(os, name)
        def step(*args, _real=real, **kwargs):
            _real(*args, **kwargs)
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
        setattr(os, name, step)
    exec(sys.argv[4])
    """
)


@pytest.mark.slow
def test_sigkill_after_every_step_of_the_swap_leaves_the_old_or_the_new_tree(
    tmp_path: Path,
) -> None:
    """Kill with SIGKILL after each rename of the swap, one run per step (journal, every unit
    out and in, the manifest commit, the clean-up), then recover as the next render or
    `railplan render --recover` would: the tree is wholly the old one or wholly the new one,
    with the user's own file kept, and nothing of railplan's is left over."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    root = tmp_path / "root"
    outcomes = []
    for n in range(1, 40):
        subprocess.run([sys.executable, "-c", _RENDER, str(root), "a"], check=True, env=env)
        (root / "inventories/c/mine.txt").write_text("user\n")
        done = subprocess.run(
            [sys.executable, "-c", _KILL_AT, str(root), "b", str(n), _RENDER], env=env, check=False
        )
        if done.returncode == 0:  # fewer renames than n: the render finished
            break
        assert done.returncode == -signal.SIGKILL
        recover_tree(root)
        outcomes.append(_whole(root))
        assert (root / "inventories/c/mine.txt").read_text() == "user\n"
        assert not [
            p for p in root.iterdir() if p.name.startswith((".railplan-old", ".railplan-staging"))
        ]
        assert not (root / ".railplan-journal.json").exists()
    assert len(outcomes) >= 8  # journal, 3 units out and in, the manifest: every step was hit
    assert outcomes[0] == b"a" and outcomes[-1] == b"b"


def test_an_edit_made_while_the_tree_is_staged_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    real_stage = writer._stage
    edited = root / "inventories/lab/group_vars/all.yml"

    def stage_then_user_edits(*args: object) -> None:
        real_stage(*args)  # type: ignore[arg-type]
        edited.write_bytes(b"---\na: 2  # mine\n")  # after the conflict check, before the swap
        (root / "inventories/lab/notes.txt").write_text("mine too\n")

    monkeypatch.setattr(writer, "_stage", stage_then_user_edits)
    with pytest.raises(RenderError, match="changed while the tree was rendered"):
        write_tree(root, NEW)
    assert edited.read_bytes() == b"---\na: 2  # mine\n"
    assert (root / "inventories/lab/notes.txt").read_text() == "mine too\n"


def test_force_over_an_edited_file_reports_it_written(tmp_path: Path) -> None:
    """Before: "0 files written, N unchanged" while the edit was being replaced."""
    root = tmp_path / "root"
    write_tree(root, TREE)
    (root / "ansible.cfg").write_bytes(b"[defaults]\nmine = 1\n")
    report = write_tree(root, TREE, force=True)
    assert report.written == ("ansible.cfg",) and report.replaced == ("ansible.cfg",)
    assert (root / "ansible.cfg").read_bytes() == TREE["ansible.cfg"]


_FEW_FDS = textwrap.dedent(
    """
    import resource, sys
    from pathlib import Path
    from infra.errors import RailplanError
    from infra.render.writer import write_tree
    files = {f"inventories/c/f{i}.yml": b"x" for i in range(50)} | {"a.cfg": b"x"}
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))
    try:
        write_tree(Path(sys.argv[1]), files)
    except (RailplanError, OSError) as exc:
        print(type(exc).__name__, exc)
        sys.exit(2)
    """
)


@pytest.mark.parametrize("limit", [6, 7, 8, 10, 16])
def test_few_file_descriptors_never_end_in_success_with_leftovers(
    tmp_path: Path, limit: int
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    root = tmp_path / "root"
    root.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _FEW_FDS, str(root), str(limit)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    leftovers = [
        p.name for p in root.iterdir() if p.name.startswith(".railplan-") and p.name != MANIFEST
    ]
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 0:
        assert leftovers == []
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > limit  # the test's own is intact


def test_render_recover_is_a_cli_verb_that_says_what_it_did(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    done = run_cli("render", "--recover", "--root", str(root))
    assert done.returncode == 0 and "nothing to recover" in done.stdout, done.stderr
    (root / ".railplan-journal.json").write_text("[]")
    done = run_cli("render", "--recover", "--root", str(root))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert ".railplan-journal.json" in done.stderr


_PLACES = [
    "inventories",
    "inventories/lab",
    "inventories/lab/group_vars",
    "playbooks",
    "playbooks/roles",
    "playbooks/roles/nccl",
    "ansible.cfg",
    ".railplan-manifest.json",
    ".railplan-journal.json",
    f".railplan-staging-{os.getpid()}",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="./abc0-", max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["old", "staging", "state", "units", "created", "manifest", "files", "format"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    links=st.lists(st.sampled_from(_PLACES), max_size=3, unique=True),
    journal=st.none() | _JSON,
    manifest=st.none() | _JSON,
    force=st.booleans(),
)
def test_any_planted_state_renders_safely_or_is_refused_with_one_error(
    tmp_path_factory: pytest.TempPathFactory,
    links: list[str],
    journal: object,
    manifest: object,
    force: bool,
) -> None:
    """Fuzz: links to a victim planted anywhere railplan looks, forged journals and manifests
    of any JSON shape. The render succeeds or raises a railplan error; the victim never
    changes; after a success the tree is the render."""
    base = tmp_path_factory.mktemp("planted")
    victim = base / "victim"
    victim.mkdir()
    (victim / "s.txt").write_text("secret\n")
    (victim / "hosts.yml").write_text("precious\n")
    root = base / "root"
    write_tree(root, TREE)
    for name, document in ((".railplan-journal.json", journal), (MANIFEST, manifest)):
        if document is not None:
            (root / name).write_text(json.dumps(document))
    for place in sorted(links):
        if any(place.startswith(done + "/") for done in links if done < place):
            continue  # under a link already planted: planting would write into the victim
        target = root / place
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(victim)
    try:
        write_tree(root, NEW, force=force)
    except RailplanError:
        pass
    else:
        assert _tree(root) == NEW
    _untouched(victim)


def test_render_force_names_the_edited_files_it_replaced(tmp_path: Path) -> None:
    """Before: "0 files written, 1435 unchanged" while an edited group_vars was replaced."""
    spec = REPO / "examples" / "a100-lab-mig.yaml"
    root = tmp_path / "tree"
    assert run_cli("render", str(spec), "--root", str(root)).returncode == 0
    edited = next((root / "inventories").glob("*/group_vars/all.yml"))
    edited.write_text(edited.read_text() + "# mine\n")
    done = run_cli("render", str(spec), "--root", str(root), "--force")
    assert done.returncode == 0, done.stderr
    assert " 1 files written," in done.stdout
    rel = edited.relative_to(root).as_posix()
    assert f"1 edited file replaced (--force): {rel}" in done.stdout


@pytest.mark.parametrize("verb", [["render", "examples/a100-lab-mig.yaml"], ["render"]])
def test_a_root_name_too_long_for_the_file_system_is_one_line_exit_2(
    tmp_path: Path, verb: list[str]
) -> None:
    """A component over NAME_MAX: `Path.exists()` raises ENAMETOOLONG itself (was exit 3)."""
    root = tmp_path / ("x" * 300)
    args = [*verb, "--root", str(root)] + (["--recover"] if len(verb) == 1 else [])
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "too long" in result.stderr.lower(), result.stderr


def test_a_root_named_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    """Success lines show command-line paths as error lines do: an OSC sequence in --root
    (it would set the terminal's title) or U+202E never reaches the terminal raw."""
    root = tmp_path / "r\x1b]0;pwn\x07\u202e"
    for args in (["render", "examples/a100-lab-mig.yaml"], ["render", "--recover"]):
        result = run_cli(*args, "--root", str(root))
        assert result.returncode == 0, result.stderr
        out = result.stdout + result.stderr
        assert not any(ch in out for ch in "\x1b\x07\u202e"), repr(out)
        assert "r\\x1b]0;pwn\\x07" in out, out
