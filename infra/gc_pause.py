"""`paused_gc`: the cyclic garbage collector paused while a stage builds or reads a large plan.

A plan of a large cluster is millions of small objects that live to the end of the command;
each full collection walks all of them again, so a stage that allocates a lot beside the
plan (the rendered files, the lint rules, the tree writer's listings) spends much of its
time in the collector. Nothing these stages build is cyclic: reference counting frees it
as usual, and the collector runs again once the stage is done. What the stage leaves
behind goes straight to the collector's oldest generation: left young, the first
collections after the stage would walk all of it (a 16,384-server plan: 0.2 s of a render).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused_gc"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after if it was on.

    Objects that outlive the block are moved to the oldest generation unscanned (frozen,
    then unfrozen at once): still collected by a full collection, like any old object.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()  # every tracked object into the permanent generation...
            gc.unfreeze()  # ...and back into the oldest one, none of them scanned
            gc.enable()
