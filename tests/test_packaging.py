"""An installed railplan (not a checkout) renders the tree and writes the report.

The README installs with `pip install .` or `pipx install .`; both build a wheel and install
it, so the templates and static roles must travel inside it (setup.py copies them into
`infra/_data/`; MANIFEST.in puts them into the sdist a wheel may be built from). The test
builds the sdist from a copy of the checkout's files, then the wheel from the sdist (the
longest way, as `python -m build` and pipx do), installs the wheel into a fresh venv and runs
its `railplan` from a directory outside the checkout. No network: the build uses this venv's
setuptools (no build isolation) and the new venv sees this venv's installed dependencies
through a `.pth` file, not a second download. About 10 s on the 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "a100-lab-mig.yaml"


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, check=False, cwd=cwd, env=env
    )
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def _source_copy(dest: Path) -> Path:
    """The checkout's tracked and new (not ignored) files: no build/, .venv or egg-info."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the project's files")
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for rel in filter(None, listed.split("\0")):
        if (ROOT / rel).is_file():  # a deleted, not yet committed file is still listed
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _wheel(tmp: Path) -> Path:
    source = _source_copy(tmp / "src")
    python = sys.executable
    sdist = _run(
        python, "-c", "from setuptools import build_meta as b; print(b.build_sdist('../sdist'))",
        cwd=source,
    ).split()[-1]  # fmt: skip
    _run(
        python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--disable-pip-version-check", "-w", tmp / "wheel", tmp / "sdist" / sdist,
        cwd=tmp,
    )  # fmt: skip
    (wheel,) = (tmp / "wheel").glob("railplan-*.whl")
    return wheel


def _venv_with(wheel: Path, venv: Path) -> Path:
    """A fresh venv with the wheel installed; its dependencies are this venv's."""
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                     cwd=venv).strip())  # fmt: skip
    # Appended after the venv's own site-packages, so the wheel's `infra` wins over the
    # editable checkout's; .pth files in these directories are not run (the editable finder).
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "railplan_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
        "--no-index", "--disable-pip-version-check", wheel,
        cwd=venv.parent,
    )  # fmt: skip
    return venv / "bin"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_an_installed_wheel_renders_and_reports_outside_the_checkout(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("render/tree.py", "report/report.py", "day2/diff.py", "budget/bands.py"):
        assert f"infra/{module}" in names, f"the wheel lacks infra/{module}"
    assert "infra/budget/data/bands.json" in names  # read at runtime by infra.budget.bands
    assert not [n for n in names if n.split("/")[0] in ("tools", "tests", "bench")]
    bin_dir = _venv_with(wheel, tmp_path / "venv")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["NO_COLOR"] = "1"

    where = _run(bin_dir / "python", "-c", "import infra; print(infra.__file__)", cwd=elsewhere)
    assert Path(where.strip()).is_relative_to(tmp_path / "venv"), "imported the checkout"

    _run(bin_dir / "railplan", "render", EXAMPLE, "--root", "tree", cwd=elsewhere, env=env)
    rendered = _files(elsewhere / "tree" / "playbooks" / "roles")
    assert rendered == _files(ROOT / "playbooks" / "roles")
    assert (elsewhere / "tree" / "ansible.cfg").is_file()  # from templates/ansible/

    _run(bin_dir / "railplan", "diff", EXAMPLE, EXAMPLE, cwd=elsewhere, env=env)  # infra.day2
    _run(bin_dir / "railplan", "report", EXAMPLE, "-o", "x.html", cwd=elsewhere, env=env)
    page = (elsewhere / "x.html").read_text(encoding="utf-8")
    css = (ROOT / "templates" / "report" / "report.css").read_text(encoding="utf-8")
    assert css.strip() in page and page.rstrip().endswith("</html>")  # template, its CSS
