"""What keeps planning and rendering a large cluster linear and lean, checked on small ones.

The bench (`make bench`, case render:16384) has the figures; these tests hold the causes:
each cable kept in a few hundred bytes, the rendered tree held once (bytes, not text and
bytes), the compute cables listed once for the fabric files, one upper-tier wiring for
every plane, and the fast paths (record constructor, joined CSV) giving exactly what the
slow ones give.
"""

from __future__ import annotations

import csv
import dataclasses
import gc
import io
import pickle
import sys
import tracemalloc
from ipaddress import IPv4Address
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra.catalog import Catalog
from infra.gc_pause import paused_gc
from infra.render import sheets
from infra.render.fabric_validators import CVT_HEADER, _Ends, cable_validation_csv, fabric_files
from infra.render.tree import render_tree
from infra.spec import Spec, load_spec_text
from infra.topology import compute, expand
from infra.topology.addressing import dotted
from infra.topology.geometry import cable_length, rack_places
from infra.topology.model import Cable, Plan
from infra.topology.record_maker import maker

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _spec(servers: int, planes: int) -> Spec:
    """The bench's own render spec, at a test's size."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    from run import plan_spec

    return load_spec_text(plan_spec(servers, planes).replace("sharp: true", "sharp: false")).spec


def test_a_plan_keeps_each_cable_in_a_few_hundred_bytes(catalog: Catalog) -> None:
    spec = _spec(512, 2)
    expand(spec, catalog)  # caches and imports outside the measure
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        plan = expand(spec, catalog)
        kept = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    # 415 bytes when every cable stored its id and its own port and length objects
    assert kept / len(plan.cables) < 300


def test_the_rendered_tree_is_never_held_twice(catalog: Catalog) -> None:
    spec = _spec(512, 2)
    plan = expand(spec, catalog)
    render_tree(spec, catalog, plan)  # templates and roles loaded outside the measure
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tree = render_tree(spec, catalog, plan)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    # 2.09 times the tree when every text was kept until all were encoded
    assert peak / sum(map(len, tree.values())) < 1.8


def test_fabric_files_list_the_compute_cables_once(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(64, 2)
    plan = expand(spec, catalog)
    listed = []
    cables_in = Plan.cables_in

    def counted(self: Plan, fabric: str, tier: str | None = None) -> list[Cable]:
        listed.append(fabric)
        return cables_in(self, fabric, tier)  # type: ignore[arg-type]

    monkeypatch.setattr(Plan, "cables_in", counted)
    files = fabric_files(plan, spec, catalog)
    assert {"topology.topo", "cable-validation.csv", "ibsim.net"} <= set(files)
    assert listed == ["compute"]


def test_every_plane_is_wired_from_one_upper_tier_wiring(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    wire = compute.wire_upper_tiers

    def counted(*args: object) -> object:
        calls.append(args)
        return wire(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(compute, "wire_upper_tiers", counted)
    plan = expand(_spec(256, 8), catalog)
    assert plan.fabrics["compute"].planes == 8
    assert len(calls) == 1


def test_what_a_paused_stage_keeps_is_old_at_once() -> None:
    """Left young, a plan built with the collector paused was walked by the next young
    collections: 0.2 s of a 16,384-server render, every one of them finding nothing."""
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    with paused_gc():
        kept = [[n] for n in range(1000)]
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(k) in oldest for k in kept)
    del kept[:]  # still collectable: old, not frozen
    assert gc.get_freeze_count() == 0


def test_made_records_are_the_records_the_class_makes() -> None:
    make = maker(Cable)
    values = ("compute", "node_leaf", "n1", "mlx5_0", "leaf", "7", 400.0, "r1", 3, "r2", 40)
    made, plain = make(*values, "dac", 1.5), Cable(*values, "dac", 1.5)
    assert type(made) is Cable
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert made.id == "n1:mlx5_0" and pickle.loads(pickle.dumps(made)) == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = "n2"  # type: ignore[misc]


def test_only_plain_frozen_slotted_records_get_a_fast_maker() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            assert self.a > 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Defaulted:
        a: int = 1

    for cls in (NoSlots, Mutable, Checked, Defaulted):
        with pytest.raises(TypeError, match="not a plain frozen, slotted dataclass"):
            maker(cls)


def test_a_made_record_takes_its_fields_in_order_and_refuses_the_makers_names() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Pair:
        b: str
        a: int

    made = maker(Pair)("x", 2)
    assert type(made) is Pair and made == Pair("x", 2) and (made.b, made.a) == ("x", 2)
    with pytest.raises(TypeError, match="missing"):
        maker(Pair)("x")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Clashing:
        _record_: int

    with pytest.raises(TypeError, match="the maker's own variables"):
        maker(Clashing)


@pytest.mark.parametrize(
    "cell",
    ["plain", "", "a,b", 'say "hi"', "two\nlines", "carriage\rreturn", " spaced ", "é"],
)
def test_joined_sheets_are_what_csv_writer_writes(cell: str) -> None:
    header = ("first", "second", "third")
    rows = [("a", cell, "c"), (cell, "", "z"), ("1", "2", "3")]
    joined = sheets.joined_csv(header, [",".join(row) for row in rows], lambda: rows)
    assert joined == sheets._csv(header, rows, raw=True)


@pytest.mark.parametrize("subnet_manager", ["opensm", "ufm"])
def test_the_cvt_sheet_is_what_csv_writer_writes_of_each_end(
    catalog: Catalog, subnet_manager: str
) -> None:
    """The sheet's rows are written out in one loop; each end as `_Ends.cvt_port` names it."""
    spec = _spec(60, 2)  # a free slot in the second SU, for the UFM appliance
    spec = spec.model_copy(
        update={
            "fabrics": spec.fabrics.model_copy(
                update={
                    "compute": spec.fabrics.compute.model_copy(  # type: ignore[union-attr]
                        update={"subnet_manager": subnet_manager}
                    )
                }
            )
        }
    )
    plan = expand(spec, catalog)
    cables = plan.cables_in("compute")
    port = _Ends.of(plan, catalog).cvt_port
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CVT_HEADER)
    for c in cables:
        writer.writerow(
            [
                c.a_rack,
                c.a_unit,
                c.a,
                port(c.a, c.a_port),
                c.b_rack,
                c.b_unit,
                c.b,
                port(c.b, c.b_port),
            ]
        )
    assert cable_validation_csv(plan, catalog, cables) == out.getvalue()
    # the UFM appliance's ports keep their planned names: a device with no rails
    ufm = any(compute.UFM_HOST in (c.a, c.b) for c in cables)
    assert ufm is (subnet_manager == "ufm")


@pytest.mark.parametrize("address", [0, 1, 255, 256, 65535, 167772161, 3232235777, 2**32 - 1])
def test_dotted_addresses_are_what_ipaddress_writes(address: int) -> None:
    assert dotted(address) == str(IPv4Address(address))


def test_cable_lengths_written_out_are_the_measured_ones(catalog: Catalog) -> None:
    """`finish_cables` sums each length inline; `geometry.cable_length` gives the same.

    The SuperPOD example has PDUs as A ends (measured half-way up their rack), storage
    ports with no rack (no length) and cables inside one rack and between racks.
    """
    root = Path(__file__).resolve().parent.parent
    spec = load_spec_text((root / "examples/dgx-h100-superpod.yaml").read_text()).spec
    plan = expand(spec, catalog)
    racks = {r.name: r for r in plan.racks}
    places = rack_places(
        ((r.name, r.row, r.position, r.units) for r in plan.racks),
        list(dict.fromkeys(["core", *(r.row for r in plan.racks)])),
        spec.site.layout,
    )
    pdus = {p.name for p in plan.pdus}
    kinds = {"inside": 0, "between": 0, "pdu": 0, "none": 0}
    for c in plan.cables:
        a_unit = racks[c.a_rack].units // 2 if c.a in pdus and c.a_rack else c.a_unit
        want = cable_length((c.a_rack, a_unit), (c.b_rack, c.b_unit), places, spec.site.layout)
        assert c.length_m == want, c
        kind = "none" if want is None else "pdu" if c.a in pdus else "between"
        kinds["inside" if want is not None and c.a_rack == c.b_rack else kind] += 1
    assert all(kinds.values()), kinds


def test_transceivers_of_one_device_are_counted_across_runs_of_cables(catalog: Catalog) -> None:
    """A twin-port switch's optical ends of one fabric and rate share cages wherever its
    cables stand in the plan: the spine's two ends, in two runs of cables, are one transceiver."""
    values = ("compute", "leaf_spine", "leaf", "1", "spine", "1", 400.0, "r1", 1, "r2", 1)
    other = ("storage", "node_leaf", "n1", "s0", "st-leaf", "1", 400.0, "r1", 2, "r3", 1)
    plan = SimpleNamespace(
        switches=[
            SimpleNamespace(name=n, model="qm9700") for n in ("leaf", "leaf2", "spine", "st-leaf")
        ],
        servers=[SimpleNamespace(name="n1", node="dgx-a100")],
        cables=[
            Cable(*values, "optical", 30.0),
            Cable(*other, "optical", 30.0),
            Cable(*values[:2], "leaf2", "1", "spine", "2", *values[6:], "optical", 30.0),
        ],
    )
    counts = sheets._transceivers(plan, catalog)  # type: ignore[arg-type]
    assert counts == {
        ("compute", "twin-port OSFP transceiver", 400.0): 3,  # leaf, leaf2, spine (2 ends)
        ("storage", "twin-port OSFP transceiver", 400.0): 1,  # st-leaf
        ("storage", "single-port transceiver", 400.0): 1,  # n1, a DGX A100
    }
