"""Layouts the training frameworks refuse are refused by `railplan train` and never searched.

Megatron-LM's interleaved 1F1B needs at least PP micro-batches a step (Megatron-Core:
"should range in [PP, M]"; earlier releases asked for M divisible by PP); DeepSpeed's
pipeline engine refuses ZeRO-2 and ZeRO-3 ("incompatible with pipeline parallelism").
Before, `train --tp 8 --pp 4 --virtual 2` with 3 micro-batches printed a step, the search
picked PP 8 x4 with 5 micro-batches, and deepspeed-zero ran ZeRO-3 on PP 4.
"""

from __future__ import annotations

import json

import pytest

from .cli_run import run_cli
from .conftest import ROOT

SPEC = str(ROOT / "examples/dgx-h100-superpod.yaml")
GPT3 = ["--model", "gpt3-175b"]


def _train(*args: str) -> tuple[int, str, str]:
    result = run_cli("train", SPEC, *GPT3, *args)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize("batch", ["6", "4"])  # 3 and 2 micro-batches on PP 4
def test_interleaving_with_fewer_micro_batches_than_pp_is_refused(batch: str) -> None:
    code, _, err = _train(
        "--gpus", "64", "--global-batch", batch, "--micro-batch", "1",
        "--tp", "8", "--pp", "4", "--virtual", "2",
    )  # fmt: skip
    assert code == 2, err
    assert "need at least PP 4 micro-batches a step" in err and "[--virtual]" in err


def test_interleaving_with_as_many_micro_batches_as_pp_runs() -> None:
    code, out, err = _train(
        "--gpus", "64", "--global-batch", "8", "--micro-batch", "1",
        "--tp", "8", "--pp", "4", "--virtual", "2",
    )  # fmt: skip
    assert code == 0, err
    assert "PP 4 (x2 interleaved)" in out


@pytest.mark.parametrize(("gpus", "batch"), [("256", "40"), ("64", "6"), ("512", "96")])
def test_the_search_never_interleaves_fewer_micro_batches_than_pp(gpus: str, batch: str) -> None:
    code, out, err = _train("--gpus", gpus, "--global-batch", batch, "--format", "json")
    assert code in (0, 2), err
    if code == 0:
        answer = json.loads(out)
        if answer["virtual_stages"] > 1:
            assert answer["micro_batches"] >= answer["pp"], answer


def test_deepspeed_refuses_zero_3_with_pipeline_parallelism() -> None:
    code, _, err = _train(
        "--gpus", "64", "--global-batch", "64", "--tp", "8", "--pp", "4",
        "--zero", "3", "--stack", "deepspeed-zero",
    )  # fmt: skip
    assert code == 2, err
    assert "ZeRO-3 with PP 4" in err and "[--zero]" in err


def test_the_deepspeed_search_keeps_zero_below_2_on_a_pipeline() -> None:
    for pp in ("2", "4"):
        code, out, err = _train(
            "--gpus", "64", "--global-batch", "64", "--tp", "8", "--pp", pp,
            "--stack", "deepspeed-zero", "--format", "json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["zero"] <= 1
