"""The "## Training" section of docs/accuracy.md: the model's rows and the peer's beside them.

`training_doc` joins `tools.accuracy.train_accuracy` (every published row against the model)
and `tools.accuracy.train_peer` (Calculon's figures on the same rows), which builds on the
first; this module sits above both so neither imports the other back. Regenerate with
``make accuracy`` (``python -m tools.accuracy.accuracy_doc tests/data/training-measurements.yaml``).
"""

from __future__ import annotations

import sys
from typing import Any

from infra.catalog import Catalog, load_catalog
from tools.accuracy.train_accuracy import load_rows, training_markdown
from tools.accuracy.train_peer import peer_markdown

__all__ = ["training_doc"]


def training_doc(data: dict[str, Any], catalog: Catalog) -> str:
    """The whole "## Training" section, peer tables included."""
    return training_markdown(data, catalog, peer_markdown(data, catalog))


if __name__ == "__main__":  # pragma: no cover - the documented regenerate command
    sys.stdout.write(training_doc(load_rows(sys.argv[1]), load_catalog()))
