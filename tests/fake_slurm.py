"""A stand-in `scontrol` and `sinfo` for testing the drain role: there is no Slurm cluster here.

One script plays both ($FAKE_SLURM_PROG, set by the wrappers on PATH, names which). Nodes
live in the JSON file named by $FAKE_SLURM_STATE; only the calls the drain role makes are
implemented, anything else is refused (exit 99) so a new call in the role fails the test
until the fake learns it. Time passes with each sinfo read: a drained node's jobs finish one
per read (``jobs: -1`` never finish), and a rebooted node answers ``*`` (not responding) for
``down_reads`` reads. Every call is appended to ``calls``.

State: {"nodes": {name: {"jobs": int, "drain": bool, "down": bool, "reason": str,
"down_reads": int}}, "calls": [[prog, argv...]]}, and optionally "version" (what `scontrol --version` prints;
default "slurm 21.08.5"), "no_slurm" (true: not installed, every call exits 127),
"no_controller" (true: installed, but every call that asks slurmctld fails, as with it down) and
"suspend_exc_nodes" (the names slurmctld excludes from power saving, run-time updates
included; only Slurm 23.02 and later take `scontrol update SuspendExcNodes+=/-=`). A node may
also carry "power": "off" (sinfo's ``~``), "powering_down" (``%``) or "powering_up" (``#``),
each lasting "power_reads" sinfo reads before it moves on (powering down -> off, powering up
-> on); `update state=power_up` powers an "off" node up and, as Slurm 21.08 did on the
cluster twin, is accepted (rc 0) and ignored while the node is still powering down. A node
with "pending_power_down" (an operator's `scontrol update state=power_down` that Slurm keeps
as a flag) shows ``!`` while on, and only ``~`` while off, as sinfo prints it; once on and
without jobs it powers down, which clears the flag (Slurm 23.11's power_save.c, where
SuspendExcNodes does not hold it back).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# Run as a script (tests/ on sys.path): the checkout's root, for the twin's hostlist reader.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.cluster_twin.watch import expand_hostlist

STATE = Path(os.environ.get("FAKE_SLURM_STATE", "slurm-state.json"))

POWER_SUFFIX = {"off": "~", "powering_down": "%", "powering_up": "#"}
POWER_NEXT = {"powering_down": "off", "powering_up": "on"}


def _state_name(node: dict[str, Any]) -> str:
    """sinfo's %T: the long state, '*' when slurmd does not respond."""
    busy = node["jobs"] != 0
    if node["down"]:
        name = "down"
    elif node["drain"]:
        name = "draining" if busy else "drained"
    else:
        name = "allocated" if busy else "idle"
    power = POWER_SUFFIX.get(node.get("power", "on"), "")
    if not power and node.get("pending_power_down"):
        power = "!"
    return name + power + ("*" if node["down_reads"] > 0 else "")


def _power_passes(node: dict[str, Any]) -> None:
    """A read lets a power transition run on; it ends after its ``power_reads``."""
    if node.get("power") in POWER_NEXT:
        node["power_reads"] = node.get("power_reads", 0) - 1
        if node["power_reads"] <= 0:
            node["power"] = POWER_NEXT[node["power"]]
            node["power_reads"] = 1
    elif node.get("power", "on") == "on" and node.get("pending_power_down") and not node["jobs"]:
        node.update(power="powering_down", power_reads=1, pending_power_down=False)


def sinfo(state: dict[str, Any], argv: list[str]) -> str:
    if argv == ["--noheader", "--Node", "--format=%N"]:
        return "".join(f"{name}\n" for name in state["nodes"])
    head = argv[:4]
    if head[:3] != ["--noheader", "--Node", "--nodes"] or len(argv) != 5:
        raise SystemExit(99)
    fmt = argv[4].removeprefix("--format=")
    node = state["nodes"].get(head[3])
    if node is None:
        return ""  # sinfo prints nothing for a node it does not know
    line = fmt.replace("%T", _state_name(node)).replace("%E", node["reason"])
    if node["drain"] and node["jobs"] > 0:
        node["jobs"] -= 1  # a job finished while we waited
    node["down_reads"] = max(0, node["down_reads"] - 1)
    _power_passes(node)
    return line + "\n"


def _suspend_exc_nodes(state: dict[str, Any], argv: list[str]) -> str:
    """`update SuspendExcNodes+=` / `-=`: Slurm 23.02's hostset insert and delete."""
    major, minor = (int(p) for p in state.get("version", "slurm 21.08.5").split()[1].split(".")[:2])
    (arg,) = argv[1:]
    key, _, value = arg.partition("=")
    if (major, minor) < (23, 2) or key not in ("SuspendExcNodes+", "SuspendExcNodes-"):
        sys.stderr.write(f"Update failed: invalid keyword {key}\n")
        raise SystemExit(1)
    held = set(state.setdefault("suspend_exc_nodes", []))
    held = (
        held | set(expand_hostlist(value))
        if key.endswith("+")
        else held - set(expand_hostlist(value))
    )
    state["suspend_exc_nodes"] = sorted(held)
    return ""


def scontrol(state: dict[str, Any], argv: list[str]) -> str:
    if argv == ["--version"]:
        return state.setdefault("version", "slurm 21.08.5") + "\n"
    if argv[:2] == ["show", "hostnames"] and len(argv) == 3:
        return "".join(f"{name}\n" for name in expand_hostlist(argv[2]))
    if argv[:1] == ["update"] and argv[1:2] and argv[1].startswith("SuspendExcNodes"):
        return _suspend_exc_nodes(state, argv)
    opts = dict(a.split("=", 1) for a in argv[1:])
    if argv[:1] != ["update"] or set(opts) - {"nodename", "state", "reason"}:
        raise SystemExit(99)
    node = state["nodes"][opts["nodename"]]
    if opts["state"] == "drain" and "reason" in opts:
        node["drain"], node["reason"] = True, opts["reason"]
    elif opts["state"] == "power_up" and "reason" not in opts:
        if node.get("power") == "off":  # powering down: accepted and ignored
            node["power"] = "powering_up"
    elif opts["state"] == "resume" and "reason" not in opts:
        node["drain"] = node["down"] = False
        node["reason"] = "none"
    else:
        raise SystemExit(99)
    return ""


def reboot(state: dict[str, Any], name: str) -> None:
    """Test-only: the node reboots, Slurm marks it down and it does not answer for a while."""
    if name in state["nodes"]:
        state["nodes"][name].update(down=True, down_reads=2)


def main(argv: list[str]) -> int:
    state = json.loads(STATE.read_text())
    prog = os.environ["FAKE_SLURM_PROG"]
    state["calls"].append([prog, *argv[1:]])
    local = argv[1:] == ["--version"] or argv[1:3] == ["show", "hostnames"]  # no slurmctld needed
    if state.get("no_controller") and not local:
        STATE.write_text(json.dumps(state, indent=1))
        sys.stderr.write("Unable to contact slurm controller (connect failure)\n")
        return 1  # installed, slurmctld not answering
    if state.get("no_slurm"):
        STATE.write_text(json.dumps(state, indent=1))
        return 127  # command not found: a green field, no Slurm yet
    out = ""
    if argv[1:2] == ["--test-reboot"]:
        reboot(state, argv[2])
    elif prog == "sinfo":
        out = sinfo(state, argv[1:])
    elif prog == "scontrol":
        out = scontrol(state, argv[1:])
    else:
        return 99
    STATE.write_text(json.dumps(state, indent=1))
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
