"""Every integer option reads ASCII digits (and a leading '-') only, as the input files do.

typer reads an ``int`` option with Pydantic's lax rules, so ``--seed 1_0`` was 10, ``--gpus
+8`` 8, ``--global-batch 1.0`` 1 and ``--tp 2<U+00A0>`` 2, while the spec and the traces
refuse such numbers. Each is now a usage error (one line, exit 2), from one option builder
(`infra.cli.common.integer_option`), which every integer option of every command uses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer

from infra.cli import app, main
from infra.cli.common import integer_option

from .conftest import ROOT

SPEC = str(ROOT / "examples/dgx-a100-superpod.yaml")
NOT_INTEGERS = ["1_0", "+8", "1.0", "8\u00a0", " 8", "٣", "１２", "0x10", "8e0", ""]


def _integer_options() -> Iterator[tuple[str, str, object]]:
    command = typer.main.get_command(app)
    pending: list[tuple[list[str], object]] = [([], command)]
    while pending:
        path, node = pending.pop()
        for name, sub in getattr(node, "commands", {}).items():
            pending.append(([*path, name], sub))
        for param in getattr(node, "params", []) if not hasattr(node, "commands") else []:
            if param.type_descriptor.annotation is int:
                yield " ".join(path), param.opts[0], param.type_descriptor.parameter_info.parser


def test_every_integer_option_is_built_by_the_one_builder() -> None:
    found = list(_integer_options())
    assert len(found) >= 17, found  # predict, train, simulate, trace
    ours = integer_option().parser.__qualname__  # the builder's parser (a closure)
    others = [(c, o) for c, o, parser in found if getattr(parser, "__qualname__", None) != ours]
    assert others == []


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    _, err = capsys.readouterr()
    assert isinstance(exc.value.code, int)
    return exc.value.code, err


@pytest.mark.parametrize("value", NOT_INTEGERS)
@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", SPEC, "--trace", "t.csv", "--seed"],
        ["trace", SPEC, "--jobs"],
        ["predict", SPEC, "--collective", "all_reduce", "--gpus"],
        ["train", SPEC, "--gpus", "8", "--global-batch"],
        ["train", SPEC, "--gpus", "8", "--global-batch", "8", "--model", "gpt3-175b", "--tp"],
    ],
)
def test_an_integer_not_in_ascii_digits_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], value: str
) -> None:
    code, err = _run(capsys, *argv, value)
    assert code == 2, err
    assert err.count("\n") == 1 and f"invalid value for '{argv[-1]}'" in err, err


def test_bounds_are_still_checked_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "predict", SPEC, "--collective", "all_reduce", "--gpus", "1")
    assert code == 2 and "'--gpus': must be at least 2" in err, err
    code, err = _run(capsys, "trace", SPEC, "--jobs", "99999999")
    assert code == 2 and "'--jobs': must be at most 2,000,000" in err, err


def test_plain_integers_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(
        capsys, "predict", SPEC, "--collective", "all_reduce", "--gpus", "16", "--max-bytes", "1MiB"
    )
    assert code == 0, err
    code, err = _run(capsys, "trace", SPEC, "--jobs", "5", "--seed", "-3")
    assert code == 0, err
