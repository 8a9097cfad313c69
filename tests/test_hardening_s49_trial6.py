"""Breaks the sixth hostile trial found (session 49, issue 36), one test per cause.

1. Cron and time-zone load errors carried no hint: a validator's ValueError could not give
   one (`HintedValueError`); a cron schedule now says which field robfig/cron refuses and a
   zone what it probably means.
2. Numbers YAML 1.1 (railplan's reader) and YAML 1.2 (editors, yaml-language-server) read
   differently were taken silently: `count: 010` planned 8 servers (10 in the editor),
   `first_index: 010` numbered from 8, `count: 1:30` planned 90 (base 60). Refused, located.
3. A model preset and a shape together: the preset won silently (`train --model gpt3-175b
   --layers 2 ...` and a scaling_efficiency budget with `model` and `layers` timed GPT-3 175B).
   Refused: the CLI exits 2, the spec is a located RP000 error.
4. `plan --cabling A --bom B` with B's file system full: exit 2 with A already replaced (half
   a set of outputs). The outputs are now staged whole before the first is renamed into place
   (`write_atomic_all`); seen on a real full tmpfs by the trial (IO6-14), simulated here. A
   signal between two renames (SIGHUP to plan, SG6-03) waits until the last one is done.
5. Kubernetes names lint passed that the consumer refuses: a tenant's `clients.cidrs` with an
   IPv6 zone (`fe80::%eth0/64`: Python's ip_network takes it, a NetworkPolicy ipBlock does
   not) and `monitoring.prometheus_release` outside Helm's release-name rule (`Kube_Prom`,
   63 characters: no Helm release has that name, so the `release:` label matched nothing).
6. Ctrl-C early: SIGINT while `infra.cli` imported (before `main` set its handlers) printed a
   KeyboardInterrupt traceback; SIGINT while pydantic built a model's schema (a command's
   lazy import) came back wrapped in pydantic's SchemaError and was reported as a railplan
   bug (exit 3, 17 lines); SIGINT raised inside a weakref callback (importlib's module lock)
   printed "Exception ignored" with a traceback and lint went on to exit 0. Now one line and
   exit 130 in every window.
7. A MIG layout named `disabled`: `mig: disabled` means MIG off, so the layout was dropped
   (nothing rendered it) while RP015 counted it as used: the group silently had no MIG. The
   name is reserved like `all-disabled`.
"""

from __future__ import annotations

import errno
import gc
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from infra import files, signals
from infra.budget.train_request import model_shape
from infra.cli import process
from infra.errors import InputError
from infra.spec import SpecValidationError, load_spec_text

from .cli_run import ROOT, run_cli

SCHEDULED = (
    "name: lab\nfabrics: {compute: {switch: qm8700, su_size: 4}}\nscheduler: {kind: kubernetes}\n"
    "mig_layouts: {small: {profiles: {'1g.10gb': 7}}}\nnode_groups:\n"
    "  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n    hostname: 'infer{index:02d}'\n"
    "    mig_schedule:\n      timezone: Europe/Berlin\n      changes:\n"
    "        - {at: '0 7 * * 1-5', mig: small}\n        - {at: '0 21 * * *', mig: disabled}\n"
)


def _only_error(text: str) -> tuple[str, str, str]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    return error.path, error.message, error.hint or ""


# --- 1. cron and time-zone errors with a hint ---------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("0 7 * * 1-8", "day-of-week '1-8'"),
        ("0 24 * * *", "hour '24'"),
        ("0 7 ? * *", "day-of-month '?'"),
        ("0 7 * *", "4 fields"),
        ("@daily ", "a macro stands alone"),
        ("@Daily", "a macro stands alone"),
        ("CRON_TZ=UTC 0 7 * * *", "set mig_schedule.timezone"),
    ],
)
def test_a_bad_cron_schedule_gets_a_hint_naming_what_to_fix(schedule: str, says: str) -> None:
    path, message, hint = _only_error(SCHEDULED.replace("0 7 * * 1-5", schedule))
    assert path.endswith("changes[0].at") and "is not a cron schedule" in message
    assert says in hint, hint


@pytest.mark.parametrize(
    ("zone", "says"),
    [
        ("Europe/Berln", "did you mean 'Europe/Berlin'?"),
        ("europe/berlin", "did you mean 'Europe/Berlin'?"),
        ("UTC+2", "Etc/GMT-2"),
        ("GMT-05:00", "Etc/GMT+5"),
        ("localtime", "timedatectl list-timezones"),
    ],
)
def test_an_unknown_time_zone_gets_a_hint(zone: str, says: str) -> None:
    path, message, hint = _only_error(SCHEDULED.replace("Europe/Berlin", f"'{zone}'"))
    assert path.endswith("mig_schedule.timezone") and "IANA time zone" in message
    assert says in hint, hint


# --- 2. YAML 1.1 octal and base-60 numbers -------------------------------------------------------

LAB = (
    "name: lab\nfabrics: {compute: {switch: qm8700, su_size: 4}}\nnode_groups:\n"
    "  - {name: train, node: dgx-a100-640gb, count: 2, hostname: 'train{index:02d}'}\n"
)


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("count: 010", "octal 8"),
        ("count: 2, first_index: 010", "octal 8"),
        ("count: 0_10", "octal 8"),
        ("count: 1:30", "base-60"),
        ("count: 1:30.5", "base-60"),
    ],
)
def test_a_number_yaml_1_1_reads_otherwise_than_an_editor_is_refused(
    written: str, says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_spec_text(LAB.replace("count: 2", written), "spec.yaml")
    error = caught.value
    assert says in error.message and error.position is not None
    assert error.position.line == 4 and "quote" in (error.hint or "")


@pytest.mark.parametrize("written", ["count: 02", "count: 0x2", "count: 2", "count: '010'"])
def test_numbers_both_yaml_versions_agree_on_still_load(written: str) -> None:
    text = LAB.replace("count: 2", written)
    if "'" in written:  # a quoted 010 is text: the schema says so, not the reader
        path, message, _ = _only_error(text)
        assert path == "node_groups[0].count" and "whole number" in message
    else:
        assert load_spec_text(text, "spec.yaml").spec.node_groups[0].count == 2


# --- 3. a preset and a shape -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [{"layers": 2}, {"hidden": 1024}, {"layers": 2, "hidden": 1024, "heads": 8}]
)
def test_train_refuses_a_preset_with_a_shape(shape: dict[str, int]) -> None:
    with pytest.raises(InputError) as caught:
        model_shape("gpt3-175b", **shape)
    assert "both give the model" in caught.value.message and caught.value.hint


def test_a_preset_may_still_change_seq_and_vocab() -> None:
    shape = model_shape("gpt3-175b", seq=4096, vocab=32000)
    assert (shape.seq, shape.vocab, shape.layers) == (4096, 32000, 96)


def test_a_budget_with_a_preset_and_a_shape_is_a_located_spec_error() -> None:
    text = (
        LAB
        + "budgets:\n  - scaling_efficiency: {gpus: 16, min: 0.5, model: gpt3-175b, layers: 2}\n"
    )
    path, message, hint = _only_error(text)
    assert path == "budgets[0].scaling_efficiency" and "both give the model" in message
    assert "remove `layers`" in hint


# --- 4. a set of outputs is written whole or not at all ---------------------------------------------


def _full_under(monkeypatch: pytest.MonkeyPatch, full: Path) -> None:
    """Make writes of temp files inside ``full`` fail with ENOSPC, as a full disk does."""
    real_write_all = files._write_all

    def write_all(fd: int, data: bytes) -> None:
        if str(Path(f"/proc/self/fd/{fd}").readlink()).startswith(str(full)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write_all(fd, data)

    monkeypatch.setattr(files, "_write_all", write_all)


def test_a_full_disk_under_a_later_output_leaves_the_earlier_one_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok_dir, full = tmp_path / "ok", tmp_path / "full"
    ok_dir.mkdir()
    full.mkdir()
    cabling, bom = ok_dir / "c.csv", full / "b.csv"
    cabling.write_text("OLD\n")
    _full_under(monkeypatch, full)
    lab = str(ROOT / "examples" / "a100-lab-mig.yaml")
    result = run_cli("plan", lab, "--cabling", str(cabling), "--bom", str(bom))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "No space left on device" in result.stderr and str(bom) in result.stderr
    assert cabling.read_text() == "OLD\n"
    assert sorted(p.name for p in ok_dir.iterdir()) == ["c.csv"]  # no temp file left
    assert list(full.iterdir()) == []


def test_a_signal_between_two_renames_waits_for_the_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old a")
    b.write_text("old b")
    real_rename = os.rename

    def rename(src: str, dst: str) -> None:
        real_rename(src, dst)
        if dst == str(a):  # the first output is in place: a signal arrives now
            os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(files.os, "rename", rename)
    with pytest.raises(signals.Interrupted):
        files.write_atomic_all([(str(a), b"new a"), (str(b), b"new b")])
    assert (a.read_text(), b.read_text()) == ("new a", "new b")


def test_write_atomic_all_replaces_every_file_when_all_can_be_written(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old")
    files.write_atomic_all([(str(a), b"new a"), (str(b), b"new b")])
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


# --- 5. names the consumer refuses -----------------------------------------------------------------

TENANT = LAB.replace(
    "name: lab\n",
    "name: lab\nscheduler:\n  kind: kubernetes\n  tenants:\n"
    "    - {name: serving, gpus: 8, clients: {cidrs: ['CIDR']}}\n",
)


@pytest.mark.parametrize(
    ("cidr", "says"),
    [("fe80::%eth0/64", "write fe80::/64"), ("fe80::%1/64", "write fe80::/64"),
     ("10.0.0.1/8", "did you mean 10.0.0.0/8?")],
)  # fmt: skip
def test_a_client_network_kubernetes_refuses_is_a_located_error(cidr: str, says: str) -> None:
    path, message, hint = _only_error(TENANT.replace("CIDR", cidr))
    assert path == "scheduler.tenants[0].clients.cidrs[0]" and "CIDR form" in message
    assert hint == says


def test_client_networks_kubernetes_takes_still_load() -> None:
    text = TENANT.replace("'CIDR'", "'10.0.0.0/8', 'fd00::/64', '::ffff:10.0.0.0/104'")
    clients = load_spec_text(text, "spec.yaml").spec.scheduler.tenants[0].clients
    assert clients is not None and len(clients.cidrs) == 3


RELEASE = LAB.replace(
    "name: lab\n", "name: lab\nscheduler: {kind: kubernetes, monitoring: {prometheus_release: R}}\n"
)


@pytest.mark.parametrize("release", ["Kube_Prom", "kube_prom", "k" * 54, "kp.", "a..b"])
def test_a_prometheus_release_helm_refuses_is_an_error(release: str) -> None:
    path, message, _ = _only_error(RELEASE.replace(": R}", f": '{release}'}}"))
    assert path == "scheduler.monitoring.prometheus_release"
    assert "Helm release name" in message or "at most 53" in message


@pytest.mark.parametrize("release", ["kube-prometheus-stack", "prom.v2", "k" * 53, "1"])
def test_a_prometheus_release_helm_takes_loads(release: str) -> None:
    spec = load_spec_text(RELEASE.replace(": R}", f": '{release}'}}"), "s.yaml").spec
    assert spec.scheduler.monitoring.prometheus_release == release


# --- 6. signals in the windows main does not cover ----------------------------------------------

_SIGINT_DURING_IMPORT = """
import builtins, os, signal
real = builtins.__import__
def hooked(name, *args, **kwargs):
    if name == "typer":  # inside infra.cli's imports, before main runs
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = hooked
import infra.cli
"""


def test_sigint_while_the_cli_imports_is_one_line_and_exit_130() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _SIGINT_DURING_IMPORT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "railplan: interrupted by SIGINT\n"


def test_sigint_a_library_wraps_is_reported_as_the_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def app(args: list[str], standalone_mode: bool) -> int:
        try:  # as pydantic-core does when a Python callback raises while it builds a schema
            signals._raise(signal.SIGINT, None)
        except signals.Interrupted as exc:
            raise RuntimeError(f"SchemaError: ...\n  Interrupted: {exc}") from None
        return 0

    monkeypatch.setattr(process, "app", app)
    monkeypatch.setattr(signals, "_RAISED", [], raising=False)
    result = run_cli("lint", "x.yaml")
    assert result.returncode == 130 and result.stderr == "railplan: interrupted by SIGINT\n"


# --- 7. a layout named `disabled` --------------------------------------------------------------

LAYOUT_DISABLED = LAB.replace("count: 2,", "count: 2, mig: disabled,") + (
    "mig_layouts: {disabled: {profiles: {'1g.10gb': 7}}}\n"
)


def test_a_layout_named_disabled_is_refused_at_its_key() -> None:
    path, message, hint = _only_error(LAYOUT_DISABLED)
    assert path == "mig_layouts.disabled" and "means MIG off" in message
    assert "rename the layout" in hint


def test_sigint_python_swallows_in_a_callback_still_ends_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Locked:
        pass

    def app(args: list[str], standalone_mode: bool) -> int:
        thing = Locked()
        # the handler runs in whatever Python code is current: here a weakref callback,
        # whose exception Python only prints ("Exception ignored in: ...")
        ref = weakref.ref(thing, lambda _: signals._raise(signal.SIGINT, None))
        del thing
        gc.collect()
        assert ref() is None
        return 0

    monkeypatch.setattr(process, "app", app)
    result = run_cli("lint", "x.yaml")
    assert result.returncode == 130 and result.stderr == "railplan: interrupted by SIGINT\n"
