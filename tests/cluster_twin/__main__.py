"""Stand a twin up by hand: ``python -m tests.cluster_twin up SPEC [--workdir DIR]``.

``up`` leaves the twin running (render, hosts, BMCs; no playbook) and prints how to reach
it; ``play`` runs the entry playbook once on a running twin; ``down`` stops the twin that
DIR holds. The pytest module `tests/test_cluster_twin.py` runs the scenarios.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.cluster_twin.proc import TwinError
from tests.cluster_twin.twin import ClusterTwin

DEFAULT_WORKDIR = Path("/var/tmp/railplan-twin/run")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.cluster_twin", description=__doc__.splitlines()[0]
    )
    parser.add_argument("verb", choices=["up", "play", "down"])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--extra-driver", action="append", default=[])
    parser.add_argument("ansible_args", nargs="*")
    args = parser.parse_args(argv)
    try:
        twin = ClusterTwin(args.spec, args.workdir, extra_drivers=args.extra_driver)
        if args.verb == "up":
            twin.up()
            print(
                json.dumps(
                    {
                        "hosts": {h.name: h.net.mgmt_ip for h in twin.hosts.values()},
                        "timings": twin.timings,
                        "tree": str(twin.tree),
                    },
                    indent=1,
                )
            )
        elif args.verb == "play":
            twin.resume()
            result = twin.playbook(*args.ansible_args)
            print(
                json.dumps(
                    {
                        "rc": result.rc,
                        "seconds": round(result.seconds),
                        "log": str(result.log),
                        "failed": result.failed_hosts(),
                        "changed": result.changed(),
                        "problems": result.problems()[:40],
                    },
                    indent=1,
                )
            )
        else:
            twin.resume()
            twin.down()
    except TwinError as err:
        print(err, file=sys.stderr)
        return err.code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
