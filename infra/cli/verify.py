"""`railplan verify`: the cabled InfiniBand fabric, as discovery tools saw it, against the plan.

Reads the spec and one or more dumps (``ibnetdiscover``, ``ibnetdiscover -p``, ``iblinkinfo``,
``iblinkinfo -l``, told apart by content) and an optional node-name map, then prints the
findings: text by rack, the JSON document, or a CSV work order. With ``--structure`` the spec
is optional (a first argument that is no dump is the spec) and the structure checks
(`infra.verify.structure`) run too. Exits 0 when the fabric is as planned, 1 with findings (or
a spec that cannot be planned), 2 for unreadable input or no spec without ``--structure``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from infra.cli.common import EXIT_FAILED, EXIT_OK, app, plan_or_fail, read_spec, say
from infra.errors import DiscoveredError, InputError, RailplanError

if TYPE_CHECKING:
    from infra.spec import LoadedSpec
    from infra.verify.findings import Finding, Place
    from infra.verify.formats import Summary
    from infra.verify.model import Fabric
    from infra.verify.seen import NamedEnd
    from infra.verify.workorder import Sheet

_SNIFF_CHARS = 64 * 1024  # a dump says what it is in its first lines


class VerifyFormat(StrEnum):
    """Output formats of `railplan verify`."""

    TEXT = "text"
    JSON = "json"
    CSV = "csv"


def _dump_text(path: str) -> str | None:
    """The file's text when it reads as a dump (by content, as the parsers decide), else None.

    Read once, through the one bounded reader (`read_dump`): a FIFO or device given first is
    refused here, never waited on, and a pipe's text is kept, as it cannot be read again.
    """
    from infra.verify import detect
    from infra.verify.discovered import dump_lines, read_dump

    text = read_dump(path)
    lines = dump_lines(text[:_SNIFF_CHARS])
    try:
        detect(lines[:-1] or lines, path)  # the last line of the sniffed head may be cut
    except DiscoveredError:
        return None
    return text


_USAGE = (
    "railplan verify SPEC DISCOVERED..., or railplan verify --structure DISCOVERED... "
    "to check the dumps without a spec"
)


def _split(files: list[str], structure: bool) -> tuple[str | None, list[str], dict[str, str]]:
    """(spec or None, dumps, dumps already read): without --structure the first is the spec."""
    if structure and len(files) > 1:
        text = _dump_text(files[0])
        if text is None:
            return files[0], files[1:], {}
        return None, files, {files[0]: text}
    if structure:
        return None, files, {}
    if len(files) < 2:
        raise InputError("needs the spec and at least one dump", hint=_USAGE)
    return files[0], files[1:], {}


def _load_the_spec(path: str) -> LoadedSpec:
    """The spec; a dump given in its place is named as such (not as a spec that is invalid)."""
    try:
        return read_spec(path)
    except RailplanError:
        try:
            dump = _dump_text(path) is not None
        except InputError:
            dump = False  # unreadable as a dump too: the spec loader's error says why
        if dump:
            raise InputError("is a dump, not the spec", file=path, hint=_USAGE) from None
        raise


def _check(
    loaded: LoadedSpec | None, fabric: Fabric, structure: bool
) -> tuple[list[Finding], Summary, Sheet | None]:
    """The plan check (with a spec), the structure checks (with --structure), or both."""
    from infra.catalog import load_catalog
    from infra.verify.compare import LISTED, compare_listed, listed, placer
    from infra.verify.findings import Finding
    from infra.verify.formats import Summary
    from infra.verify.lids import duplicate_lids
    from infra.verify.resolve import resolve
    from infra.verify.structure import STRUCTURE_KINDS, check_structure, combine
    from infra.verify.workorder import sheet

    findings: list[Finding] = []
    not_listed: dict[str, int] = {}
    planned: int | None = None
    sharp: bool | None = None
    place = None
    work: Sheet | None = None
    seen = resolve(fabric)
    if loaded is not None:
        plan = plan_or_fail(loaded)
        compared = compare_listed(plan, seen)
        findings, not_listed = compared.findings, compared.not_listed
        planned = len(plan.cables_in("compute"))
        compute = loaded.spec.fabrics.compute
        switches = load_catalog().switches
        sharp = bool(compute and compute.sharp and switches[compute.switch].sharp)
        place = placer(plan)
        work = sheet(plan, load_catalog())
    shape = None
    if structure:
        found = check_structure(fabric, sharp=sharp, place=place)
        # "unexpected": a port with two peers, which the structure check names without a plan
        capped = listed(list(found.findings), (*STRUCTURE_KINDS, "unexpected"), LISTED)
        findings, shape = combine(findings, capped.findings), found.shape
        not_listed |= capped.not_listed
    # in both checks: a LID two ports hold breaks routing however the cables run
    lids = listed(duplicate_lids(fabric, place or _bare_place), ("duplicate_lid",), LISTED)
    findings = sorted([*findings, *lids.findings], key=Finding.sort_key)
    not_listed |= lids.not_listed
    return findings, Summary(planned, seen.cables, fabric.sources, shape, not_listed), work


def _bare_place(end: NamedEnd) -> Place:
    """Without a plan a device has no rack: its discovered name and port are the place."""
    from infra.verify.findings import Place

    return Place(end.device, end.port)


@app.command()
def verify(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="[SPEC] DISCOVERED",
            help="The cluster spec (optional with --structure), then ibnetdiscover [-p] or "
            "iblinkinfo [-l] output of the fabric, one or more files.",
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
    structure: Annotated[
        bool,
        typer.Option(
            "--structure",
            help="Also check rails, uplinks, the SU grid, SHARP and link rates from the dumps "
            "alone; needs no spec.",
        ),
    ] = False,
    output_format: Annotated[VerifyFormat, typer.Option("--format", "-f")] = VerifyFormat.TEXT,
) -> None:
    """Check the discovered compute fabric against the plan: each fault with its fix.

    Finds missing and unexpected cables, swapped pairs, cables on the wrong rail, switch or
    port, links below the planned rate or not up, devices never seen and HCAs without a
    name; every finding names both ends' rack and unit. --structure adds checks that need
    no spec: each leaf reached from one HCA index, equal uplinks to every spine of a pod, no
    gap in the rail/SU grid, SHARP aggregation nodes, no link slower than its tier. Exits 0
    as planned, 1 with findings, 2 for unreadable input. With --format json stdout holds one
    document; csv is a work order.
    """
    from infra.verify import parse_files
    from infra.verify.formats import verify_csv, verify_json, verify_text

    spec, dumps, read = _split(files, structure)
    if not dumps:
        raise InputError("needs at least one dump", hint="give ibnetdiscover or iblinkinfo output")
    loaded = _load_the_spec(spec) if spec is not None else None  # the spec's errors come first
    fabric = parse_files([*dumps, *([names] if names else [])], read)
    findings, summary, work = _check(loaded, fabric, structure)
    if output_format is VerifyFormat.JSON:
        say(verify_json(findings, summary, fabric.ignored))
    elif output_format is VerifyFormat.CSV:
        say(verify_csv(findings, summary, work).rstrip("\n"))
    else:
        say(verify_text(findings, summary, fabric.ignored).rstrip("\n"))
    raise typer.Exit(EXIT_FAILED if findings else EXIT_OK)
