"""Where an output may go: symlinks of other users, and whole sets of outputs (trial 5, issue 36).

Two breaks of the fifth hostile trial. IO5-04: as root, a symlink owned by another user in a
sticky world-writable directory (``/tmp``) made ``plan --cabling LINK`` replace the link's
target, a root-owned file elsewhere, which the kernel's ``fs.protected_symlinks`` rule would
have refused (railplan resolved the link itself and renamed over the target). IO5-03: ``plan
--cabling ok.csv --bom nodir/b.csv`` exited 2 with ok.csv written. The tests run as root (as
CI does) and give links another owner with ``os.lchown``; not as root they are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infra.files import OutputError, check_outputs, write_atomic

from .cli_run import run_cli
from .conftest import ROOT

LAB = str(ROOT / "examples" / "a100-lab-mig.yaml")
NOBODY = 65534

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link an owner")


def _shared(tmp_path: Path, owner: int = 0) -> tuple[Path, Path]:
    """A sticky world-writable directory (owned by ``owner``) and a root-owned victim file."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    os.chown(sticky, owner, owner)
    victim = tmp_path / "victim" / "important.conf"
    victim.parent.mkdir()
    victim.write_text("root-owned config\n")
    return sticky, victim


def _link(at: Path, to: Path, owner: int) -> Path:
    at.symlink_to(to)
    os.lchown(at, owner, owner)
    return at


def _argv(verb: str, out: str) -> list[str]:
    """A command line of each verb that writes a file, writing ``out``."""
    missing = str(ROOT / "no-such-trace.csv")  # the output is refused before any input is read
    return {
        "plan --cabling": ["plan", LAB, "--cabling", out],
        "plan --bom": ["plan", LAB, "--bom", out],
        "plan --hosts": ["plan", LAB, "--hosts", out],
        "report -o": ["report", LAB, "-o", out],
        "trace -o": ["trace", LAB, "--jobs", "10", "-o", out],
        "simulate --jobs-csv": ["simulate", LAB, "--trace", missing, "--jobs-csv", out],
    }[verb]


VERBS = [
    "plan --cabling",
    "plan --bom",
    "plan --hosts",
    "report -o",
    "trace -o",
    "simulate --jobs-csv",
]


@root_only
@pytest.mark.parametrize("verb", VERBS)
def test_another_users_link_in_a_sticky_directory_is_not_followed(
    tmp_path: Path, verb: str
) -> None:
    """IO5-04: before, exit 0 and the victim replaced by the cabling CSV."""
    sticky, victim = _shared(tmp_path)
    link = _link(sticky / "out.csv", victim, NOBODY)
    result = run_cli(*_argv(verb, str(link)))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"{link}: error: is a symbolic link of another user (uid {NOBODY})" in result.stderr
    assert "fs.protected_symlinks" in result.stderr and "(hint: " in result.stderr
    assert victim.read_text() == "root-owned config\n"
    assert link.is_symlink() and link.readlink() == victim


@root_only
def test_a_link_to_a_directory_on_the_way_is_judged_too(tmp_path: Path) -> None:
    sticky, victim = _shared(tmp_path)
    _link(sticky / "d", victim.parent, NOBODY)
    path = str(sticky / "d" / "important.conf")
    with pytest.raises(OutputError, match=r"goes through .*/sticky/d, a symbolic link"):
        write_atomic(path, b"x")
    with pytest.raises(OutputError, match=r"fs\.protected_symlinks"):
        check_outputs({"--bom": path})
    assert victim.read_text() == "root-owned config\n"


@root_only
@pytest.mark.parametrize(
    ("link_owner", "dir_owner", "mode"),
    [
        (0, 0, 0o1777),  # the follower's own link
        (NOBODY, NOBODY, 0o1777),  # the directory's owner's link
        (NOBODY, 0, 0o0777),  # world-writable, not sticky
        (NOBODY, 0, 0o1755),  # sticky, not world-writable
    ],
)
def test_links_the_kernel_follows_are_written_through(
    tmp_path: Path, link_owner: int, dir_owner: int, mode: int
) -> None:
    """The neighbours: fs.protected_symlinks follows these, and so does railplan."""
    sticky, victim = _shared(tmp_path, dir_owner)
    sticky.chmod(mode)
    link = _link(sticky / "cabling.csv", victim, link_owner)
    result = run_cli("plan", LAB, "--cabling", str(link))
    assert result.returncode == 0, result.stderr
    assert "infer02:mlx5_9,compute" in victim.read_text()
    assert link.is_symlink()


def test_a_link_loop_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = run_cli("plan", LAB, "--cabling", str(tmp_path / "a"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot write: " in result.stderr, result.stderr


# --- a whole set of outputs or none ---------------------------------------------------------


def test_a_missing_directory_of_a_later_output_writes_no_output(tmp_path: Path) -> None:
    """IO5-03: before, exit 2 for --bom with --cabling's file already written."""
    ok, bad = tmp_path / "c.csv", tmp_path / "nodir" / "b.csv"
    result = run_cli("plan", LAB, "--cabling", str(ok), "--bom", str(bad), "--hosts", "-")
    assert result.returncode == 2
    assert result.stderr == (
        f"{bad}: error: cannot write: directory {bad.parent} does not exist "
        "(hint: create the directory first)\n"
    )
    assert result.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_directory_that_is_a_file_writes_no_output(tmp_path: Path) -> None:
    ok, afile = tmp_path / "c.csv", tmp_path / "afile"
    afile.write_text("x\n")
    result = run_cli("plan", LAB, "--cabling", str(ok), "--hosts", str(afile / "h.csv"))
    assert result.returncode == 2 and "Not a directory" in result.stderr, result.stderr
    assert not ok.exists()


def test_a_full_set_of_good_outputs_is_written(tmp_path: Path) -> None:
    """The neighbour: every directory exists, every output is written."""
    (tmp_path / "sub").mkdir()
    outs = [tmp_path / "c.csv", tmp_path / "sub" / "b.csv", tmp_path / "h.csv"]
    argv = ["--cabling", str(outs[0]), "--bom", str(outs[1]), "--hosts", str(outs[2])]
    assert run_cli("plan", LAB, *argv).returncode == 0
    assert all(p.stat().st_size > 0 for p in outs)
