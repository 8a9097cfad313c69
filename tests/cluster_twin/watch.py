"""Watching Slurm while a playbook runs: node states and job placements over time.

`SlurmWatch` polls ``sinfo`` and ``squeue`` on the controller over SSH from a thread, every
POLL seconds, and keeps every sample, so a scenario can check afterwards what the scheduler
saw during a roll-out: which nodes were draining when, and where each job started. A failed
poll (the controller rebooting) is recorded as a gap, not an error.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from tests.cluster_twin.twin import ClusterTwin

POLL = 2.0
SINFO = "sinfo --noheader --Node --format='%N %T'"
SQUEUE = "squeue --noheader --states=all --format='%i %T %N'"


@dataclass
class Sample:
    at: float
    nodes: dict[str, str]  # node -> sinfo %T state
    jobs: dict[str, tuple[str, str]]  # job id -> (state, node list)


@dataclass
class SlurmWatch:
    twin: ClusterTwin
    host: str
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = self.twin.ssh(self.host, f"{SINFO}; echo ---; {SQUEUE}", check=False, timeout=20)
            if out.returncode == 0 and "---" in out.stdout:
                nodes_text, jobs_text = out.stdout.split("---", 1)
                nodes = dict(
                    line.split(None, 1) for line in nodes_text.strip().splitlines() if " " in line
                )
                jobs = {}
                for line in jobs_text.strip().splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        jobs[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
                self.samples.append(Sample(time.time(), nodes, jobs))
            self._stop.wait(POLL)

    def states_of(self, node: str) -> list[str]:
        """The node's distinct states in the order they were seen."""
        seen: list[str] = []
        for sample in self.samples:
            state = sample.nodes.get(node)
            if state is not None and (not seen or seen[-1] != state):
                seen.append(state)
        return seen

    def last_state_of(self, job: str) -> str:
        """The last state squeue showed for ``job`` ('' if it never did)."""
        for sample in reversed(self.samples):
            if job in sample.jobs:
                return sample.jobs[job][0]
        return ""

    def draining_when_started(self) -> list[str]:
        """Jobs seen RUNNING on a node that the previous sample showed draining or drained."""
        bad = []
        for before, after in zip(self.samples, self.samples[1:], strict=False):
            for job, (state, nodes) in after.jobs.items():
                if state != "RUNNING" or before.jobs.get(job, ("", ""))[0] == "RUNNING":
                    continue
                for node in expand_hostlist(nodes):
                    if before.nodes.get(node, "").startswith(("drain", "drng")):
                        bad.append(f"job {job} started on {node} while it was {before.nodes[node]}")
        return bad


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host lists as squeue prints them: ``train[01-02,05],infer01``."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{n:0{len(low)}d}")
    return names
