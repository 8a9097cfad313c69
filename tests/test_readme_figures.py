"""The README's model-accuracy figures are the generated document's, not a copy that drifts.

docs/accuracy.md is generated (`make accuracy`); the README quotes its held-out medians in
prose. They once disagreed (2.8 % / 11.2 % in the README, 3.9 % / 9.9 % in the document):
each figure the README quotes is checked against the document's "Held-out half" block.
"""

from __future__ import annotations

import re

from .conftest import ROOT

README = (ROOT / "README.md").read_text()
ACCURACY = (ROOT / "docs/accuracy.md").read_text()


def _held_out_median(label: str) -> str:
    """The held-out median |error| of the class whose bullet starts with ``label``."""
    block = ACCURACY.split("### Held-out half", 1)[1].split("###", 1)[0]
    match = re.search(
        rf"^- \*\*{re.escape(label)}[^*]*\*\*: .*?median \|error\| ([\d.]+)%", block, re.MULTILINE
    )
    assert match is not None, label
    return match.group(1)


def test_the_readme_quotes_the_held_out_medians_of_the_generated_document() -> None:
    text = " ".join(README.split())  # prose wraps anywhere
    large, medium = _held_out_median("large messages"), _held_out_median("1-128 MiB")
    assert f"large messages (>= 256 MiB) median error {large} %, 1-128 MiB {medium} %" in text
    assert f"1-128 MiB: held-out median error {medium} %" in text
    assert f"small sizes {_held_out_median('small messages')} %" in text
