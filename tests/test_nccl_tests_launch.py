"""nccl-tests' launch mode: one thread driving N GPUs (-g N) against one process per GPU.

The term (`infra.budget.nccl_tests_launch`) is the benchmark's, not the cluster's: an
iteration takes the longer of the GPUs' time and N serial launches on the one thread. More
GPUs per thread can never make a row faster, and one GPU per thread is `predict` itself. The
data file records the mode per row (``gpus_per_process``) and per source (``launch``,
``launch_stated``), and the report marks the rows whose source does not state it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.collectives import COLLECTIVES, CommTopology, bus_factor, predict
from infra.budget.nccl_tests_launch import (
    NCCL_TESTS_LAUNCH_US_PER_GPU,
    as_measured,
    launch_floor_us,
)
from infra.catalog import Catalog
from tools.accuracy.calibration import (
    accuracy_markdown,
    compare_rows,
    gpus_per_thread,
    launch_stated,
    load_measurements,
)

from .conftest import TESTS

MEASUREMENTS = load_measurements(TESTS / "data" / "nccl-measurements.yaml")
TOPOLOGIES = (
    CommTopology("ampere", 8, 1, True, 12, 0, 0, "amd", False),
    CommTopology("hopper", 8, 1, True, 18, 0, 0, "intel", False),
    CommTopology("ampere", 8, 2, True, 12, 8, 200, "amd", False),
    CommTopology("hopper", 4, 4, True, 18, 8, 400, "intel", False),
)


@settings(max_examples=80, deadline=None)
@given(
    topology=st.sampled_from(TOPOLOGIES),
    collective=st.sampled_from(COLLECTIVES),
    exponent=st.integers(min_value=0, max_value=34),
    gpus=st.integers(min_value=1, max_value=16),
)
def test_more_gpus_per_thread_is_never_faster_and_one_is_predict(
    topology: CommTopology, collective: str, exponent: int, gpus: int
) -> None:
    model = predict(topology, collective, 2**exponent)  # type: ignore[arg-type]
    factor = bus_factor(collective, topology.ranks)  # type: ignore[arg-type]
    assert as_measured(model, 1, factor) == model
    fewer, more = as_measured(model, gpus, factor), as_measured(model, gpus + 1, factor)
    assert model.time_us <= fewer.time_us <= more.time_us
    assert more.busbw_GBps <= fewer.busbw_GBps <= model.busbw_GBps


def test_the_floor_is_n_serial_launches() -> None:
    assert launch_floor_us(1) == 0.0
    assert launch_floor_us(8) == 8 * NCCL_TESTS_LAUNCH_US_PER_GPU
    # One launch hides behind any collective: NCCL's smallest latency is Ring/LL's 6.6 us.
    assert NCCL_TESTS_LAUNCH_US_PER_GPU < 6.6


def test_every_source_states_or_assumes_its_launch_mode() -> None:
    sources = MEASUREMENTS["sources"]
    assert all(
        isinstance(s.get("launch_stated"), bool) and s.get("launch") for s in sources.values()
    )
    for row in MEASUREMENTS["measurements"]:
        text = sources[row["source"]]["launch"]
        if gpus_per_thread(row) > 1:
            assert "-g" in text and launch_stated(row, sources)
        elif not launch_stated(row, sources):
            assert "assumed one process per GPU" in text


def test_the_report_marks_assumed_launch_modes(catalog: Catalog) -> None:
    doc = accuracy_markdown(MEASUREMENTS, catalog)
    sources = MEASUREMENTS["sources"]
    assumed = [c for c in compare_rows(MEASUREMENTS, catalog) if not launch_stated(c.row, sources)]
    assert assumed and doc.count("| 1 (assumed) |") >= len(assumed)
    assert "| held out | nccl-2355 | a100-sxm4-80gb | 1 x 8 | all_reduce | 1048576 | 1 |" in doc
