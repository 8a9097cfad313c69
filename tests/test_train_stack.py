"""Named software stacks (`--stack`), their overrides, the budget's stack and batch, and the
commands docs/accuracy.md prints for each training row (run here through the CLI)."""

from __future__ import annotations

import json
import shlex
import statistics
import typing
from typing import Any

import pytest

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.budget.train_plan import train
from infra.budget.train_request import TrainRequest
from infra.budget.train_stack import DEFAULT_STACK, STACKS, resolve
from infra.catalog import Catalog
from infra.errors import InputError
from infra.spec import load_spec_text
from infra.spec.budgets import StackName
from infra.topology import expand
from tools.accuracy.train_accuracy import compare, load_rows, row_command

from .conftest import ROOT
from .test_cli import railplan

DATA = ROOT / "tests" / "data" / "training-measurements.yaml"
A100 = "tests/data/accuracy/a100-hdr.yaml"
# SC21 Table 1's 7.5B row (128 A100, TP 4): one layout timed under different stacks.
ROW_7B = (
    "train", A100, "--gpus", "128", "--global-batch", "512", "--layers", "36", "--hidden",
    "4096", "--heads", "32", "--vocab", "51200", "--tp", "4", "--pp", "1", "--micro-batch", "4",
    "--recompute", "full", "--zero", "0", "-f", "json",
)  # fmt: skip
METRIC = {
    "hardware TFLOP/s/GPU": "hardware_tflops_per_gpu",
    "model TFLOP/s/GPU": "model_tflops_per_gpu",
    "iteration s": "step_s",
}


def run_json(*args: str) -> dict[str, Any]:
    result = railplan(*args)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_every_preset_is_cited_and_the_spec_names_the_same_stacks() -> None:
    assert set(typing.get_args(StackName)) == set(STACKS)
    assert DEFAULT_STACK == "megatron-core-2024"
    for stack in STACKS.values():
        assert stack.source.startswith("["), stack.name  # a key of the module's Sources
    sc21 = STACKS["megatron-2021"]  # SC21: none of the 2022+ features
    assert not (sc21.fused_attention or sc21.sequence_parallel or sc21.distributed_optimizer)
    assert not (sc21.dp_overlap or sc21.fp8) and sc21.zero_stages == (0,)
    assert STACKS["deepspeed-zero"].zero_stages == (1, 2, 3)
    assert STACKS["nemo-2024"].recompute == "selective"


def test_megatron_2021_is_slower_than_megatron_core_on_the_same_layout() -> None:
    core = run_json(*ROW_7B)
    sc21 = run_json(*ROW_7B, "--stack", "megatron-2021")
    assert core["stack"] == "megatron-core-2024" and sc21["stack"] == "megatron-2021"
    assert sc21["step_s"] > 1.1 * core["step_s"]  # unfused attention, exposed DP all-reduce
    assert sc21["sequence_parallel"] is False and core["sequence_parallel"] is True
    assert abs(sc21["hardware_tflops_per_gpu"] / 142 - 1) < 0.05  # SC21 Table 1: 142


@pytest.mark.parametrize(
    ("flag", "slower"),
    [("--no-fused-attention", True), ("--no-dp-overlap", True), ("--no-sequence-parallel", None)],
)
def test_each_switch_overrides_the_preset_in_its_direction(flag: str, slower: bool | None) -> None:
    base = run_json(*ROW_7B, "--stack", "megatron-core-2024")
    changed = run_json(*ROW_7B, "--stack", "megatron-core-2024", flag)
    assert changed["stack"] == f"megatron-core-2024 + {flag.removeprefix('--')}"
    if slower:
        assert changed["step_s"] > base["step_s"]
    else:  # sequence parallelism off: norms and dropouts replicated on the TP ranks
        assert changed["memory_gb"]["activations"] > base["memory_gb"]["activations"]


def test_a_flag_turns_a_feature_on_over_an_older_stack() -> None:
    plain = run_json(*ROW_7B, "--stack", "megatron-2021")
    fused = run_json(*ROW_7B, "--stack", "megatron-2021", "--fused-attention")
    assert fused["stack"] == "megatron-2021 + fused-attention"
    assert fused["step_s"] < plain["step_s"]
    same = resolve("megatron-2021", fused_attention=False)  # no change: no override label
    assert same == STACKS["megatron-2021"] and same.label == "megatron-2021"
    assert resolve("megatron-2021", distributed_optimizer=True).zero_stages == (1,)
    assert resolve("deepspeed-zero", distributed_optimizer=False).zero_stages == (0,)


def test_text_names_the_stack_and_unknown_stacks_are_refused() -> None:
    text = railplan(*ROW_7B[:-2], "--stack", "nemo-2024")
    assert text.returncode == 0 and "software stack nemo-2024" in text.stdout
    bad = railplan(*ROW_7B[:-2], "--stack", "megatron-2020")
    assert bad.returncode != 0 and "unknown software stack" in bad.stderr
    assert "megatron-2021" in bad.stderr  # the spelling hint


def test_a_stack_without_fp8_refuses_fp8(catalog: Catalog) -> None:
    spec = load_spec_text("name: t\nnode_groups: [{name: g, node: dgx-h100, count: 2}]\n").spec
    from infra.budget.train_model import PRESETS
    from infra.spec.base import Precision

    request = TrainRequest(16, PRESETS["llama2-70b"], 16, precision=Precision.FP8)
    with pytest.raises(InputError, match="no FP8"):
        train(spec, catalog, TrainRequest(**{**request.__dict__, "stack": STACKS["megatron-2021"]}))


def budget_spec(extra: str, nodes: int = 140) -> str:
    return (
        f"name: t\nnode_groups: [{{name: dgx, node: dgx-a100-640gb, count: {nodes}}}]\n"
        f"budgets:\n  - scaling_efficiency: {{gpus: 1000, min: 0.5, model: gpt3-175b{extra}}}\n"
    )


def budget(text: str, catalog: Catalog) -> BudgetResult:
    spec = load_spec_text(text).spec
    (result,) = evaluate_budgets(spec, catalog, expand(spec, catalog))
    return result


def test_budget_refuses_a_stated_batch_no_layout_divides_as_train_does(catalog: Catalog) -> None:
    # GPT-3's published batch of 1,536 on 1,000 GPUs: it used to be rounded up to 1,625
    result = budget(budget_spec(", global_batch: 1536"), catalog)
    assert result.verdict == "error", result.detail
    assert result.path == "budgets[0].scaling_efficiency.global_batch"
    assert "nearest valid global batches: 1,500 or 1,625" in result.error_text
    cli = railplan(
        "train", "examples/dgx-a100-superpod.yaml", "--gpus", "1000", "--global-batch", "1536",
        "--model", "gpt3-175b",
    )  # fmt: skip
    assert cli.returncode != 0 and "nearest valid global batches: 1,500 or 1,625" in cli.stderr
    assert budget(budget_spec(", global_batch: 1500"), catalog).verdict != "error"


def test_a_batch_the_budget_does_not_state_is_the_nearest_valid_one_and_says_so(
    catalog: Catalog,
) -> None:
    """The preset's 1,536 on 1,000 GPUs: 1,500 (36 away) rather than 1,625, never silently."""
    result = budget(budget_spec(""), catalog)
    assert result.error == "", result.error
    assert "global batch 1,500: the nearest to 1,536 that 1,000 GPUs divide" in result.detail
    stated = budget(budget_spec(", global_batch: 1500"), catalog)
    assert stated.predicted == result.predicted and "nearest" not in stated.detail


def test_fixed_layout_batch_error_names_the_nearest_valid_batches() -> None:
    cli = railplan(
        "train", A100, "--gpus", "128", "--global-batch", "500", "--layers", "36", "--hidden",
        "4096", "--heads", "32", "--tp", "4", "--pp", "1", "--micro-batch", "4",
    )  # fmt: skip
    assert cli.returncode != 0  # DP 32 x micro-batch 4: multiples of 128
    assert "nearest valid global batches: 384 or 512" in cli.stderr


def test_budget_names_a_stack(catalog: Catalog) -> None:
    fixed = ", global_batch: 1536, tp: 8, pp: 8, micro_batch: 1, recompute: full"
    core = budget(budget_spec(fixed).replace("1000", "1024"), catalog)
    sc21 = budget(budget_spec(fixed + ", stack: megatron-2021").replace("1000", "1024"), catalog)
    assert core.error == sc21.error == ""
    assert "(stack megatron-2021)" in sc21.detail and "stack" not in core.detail
    assert sc21.predicted < core.predicted  # DP all-reduce exposed after the flush


def _predictions() -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    from infra.catalog import load_catalog

    for c in compare(load_rows(DATA), load_catalog()):
        out.setdefault(c.row_id, []).append((c.metric, c.predicted))
    return out


SAMPLE = (
    "megatron-7.5b", "megatron-76.1b", "megatron-t2-530b-1120", "korthikanti-175b",
    "mt-nlg-2800", "llama3-8192", "nemo-gpt3-175b-128", "zero3-175b-768",
    "mlperf-v40-gpt3-10752",
)  # fmt: skip


@pytest.mark.parametrize("row_id", SAMPLE)
def test_printed_command_reproduces_the_harness(row_id: str) -> None:
    data = load_rows(DATA)
    row = next(r for r in data["measurements"] if r["id"] == row_id)
    command = row_command(row, data["sources"])
    assert command is not None
    assert f"`{command} -f json`" in (ROOT / "docs" / "accuracy.md").read_text()
    answer = run_json(*shlex.split(command)[1:], "-f", "json")
    for metric, predicted in _predictions()[row_id]:
        assert answer[METRIC[metric]] == pytest.approx(predicted, rel=1e-4), metric


def test_cli_reproduces_sc21_tables_1_and_2_with_megatron_2021() -> None:
    """SC21 Table 1 and Table 2 (PTD-P) within 10 % median: a target the model must keep."""
    data = load_rows(DATA)
    errors = []
    for row in data["measurements"]:
        if row["source"] not in ("megatron-2021", "megatron-2021-table2"):
            continue
        command = row_command(row, data["sources"])
        assert command is not None and "--stack megatron-2021" in command
        answer = run_json(*shlex.split(command)[1:], "-f", "json")
        errors.append(abs(answer["hardware_tflops_per_gpu"] / row["hardware_tflops"] - 1))
    assert len(errors) == 16
    assert statistics.median(errors) < 0.10


def fits_budget(extra: str, catalog: Catalog) -> BudgetResult:
    return budget(
        "name: t\nnode_groups: [{name: dgx, node: dgx-a100-640gb, count: 140}]\n"
        f"budgets:\n  - model_fits: {{model_params: 174.6e9, gpus: 1024, zero_stage: 1{extra}}}\n",
        catalog,
    )


def test_model_fits_splits_weights_over_tp_and_pp_as_train_does(catalog: Catalog) -> None:
    """The issue's case: ZeRO-1 ignoring TP/PP said ~700 GB per GPU where train says ~24."""
    from infra.budget.train_model import PRESETS, memory_per_gpu
    from infra.spec.base import Precision

    flat = fits_budget("", catalog)
    assert flat.predicted > 600  # all weights and gradients on every GPU: no fit
    acts = ", activations: {seq_len: 2048, micro_batch: 1, hidden: 12288, layers: 12, heads: 96"
    split = fits_budget(", tp: 8, pp: 8" + acts + ", recompute: selective}", catalog)
    assert "TP 8 x PP 8 x CP 1" in split.detail and split.predicted < 80
    gpu = catalog.gpus[catalog.nodes["dgx-a100-640gb"].gpu]
    shape = PRESETS["gpt3-175b"]
    train_mem = memory_per_gpu(shape, gpu, Precision.BF16, (8, 8, 16, 1, 1), "selective", 1)
    # the budget knows only model_params and per-stage layers (no embedding on stage 1):
    # within 5 % of train's first stage, activations exactly
    assert split.predicted == pytest.approx(train_mem.total / 1e9, rel=0.05)
    no_acts = fits_budget(", tp: 8, pp: 8", catalog)
    assert split.predicted - no_acts.predicted == pytest.approx(train_mem.activations / 1e9)


def test_model_fits_refuses_a_split_that_does_not_divide(catalog: Catalog) -> None:
    result = fits_budget(", tp: 8, pp: 3", catalog)
    assert result.verdict == "error" and result.path == "budgets[0].model_fits.gpus"
