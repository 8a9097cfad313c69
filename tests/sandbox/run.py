"""Run a rendered deployment tree's playbook for real against Debian chroots, twice.

`make sandbox` calls this. It proves that the configuration tasks of the rendered roles
(everything not guarded by `railplan_sandbox`) run on a real Debian root and are
idempotent: the second run must report changed=0 on every host.

Steps: build (or reuse) a cached Debian bookworm minbase root with debootstrap; render the
spec with `railplan render SPEC --root TMP/tree`; copy the root once per inventory host;
write an override inventory that points each host at its root through the
`community.general.chroot` connection; run the entry playbook twice with
`-e railplan_sandbox=true` and the `ansible.posix.json` callback; compare the stats.

    python tests/sandbox/run.py [--spec examples/a100-lab-mig.yaml] [--keep]

Exit codes: 0 pass, 1 a run failed or was not idempotent, 2 cannot run here (not root,
no debootstrap, no railplan render). Needs root and a reachable Debian mirror (first run).
The hidden flag `--tree DIR` skips rendering and uses an already rendered tree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SPEC = REPO / "examples" / "a100-lab-mig.yaml"
DEBOOTSTRAP = "/usr/sbin/debootstrap"
DEBOOTSTRAP_ATTEMPTS = 3
SUITE = "bookworm"
MIRROR = os.environ.get("RAILPLAN_SANDBOX_MIRROR", "http://deb.debian.org/debian")
# python3 for Ansible itself, python3-apt for the apt modules; the rest is in minbase.
INCLUDE = ["python3", "python3-apt"]
DEBOOTSTRAP_ARGS = ["--variant=minbase", "--include=" + ",".join(INCLUDE), SUITE]
# Bump when prepare_root() changes, so old caches are not reused.
ROOT_LAYOUT = "1"
# The ansible.posix.json callback's document: {"plays": [...], "stats": {host: {...}}}.
Doc = dict[str, Any]
# Keeps maintainer scripts from starting services inside the chroot.
POLICY_RC_D = "#!/bin/sh\n# railplan sandbox: never start services in this chroot.\nexit 101\n"


class SandboxError(Exception):
    """A failure worth one clear line; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="cluster spec")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and roots")
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def preflight() -> None:
    if os.geteuid() != 0:
        raise SandboxError("sandbox: needs root (chroot and debootstrap); run as root", 2)
    if not os.access(DEBOOTSTRAP, os.X_OK):
        raise SandboxError(f"sandbox: {DEBOOTSTRAP} not found; apt-get install debootstrap", 2)
    for tool in ("ansible-playbook", "ansible-inventory", "findmnt"):
        if shutil.which(tool) is None:
            raise SandboxError(f"sandbox: {tool} not found on PATH", 2)


def on_signal(signum: int, _frame: object) -> None:
    # Raising unwinds through the finally blocks, which clean up.
    raise SandboxError(f"sandbox: interrupted by signal {signum}, cleaning up", 128 + signum)


# --- child processes -------------------------------------------------------------------


def communicate(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """proc.communicate(), but on a signal SIGTERM the child and wait for it, so that
    debootstrap unmounts its /proc and ansible-playbook stops its forks before the
    cleanup removes their roots."""
    try:
        return proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def wait_for(cmd: list[str], out: IO[str]) -> int:
    with subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True) as proc:
        communicate(proc)
    return proc.returncode


# --- the cached Debian root -------------------------------------------------------------


def cache_dir() -> Path:
    override = os.environ.get("RAILPLAN_SANDBOX_CACHE")
    if override:
        return Path(override)
    key = hashlib.sha256(" ".join([*DEBOOTSTRAP_ARGS, MIRROR, ROOT_LAYOUT]).encode())
    return Path("/var/tmp/railplan-sandbox/cache") / f"{SUITE}-{key.hexdigest()[:12]}"


def ensure_base(cache: Path) -> Path:
    """Return the cached root, building it into a sibling temp dir and renaming it in."""
    if (cache / "usr/bin/python3").exists():
        print(f"sandbox: reusing cached root {cache}")
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=cache.name + ".partial-", dir=cache.parent))
    try:
        print(f"sandbox: building {SUITE} root with debootstrap (about a minute) -> {cache}")
        log = build / "debootstrap.log"
        started = time.monotonic()
        for attempt in range(DEBOOTSTRAP_ATTEMPTS):  # a mirror hiccup should not fail CI
            remove_tree(build / "root")
            with log.open("w") as out:
                rc = wait_for([DEBOOTSTRAP, *DEBOOTSTRAP_ARGS, str(build / "root"), MIRROR], out)
            if rc == 0:
                break
            print(f"sandbox: debootstrap attempt {attempt + 1} failed (rc={rc})")
        if rc != 0:
            sys.stderr.write("".join(log.read_text().splitlines(True)[-20:]))
            raise SandboxError(f"sandbox: debootstrap {MIRROR} failed (rc={rc})")
        prepare_root(build / "root")
        (build / "root").rename(cache)
        print(f"sandbox: root built in {time.monotonic() - started:.0f}s")
    finally:
        remove_tree(build)
    return cache


def prepare_root(root: Path) -> None:
    """Make the fresh root chroot-friendly: no service starts, no apt cache."""
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC_D)
    policy.chmod(0o755)
    subprocess.run(["chroot", str(root), "apt-get", "clean"], check=True)


# --- mounts and removal -----------------------------------------------------------------


def mounts_under(path: Path) -> list[str]:
    out = subprocess.run(
        ["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True, check=True
    ).stdout
    prefix = str(path.resolve()).rstrip("/") + "/"
    targets = [t.encode().decode("unicode_escape") for t in out.split()]
    return [t for t in targets if t == prefix[:-1] or t.startswith(prefix)]


def remove_tree(path: Path) -> None:
    """rm -rf PATH, but never through a mount point (a killed debootstrap leaves /proc)."""
    if not path.exists():
        return
    for target in sorted(mounts_under(path), reverse=True):
        subprocess.call(["umount", "-l", target])
    left = mounts_under(path)
    if left:
        raise SandboxError(f"sandbox: still mounted, not removing {path}: {' '.join(left)}")
    shutil.rmtree(path)


# --- the rendered tree and its hosts ----------------------------------------------------


def render(spec: Path, tree: Path) -> Path:
    if not spec.is_file():
        raise SandboxError(f"sandbox: spec {spec} not found", 2)
    if shutil.which("railplan") is None:
        raise SandboxError("sandbox: railplan not found on PATH (run through `make sandbox`)", 2)
    cmd = ["railplan", "render", str(spec), "--root", str(tree)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if "No such command 'render'" in proc.stdout + proc.stderr:
        raise SandboxError("sandbox: this railplan has no `render` command yet", 2)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SandboxError(f"sandbox: `{' '.join(cmd)}` failed (rc={proc.returncode})")
    print(f"sandbox: {proc.stdout.strip()}")
    return tree


def inventory_name(tree: Path) -> str:
    names = sorted(p.name for p in (tree / "inventories").iterdir() if p.is_dir())
    if len(names) != 1:
        raise SandboxError(f"sandbox: expected one directory in {tree}/inventories, got {names}")
    return names[0]


def ansible_env(tree: Path, tmp: Path) -> dict[str, str]:
    """The tree's ansible.cfg, but state kept in TMP: the rendered config caches facts in
    ~/.cache/railplan for a day, which would leak real hosts' facts into the sandbox (same
    hostnames) and sandbox facts into the operator's cache."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(tree / "ansible.cfg"),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "ansible" / "facts"),
        ANSIBLE_LOCAL_TEMP=str(tmp / "ansible" / "tmp"),
        ANSIBLE_NOCOLOR="1",
    )
    env.pop("ANSIBLE_FORCE_COLOR", None)
    return env


def inventory_hosts(tree: Path, inventory: Path, tmp: Path) -> list[str]:
    proc = subprocess.run(
        ["ansible-inventory", "-i", str(inventory), "--list"],
        cwd=tree,
        env=ansible_env(tree, tmp),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SandboxError(f"sandbox: ansible-inventory -i {inventory} --list failed")
    data = json.loads(proc.stdout)
    hosts = set(data.get("_meta", {}).get("hostvars", {}))
    for name, group in data.items():
        if name != "_meta":
            hosts.update(group.get("hosts", []))
    if not hosts:
        raise SandboxError(f"sandbox: no hosts in {inventory}")
    return sorted(hosts)


# --- per-host roots and the override inventory ------------------------------------------


def make_roots(base: Path, roots_dir: Path, hosts: list[str]) -> dict[str, Path]:
    """One full copy of the cached root per host (reflinked where the filesystem can)."""
    roots_dir.mkdir()
    roots = {}
    for host in hosts:
        root = roots_dir / re.sub(r"[^A-Za-z0-9._-]", "_", host)
        subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(root)], check=True)
        roots[host] = root
    return roots


def write_overrides(overrides: Path, roots: dict[str, Path]) -> Path:
    """An inventory dir whose host_vars beat the rendered host_vars (later -i wins).

    A plain inventory file would not do: inventory host_vars/ files outrank host variables
    set in an inventory file, so the rendered host_vars' ansible_host would win.
    """
    (overrides / "host_vars").mkdir(parents=True)
    listing = {"all": {"hosts": {host: None for host in roots}}}
    (overrides / "hosts.yml").write_text(json.dumps(listing, indent=2) + "\n")
    for host, root in roots.items():
        hostvars = {
            "ansible_connection": "community.general.chroot",
            "ansible_host": str(root),
            "ansible_python_interpreter": "/usr/bin/python3",
            # Already root; a minbase chroot has no sudo.
            "ansible_become": False,
        }
        (overrides / "host_vars" / f"{host}.yml").write_text(json.dumps(hostvars) + "\n")
    return overrides


# --- the playbook runs ------------------------------------------------------------------


def run_playbook(
    tree: Path, inventory: Path, overrides: Path, tmp: Path, run: int
) -> tuple[Doc, float]:
    """Run the entry playbook once; return the json callback's document and wall time."""
    env = ansible_env(tree, tmp)
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.posix.json"
    cmd = [
        "ansible-playbook",
        "-i", str(inventory),
        "-i", str(overrides),
        str(tree / "playbooks" / f"{inventory.name}.yml"),
        "-e", "railplan_sandbox=true",
    ]  # fmt: skip
    print("sandbox: " + " ".join(cmd), flush=True)
    started = time.monotonic()
    with subprocess.Popen(
        cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        stdout, stderr = communicate(proc)
    elapsed = time.monotonic() - started
    log = tmp / f"run{run}.log"
    log.write_text(stdout + "\n--- stderr ---\n" + stderr)
    try:
        return parse_json_output(stdout), elapsed
    except ValueError as err:
        sys.stderr.write(stdout[-3000:] + stderr[-3000:])
        message = f"sandbox: ansible-playbook rc={proc.returncode}, no JSON output ({log})"
        raise SandboxError(message) from err


def parse_json_output(text: str) -> Doc:
    """The json callback's document, skipping anything other callbacks printed first."""
    start = re.search(r"^\{", text, re.MULTILINE)
    if start is None:
        raise ValueError("no JSON document")
    doc: Doc = json.JSONDecoder().raw_decode(text[start.start() :])[0]
    return doc


def changed_tasks(doc: Doc, host: str) -> list[str]:
    names = []
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            if task.get("hosts", {}).get(host, {}).get("changed"):
                names.append(task["task"]["name"])
    return names


def failed_results(doc: Doc, host: str) -> list[str]:
    lines = []
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            result = task.get("hosts", {}).get(host, {})
            if result.get("failed") or result.get("unreachable"):
                lines.append(f"{task['task']['name']}: {result.get('msg', '')}".strip())
    return lines


def check_runs(first: Doc, second: Doc) -> list[str]:
    """Every problem, one line each: failures in either run, changes in the second
    (pass {} as SECOND to check the first run alone)."""
    problems = []
    if not first.get("stats"):
        problems.append("the playbook matched no hosts")
    for label, doc in (("run 1", first), ("run 2", second)):
        for host, stats in sorted(doc.get("stats", {}).items()):
            if stats.get("failures") or stats.get("unreachable"):
                problems.append(f"{label}: {host} failed or unreachable")
                problems += [f"    {line}" for line in failed_results(doc, host)]
    for host, stats in sorted(second.get("stats", {}).items()):
        if stats.get("changed"):
            problems.append(f"run 2: {host} changed={stats['changed']} (not idempotent)")
            problems += [f"    changed: {name}" for name in changed_tasks(second, host)]
    return problems


def print_summary(runs: list[tuple[Doc, float]]) -> None:
    hosts = sorted(set().union(*(doc.get("stats", {}) for doc, _ in runs)))
    print(f"\nsandbox summary: {len(hosts)} hosts (ok/changed/failed; failed counts unreachable)")
    print(f"{'host':<24}" + "".join(f"{f'run {i + 1}':>16}" for i in range(len(runs))))
    for host in hosts:
        cells = []
        for doc, _ in runs:
            s = doc.get("stats", {}).get(host, {})
            failed = s.get("failures", 0) + s.get("unreachable", 0)
            cells.append(f"{s.get('ok', 0)}/{s.get('changed', 0)}/{failed}".rjust(16))
        print(f"{host:<24}" + "".join(cells))
    walls = "".join(f"{f'{t:.1f}s':>16}" for _, t in runs)
    print(f"{'wall time':<24}{walls}")


# --- main -------------------------------------------------------------------------------


def sandbox(args: argparse.Namespace, tmp: Path) -> int:
    base = ensure_base(cache_dir())
    tree = args.tree.resolve() if args.tree else render(args.spec.resolve(), tmp / "tree")
    inventory = tree / "inventories" / inventory_name(tree)
    hosts = inventory_hosts(tree, inventory, tmp)
    print(f"sandbox: {len(hosts)} hosts; copying the root for each into {tmp}/roots")
    roots = make_roots(base, tmp / "roots", hosts)
    overrides = write_overrides(tmp / "overrides", roots)
    runs = [run_playbook(tree, inventory, overrides, tmp, 1)]
    problems = check_runs(runs[0][0], {})
    if problems:
        print("sandbox: run 1 failed, not running it again")
    else:
        runs.append(run_playbook(tree, inventory, overrides, tmp, 2))
        problems = check_runs(runs[0][0], runs[1][0])
    print_summary(runs)
    for line in problems:
        print("FAIL " + line if not line.startswith("    ") else line)
    print("sandbox: FAIL" if problems else "sandbox: PASS (second run changed=0 on every host)")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        preflight()
        tmp = Path(
            tempfile.mkdtemp(prefix="railplan-sandbox-", dir=os.environ.get("TMPDIR", "/var/tmp"))
        )
        try:
            return sandbox(args, tmp)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the cleanup finish
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if args.keep:
                print(f"sandbox: kept {tmp}")
            else:
                remove_tree(tmp)
    except SandboxError as err:
        print(err, file=sys.stderr)
        return err.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
