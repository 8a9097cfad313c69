"""`railplan verify`: the cabled InfiniBand fabric, as discovery tools saw it, against the plan.

Reads the spec and one or more dumps (``ibnetdiscover``, ``ibnetdiscover -p``, ``iblinkinfo``,
``iblinkinfo -l``, told apart by content) and an optional node-name map, then prints the
findings: text by rack, the JSON document, or a CSV work order. Exits 0 when the fabric is as
planned, 1 with findings (or a spec that cannot be planned), 2 for unreadable input.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from infra.cli.common import EXIT_FAILED, EXIT_OK, _load_spec, _say, app
from infra.cli.planning import _plan_or_fail
from infra.verify import parse_files
from infra.verify.compare import compare
from infra.verify.formats import Summary, verify_csv, verify_json, verify_text
from infra.verify.resolve import resolve


class VerifyFormat(StrEnum):
    """Output formats of `railplan verify`."""

    TEXT = "text"
    JSON = "json"
    CSV = "csv"


@app.command()
def verify(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The cluster spec.")],
    discovered: Annotated[
        list[str],
        typer.Argument(
            metavar="DISCOVERED...",
            help="ibnetdiscover [-p] or iblinkinfo [-l] output of the fabric, one or more files.",
        ),
    ],
    names: Annotated[
        str | None,
        typer.Option(
            "--names",
            metavar="MAP",
            help='Node-name map (ibnetdiscover --node-name-map format: 0x<guid> "name").',
        ),
    ] = None,
    output_format: Annotated[VerifyFormat, typer.Option("--format", "-f")] = VerifyFormat.TEXT,
) -> None:
    """Check the discovered compute fabric against the plan: each fault with its fix.

    Finds missing and unexpected cables, swapped pairs, cables on the wrong rail, switch or
    port, links below the planned rate or not up, devices never seen and HCAs without a
    name; every finding names both ends' rack and unit. Exits 0 as planned, 1 with findings,
    2 for unreadable input. With --format json stdout holds one document; csv is a work order.
    """
    loaded = _load_spec(spec)
    fabric = parse_files(Path(p) for p in [*discovered, *([names] if names else [])])
    plan = _plan_or_fail(loaded)
    findings = compare(plan, resolve(fabric))
    summary = Summary(
        cables_planned=len(plan.cables_in("compute")),
        links_seen=len(fabric.links),
        files=fabric.sources,
    )
    if output_format is VerifyFormat.JSON:
        _say(verify_json(findings, summary, fabric.ignored))
    elif output_format is VerifyFormat.CSV:
        _say(verify_csv(findings).rstrip("\n"))
    else:
        _say(verify_text(findings, summary, fabric.ignored).rstrip("\n"))
    raise typer.Exit(EXIT_FAILED if findings else EXIT_OK)
