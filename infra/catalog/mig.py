"""MIG profile names and layouts: parse a mig-parted profile string, decide if counts fit a GPU.

A MIG layout is a multiset of GPU-instance (GI) profiles on one GPU. It is valid when a
non-overlapping assignment of placements exists: each GI occupies the memory slices
``[start, start + memory_slices)`` for one of its profile's valid ``start`` slots, no two
instances share a slice, each profile stays within its ``max_count``, the GPU holds at most
``max_instances`` GIs and the compute slices add up to at most the full GPU's (7).

Sources:

- MIG User Guide, "Concepts" (docs.nvidia.com/datacenter/tesla/mig-user-guide/): a GI occupies
  the memory slices of its placement; valid combinations are built "such that no two profiles
  overlap vertically"; "prior to NVIDIA driver release R510, the combination of a (4 memory,
  4 compute) and a (4 memory, 3 compute) profile was not supported". The "Getting Started"
  ``-cgi 19,19,14,9`` example shows that the driver places greedily, so order matters; we
  therefore ask whether *some* assignment exists, which is what NVIDIA/mig-parted's
  ``iteratePermutationsUntilSuccess`` (``pkg/mig/config/config.go``) searches for by trying
  every creation order. Placements and limits come from the catalog (``nvidia-smi mig -lgipp``).
- Profile grammar: NVIDIA/go-nvlib ``pkg/nvlib/device/mig_profile.go`` (vendored by
  mig-parted; older mig-parted ``pkg/types/mig_profile.go``): optional ``<C>c.`` compute-instance
  prefix, ``<G>g.<M>gb``, then either ``+attr[,attr...]`` or ``-attr[,attr...]``. We accept
  the attributes a device can actually expose (``me``, ``me.all``, ``gfx``); go-nvlib's format
  check accepts any alphanumeric word, but such a name never matches a device profile.

Compute-instance names (``1c.3g.20gb``): mig-parted counts *compute instances* (CIs):
``Flatten`` yields one item per count and ``SetMigConfig`` creates each CI in the GI created for
the previous item when it has the same GI profile and room, else in a new GI. We model this
conservatively: a GI of ``G`` compute slices holds ``G // C`` CIs of ``C`` slices, and CIs of
different sizes never share a GI, so ``n`` CIs need ``ceil(n / (G // C))`` GIs. mig-parted may
pack mixed CI sizes (``1c.3g`` with ``2c.3g``) tighter than we assume, so we may reject such a
mix that it would accept, never the reverse. Valid CI sizes per GI size are those NVIDIA lists
for A100-40GB in mig-parted ``pkg/mig/config/known_configs.go`` (1g: 1; 2g: 1, 2; 3g: 1-3;
4g: 1, 2, 4; 7g: 1-4, 7); we assume the same for the other 8-slice GPUs. ``3c.3g.20gb`` is the
same profile as ``3g.20gb`` (go-nvlib prints it without the prefix); counts of the two add up.

>>> parse_profile("1c.3g.20gb+me").gi_name
'3g.20gb+me'
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import combinations

from infra.catalog.models import Gpu, MigProfile, MigSpec

__all__ = [
    "GRAMMAR",
    "KNOWN_ATTRIBUTES",
    "FitResult",
    "ParsedProfile",
    "ResolvedProfile",
    "check_layout",
    "parse_profile",
    "resolve_profile",
]

KNOWN_ATTRIBUTES = frozenset({"me", "me.all", "gfx"})
"""Profile attributes a device exposes: media extensions, all media engines, graphics."""

GRAMMAR = "[<C>c.]<G>g.<M>gb[+attr,...|-attr]"
"""The profile-name grammar, as error messages quote it."""
_FIELDS = re.compile(r"([0-9]+c\.)?([0-9]+)g\.([0-9]+)gb")
# Compute-instance sizes a GPU instance of G compute slices offers (known_configs.go).
_CI_SIZES: dict[int, tuple[int, ...]] = {
    1: (1,),
    2: (1, 2),
    3: (1, 2, 3),
    4: (1, 2, 4),
    7: (1, 2, 3, 4, 7),
}
_R510 = 510


@dataclass(frozen=True)
class ParsedProfile:
    """A MIG profile name split into its parts.

    Attributes:
        compute_slices: ``C`` of the ``<C>c.`` prefix; equals ``gpu_slices`` without a prefix.
        gpu_slices: ``G``, the GPU instance's compute slices.
        memory_gb: ``M``, the GPU instance's memory as the name rounds it.
        attributes: sorted attributes after ``+`` or ``-``.
        negated: the attributes were given with ``-`` (``1g.24gb-me``: without media engines).
    """

    compute_slices: int
    gpu_slices: int
    memory_gb: int
    attributes: tuple[str, ...] = ()
    negated: bool = False

    @property
    def gi_name(self) -> str:
        """The GPU-instance profile name, without a compute-instance prefix (``3g.20gb+me``)."""
        suffix = ("-" if self.negated else "+") + ",".join(self.attributes)
        return f"{self.gpu_slices}g.{self.memory_gb}gb" + (suffix if self.attributes else "")

    @property
    def name(self) -> str:
        """The canonical name, as go-nvlib prints it (prefix only when ``C != G``)."""
        if self.compute_slices == self.gpu_slices:
            return self.gi_name
        return f"{self.compute_slices}c.{self.gi_name}"


@dataclass(frozen=True)
class ResolvedProfile:
    """A profile name resolved against one GPU.

    Attributes:
        profile: the GPU's GPU-instance profile the name refers to.
        parsed: the parsed name.
        per_instance: compute instances of this size one GPU instance holds (1 without prefix).
    """

    profile: MigProfile
    parsed: ParsedProfile
    per_instance: int


@dataclass(frozen=True)
class FitResult:
    """Whether MIG profile counts fit one GPU.

    Attributes:
        ok: the counts fit (no problems).
        placement: when ok, ``(GI profile name, start memory slice)`` pairs sorted by slot.
        problems: when not ok, one sentence per rule broken, with the values involved.
    """

    ok: bool
    placement: tuple[tuple[str, int], ...] = ()
    problems: tuple[str, ...] = ()


def parse_profile(name: str) -> ParsedProfile | None:
    """Parse a mig-parted profile string, or return ``None`` if it is not one.

    Args:
        name: e.g. ``1g.5gb``, ``1c.2g.10gb``, ``1g.5gb+me``, ``1g.24gb-me``, ``2g.48gb+me.all``.

    Returns:
        The parts, or ``None`` when the grammar ``[<C>c.]<G>g.<M>gb[+attr,...|-attr,...]`` is
        not met, ``+`` and ``-`` are mixed, or an attribute is unknown or repeated.

    >>> parse_profile("1g.24gb-me")
    ParsedProfile(compute_slices=1, gpu_slices=1, memory_gb=24, attributes=('me',), negated=True)
    >>> parse_profile("1g.5gb+foo") is None
    True
    """
    plus, minus = name.split("+", 1), name.split("-", 1)
    if len(plus) == 2 and len(minus) == 2:
        return None
    head, *rest = plus if len(plus) == 2 else minus
    match = _FIELDS.fullmatch(head)
    if match is None:
        return None
    attributes = rest[0].split(",") if rest else []
    if len(set(attributes)) != len(attributes) or not KNOWN_ATTRIBUTES.issuperset(attributes):
        return None
    gpu_slices = int(match.group(2))
    compute = int(match.group(1)[:-2]) if match.group(1) else gpu_slices
    return ParsedProfile(
        compute, gpu_slices, int(match.group(3)), tuple(sorted(attributes)), len(minus) == 2
    )


def resolve_profile(gpu: Gpu, name: str) -> ResolvedProfile | str:
    """Find the GPU-instance profile of ``gpu`` that ``name`` refers to.

    Args:
        gpu: a catalog GPU.
        name: a mig-parted profile string (with or without compute-instance prefix).

    Returns:
        The resolved profile, or a sentence saying why ``name`` is not a profile of ``gpu``.
    """
    parsed = parse_profile(name)
    if parsed is None:
        return f"{name!r} is not a MIG profile name (expected {GRAMMAR})"
    if gpu.mig is None:
        return f"{gpu.name} does not support MIG"
    key = parsed.gi_name
    profile = next((p for p in gpu.mig.profiles if _gi_key(p.name) == key), None)
    if profile is None:
        valid = ", ".join(p.name for p in gpu.mig.profiles)
        return f"profile {name} is not a MIG profile of {gpu.name} (valid: {valid})"
    sizes = _CI_SIZES.get(profile.compute_slices, (profile.compute_slices,))
    if parsed.compute_slices not in sizes:
        allowed = " or ".join(", ".join(str(s) for s in sizes).rsplit(", ", 1))
        unit = "slice" if sizes == (1,) else "slices"
        return (
            f"compute-instance profile {name} is not available on {gpu.name}: a "
            f"{profile.compute_slices}g GPU instance holds compute instances of {allowed} {unit}"
        )
    return ResolvedProfile(profile, parsed, profile.compute_slices // parsed.compute_slices)


def check_layout(
    gpu: Gpu, counts: Mapping[str, int], driver_branch: int | None = None
) -> FitResult:
    """Decide whether MIG profile counts fit on one GPU, and find a placement if they do.

    Args:
        gpu: a catalog GPU.
        counts: profile name -> count, as in a mig-parted ``mig-devices`` mapping. Zero counts
            are ignored; negative counts are a problem. Compute-instance names count compute
            instances (see the module docstring).
        driver_branch: NVIDIA driver branch (``535`` for 535.x), or ``None`` if unknown.

    Returns:
        ``FitResult(ok=True, placement=...)``, or ``ok=False`` with every problem found.
        The placement search runs only when the names, counts and limits are valid.
    """
    if gpu.mig is None:
        return FitResult(False, problems=(f"{gpu.name} does not support MIG",))
    demand, problems = _demand(gpu, counts)
    if not problems:
        problems = _limit_problems(gpu.mig, demand)
    placement = None
    if not problems:
        placement = _search(gpu.mig, demand)
        if placement is None:
            problems.append(_no_placement(gpu.mig, demand))
        else:
            problems = _compute_problems(gpu.mig, demand)
    problems += _driver_problems(gpu, demand, driver_branch)
    if problems:
        return FitResult(False, problems=tuple(problems))
    return FitResult(True, placement=placement or ())


def _gi_key(name: str) -> str:
    parsed = parse_profile(name)
    return parsed.gi_name if parsed is not None else name


def _demand(gpu: Gpu, counts: Mapping[str, int]) -> tuple[dict[str, int], list[str]]:
    """GPU instances needed per GI profile name, and the problems with names and counts."""
    problems: list[str] = []
    cis: dict[tuple[str, int], int] = {}
    for name, count in sorted(counts.items()):
        if count < 0:
            problems.append(f"count {count} for {name} is negative; counts must be 0 or more")
            continue
        if count == 0:
            continue
        resolved = resolve_profile(gpu, name)
        if isinstance(resolved, str):
            problems.append(resolved)
            continue
        key = (resolved.profile.name, resolved.per_instance)
        cis[key] = cis.get(key, 0) + count
    demand: dict[str, int] = {}
    for (gi_name, per_instance), n in cis.items():
        demand[gi_name] = demand.get(gi_name, 0) - (-n // per_instance)
    return demand, problems


def _limit_problems(mig: MigSpec, demand: Mapping[str, int]) -> list[str]:
    """Per-profile maxima and the GPU's instance limit."""
    problems: list[str] = []
    for profile in mig.profiles:
        n = demand.get(profile.name, 0)
        if n > profile.max_count:
            problems.append(
                f"{n} × {profile.name} exceeds the maximum of {profile.max_count} per GPU"
            )
    instances = sum(demand.values())
    if instances > mig.max_instances:
        problems.append(
            f"{instances} GPU instances exceed the GPU's maximum of {mig.max_instances}"
        )
    return problems


def _compute_problems(mig: MigSpec, demand: Mapping[str, int]) -> list[str]:
    """Compute slices in use against the full GPU's (a placement that fits memory may not)."""
    by_name = {p.name: p for p in mig.profiles}
    compute = sum(by_name[name].compute_slices * n for name, n in demand.items())
    full = max(p.compute_slices for p in mig.profiles)
    if compute > full:
        return [f"{compute} compute slices exceed the GPU's {full}"]
    return []


def _driver_problems(gpu: Gpu, demand: Mapping[str, int], driver_branch: int | None) -> list[str]:
    """MIG's first driver branch on this GPU, and the pre-R510 4g + 3g restriction."""
    if driver_branch is None or gpu.mig is None:
        return []
    problems: list[str] = []
    if driver_branch < gpu.mig.min_driver_branch:
        problems.append(
            f"MIG on {gpu.name} needs driver R{gpu.mig.min_driver_branch} or later "
            f"(got R{driver_branch})"
        )
    shapes = {(p.memory_slices, p.compute_slices) for p in gpu.mig.profiles if p.name in demand}
    if {(4, 4), (4, 3)} <= shapes and driver_branch < _R510:
        problems.append(f"4g + 3g on one GPU needs driver R{_R510} or later (got R{driver_branch})")
    return problems


def _search(mig: MigSpec, demand: Mapping[str, int]) -> tuple[tuple[str, int], ...] | None:
    """Exhaustive placement search: largest profiles first, failed states memoized.

    Each profile group places all its instances at once (a combination of its valid starts),
    so identical instances are never permuted; a state is (group index, used-slice bitmask).
    """
    by_name = {p.name: p for p in mig.profiles}
    groups = sorted(
        ((by_name[name], n) for name, n in demand.items() if n > 0),
        key=lambda g: (-g[0].memory_slices, -g[0].compute_slices, len(g[0].placements), g[0].name),
    )
    failed: set[tuple[int, int]] = set()

    def place(i: int, used: int) -> list[tuple[str, int]] | None:
        if i == len(groups):
            return []
        if (i, used) in failed:
            return None
        profile, n = groups[i]
        for starts, mask in _start_sets(profile, n, used, mig.memory_slots):
            rest = place(i + 1, used | mask)
            if rest is not None:
                return [(profile.name, s) for s in starts] + rest
        failed.add((i, used))
        return None

    found = place(0, 0)
    if found is None:
        return None
    return tuple(sorted(found, key=lambda item: (item[1], item[0])))


def _start_sets(
    profile: MigProfile, n: int, used: int, slots: int
) -> Iterator[tuple[tuple[int, ...], int]]:
    """Sets of ``n`` valid starts for ``profile`` that overlap neither each other nor ``used``."""
    width = (1 << profile.memory_slices) - 1
    free = [s for s in profile.placements if s + profile.memory_slices <= slots]
    free = [s for s in free if not used & (width << s)]
    for starts in combinations(free, n):
        mask = 0
        for s in starts:
            if mask & (width << s):
                break
            mask |= width << s
        else:
            yield starts, mask


def _no_placement(mig: MigSpec, demand: Mapping[str, int]) -> str:
    """The sentence for a layout whose instances cannot all be placed without overlap."""
    by_name = {p.name: p for p in mig.profiles}
    names = sorted(
        (name for name, n in demand.items() if n > 0),
        key=lambda name: (-by_name[name].memory_slices, -by_name[name].compute_slices, name),
    )
    parts = [name if demand[name] == 1 else f"{demand[name]} × {name}" for name in names]
    return (
        f"no non-overlapping placement exists for {' + '.join(parts)} "
        f"(memory slices 0–{mig.memory_slots - 1})"
    )
