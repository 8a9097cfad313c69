"""A stand-in `kubectl` for testing mig-change.sh and the drain role: there is no cluster here.

It keeps nodes and pods in the JSON file named by $FAKE_KUBE_STATE and implements only the
calls infra/k8s/scripts/mig-change.sh and playbooks/roles/drain make, refusing anything else
(exit 99), so a new kubectl call in either fails the test until the fake learns it. It plays
the GPU Operator's MIG manager too: setting ``nvidia.com/mig.config`` makes
``nvidia.com/mig.config.state`` ``pending``, and the next read of the node turns it into the
node's ``mig_result`` (``success`` or ``failed``; ``never`` stays pending). Every call is
appended to ``calls`` in the state file.

State: {"nodes": {name: {"labels": {}, "annotations": {}, "unschedulable": bool,
"mig_result": str, "ready": bool}}, "pods": [{"namespace", "name", "node", "phase",
"resources": [names], "pdb_refusals": int}], "calls": [[argv...]]}.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

STATE = Path(os.environ.get("FAKE_KUBE_STATE", "kube-state.json"))
CONFIG = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"


class Refused(Exception):
    """An error kubectl would print, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _jsonpath(template: str, node: dict[str, Any]) -> str:
    """The subset of kubectl's JSONPath the script uses: ``{.a.b.c}`` with ``\\.`` escapes."""

    def value(match: re.Match[str]) -> str:
        parts = [p.replace("\0", ".") for p in match.group(1).replace("\\.", "\0").split(".")]
        if parts[:3] == ["", "metadata", "labels"] and len(parts) == 4:
            return str(node["labels"].get(parts[3], ""))
        if parts[:3] == ["", "metadata", "annotations"] and len(parts) == 4:
            return str(node["annotations"].get(parts[3], ""))
        if parts == ["", "spec", "unschedulable"]:
            return "true" if node["unschedulable"] else ""
        raise Refused(f"fake kubectl: jsonpath {match.group(0)!r} not supported", 99)

    return re.sub(r"\{([^}]*)\}", value, template)


def _selector(text: str) -> dict[str, frozenset[str]]:
    """``k=v`` and ``k in (a,b)`` terms, comma-separated: each key -> the values it accepts."""
    want: dict[str, frozenset[str]] = {}
    for match in re.finditer(r"([^,=\s]+)\s+in\s+\(([^)]*)\)|([^,=]+)=([^,]*)", text):
        if match[1]:
            want[match[1]] = frozenset(v.strip() for v in match[2].split(","))
        else:
            want[match[3]] = frozenset([match[4]])
    return want


def _node(state: dict[str, Any], name: str) -> dict[str, Any]:
    if name not in state["nodes"]:
        raise Refused(f'Error from server (NotFound): nodes "{name}" not found')
    node: dict[str, Any] = state["nodes"][name]
    return node


def _get(state: dict[str, Any], args: list[str]) -> str:
    opts = dict(zip(args[1::2], args[2::2], strict=False)) if args[0] != "pods" else {}
    if args[0] == "nodes" and opts.get("-o") == "name":
        want = _selector(opts["-l"])
        names = [
            n
            for n, node in state["nodes"].items()
            if all(node["labels"].get(k) in v for k, v in want.items())
        ]
        return "".join(f"node/{n}\n" for n in sorted(names))
    if args[0] == "node" and len(args) == 4 and args[2] == "-o" and args[3].startswith("jsonpath="):
        node = _node(state, args[1])
        if node["labels"].get(STATE_LABEL) == "pending" and node["mig_result"] != "never":
            node["labels"][STATE_LABEL] = node["mig_result"]  # the MIG manager finished
        return _jsonpath(args[3].removeprefix("jsonpath="), node)
    if args[0] == "pods" and args[1] == "--all-namespaces" and args[2] == "--field-selector":
        fields = args[3].split(",")
        template = args[5].removeprefix("go-template=")
        if args[4] != "-o" or ".resources.limits" not in template:
            raise Refused("fake kubectl: only the script's GPU pod template is supported", 99)
        node = next(f.split("=", 1)[1] for f in fields if f.startswith("spec.nodeName="))
        skip = {f.split("!=", 1)[1] for f in fields if f.startswith("status.phase!=")}
        lines = [
            " ".join([p["namespace"], p["name"], "running", *p["resources"]]) + "\n"
            for p in state["pods"]
            if p["node"] == node and p["phase"] not in skip
        ]
        return "".join(lines)
    raise Refused(f"fake kubectl: get {args} not supported", 99)


def _label(node: dict[str, Any], field: str, changes: list[str], overwrite: bool) -> None:
    for change in changes:
        if change.endswith("-"):
            node[field].pop(change[:-1], None)
            continue
        key, value = change.split("=", 1)
        if key in node[field] and node[field][key] != value and not overwrite:
            raise Refused(f"error: '{key}' already has a value ({node[field][key]})")
        node[field][key] = value
    if field == "labels" and any(c.startswith(f"{CONFIG}=") for c in changes):
        node["labels"][STATE_LABEL] = "pending"  # the MIG manager picks the change up


def _evict(state: dict[str, Any], args: list[str], body: str) -> str:
    match = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", args[1])
    if match is None or args[2:] != ["-f", "-"]:
        raise Refused(f"fake kubectl: create {args} not supported", 99)
    ns, name = match.groups()
    eviction = json.loads(body)
    meta = eviction["metadata"]
    if (eviction["kind"], eviction["apiVersion"], meta["namespace"], meta["name"]) != (
        "Eviction",
        "policy/v1",
        ns,
        name,
    ):
        raise Refused(f"fake kubectl: eviction body {body!r} does not match the URL")
    pod = next((p for p in state["pods"] if (p["namespace"], p["name"]) == (ns, name)), None)
    if pod is None:
        raise Refused(f'Error from server (NotFound): pods "{name}" not found')
    if pod.get("pdb_refusals", 0) != 0:
        pod["pdb_refusals"] -= 1  # negative: refused for ever
        raise Refused(
            "Error from server (TooManyRequests): Cannot evict pod as it would violate the "
            "pod's disruption budget."
        )
    state["pods"].remove(pod)
    return ""


def _drain(state: dict[str, Any], args: list[str]) -> str:
    """``drain <node> --ignore-daemonsets --delete-emptydir-data --timeout=<t>``: cordon, evict.

    A pod whose disruption budget refuses for ever (``pdb_refusals`` < 0) makes the drain time
    out, as kubectl's does, leaving the node cordoned.
    """
    flags = ["--ignore-daemonsets", "--delete-emptydir-data"]
    if len(args) != 4 or args[1:3] != flags or not args[3].startswith("--timeout="):
        raise Refused(f"fake kubectl: drain {args} not supported", 99)
    node = _node(state, args[0])
    out = f"node/{args[0]} {'already cordoned' if node['unschedulable'] else 'cordoned'}\n"
    node["unschedulable"] = True
    for pod in [p for p in state["pods"] if p["node"] == args[0]]:
        if pod.get("pdb_refusals", 0) < 0:
            raise Refused(
                f'error: unable to drain node "{args[0]}" due to error: global timeout '
                f"reached: {args[3].removeprefix('--timeout=')}, continuing command..."
            )
        state["pods"].remove(pod)
        out += f"pod/{pod['name']} evicted\n"
    return out + f"node/{args[0]} drained\n"


def _wait(state: dict[str, Any], args: list[str]) -> str:
    """``wait --for=condition=Ready node/<n> --timeout=<t>``: nodes are Ready unless told."""
    if len(args) != 3 or args[0] != "--for=condition=Ready" or not args[1].startswith("node/"):
        raise Refused(f"fake kubectl: wait {args} not supported", 99)
    name = args[1].removeprefix("node/")
    if not _node(state, name).get("ready", True):
        raise Refused(f"error: timed out waiting for the condition on nodes/{name}")
    return f"node/{name} condition met\n"


def run(state: dict[str, Any], argv: list[str], stdin: str) -> str:
    """Apply one kubectl call to ``state``; its stdout."""
    verb, args = argv[0], argv[1:]
    if verb == "get":
        return _get(state, args)
    if verb in ("cordon", "uncordon") and len(args) == 1:
        _node(state, args[0])["unschedulable"] = verb == "cordon"
        return f"node/{args[0]} {verb}ed\n"
    if verb in ("label", "annotate") and args[0] == "node":
        overwrite = "--overwrite" in args
        changes = [a for a in args[2:] if a != "--overwrite"]
        field = "labels" if verb == "label" else "annotations"
        _label(_node(state, args[1]), field, changes, overwrite)
        return f"node/{args[1]} {verb}d\n"
    if verb == "drain" and args:
        return _drain(state, args)
    if verb == "wait":
        return _wait(state, args)
    if verb == "create" and args[:1] == ["--raw"]:
        return _evict(state, args, stdin)
    raise Refused(f"fake kubectl: {argv} not supported", 99)


def main(argv: list[str]) -> int:
    state = json.loads(STATE.read_text())
    state["calls"].append(argv)
    stdin = sys.stdin.read() if "-f" in argv else ""
    try:
        out = run(state, argv, stdin)
        code = 0
    except Refused as exc:
        sys.stderr.write(f"{exc}\n")
        out, code = "", exc.code
    # atomically: a test may SIGKILL the script (and this call) at any instant
    partial = STATE.with_name(f"{STATE.name}.{os.getpid()}")
    partial.write_text(json.dumps(state, indent=1))
    partial.replace(STATE)
    sys.stdout.write(out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
