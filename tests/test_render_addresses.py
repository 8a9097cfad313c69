"""`railplan render --addresses`: cloud-assigned management addresses reach the inventory."""

from __future__ import annotations

import json
from pathlib import Path

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
