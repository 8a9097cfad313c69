"""Trial 9 (session 52, issue 36): each test one cause a hostile trial broke, not one example.

1. A YAML merge key (``<<``) of anything but a mapping (``<<: 1``, ``<<: [1]``, an alias to a
   scalar or a list of scalars, ``<<: ~``) was refused with no hint.
2. A merge written after a key the mapping states itself recorded the anchor's positions for
   that key: ``count: 0`` followed by ``<<: *base`` was reported at the anchor's ``count: 2``,
   a line holding a valid value (and so for every key, in block and flow style, at any depth).
3. A utilization or queueing budget's trace was resolved by ``normpath`` against a spec named
   through a symlinked parent (``link/../spec.yaml``): the kernel read the spec beside the
   link's target, railplan read (or refused) a trace of that name in the current directory.
4. An output that hit a process limit (``ulimit -f``: EFBIG) said "cannot write: File too
   large" with no hint, and a render said "render into a writable directory with free space".
5. A name with an accent or a look-alike letter of another script (``résearch``, Cyrillic
   ``а``, a dotless ``ı``) got a hint with a separator in the letter's place
   (``did you mean 'r-search'?``, ``'rese-rch'``, a provisioner's dots made dashes).
6. A fabric dump or node-name map saved with a UTF-8 byte-order mark (a Windows editor,
   PowerShell) was refused ("cannot tell what dump this is from '\\ufeffCA ...'"), while
   specs and traces with one are read.
7. A trace whose header names are quoted (``"id","submit_s",...``: pandas or Excel quoting
   every field) was "not recognised from its first line": the format detector split the line
   at commas, the readers read it as CSV.
8. Text output with a character stdout's encoding cannot hold (``lint -v`` prints ``×`` and
   ``—``) exited 3 "internal error: UnicodeEncodeError" under ``PYTHONIOENCODING=ascii`` or
   a C locale without UTF-8 (stderr already escapes such characters).
9. Under ``umask 000`` a render made the whole tree world-writable (root, directories,
   ansible.cfg, the manifest): Ansible ignores the ansible.cfg of a world-writable directory
   (the roles path and settings are lost) and any local user could change what root runs.
10. A file system mounted inside a rendered unit (``inventories/<name>/files``) moved with
    the unit into the old copy: the user's mount ended up under ``.railplan-old-*``, the render
    exited 2 with the immutable-flag hint, and every ``--recover`` after failed with "cannot
    write the tree ... free space"; one mounted on the way (``playbooks/``) failed the render
    with the free-space hint.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infra.budget.simulation import Replays
from infra.cli.common import say
from infra.errors import InputError
from infra.files import OutputError, write_atomic
from infra.render.tree_fs import RenderError, write_failed
from infra.render.writer import write_tree
from infra.simulate.traces import read_trace
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.schema_hints import nearest_fitting
from infra.spec.yamlpos import load_yaml_text
from infra.verify.discovered import parse_files, read_dump

from .cli_run import ROOT

LAB = (ROOT / "examples" / "a100-lab-mig.yaml").read_text()
K8 = (ROOT / "examples" / "k8s-tenants.yaml").read_text()
TRAIN = (
    '  - name: train\n    node: dgx-a100-640gb\n    count: 2\n    hostname: "train{index:02d}"\n'
)
INFER = (
    '  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n    hostname: "infer{index:02d}"\n'
)
BASE = LAB.replace("  - name: train\n", "  - &base\n    name: train\n", 1)


def _errors(text: str) -> list[SpecValidationError]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    return list(caught.value.errors)  # type: ignore[arg-type]


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# --- 1. a merge key of a non-mapping gets a hint --------------------------------------------------


@pytest.mark.parametrize(
    "merge",
    [
        "    <<: 1\n",
        "    <<: [1]\n",
        "    x-a: &s 3\n    <<: *s\n",
        "    <<: ~\n",
        "    <<: [[1]]\n",
    ],
    ids=["scalar", "list-of-scalar", "alias-to-scalar", "null", "list-of-list"],
)
def test_a_merge_key_of_anything_but_a_mapping_says_what_to_merge(merge: str) -> None:
    with pytest.raises(InputError) as caught:
        load_yaml_text(LAB.replace(TRAIN, TRAIN + merge), "spec.yaml")
    assert "merge key" in caught.value.message and caught.value.position is not None
    assert caught.value.hint and "<<: *base" in caught.value.hint


# --- 2. a key the mapping states is located at its own line, whatever a merge brings ----------


@pytest.mark.parametrize(
    ("group", "bad"),
    [
        (
            '  - name: infer\n    count: 0\n    <<: *base\n    hostname: "i{index:02d}"\n',
            "count: 0",
        ),
        (
            '  - name: infer\n    <<: *base\n    count: 0\n    hostname: "i{index:02d}"\n',
            "count: 0",
        ),
        ('  - {name: infer, count: 0, <<: *base, hostname: "i{index:02d}"}\n', "count: 0"),
        ('  - name: infer\n    hostname: "Infer{index:02d}"\n    <<: *base\n', "Infer{index"),
    ],
    ids=["merge-after", "merge-before", "flow-merge-after", "pattern-merge-after"],
)
def test_an_error_in_a_key_beside_a_merge_points_at_that_key(group: str, bad: str) -> None:
    text = BASE.replace(INFER, group, 1)
    text = text[: text.index("    mig:\n      - {gpus: [0,")] + text[text.index("fabrics:") :]
    (error,) = _errors(text)
    assert error.position is not None and error.position.line == _line(text, bad), error


def test_a_nested_key_beside_a_merge_points_at_its_own_line() -> None:
    text = K8.replace(
        "  - checkpoint: {bytes: 1.4TB, max_s: 90}",
        "  - checkpoint: &c {bytes: 1.4TB, max_s: 90}\n  - checkpoint: {max_s: -1, <<: *c}",
    )
    (error,) = _errors(text)
    assert error.position is not None and error.position.line == _line(text, "max_s: -1")


def test_a_list_item_beside_a_merge_bringing_the_same_list_points_at_its_own_line() -> None:
    infer = "  - name: infer\n"
    text = LAB.replace(infer, "  - &inf\n    name: infer\n", 1).replace(
        "fabrics:",
        "  - name: extra\n    mig:\n      - {gpus: [-1], layout: infer-small}\n"
        '    <<: *inf\n    hostname: "x{index:02d}"\n    count: 1\nfabrics:',
        1,
    )
    (error,) = _errors(text)
    assert error.position is not None and error.position.line == _line(text, "gpus: [-1]")


def test_a_key_only_the_merge_brings_is_located_at_the_anchor() -> None:
    text = BASE.replace("    count: 2\n", "    count: 0\n", 1).replace(
        INFER, '  - name: infer\n    <<: *base\n    hostname: "i{index:02d}"\n', 1
    )
    text = text[: text.index("    mig:\n      - {gpus: [0,")] + text[text.index("fabrics:") :]
    lines = {e.position.line for e in _errors(text) if e.position is not None}
    assert lines == {_line(text, "    count: 0\n")}


# --- 3. a budget's trace is found where the kernel found the spec -------------------------------


def test_a_trace_is_read_beside_a_spec_named_through_a_symlinked_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = tmp_path / "specs"
    (specs / "sub").mkdir(parents=True)
    (specs / "elsewhere").mkdir()
    (specs / "t.csv").write_text("id,submit_s,duration_s,gpus\nright,0,10,8\n")
    (specs / "elsewhere" / "t.csv").write_text("id,submit_s,duration_s,gpus\nwrong,0,10,8\n")
    (specs / "elsewhere" / "cur").symlink_to("../sub")
    monkeypatch.chdir(specs / "elsewhere")
    replays = Replays(spec_file="cur/../lab.yaml")  # the kernel: specs/lab.yaml
    path = replays.path("t.csv")
    assert Path(path).resolve() == (specs / "t.csv").resolve()
    assert Path(path).read_text().endswith("right,0,10,8\n")


def test_a_trace_beside_a_spec_named_through_a_symlink_from_outside_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs, cwd = tmp_path / "specs", tmp_path / "cwd"
    (specs / "sub").mkdir(parents=True)
    cwd.mkdir()
    (specs / "t.csv").write_text("id,submit_s,duration_s,gpus\nj,0,10,8\n")
    (cwd / "far").symlink_to(specs / "sub")
    monkeypatch.chdir(cwd)
    path = Replays(spec_file="far/../lab.yaml").path("t.csv")  # was "leads out of ..."
    assert Path(path).resolve() == (specs / "t.csv").resolve()


# --- 4. a write that hits a process limit says so -------------------------------------------------


def test_a_write_past_the_file_size_limit_gets_a_hint_naming_the_limit(tmp_path: Path) -> None:
    code = (
        "import resource, sys\n"
        "from infra.files import OutputError, write_atomic\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))\n"
        "try:\n"
        f"    write_atomic({str(tmp_path / 'big.csv')!r}, b'x' * 100_000)\n"
        "except OutputError as exc:\n"
        "    print(exc.one_line())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert "File too large" in out.stdout and "ulimit -f" in out.stdout, out
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("code", [errno.EFBIG, errno.EMFILE])
def test_a_render_that_hits_a_process_limit_does_not_advise_free_space(code: int) -> None:
    error = write_failed(Path("/tmp/root"), OSError(code, os.strerror(code)))
    assert error.hint and "ulimit" in error.hint and "free space" not in error.hint


def test_every_failed_output_write_has_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(OutputError) as caught:
        write_atomic(str(tmp_path / "out.csv"), b"x")
    assert caught.value.hint


# --- 5. a name hint keeps the letter an accent or a look-alike stands for -----------------------


@pytest.mark.parametrize(
    ("value", "pattern", "meant"),
    [
        ("re\u0301search", r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$", "research"),
        ("\u0155esearch", r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$", "research"),
        ("rese\u0430rch", r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$", "research"),
        ("tra\u0131n", r"^[a-z]([a-z0-9_]{0,30}[a-z0-9])?$", "train"),
        ("fl\u03bfck", r"^[A-Za-z0-9_.,=:/-]{1,128}$", "flock"),
        ("lustre.cs\u0131.hpe.com", r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$", "lustre.csi.hpe.com"),
    ],
    ids=["nfd-accent", "composed-accent", "cyrillic-a", "dotless-i", "greek-o", "dotted-name"],
)
def test_a_name_with_an_accent_or_look_alike_gets_the_plain_letter(
    value: str, pattern: str, meant: str
) -> None:
    assert nearest_fitting(value, pattern) == meant


def test_a_tenant_typed_with_a_cyrillic_letter_is_told_the_latin_name() -> None:
    (error,) = _errors(K8.replace("name: research,", 'name: "rese\u0430rch",'))
    assert error.hint == "did you mean 'research'?"


# --- 6. a dump or node-name map with a byte-order mark is read -----------------------------------

DUMP = ROOT / "tests" / "data" / "verify"


@pytest.mark.parametrize("name", ["ibnetdiscover.txt", "iblinkinfo.txt", "ibnetdiscover-p.txt"])
def test_a_dump_with_a_byte_order_mark_reads_as_without(tmp_path: Path, name: str) -> None:
    text = (DUMP / name).read_text()
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    assert read_dump(str(tmp_path / name)) == text.replace("\n", "\r\n")
    assert parse_files([tmp_path / name]).edges() == parse_files([DUMP / name]).edges()


def test_a_node_name_map_with_a_byte_order_mark_is_a_map(tmp_path: Path) -> None:
    names = tmp_path / "names.map"
    names.write_bytes(b"\xef\xbb\xbf" + (DUMP / "node-name-map.txt").read_bytes())
    fabric = parse_files([DUMP / "ibnetdiscover.txt", names])
    plain = parse_files([DUMP / "ibnetdiscover.txt", DUMP / "node-name-map.txt"])
    assert [n.name for n in fabric.nodes] == [n.name for n in plain.nodes]


# --- 7. a quoted trace header is recognised -------------------------------------------------------


@pytest.mark.parametrize("bom", ["", "\ufeff"], ids=["plain", "bom"])
def test_a_trace_whose_header_is_quoted_is_recognised(tmp_path: Path, bom: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(bom + '"id","submit_s","duration_s","gpus"\r\n"j1","0","60","8"\r\n')
    assert [job.id for job in read_trace(str(path)).jobs] == ["j1"]


def test_a_first_line_that_is_no_csv_is_not_recognised_rather_than_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("x" * 200_000 + "\n")
    with pytest.raises(InputError, match="not recognised"):
        read_trace(str(path))


# --- 8. stdout that cannot hold a character gets an escape, not a crash -------------------------


def test_text_on_an_ascii_stdout_is_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    say("train 2 \u00d7 dgx-a100-640gb \u2014 ok")
    sys.stdout.flush()
    assert raw.getvalue() == b"train 2 \\u00d7 dgx-a100-640gb \\u2014 ok\n"


@pytest.mark.parametrize(
    "args",
    [["lint", "-v"], ["catalog", "--format", "json"], ["plan", "--format", "json"]],
    ids=["lint-verbose", "catalog-json", "plan-json"],
)
def test_every_output_on_an_ascii_stdout_exits_0_and_json_stays_json(
    tmp_path: Path, args: list[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(LAB.replace("Seven small", "Seven \u00d7 \U0001f680 small"))
    argv = [*args[:1], *([str(spec)] if args[0] != "catalog" else []), *args[1:]]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="ascii")
    out = subprocess.run(
        [sys.executable, "-m", "infra", *argv], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out
    if "json" in args:
        json.loads(out.stdout)
    else:
        assert "\\u00d7" in out.stdout


# --- 9. a rendered tree is never world-writable ---------------------------------------------------


def _world_writable(root: Path) -> list[str]:
    entries = [root, *root.rglob("*")]
    return [str(p) for p in entries if not p.is_symlink() and p.lstat().st_mode & stat.S_IWOTH]


@pytest.mark.parametrize("mask", [0o000, 0o002])
def test_a_render_under_a_permissive_umask_is_not_world_writable(tmp_path: Path, mask: int) -> None:
    files = {"ansible.cfg": b"[defaults]\n", "inventories/lab/hosts.yml": b"all: {}\n"}
    old = os.umask(mask)
    try:
        write_tree(tmp_path / "root", files)
        write_tree(tmp_path / "root", {**files, "playbooks/lab.yml": b"- hosts: all\n"})
    finally:
        os.umask(old)
    assert _world_writable(tmp_path / "root") == []
    assert (tmp_path / "root" / "ansible.cfg").stat().st_mode & 0o777 == 0o664


def test_group_write_stays_the_users_choice(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        write_tree(tmp_path / "root", {"ansible.cfg": b"[defaults]\n"})
    finally:
        os.umask(old)
    assert (tmp_path / "root").stat().st_mode & 0o777 == 0o775


# --- 10. a mount inside or on the way to a unit is refused before anything moves --------------


@pytest.fixture
def mounted(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A function mounting a small tmpfs at a path (skips without root); every mount under
    ``tmp_path`` is unmounted after, wherever a render moved it."""

    def mount(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        cmd = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)]
        if os.geteuid() != 0 or subprocess.run(cmd, capture_output=True, check=False).returncode:
            pytest.skip("needs root to mount a small tmpfs")
        return path

    yield mount
    mounts = Path("/proc/self/mounts").read_text().split("\n")
    points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    for point in sorted((p for p in points if p.startswith(str(tmp_path))), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@pytest.mark.parametrize(
    "where",
    ["inventories/lab/files", "inventories/lab", "playbooks"],
    ids=["inside", "unit", "way"],
)
def test_a_mount_in_the_tree_is_refused_and_stays_put(tmp_path: Path, mounted, where: str) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "root"
    files = {
        "ansible.cfg": b"[defaults]\n",
        "inventories/lab/hosts.yml": b"all: {}\n",
        "inventories/lab/files/cabling.csv": b"a,b\n",
        "playbooks/lab.yml": b"- hosts: all\n",
    }
    write_tree(root, files)
    point = mounted(root / where)
    (point / "user-data.txt").write_text("precious")
    with pytest.raises(RenderError, match="mount point") as caught:
        write_tree(root, {**files, "inventories/lab/hosts.yml": b"all: {hosts: {}}\n"})
    assert caught.value.hint and "unmount" in caught.value.hint
    assert os.path.ismount(point) and (point / "user-data.txt").read_text() == "precious"
    assert not [
        p.name
        for p in root.iterdir()
        if p.name.startswith(".railplan-") and "manifest" not in p.name
    ]
