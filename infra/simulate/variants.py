"""The same cluster without MIG, with MIG held static, and as declared: what MIG buys on a trace.

`mig_variants` turns a spec whose node groups split GPUs with MIG (a `mig` layout, a
`mig_schedule`, or both) into the variants `railplan simulate --compare-mig` and
`railplan report --trace` replay side by side: ``no MIG`` (every group `mig: disabled`, no
schedule), ``static MIG`` (each group held at its most-split state all the time: of the group's
`mig` and its scheduled changes, the one with the most MIG slices per node, the first such in
spec order on a tie; no schedule) and the spec as declared, named ``day/night MIG`` when a
group has a schedule. Without a schedule the spec as declared *is* static MIG, so there are
two variants (``no MIG`` and ``static MIG``, the spec itself). A spec that splits no GPU in
any state gets no variants (an empty dict): there is nothing to compare. MIG changes neither
servers nor cables, so every variant plans to the same fabric; each is re-validated through
the spec model, so it is a spec as valid as one loaded from YAML.
"""

from __future__ import annotations

from infra.catalog import Catalog, load_catalog
from infra.spec import Spec
from infra.spec.mig import MigValue
from infra.spec.models import NodeGroup
from infra.topology.facts_model import GroupMig
from infra.topology.groups import group_migs

__all__ = ["AS_DECLARED", "DAY_NIGHT", "NO_MIG", "STATIC", "mig_variants", "split_groups"]

NO_MIG = "no MIG"
STATIC = "static MIG"
DAY_NIGHT = "day/night MIG"
AS_DECLARED = "as declared"  # the spec itself, in texts that name it apart from its variant


def _slices(state_per_gpu: tuple[str | None, ...], spec: Spec) -> int:
    """MIG instances one node of the group holds in this state (0: no GPU split)."""
    return sum(
        sum(spec.mig_layouts[layout].profiles.values())
        for layout in state_per_gpu
        if layout is not None and layout in spec.mig_layouts
    )


def _most_split(mig: GroupMig, spec: Spec) -> MigValue | None:
    """The `mig` value of the group's state with the most slices per node; None if none splits."""
    best: MigValue | None = None
    most = 0
    for state in mig.states:  # spec order: `mig`, then the changes; the first wins a tie
        slices = _slices(state.per_gpu, spec)
        if slices > most:
            best, most = state.value, slices
    return best


def split_groups(spec: Spec, catalog: Catalog | None = None) -> tuple[str, ...]:
    """Names of the node groups that split a GPU with MIG in some state, in spec order."""
    migs = group_migs(spec, catalog or load_catalog())
    return tuple(g.name for g, m in zip(spec.node_groups, migs, strict=True) if m.split)


def _with_groups(spec: Spec, groups: list[NodeGroup]) -> Spec:
    """``spec`` with ``groups``, validated again through the spec model (a fresh, valid Spec)."""
    changed = spec.model_copy(update={"node_groups": groups})
    return Spec.model_validate(changed.model_dump(mode="json"))


def _held(group: NodeGroup, mig: MigValue) -> NodeGroup:
    return group.model_copy(update={"mig": mig, "mig_schedule": None})


def mig_variants(spec: Spec, catalog: Catalog | None = None) -> dict[str, Spec]:
    """``{name: spec}`` of the MIG variants of ``spec`` in table order; empty without MIG.

    ``catalog`` gives the GPUs per node that a ``gpus: all`` assignment covers (default: the
    bundled catalog).
    """
    migs = group_migs(spec, catalog or load_catalog())
    if not any(m.split for m in migs):
        return {}
    pairs = list(zip(spec.node_groups, migs, strict=True))
    none = [_held(g, "disabled") if m.split else g for g, m in pairs]
    static = [_held(g, _most_split(m, spec) or "disabled") if m.split else g for g, m in pairs]
    scheduled = any(g.mig_schedule is not None for g, m in pairs if m.split)
    out = {NO_MIG: _with_groups(spec, none)}
    if not scheduled:
        return out | {STATIC: spec}
    return out | {STATIC: _with_groups(spec, static), DAY_NIGHT: spec}
