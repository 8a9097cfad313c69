"""`railplan render --addresses`: cloud-assigned management addresses reach the inventory."""

from __future__ import annotations

import json
from ipaddress import IPv4Network
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.addresses import AddressesError, with_addresses

from .test_cli import ROOT, railplan

P4D = ROOT / "examples" / "aws-p4d.yaml"


def test_stack_output_addresses_become_ansible_host(tmp_path: Path) -> None:
    names = [f"p4d-{i:02d}" for i in range(1, 17)]
    outputs = {"hosts": {n: f"10.0.1.{i + 10}" for i, n in enumerate(names)}, "vpc_id": "v"}
    (tmp_path / "out.json").write_text(json.dumps(outputs))
    done = railplan(
        "render", str(P4D), "--root", str(tmp_path / "t"), "--addresses", "out.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    host_vars = tmp_path / "t" / "inventories" / "p4d-train" / "host_vars"
    got = {p.stem: yaml.safe_load(p.read_text())["ansible_host"] for p in host_vars.iterdir()}
    assert got == outputs["hosts"]


def test_a_name_the_plan_lacks_is_located_and_refused(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text('{"p4d-01": "10.0.0.1",\n "p4d-99": "10.0.0.2"}\n')
    done = railplan(
        "render", str(P4D), "--root", str(tmp_path / "t"), "--addresses", "out.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("out.json:2:2: error:") and "'p4d-99'" in done.stderr
    assert not (tmp_path / "t").exists()


def test_something_not_a_mapping_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text('["10.0.0.1"]\n')
    done = railplan(
        "render", str(P4D), "--root", str(tmp_path / "t"), "--addresses", "out.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "mapping of hostname" in done.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "1:1: error: the file is empty"),
        ("# nothing yet\n", "1:1: error: the file is empty"),
        ('["10.0.0.1"]\n', "1:1: error: expected a mapping of hostname"),
    ],
)
def test_an_empty_or_wrong_addresses_file_is_one_located_line(
    tmp_path: Path, text: str, said: str
) -> None:
    """As every other loader says of an empty file: file:line:column, exit 2, one line."""
    (tmp_path / "out.json").write_text(text)
    done = railplan(
        "render", str(P4D), "--root", str(tmp_path / "t"), "--addresses", "out.json", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"out.json:{said}"), done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "t").exists()


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.text(max_size=20), st.integers(), st.none(), st.floats()))
def test_only_ipv4_addresses_are_accepted(value: object) -> None:
    plan = expand(load_spec(P4D).spec, load_catalog())
    try:
        changed = with_addresses(plan, {"p4d-01": value})
    except AddressesError as exc:
        assert exc.path == "p4d-01" and "not an IPv4 address" in exc.message
    else:
        assert changed.server("p4d-01").mgmt_ip == value  # only valid text addresses pass
        assert isinstance(value, str)


SUPERPOD = ROOT / "examples" / "dgx-h100-superpod.yaml"
UNUSABLE = {
    "loopback": ("127.0.0.1", "loopback"),
    "unspecified": ("0.0.0.0", "unspecified"),
    "broadcast": ("255.255.255.255", "reserved"),
    "multicast": ("224.0.0.1", "multicast"),
    "cloud metadata": ("169.254.169.254", "link-local"),
    "reserved": ("240.0.0.1", "reserved"),
    "twice in the file": ("10.0.1.5", "already the address of 'p4d-01'"),
    "another host's planned address": ("10.10.16.2", "already the address of 'p4d-01'"),
    "another host's BMC": ("10.11.16.4", "already the address of 'p4d-03 (BMC)'"),
}


@pytest.mark.parametrize("case", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_unusable_and_taken_addresses_are_located_and_refused(
    case: tuple[str, str], tmp_path: Path
) -> None:
    # before: render exited 0 with each of these as p4d-02's ansible_host
    address, why = case
    # p4d-01 is given 10.0.1.5, or keeps its planned 10.10.16.2 when p4d-02 is given that
    entries = [] if address == "10.10.16.2" else ['"p4d-01": "10.0.1.5",']
    entries.append(f'"p4d-02": "{address}"')
    (tmp_path / "out.json").write_text("{\n" + "\n".join(entries) + "\n}\n")
    done = railplan(
        "render", str(P4D), "--root", str(tmp_path / "t"), "--addresses", "out.json", cwd=tmp_path
    )
    line = len(entries) + 1
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"out.json:{line}:1: error: address of 'p4d-02'"), done.stderr
    assert why in done.stderr and "hint:" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "t").exists()


def test_swapping_two_planned_addresses_is_allowed() -> None:
    plan = expand(load_spec(P4D).spec, load_catalog())
    swapped = with_addresses(plan, {"p4d-01": "10.10.16.3", "p4d-02": "10.10.16.2"})
    assert [s.mgmt_ip for s in swapped.servers[:3]] == ["10.10.16.3", "10.10.16.2", "10.10.16.4"]


@pytest.mark.parametrize("address", ["192.168.1.4", "10.10.0.0", "10.10.255.255"])
def test_a_racked_server_stays_in_the_management_subnet(address: str) -> None:
    plan = expand(load_spec(SUPERPOD).spec, load_catalog())
    with pytest.raises(AddressesError, match="not a host address of the management subnet"):
        with_addresses(plan, {"dgx-h100-001": address}, IPv4Network("10.10.0.0/16"))
    moved = with_addresses(plan, {"dgx-h100-001": "10.10.200.1"}, IPv4Network("10.10.0.0/16"))
    assert moved.servers[0].mgmt_ip == "10.10.200.1"
