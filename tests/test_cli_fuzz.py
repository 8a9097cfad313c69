"""Fuzz the CLI as a whole: files, flags and environments, each case in a limited child.

Hypothesis draws batches of cases: an input (a shipped example, one mutated, random YAML, or
a special file: /dev/zero, /dev/urandom, a FIFO, a directory, a symlink loop, a missing,
empty, binary or over-limit one-line file), a verb with random option values (huge, negative,
NaN numbers, unknown options, outputs onto /dev/full, /dev/null, a read-only or full
directory, the input itself, a directory, a render root holding a planted symlink or a
forged journal that points at a directory the case was not given) and an environment (stdout
a file, closed, /dev/full or a pipe whose reader has gone). Each batch runs in one subprocess
(this module run as a script) that imports railplan once and forks a child per case with
RLIMIT_AS 2 GiB, RLIMIT_CPU and a wall-clock limit, snapshotting the sandbox before and after.
Every case must end with exit 0, 1 or 2 (141 where stdout's reader has gone, 130 for SIGINT),
print no traceback, keep each problem to one line, and change nothing but the outputs it
named.

The read-only and full directories are small tmpfs mounts (root only); elsewhere those
environments are left out and the test says so. ``make fuzz`` runs it with more examples
(``CLI_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
EXAMPLES = ["a100-lab-mig.yaml", "aws-p4d.yaml", "k8s-tenants.yaml"]
CASE_WALL_S = 30.0  # a case taking longer is a hang (the slowest here take about 3 s loaded)
CASE_CPU_S = 20
CASE_AS_BYTES = 2 << 30


@dataclass
class Case:
    """One run: argv (with ``@name`` placeholders), its stdout and the outputs it may change."""

    argv: list[str]
    stdout: str = "file"  # file | closed | full | broken
    cwd: str = "@sandbox"
    outputs: list[str] = field(default_factory=list)


@dataclass
class Result:
    code: int
    stderr: str
    seconds: float
    changed: list[str]


# --- the driver: run in a subprocess, one forked child per case ------------------------------


def _snapshot(root: str) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: type, mode, size, mtime (no content read: FIFOs stay shut)."""
    out: dict[str, tuple[Any, ...]] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = f"{top}/{name}"
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):  # its entries are listed: a new output is one of them
                out[path] = (st.st_mode, st.st_ino)
            else:
                out[path] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _child(case: Case, stderr_path: str, stdout_path: str) -> None:
    """In the forked child: limits, stdout as the case wants it, then railplan's main."""
    from infra.cli import main

    resource.setrlimit(resource.RLIMIT_AS, (CASE_AS_BYTES, CASE_AS_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CASE_CPU_S, CASE_CPU_S))
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    if case.stdout == "closed":
        os.close(1)
        sys.stdout = None  # as Python starts with `>&-`
    else:
        if case.stdout == "full":
            fd = os.open("/dev/full", os.O_WRONLY)
        elif case.stdout == "broken":
            read, fd = os.pipe()
            os.close(read)
        else:
            fd = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
    os.chdir(case.cwd)
    code = 3
    try:
        main(case.argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


def _wait(pid: int) -> tuple[int, float]:
    """The child's exit code (128 + N when signal N ended it), killing it after the wall limit."""
    start = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > CASE_WALL_S:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -1, time.monotonic() - start  # -1: timed out
        time.sleep(0.005)
    seconds = time.monotonic() - start
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status), seconds
    return os.WEXITSTATUS(status), seconds


def run_case(case: Case, roots: list[str], scratch: str) -> Result:
    before = {p: s for r in roots for p, s in _snapshot(r).items()}
    stderr_path, stdout_path = f"{scratch}/stderr", f"{scratch}/stdout"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _child(case, stderr_path, stdout_path)
        finally:
            os._exit(99)
    code, seconds = _wait(pid)
    after = {p: s for r in roots for p, s in _snapshot(r).items()}
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    stderr = Path(stderr_path).read_text(errors="replace")
    return Result(code, stderr, seconds, changed)


def _preload() -> None:
    """Import, once and before the forks, what every command imports when it runs."""
    for path in sorted((ROOT / "infra" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("infra."):
                importlib.import_module(str(node.module))


def _driver() -> None:
    """Read ``{"cases": [...], "roots": [...], "scratch": dir}`` on stdin, print results."""
    _preload()  # each child starts with it
    from infra.catalog import load_catalog

    load_catalog()  # cached: each child starts with it
    job = json.load(sys.stdin)
    results = [asdict(run_case(Case(**c), job["roots"], job["scratch"])) for c in job["cases"]]
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    _driver()
    sys.exit(0)


# --- the test ------------------------------------------------------------------------------

import pytest  # the driver above runs without pytest or hypothesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLE_COUNT = int(os.environ.get("CLI_FUZZ_EXAMPLES", "6"))
# `make test` runs the first three batches (30 cases, about 10 s of CPU); `make test-slow` all
# EXAMPLE_COUNT of them, `make fuzz` CLI_FUZZ_EXAMPLES.
SMOKE_COUNT = min(3, EXAMPLE_COUNT)
CASES_PER_EXAMPLE = 10

NUMBERS = ["8", "16", "32", "0", "-1", "2", "1024", str(10**20), "9" * 400, "nan", "inf", "-inf"]
NUMBERS += ["1e309", "x", ""]
SIZES = ["8", "1KiB", "8GiB", "0", "-1", "9" * 400, "9" * 400 + "GiB", "1e400", "nan", "x", ""]
FACTORS = ["2", "8", "1", "1.000001", "0", "-2", "nan", "inf", "9" * 400, "x"]
OUTPUTS = ["@out", "@outlink", "@out2", "-", "/dev/full", "/dev/null", "@input", "@dir", ""]
MOUNTED_OUTPUTS = ["@ro/out.csv", "@full/out.csv"]
SPECIALS = [
    "/dev/zero",
    "/dev/urandom",
    "@fifo",
    "@dir",
    "@loop",
    "@missing",
    "@empty",
    "@binary",
    "@huge",
]
NASTY = [  # wrong types and sizes, and well-typed values that plans and rules must judge
    3,
    7,
    64,
    2048,
    16384,
    "dgx-h100",
    "qm8700",
    "1g.10gb",
    "525.60.13",
    "9" * 400,
    -1,
    0,
    float("nan"),
    float("inf"),
    "x" * 5000,
    [],
    {},
    None,
    True,
    "\x1b[2J\n::error::x",
    "1e400",
    "1" * 5000,
]


def _mutate(data: Any, path: list[int], value: Any) -> Any:
    """``data`` with the node reached by ``path`` (indexes into keys/items) replaced."""
    if not path or not isinstance(data, dict | list) or not data:
        return value
    keys = list(data) if isinstance(data, dict) else list(range(len(data)))
    key = keys[path[0] % len(keys)]
    out = dict(data) if isinstance(data, dict) else list(data)
    out[key] = _mutate(data[key], path[1:], value)
    return out


@st.composite
def spec_texts(draw: st.DrawFn) -> str:
    """A spec: an example, one mutated at a random path, cut short, or random YAML."""
    kind = draw(st.sampled_from(["example", "mutated", "example", "mutated", "cut", "random"]))
    text = (ROOT / "examples" / draw(st.sampled_from(EXAMPLES))).read_text()
    if kind == "mutated":
        path = draw(st.lists(st.integers(0, 20), min_size=2, max_size=5))
        data = _mutate(yaml.safe_load(text), path, draw(st.sampled_from(NASTY)))
        return yaml.safe_dump(data, allow_unicode=False, width=10**6)
    if kind == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "random":
        leaves = st.one_of(st.integers(-(10**30), 10**30), st.text(max_size=8), st.booleans())
        tree = st.recursive(
            leaves,
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
            max_leaves=12,
        )
        return yaml.safe_dump(draw(tree))
    return text


def _option(draw: st.DrawFn, name: str, values: list[str]) -> list[str]:
    return [name, draw(st.sampled_from(values))] if draw(st.booleans()) else []


Verb = Callable[[st.DrawFn, str, list[str], list[str], list[str]], list[str]]


def _lint(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    rules = _option(draw, "--select", ["rp0", "RP011", "NOPE", ""])
    return ["lint", spec, *draw(st.sampled_from([[], ["@spec"]])), *fmt, *rules]


def _plan(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    argv = ["plan", spec, *fmt]
    for option in draw(st.lists(st.sampled_from(["--cabling", "--bom", "--hosts"]))):
        named.append(draw(st.sampled_from(outs)))
        argv += [option, named[-1]]
    return argv


def _predict(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    collective = draw(st.sampled_from(["all_reduce", "all_gather", "alltoall", "nope"]))
    argv = ["predict", spec, "--collective", collective, "--gpus", draw(st.sampled_from(NUMBERS))]
    argv += _option(draw, "--min-bytes", SIZES) + _option(draw, "--max-bytes", SIZES)
    return argv + _option(draw, "--step-factor", FACTORS) + _option(draw, "--group", ["gpu", "x"])


def _train(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    model = draw(st.sampled_from([["--model", "gpt3-175b"], ["--model", "nope"], []]))
    shape = [] if model else _option(draw, "--layers", NUMBERS) + _option(draw, "--hidden", NUMBERS)
    argv = ["train", spec, "--gpus", draw(st.sampled_from(NUMBERS)), *model, *shape]
    argv += ["--global-batch", draw(st.sampled_from(NUMBERS))]
    argv += _option(draw, "--tp", NUMBERS) + _option(draw, "--pp", NUMBERS)
    argv += _option(draw, "--cp", NUMBERS) + _option(draw, "--seq", NUMBERS)
    return argv + _option(draw, "--zero", ["0", "3", "4", "x"]) + fmt


def _render(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    roots = ["@root", "@root", "/dev/null", "@input", "", "@ro", "@planted", "@forged"]
    named.append(draw(st.sampled_from(roots)))
    extra = draw(st.sampled_from([[], ["--force"], ["--addresses", "@spec"]]))
    return ["render", spec, "--root", named[-1], *extra]


def _report(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    named.append(draw(st.sampled_from(outs)))
    return ["report", spec, "-o", named[-1]]


def _diff(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    return ["diff", spec, draw(st.sampled_from(["@spec", "@example"])), *fmt]


def _mig(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    mig = draw(st.sampled_from(["@mig", "@mig", spec]))
    argv = ["mig", "check", mig, *_option(draw, "--driver", ["550.90.07", "5" * 5000, "x"])]
    return argv + _option(draw, "--gpu", ["a100-80gb", "nope"]) + fmt


def _trace(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    argv = ["trace", spec, *_option(draw, "--jobs", ["1", "50", "0", "x", "9" * 30])]
    argv += _option(draw, "--load", ["0.8", "0", "nan", "-inf", "1e308", "1e-300"])
    argv += _option(draw, "--days", ["0.5", "nan", "1e308"]) + _option(draw, "--seed", NUMBERS)
    if draw(st.booleans()):
        named.append(draw(st.sampled_from(outs)))
        argv += ["-o", named[-1], *draw(st.sampled_from([[], ["--force"]]))]
    return argv


def _explain(
    draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
) -> list[str]:
    return ["explain", draw(st.sampled_from(["RP011", "nope", "x" * 5000, ""]))]


def _listing(verb: str) -> Verb:
    def argv(
        draw: st.DrawFn, spec: str, fmt: list[str], outs: list[str], named: list[str]
    ) -> list[str]:
        return [verb, *fmt] if verb != "schema" else [verb]

    return argv


VERBS: dict[str, Verb] = {
    "plan": _plan,
    "lint": _lint,
    "render": _render,
    "predict": _predict,
    "train": _train,
    "report": _report,
    "budget": lambda draw, spec, fmt, outs, named: ["budget", spec, *fmt],
    "diff": _diff,
    "mig": _mig,
    "trace": _trace,
    "explain": _explain,
    **{verb: _listing(verb) for verb in ("rules", "schema", "catalog")},
}


@st.composite
def cases(draw: st.DrawFn, outputs: list[str]) -> tuple[Case, str]:
    """A case and the spec text behind its ``@spec`` input."""
    text = draw(spec_texts())
    spec = draw(st.sampled_from(["@spec"] * 14 + SPECIALS))
    fmt = _option(draw, "--format", ["json", "text", "sarif", "github", "bogus"])
    verb = draw(st.sampled_from([*VERBS, "plan", "lint"]))
    named: list[str] = []
    argv = VERBS[verb](draw, spec, fmt, outputs, named)
    if draw(st.integers(0, 9)) == 9:  # the simplest case is a well-formed command
        argv.append(draw(st.sampled_from(["--bogus", "--gpus=-1", "extra-arg", "--format"])))
    stdout = draw(st.sampled_from(["file"] * 6 + ["closed", "full", "broken"]))
    cwd = draw(st.sampled_from(["@sandbox"] * 4 + (["@ro"] if "@ro/out.csv" in outputs else [])))
    return Case(argv, stdout, cwd, named), text


@dataclass
class Sandbox:
    """The directory a batch runs in, with its named inputs, outputs and special files."""

    root: Path
    mounts: dict[str, Path]
    huge: Path

    def names(self, index: int) -> dict[str, str]:
        r = self.root
        names = {
            "@sandbox": str(r),
            "@spec": str(r / f"spec{index}.yaml"),
            "@example": str(ROOT / "examples" / EXAMPLES[0]),
            "@mig": str(ROOT / "examples/mig-parted/config-default.yaml"),
            "@out": str(r / "out/a.csv"),
            "@out2": str(r / "out/b.csv"),
            "@outlink": str(r / "out/link.csv"),
            "@root": str(r / f"tree{index}"),
            "@planted": str(r / "planted"),  # inventories -> adir: never written through
            "@forged": str(r / "forged"),  # a journal naming ../adir: refused
            "@fifo": str(r / "fifo"),
            "@dir": str(r / "adir"),
            "@loop": str(r / "loop"),
            "@missing": str(r / "missing.yaml"),
            "@empty": str(r / "empty.yaml"),
            "@binary": str(r / "binary.yaml"),
            "@huge": str(self.huge),
        }
        names |= {f"@{k}": str(p) for k, p in self.mounts.items()}
        return names


def _resolve(word: str, names: dict[str, str], spec: str) -> str:
    if word == "@input":
        return spec
    head, _, rest = word.partition("/")
    return names[head] + (f"/{rest}" if rest else "") if head in names else word


def _make_sandbox(base: Path, mounts: dict[str, Path], huge: Path) -> Sandbox:
    root = Path(tempfile.mkdtemp(dir=base))
    (root / "out").mkdir()
    (root / "out/target.csv").write_text("old\n")
    (root / "out/link.csv").symlink_to(root / "out/target.csv")
    (root / "adir").mkdir()
    (root / "adir/keep.txt").write_text("the victim of planted state\n")
    (root / "planted").mkdir()
    (root / "planted/inventories").symlink_to(root / "adir")
    (root / "forged").mkdir()
    journal = {"old": "../adir", "units": ["../adir/keep.txt"], "manifest": "0" * 64}
    (root / "forged/.railplan-journal.json").write_text(json.dumps(journal))
    os.mkfifo(root / "fifo")
    (root / "loop").symlink_to(root / "loop")
    (root / "empty.yaml").write_bytes(b"")
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    return Sandbox(root, mounts, huge)


@contextlib.contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[bool]:
    """A small tmpfs at ``path`` (True), or False where mounting is not possible."""
    path.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Path]]]:
    """The fuzz's base directory and its mounts: ``ro`` (read-only) and ``full`` (64 KiB)."""
    base = tmp_path_factory.mktemp("cli-fuzz")
    with _tmpfs(base / "ro", "size=64k,ro") as ro, _tmpfs(base / "full", "size=64k") as full:
        if full:
            with contextlib.suppress(OSError):  # fill it: the next write finds no space
                (base / "full/filler").write_bytes(b"x" * 65536)
        mounts = {k: base / k for k, ok in (("ro", ro), ("full", full)) if ok}
        if len(mounts) < 2:
            print("cli fuzz: no tmpfs mounts (needs root): read-only and full dirs left out")
        huge = base / "huge.yaml"
        huge.write_bytes(b"name: " + b"x" * (9 << 20) + b"\n")  # one line over the 8 MiB limit
        yield base, mounts


# what railplan's writers leave only while running: temp files, staging and old trees, journal
TEMP = re.compile(r"\.railplan-([^/]*\.tmp|staging-\d+|old-\d+|journal)")
# `error: msg`, or lint's `error[RP003] msg` (render refusing a spec prints lint's lines)
LINE = re.compile(r"^(railplan|[^\s].*?)(:\d+:\d+)?: (error|warning)(: |\[RP\d{3}\]:? )\S")


def _check(case: Case, result: Result, allowed: set[str], inputs: set[str]) -> None:
    where = f"{case} -> {result}"
    codes = {0, 1, 2} | ({141} if case.stdout == "broken" else set())
    assert result.code != -1, f"timed out: {where}"
    assert result.code in codes, where
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, where
    for line in result.stderr.splitlines():
        assert len(line) < 2000, where  # long values are cut
        if ": error" in line and not line.startswith(" "):
            assert LINE.match(line), f"not one located line: {line!r} in {where}"
    for path in result.changed:
        ok = any(path == a or path.startswith(a + "/") for a in allowed)
        assert ok and path not in inputs, f"changed {path}: {where}"
    assert not any(TEMP.search(p) and Path(p).exists() for p in result.changed), where


def _run_batch(batch: list[tuple[Case, str]], base: Path, mounts: dict[str, Path]) -> None:
    sandbox = _make_sandbox(base, mounts, base / "huge.yaml")
    resolved: list[Case] = []
    allowed: list[set[str]] = []
    for i, (case, text) in enumerate(batch):
        names = sandbox.names(i)
        Path(names["@spec"]).write_text(text)
        argv = [_resolve(w, names, names["@spec"]) for w in case.argv]
        outs = {_resolve(o, names, names["@spec"]) for o in case.outputs}
        if names["@outlink"] in outs:
            outs.add(str(sandbox.root / "out/target.csv"))  # written through the link
        allowed.append({o for o in outs if o})
        resolved.append(Case(argv, case.stdout, _resolve(case.cwd, names, ""), sorted(outs)))
    roots = [str(sandbox.root), *(str(p) for p in mounts.values())]
    job = {"cases": [asdict(c) for c in resolved], "roots": roots, "scratch": str(base)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.test_cli_fuzz"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CI": "1"},
        timeout=CASE_WALL_S * len(batch) + 60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    inputs = {str(ROOT / "examples" / EXAMPLES[0])}
    for case, result, ok in zip(resolved, json.loads(proc.stdout), allowed, strict=True):
        spec = [a for a in case.argv if a.startswith(str(sandbox.root / "spec"))]
        _check(case, Result(**result), ok - set(spec), inputs | set(spec))
        if os.environ.get("CLI_FUZZ_TRACE"):  # what ran, for tuning the strategies by eye
            shown = [a[:40] for a in case.argv]
            print(
                "TRACE", result["code"], case.stdout, shown, result["stderr"][:150], file=sys.stderr
            )


@pytest.mark.parametrize(
    "examples",
    [
        pytest.param(SMOKE_COUNT, id="smoke"),
        pytest.param(EXAMPLE_COUNT, id="full", marks=pytest.mark.slow),
    ],
)
def test_the_whole_cli_never_crashes_hangs_or_touches_what_it_was_not_given(
    places: tuple[Path, dict[str, Path]], examples: int
) -> None:
    base, mounts = places
    outputs = OUTPUTS + [o for o in MOUNTED_OUTPUTS if o.split("/")[0][1:] in mounts]

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: 2 s a try
    )
    @given(st.lists(cases(outputs), min_size=CASES_PER_EXAMPLE, max_size=CASES_PER_EXAMPLE))
    def batches(batch: list[tuple[Case, str]]) -> None:
        _run_batch(batch, base, mounts)

    batches()
