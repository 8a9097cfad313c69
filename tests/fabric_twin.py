"""The fabric twin: a plan's compute fabric in ibsim, driven by the real OpenSM and diags.

`FabricTwin` starts Debian's ``ibsim`` (ibsim-utils) on the netlist ``railplan render``
writes (``files/fabric/ibsim.net``), with stdin a pipe kept open so that `console` can type
commands into ibsim's console; runs Debian's ``opensm`` with the rendered opensm conf,
partitions and root-GUID files (``/etc/opensm`` replaced by the work directory), then
``ibnetdiscover -p``, ``iblinkinfo`` and ``ibtracert`` (infiniband-diags), all under
``ibsim-run`` (LD_PRELOAD of libumad2sim: no HCA, no kernel module, no root needed), and
``railplan verify --format json`` on the dumps, in-process through the CLI.

ibsim console commands, verified with ibsim 0.10 (``help`` lists them; names in double
quotes, spaces inside them allowed; each command answers with a new ``sim>`` prompt):

- ``Unlink "dgx001 mlx5_0"[1]``: unplug that port's cable (both ends go Down/Polling);
- ``Unlink "ib0-spine-01"``: every link of the node, as a switch that never comes up;
- ``Link "dgx001 mlx5_0"[1] "ib0-leaf-dgx-su01-r0"[3]``: cable two free ports;
- ``ReLink "node"[port]``, ``Clear "node"[port]`` (unlink and reset), ``Dump "node"``.

Commands take effect at once; opensm and the diags run afterwards see the changed fabric.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import yaml

from infra.catalog import Catalog
from infra.render.ibsim_netlist import ibsim_netlist, sim_limits
from infra.render.opensm import REHEARSAL_CONF, sm_hosts
from infra.render.subnet_manager import subnet_manager_files
from infra.spec import Spec, load_spec_text
from infra.topology import expand
from infra.topology.model import Plan
from tests.cli_run import run_cli

PROMPT = "sim> "


class FabricTwin:
    """One ibsim fabric of a spec's plan in `workdir`; a context manager that stops ibsim."""

    def __init__(self, spec_text: str, catalog: Catalog, workdir: Path) -> None:
        self.workdir = workdir
        self.spec_path = workdir / "spec.yaml"
        self.spec_path.write_text(spec_text)
        self.spec: Spec = load_spec_text(spec_text, "spec.yaml").spec
        self.catalog = catalog
        self.plan: Plan = expand(self.spec, catalog)
        self.files = self._install()
        # ibsim's socket (IBSIM_SOCKNAME): one per fabric, so runs sharing a machine stay apart
        socket = "railplan-twin-" + hashlib.sha256(str(workdir).encode()).hexdigest()[:10]
        self.env = {**os.environ, "IBSIM_SOCKNAME": socket, "OSM_TMP_DIR": str(workdir)}
        self.env["OSM_CACHE_DIR"] = str(workdir)
        self.log = workdir / "ibsim.log"
        self._proc: subprocess.Popen[str] | None = None
        self._output: IO[str] | None = None

    def _install(self) -> dict[str, str]:
        """The rendered netlist and subnet-manager files, /etc/opensm -> the work directory."""
        files = subnet_manager_files(self.plan, self.spec, self.catalog)
        for name, text in files.items():
            (self.workdir / name).write_text(text.replace("/etc/opensm", str(self.workdir)))
        (self.workdir / "ibsim.net").write_text(ibsim_netlist(self.plan))
        return files

    def __enter__(self) -> Self:
        limits = zip("NSP", sim_limits(self.plan), strict=True)
        args = ["ibsim", "-s", *(f"-{flag}{n}" for flag, n in limits), "ibsim.net"]
        self._output = self.log.open("w")
        self._proc = subprocess.Popen(
            args,
            cwd=self.workdir,
            stdin=subprocess.PIPE,  # ibsim reads its console here; open keeps it running
            stdout=self._output,
            stderr=subprocess.STDOUT,
            env=self.env,
            text=True,
        )
        self._await_prompts(1)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            self._proc.terminate()  # ibsim does not exit when its stdin closes
            self._proc.wait(timeout=10)
        if self._output is not None:
            self._output.close()

    def _await_prompts(self, count: int, timeout: float = 30.0) -> None:
        """Wait until ibsim has printed `count` prompts: the netlist loaded, commands done."""
        deadline = time.monotonic() + timeout
        while self.log.read_text().count(PROMPT) < count:
            assert self._proc is not None and self._proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"ibsim gave no prompt: {self.log.read_text()}"
            time.sleep(0.05)

    def console(self, *commands: str) -> None:
        """Type commands into ibsim's console and wait until it has run them."""
        assert self._proc is not None and self._proc.stdin is not None
        before = self.log.read_text().count(PROMPT)
        for command in commands:
            self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        self._await_prompts(before + len(commands))

    def run(self, *args: str, host: str | None = None, timeout: int = 120) -> str:
        """One command under ibsim-run on `host`'s HCA (default: the first SM host's)."""
        env = {**self.env, "SIM_HOST": host or self.sm_hca}
        done = subprocess.run(
            ["ibsim-run", *args],
            cwd=self.workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.stdout + done.stderr

    @property
    def sm_conf(self) -> str:
        """The SM the twin runs: the first opensm-<host>.conf, or a UFM spec's rehearsal conf."""
        if REHEARSAL_CONF in self.files:
            return REHEARSAL_CONF
        return min(n for n in self.files if n.startswith("opensm-"))

    @property
    def sm_hca(self) -> str:
        """The SM host's first compute HCA, as the twin names it (UFM: the master's place)."""
        host = sm_hosts(self.plan)[0]
        if self.sm_conf != REHEARSAL_CONF:
            host = self.sm_conf.removeprefix("opensm-").removesuffix(".conf")
        return f"{host} {self.plan.server(host).hcas[0]}"

    def opensm(self) -> tuple[str, str]:
        """One sweep (``-o``) with the rendered conf; returns (console output, log file)."""
        log = self.workdir / "opensm.log"
        log.unlink(missing_ok=True)
        out = self.run("opensm", "-F", str(self.workdir / self.sm_conf), "-f", str(log), "-o")
        return out, log.read_text() if log.exists() else ""

    def dump(self, name: str, *args: str, timeout: int = 120) -> Path:
        """Write one discovery tool's output (``ibnetdiscover -p``...) to `name`."""
        path = self.workdir / name
        path.write_text(self.run(*args, timeout=timeout))
        return path

    def verify(self, *dumps: Path) -> tuple[int, dict[str, Any]]:
        """`railplan verify SPEC DUMPS --format json`: exit code and the JSON document."""
        done = run_cli("verify", str(self.spec_path), *map(str, dumps), "--format", "json")
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return done.returncode, json.loads(done.stdout)


def with_opensm(spec_text: str) -> str:
    """The spec with ``subnet_manager: opensm``: the twin needs a rendered opensm conf."""
    data = yaml.safe_load(spec_text)
    data["fabrics"]["compute"]["subnet_manager"] = "opensm"
    return yaml.safe_dump(data, sort_keys=False)
