"""Each training stack's own pipeline rules (`infra.budget.train_rules`): a layout the stack's
code refuses is refused when the user fixes it and never picked by the search.

1. Interleaving at PP 2: Megatron-LM v2.6 asserts PP > 2; Megatron-Core (overlapped P2P, its
   default) and NeMo 24.07's Megatron-Core accept PP 2.
2. Uneven stages: Megatron-LM v2.6 and NeMo 24.07 need PP to divide the layers; Megatron-Core
   and DeepSpeed split them unevenly.
3. Interleaving's micro-batches: a multiple of PP on Megatron-LM v2.6 and NeMo 24.07, at
   least PP on Megatron-Core since core_v0.10.0.
4. DeepSpeed's PipelineEngine has no interleaved schedule (the search picked "x4" layouts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.budget.cluster import BudgetError
from infra.budget.train_job import Layout
from infra.budget.train_model import PRESETS
from infra.budget.train_plan import build_job, train
from infra.budget.train_request import TrainRequest, model_shape
from infra.budget.train_rules import check_layout
from infra.budget.train_stack import STACKS
from infra.catalog import Catalog
from infra.errors import InputError
from infra.spec import Spec, load_spec_text

from .test_cli import railplan

CLUSTER = "name: t\nnode_groups: [{name: gpu, node: dgx-h100, count: 16}]\n"
LLAMA = PRESETS["llama2-70b"]  # 80 layers, 64 heads
SHAPE_70 = model_shape(None, layers=70, hidden=8192, heads=64)  # 70 layers: uneven on PP 4


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec_text(CLUSTER).spec


def refused(spec: Spec, catalog: Catalog, request: TrainRequest) -> InputError:
    with pytest.raises(InputError) as caught:
        train(spec, catalog, request)
    return caught.value


def ask(stack: str, **fixed: int) -> TrainRequest:
    batch = fixed.pop("batch", 256)
    shape = SHAPE_70 if fixed.pop("uneven", 0) else LLAMA
    return TrainRequest(128, shape, batch, stack=STACKS[stack], **fixed)  # type: ignore[arg-type]


# --- 1. interleaving at PP 2 ------------------------------------------------------------------


def test_megatron_2021_refuses_interleaving_at_pp_2(spec: Spec, catalog: Catalog) -> None:
    error = refused(spec, catalog, ask("megatron-2021", tp=8, pp=2, virtual=2, micro_batch=1))
    assert error.path == "--virtual"
    assert "megatron-2021" in error.message and "PP 3 or more" in error.message
    assert "greater than 2 with interleaved schedule" in error.message  # the assert it cites
    assert "--virtual 1 with --pp 2" in error.hint and "--pp 4" in error.hint  # nearest PP


@pytest.mark.parametrize("stack", ["megatron-core-2024", "nemo-2024"])
def test_megatron_core_and_nemo_interleave_at_pp_2(
    spec: Spec, catalog: Catalog, stack: str
) -> None:
    answer = train(spec, catalog, ask(stack, tp=8, pp=2, virtual=2, micro_batch=1))
    assert (answer.result.layout.pp, answer.result.layout.virtual) == (2, 2)


def test_megatron_2021_interleaves_at_pp_4(spec: Spec, catalog: Catalog) -> None:
    answer = train(spec, catalog, ask("megatron-2021", tp=8, pp=4, virtual=2, micro_batch=1))
    assert (answer.result.layout.pp, answer.result.layout.virtual) == (4, 2)


# --- 2. uneven stages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "cites"),
    [("megatron-2021", "Megatron-LM v2.6"), ("nemo-2024", "NeMo 24.07")],
)
def test_uneven_stages_are_refused_where_the_stack_divides(
    spec: Spec, catalog: Catalog, stack: str, cites: str
) -> None:
    error = refused(spec, catalog, ask(stack, tp=8, pp=4, uneven=1, micro_batch=1))
    assert error.path == "--pp" and stack in error.message and cites in error.message
    assert "70 layers into uneven stages" in error.message
    assert "nearest PP that divides them: --pp 2" in error.hint  # 70 = 2 x 35; 128 GPUs


@pytest.mark.parametrize("stack", ["megatron-core-2024", "deepspeed-zero"])
def test_uneven_stages_run_on_megatron_core_and_deepspeed(
    spec: Spec, catalog: Catalog, stack: str
) -> None:
    answer = train(spec, catalog, ask(stack, tp=8, pp=4, uneven=1, micro_batch=1, virtual=1))
    assert answer.result.layout.pp == 4


def test_even_stages_pass_on_megatron_2021(spec: Spec, catalog: Catalog) -> None:
    answer = train(spec, catalog, ask("megatron-2021", tp=8, pp=2, uneven=1, micro_batch=1))
    assert answer.result.layout.pp == 2


# --- 3. interleaving's micro-batches ----------------------------------------------------------

# TP 8 x PP 4 on 128 GPUs: DP 4; global batch 24 at micro-batch 1 is 6 micro-batches a step.


@pytest.mark.parametrize("stack", ["megatron-2021", "nemo-2024"])
def test_interleaving_needs_a_multiple_of_pp_micro_batches(
    spec: Spec, catalog: Catalog, stack: str
) -> None:
    error = refused(spec, catalog, ask(stack, tp=8, pp=4, virtual=2, micro_batch=1, batch=24))
    assert error.path == "--virtual" and stack in error.message
    assert "a multiple of PP 4 micro-batches" in error.message and "gives 6" in error.message
    assert "global batch 16 or 32" in error.hint and "--virtual 1" in error.hint
    answer = train(spec, catalog, ask(stack, tp=8, pp=4, virtual=2, micro_batch=1, batch=32))
    assert (answer.result.micro_batches, answer.result.layout.virtual) == (8, 2)


def test_megatron_core_needs_only_pp_micro_batches(spec: Spec, catalog: Catalog) -> None:
    request = ask("megatron-core-2024", tp=8, pp=4, virtual=2, micro_batch=1, batch=24)
    assert train(spec, catalog, request).result.micro_batches == 6  # N = M = 6 >= PP 4
    error = refused(spec, catalog, ask("megatron-core-2024", tp=8, pp=4, virtual=2,
                                       micro_batch=1, batch=12))  # fmt: skip
    assert "at least PP 4 micro-batches" in error.message and "gives 3" in error.message


# --- 4. DeepSpeed has no interleaved schedule -------------------------------------------------


def test_deepspeed_refuses_interleaving(spec: Spec, catalog: Catalog) -> None:
    error = refused(spec, catalog, ask("deepspeed-zero", tp=2, pp=4, virtual=4, micro_batch=1))
    assert error.path == "--virtual"
    assert "deepspeed-zero has no interleaved pipeline schedule" in error.message
    assert "DeepSpeed v0.16.4" in error.message and "--virtual 1" in error.hint
    job = build_job(spec, catalog, ask("deepspeed-zero"))[0]
    with pytest.raises(InputError, match="no interleaved"):
        check_layout(job, Layout(2, 4, 16, 1, virtual=4, zero=1))  # the search's old pick
    check_layout(job, Layout(2, 4, 16, 1, virtual=1, zero=1))


# --- the search never picks what the stack refuses --------------------------------------------


def obeys(stack: str, layers: int, layout: Layout, micro_batches: int) -> bool:
    """The stacks' rules, written out independently of `train_rules`."""
    if layout.virtual == 1:
        return stack not in ("megatron-2021", "nemo-2024") or layers % layout.pp == 0
    least = {"megatron-2021": 3, "megatron-core-2024": 2, "nemo-2024": 2}.get(stack)
    if least is None or layout.pp < least or layers % layout.pp:
        return False
    if stack in ("megatron-2021", "nemo-2024"):
        return micro_batches % layout.pp == 0
    return micro_batches >= layout.pp


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize(
    ("gpus", "model", "batch"),
    [(128, "llama2-70b", 256), (128, "gpt3-175b", 1540), (120, "llama2-70b", 120)],
)
def test_the_search_picks_only_what_the_stack_runs(
    spec: Spec, catalog: Catalog, stack: str, gpus: int, model: str, batch: int
) -> None:
    shape = PRESETS[model]
    try:
        answer = train(spec, catalog, TrainRequest(gpus, shape, batch, stack=STACKS[stack]))
    except BudgetError as exc:  # nothing fits on this stack: it picked nothing it refuses
        assert "fits in memory" in exc.message or "no layout" in exc.message
        return
    result = answer.result
    assert obeys(stack, shape.layers, result.layout, result.micro_batches), result.layout
    if answer.other is not None:
        other = answer.other.result
        assert obeys(stack, shape.layers, other.layout, other.micro_batches), other.layout


def test_the_cli_says_which_stack_refuses_and_why(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(CLUSTER)
    args = ["--gpus", "128", "--model", "llama2-70b", "--global-batch", "256"]
    cli = railplan("train", str(tmp_path / "s.yaml"), *args, "--tp", "2", "--pp", "4",
                   "--virtual", "4", "--stack", "deepspeed-zero")  # fmt: skip
    assert cli.returncode == 2 and cli.stdout == "", cli
    assert cli.stderr.count("\n") == 1 and "[--virtual]" in cli.stderr
    assert "deepspeed-zero" in cli.stderr and "hint: use --virtual 1" in cli.stderr
