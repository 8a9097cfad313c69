"""MIG profile parsing and layout fitting (infra.catalog.mig) on the four catalog GPUs."""

from __future__ import annotations

import itertools
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog.mig import FitResult, ParsedProfile, check_layout, parse_profile
from infra.catalog.models import Gpu, MigProfile

GPUS_YAML = Path(__file__).resolve().parents[1] / "infra" / "catalog" / "data" / "gpus.yaml"
GPU_IDS = ("a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm5-141gb")
# (memory slices, compute slices) of the plain (no +me) GPU-instance profiles.
SHAPES = {"1g": (1, 1), "1g2": (2, 1), "2g": (2, 2), "3g": (4, 3), "4g": (4, 4), "7g": (8, 7)}


@cache
def gpus() -> dict[str, Gpu]:
    data = yaml.safe_load(GPUS_YAML.read_text(encoding="utf-8"))
    return {key: Gpu.model_validate(value) for key, value in data["gpus"].items()}


def gpu(gpu_id: str) -> Gpu:
    return gpus()[gpu_id]


def profile(g: Gpu, shape: str) -> MigProfile:
    assert g.mig is not None
    memory, compute = SHAPES[shape]
    return next(
        p
        for p in g.mig.profiles
        if (p.memory_slices, p.compute_slices) == (memory, compute) and "+" not in p.name
    )


def counts_of(g: Gpu, layout: dict[str, int]) -> dict[str, int]:
    return {profile(g, shape).name: n for shape, n in layout.items()}


def assert_valid_placement(g: Gpu, demand: dict[str, int], result: FitResult) -> None:
    """The placement is non-overlapping, uses valid starts, respects maxima, matches counts."""
    assert g.mig is not None
    assert result.ok and not result.problems
    by_name = {p.name: p for p in g.mig.profiles}
    used = 0
    for name, start in result.placement:
        p = by_name[name]
        assert start in p.placements
        assert start + p.memory_slices <= g.mig.memory_slots
        mask = ((1 << p.memory_slices) - 1) << start
        assert not used & mask, f"{name}@{start} overlaps"
        used |= mask
    placed = Counter(name for name, _ in result.placement)
    assert placed == Counter({k: v for k, v in demand.items() if v > 0})
    assert all(placed[name] <= by_name[name].max_count for name in placed)
    assert sum(placed.values()) <= g.mig.max_instances
    assert sum(by_name[n].compute_slices * k for n, k in placed.items()) <= 7


# --- parse_profile -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("1g.5gb", ParsedProfile(1, 1, 5)),
        ("7g.141gb", ParsedProfile(7, 7, 141)),
        ("1c.2g.10gb", ParsedProfile(1, 2, 10)),
        ("3c.3g.20gb", ParsedProfile(3, 3, 20)),
        ("1g.5gb+me", ParsedProfile(1, 1, 5, ("me",))),
        ("1c.1g.5gb+me", ParsedProfile(1, 1, 5, ("me",))),
        ("2g.48gb+me.all", ParsedProfile(2, 2, 48, ("me.all",))),
        ("1g.24gb+gfx", ParsedProfile(1, 1, 24, ("gfx",))),
        ("1g.24gb-me", ParsedProfile(1, 1, 24, ("me",), negated=True)),
        ("1g.24gb+me,gfx", ParsedProfile(1, 1, 24, ("gfx", "me"))),
    ],
)
def test_parse_profile_accepts_the_mig_parted_grammar(name: str, expected: ParsedProfile) -> None:
    assert parse_profile(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1g",
        "1g5gb",
        "g.5gb",
        "1g.5",
        "1g.5GB",
        "1x.1g.5gb",
        "1c.1g.5gb.x",
        " 1g.5gb",
        "1g.5gb ",
        "1g.5gb+",
        "1g.5gb+me,",
        "1g.5gb+me,me",
        "1g.5gb+xyz",
        "1g.5gb+me-me",
        "1g.5gb-",
        "1.5g.5gb",
        "١g.5gb",  # a non-ASCII digit
    ],
)
def test_parse_profile_rejects_other_strings(name: str) -> None:
    assert parse_profile(name) is None


@pytest.mark.parametrize(
    ("name", "gi_name", "canonical"),
    [
        ("1c.3g.20gb", "3g.20gb", "1c.3g.20gb"),
        ("3c.3g.20gb", "3g.20gb", "3g.20gb"),
        ("1g.10gb+me", "1g.10gb+me", "1g.10gb+me"),
        ("1g.24gb-me", "1g.24gb-me", "1g.24gb-me"),
        ("01g.05gb", "1g.5gb", "1g.5gb"),  # Go's strconv.Atoi accepts leading zeros
    ],
)
def test_profile_names(name: str, gi_name: str, canonical: str) -> None:
    parsed = parse_profile(name)
    assert parsed is not None
    assert (parsed.gi_name, parsed.name) == (gi_name, canonical)


def test_catalog_profile_names_parse_and_match_their_slices() -> None:
    for g in gpus().values():
        assert g.mig is not None
        for p in g.mig.profiles:
            parsed = parse_profile(p.name)
            assert parsed is not None, p.name
            assert parsed.gpu_slices == p.compute_slices


# --- check_layout: valid layouts -----------------------------------------------------------

VALID_LAYOUTS = {
    "7x1g": {"1g": 7},
    "balanced": {"1g": 2, "2g": 1, "3g": 1},
    "4g+3g": {"4g": 1, "3g": 1},
    "3g+2g+1g+1g": {"3g": 1, "2g": 1, "1g": 2},
    "2g+5x1g": {"2g": 1, "1g": 5},
    "2x3g": {"3g": 2},
    "3x2g+1g": {"2g": 3, "1g": 1},
    "4x1g-2slice": {"1g2": 4},
    "7g": {"7g": 1},
    "4g+2g+1g": {"4g": 1, "2g": 1, "1g": 1},
}


@pytest.mark.parametrize("gpu_id", GPU_IDS)
@pytest.mark.parametrize("layout", VALID_LAYOUTS)
def test_valid_layouts_fit(gpu_id: str, layout: str) -> None:
    g = gpu(gpu_id)
    assert g.mig is not None
    counts = counts_of(g, VALID_LAYOUTS[layout])
    for driver in (None, max(510, g.mig.min_driver_branch), 550):
        result = check_layout(g, counts, driver)
        assert_valid_placement(g, counts, result)


@pytest.mark.parametrize("gpu_id", GPU_IDS)
def test_zero_counts_are_ignored(gpu_id: str) -> None:
    g = gpu(gpu_id)
    counts = {**counts_of(g, {"3g": 2}), profile(g, "7g").name: 0, "1g.999gb": 0}
    result = check_layout(g, counts)
    assert_valid_placement(g, {profile(g, "3g").name: 2}, result)
    assert check_layout(g, {}) == FitResult(True)


def test_guide_geometries_place_as_the_mig_user_guide_shows() -> None:
    g = gpu("a100-sxm4-40gb")
    result = check_layout(g, {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2})
    assert result.placement == (
        ("2g.10gb", 0),
        ("1g.5gb", 2),
        ("1g.5gb", 3),
        ("3g.20gb", 4),
    )
    assert check_layout(g, {"4g.20gb": 1, "3g.20gb": 1}).placement == (
        ("4g.20gb", 0),
        ("3g.20gb", 4),
    )


# --- check_layout: invalid layouts ---------------------------------------------------------

INVALID_LAYOUTS = {
    # name: (layout, driver, expected problem with {shape} placeholders for profile names)
    "8x1g": ({"1g": 8}, None, "8 GPU instances exceed the GPU's maximum of 7"),
    "8x1g-max": ({"1g": 8}, None, "8 × {1g} exceeds the maximum of 7 per GPU"),
    "3x3g": ({"3g": 3}, None, "3 × {3g} exceeds the maximum of 2 per GPU"),
    "4g+4g": ({"4g": 2}, None, "2 × {4g} exceeds the maximum of 1 per GPU"),
    "4x2g": ({"2g": 4}, None, "4 × {2g} exceeds the maximum of 3 per GPU"),
    "5x1g-2slice": ({"1g2": 5}, None, "5 × {1g2} exceeds the maximum of 4 per GPU"),
    "7g+1g": (
        {"7g": 1, "1g": 1},
        None,
        "no non-overlapping placement exists for {7g} + {1g} (memory slices 0–7)",
    ),
    "4g+2x2g": (
        {"4g": 1, "2g": 2},
        None,
        "no non-overlapping placement exists for {4g} + 2 × {2g} (memory slices 0–7)",
    ),
    "2x3g+1g": (
        {"3g": 2, "1g": 1},
        None,
        "no non-overlapping placement exists for 2 × {3g} + {1g} (memory slices 0–7)",
    ),
    "4g+3g@470": (
        {"4g": 1, "3g": 1},
        470,
        "4g + 3g on one GPU needs driver R510 or later (got R470)",
    ),
    "4g+3g@505": (
        {"4g": 1, "3g": 1},
        505,
        "4g + 3g on one GPU needs driver R510 or later (got R505)",
    ),
}


@pytest.mark.parametrize("gpu_id", GPU_IDS)
@pytest.mark.parametrize("case", INVALID_LAYOUTS)
def test_invalid_layouts_are_rejected_with_the_rule_broken(gpu_id: str, case: str) -> None:
    g = gpu(gpu_id)
    layout, driver, expected = INVALID_LAYOUTS[case]
    result = check_layout(g, counts_of(g, layout), driver)
    names = {shape: profile(g, shape).name for shape in SHAPES}
    assert not result.ok
    assert result.placement == ()
    assert expected.format(**names) in result.problems


@pytest.mark.parametrize("gpu_id", ["a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm5-141gb"])
@pytest.mark.parametrize("name", ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb", "1g.5gb+me"])
def test_a100_40gb_names_are_unknown_on_larger_gpus(gpu_id: str, name: str) -> None:
    g = gpu(gpu_id)
    assert g.mig is not None
    result = check_layout(g, {name: 1})
    valid = ", ".join(p.name for p in g.mig.profiles)
    assert result.problems == (f"profile {name} is not a MIG profile of {g.name} (valid: {valid})",)


@pytest.mark.parametrize(
    ("gpu_id", "names"),
    [
        ("a100-sxm4-40gb", ["1g.10gb+me", "1g.20gb", "1g.18gb", "7g.80gb"]),
        ("a100-sxm4-80gb", ["1g.18gb", "3g.71gb", "1g.12gb"]),
        ("h100-sxm5-80gb", ["1g.12gb", "3g.47gb", "7g.94gb"]),
        ("h200-sxm5-141gb", ["1g.10gb", "3g.40gb", "7g.80gb"]),
    ],
)
def test_other_gpus_names_are_unknown(gpu_id: str, names: list[str]) -> None:
    g = gpu(gpu_id)
    for name in names:
        result = check_layout(g, {name: 1})
        assert not result.ok
        assert result.problems[0].startswith(f"profile {name} is not a MIG profile of {g.name}")


def test_bad_names_and_negative_counts_are_problems() -> None:
    g = gpu("a100-sxm4-40gb")
    result = check_layout(g, {"1g.5bg": 1, "1g.5gb": -1, "2g.10gb": 1})
    assert not result.ok
    assert result.problems == (
        "'1g.5bg' is not a MIG profile name (expected [<C>c.]<G>g.<M>gb[+attr,...|-attr])",
        "count -1 for 1g.5gb is negative; counts must be 0 or more",
    )


@pytest.mark.parametrize(
    ("gpu_id", "driver", "ok"),
    [
        ("a100-sxm4-40gb", 450, True),
        ("a100-sxm4-40gb", 418, False),
        ("h100-sxm5-80gb", 525, True),
        ("h100-sxm5-80gb", 520, False),
        ("h200-sxm5-141gb", 550, True),
        ("h200-sxm5-141gb", 535, False),
    ],
)
def test_mig_needs_the_gpus_first_driver_branch(gpu_id: str, driver: int, ok: bool) -> None:
    g = gpu(gpu_id)
    assert g.mig is not None
    result = check_layout(g, counts_of(g, {"3g": 2}), driver)
    assert result.ok is ok
    if not ok:
        expected = (
            f"MIG on {g.name} needs driver R{g.mig.min_driver_branch} or later (got R{driver})"
        )
        assert result.problems == (expected,)


def test_me_profile_allows_one_instance() -> None:
    g = gpu("a100-sxm4-80gb")
    assert check_layout(g, {"1g.10gb+me": 1, "1g.10gb": 6}).ok
    result = check_layout(g, {"1g.10gb+me": 2})
    assert result.problems == ("2 × 1g.10gb+me exceeds the maximum of 1 per GPU",)


# --- compute-instance (`<C>c.`) names --------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "gis"),
    [
        ({"1c.3g.20gb": 6}, {"3g.20gb": 2}),  # 3 CIs per 3g GI (known_configs: max 6)
        ({"1c.3g.20gb": 4}, {"3g.20gb": 2}),
        ({"2c.3g.20gb": 2}, {"3g.20gb": 2}),  # one 2c CI per 3g GI (known_configs: max 2)
        ({"1c.2g.10gb": 6}, {"2g.10gb": 3}),
        ({"1c.4g.20gb": 4}, {"4g.20gb": 1}),
        ({"3c.7g.40gb": 2}, {"7g.40gb": 1}),
        ({"1c.7g.40gb": 7}, {"7g.40gb": 1}),
        ({"3c.3g.20gb": 1, "3g.20gb": 1}, {"3g.20gb": 2}),  # the same profile, counts add
        ({"1c.1g.5gb": 7}, {"1g.5gb": 7}),
        ({"1c.3g.20gb": 3, "1g.5gb": 4}, {"3g.20gb": 1, "1g.5gb": 4}),
    ],
)
def test_compute_instance_names_count_compute_instances(
    counts: dict[str, int], gis: dict[str, int]
) -> None:
    g = gpu("a100-sxm4-40gb")
    assert_valid_placement(g, gis, check_layout(g, counts))


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"1c.3g.20gb": 7}, "3 × 3g.20gb exceeds the maximum of 2 per GPU"),
        ({"2c.3g.20gb": 3}, "3 × 3g.20gb exceeds the maximum of 2 per GPU"),
        ({"3c.3g.20gb": 2, "3g.20gb": 1}, "3 × 3g.20gb exceeds the maximum of 2 per GPU"),
        (
            {"3c.4g.20gb": 1},
            (
                "compute-instance profile 3c.4g.20gb is not available on NVIDIA A100-SXM4-40GB: "
                "a 4g GPU instance holds compute instances of 1, 2 or 4 slices"
            ),
        ),
        (
            {"2c.1g.5gb": 1},
            (
                "compute-instance profile 2c.1g.5gb is not available on NVIDIA A100-SXM4-40GB: "
                "a 1g GPU instance holds compute instances of 1 slice"
            ),
        ),
    ],
)
def test_compute_instance_names_that_do_not_fit(counts: dict[str, int], expected: str) -> None:
    result = check_layout(gpu("a100-sxm4-40gb"), counts)
    assert not result.ok
    assert expected in result.problems


# --- property and exhaustive cross-checks --------------------------------------------------


@cache
def achievable(gpu_id: str, four_and_three: bool) -> frozenset[tuple[int, ...]]:
    """Every count vector (in catalog profile order) some non-overlapping placement gives.

    Independent of check_layout: enumerate every set of pairwise disjoint (profile, start)
    placements, then keep the vectors within the per-profile, instance and compute limits.
    """
    g = gpu(gpu_id)
    assert g.mig is not None
    profiles = g.mig.profiles
    candidates = [
        (i, ((1 << p.memory_slices) - 1) << s)
        for i, p in enumerate(profiles)
        for s in p.placements
        if s + p.memory_slices <= g.mig.memory_slots
    ]
    vectors: set[tuple[int, ...]] = set()

    def walk(k: int, used: int, counts: list[int]) -> None:
        if k == len(candidates):
            vectors.add(tuple(counts))
            return
        walk(k + 1, used, counts)
        i, mask = candidates[k]
        if not used & mask:
            counts[i] += 1
            walk(k + 1, used | mask, counts)
            counts[i] -= 1

    walk(0, 0, [0] * len(profiles))

    def allowed(v: tuple[int, ...]) -> bool:
        shapes = {
            (p.memory_slices, p.compute_slices) for p, n in zip(profiles, v, strict=True) if n
        }
        return (
            all(n <= p.max_count for p, n in zip(profiles, v, strict=True))
            and sum(v) <= g.mig.max_instances  # type: ignore[union-attr]
            and sum(p.compute_slices * n for p, n in zip(profiles, v, strict=True)) <= 7
            and (four_and_three or not {(4, 4), (4, 3)} <= shapes)
        )

    return frozenset(v for v in vectors if allowed(v))


@pytest.mark.parametrize("driver", [None, 470])
def test_check_layout_agrees_with_brute_force_on_every_a100_40gb_vector(
    driver: int | None,
) -> None:
    g = gpu("a100-sxm4-40gb")
    assert g.mig is not None
    profiles = g.mig.profiles
    expected = achievable("a100-sxm4-40gb", four_and_three=driver is None)
    vectors = itertools.product(*(range(p.max_count + 1) for p in profiles))
    checked = 0
    for vector in vectors:
        counts = {p.name: n for p, n in zip(profiles, vector, strict=True)}
        result = check_layout(g, counts, driver)
        assert result.ok == (vector in expected), (counts, result)
        if result.ok:
            assert_valid_placement(g, counts, result)
        checked += 1
    assert checked == 8 * 2 * 5 * 4 * 3 * 2 * 2


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fit_results_are_valid_placements(data: st.DataObject) -> None:
    gpu_id = data.draw(st.sampled_from(GPU_IDS))
    g = gpu(gpu_id)
    assert g.mig is not None
    vector = tuple(data.draw(st.integers(0, 8), label=p.name) for p in g.mig.profiles)
    counts = {p.name: n for p, n in zip(g.mig.profiles, vector, strict=True)}
    result = check_layout(g, counts)
    if result.ok:
        assert_valid_placement(g, counts, result)
    else:
        assert result.problems and result.placement == ()
    assert result.ok == (vector in achievable(gpu_id, four_and_three=True))
