"""`railplan verify`: what InfiniBand discovery tools saw, against the plan.

A pure stage. Text in, a typed `Fabric` out (see `infra.verify.model`); formats are told
apart by content (`infra.verify.discovered.detect`), and any line no parser understands is a
located `infra.errors.DiscoveredError`. `infra.verify.compare` checks the seen links, names
resolved (`infra.verify.seen`), against the plan's cables into findings
(`infra.verify.findings`); `infra.verify.formats` writes them. It may import
the spec, catalog and topology stages, never render or cli.
"""

from infra.verify.discovered import Format, detect, parse_files, parse_text
from infra.verify.model import End, Fabric, Ignored, Link, Node, Source

__all__ = [
    "End",
    "Fabric",
    "Format",
    "Ignored",
    "Link",
    "Node",
    "Source",
    "detect",
    "parse_files",
    "parse_text",
]
