"""Which SM gets which routing engine, GUID files, priorities and ports (no tools needed)."""

from __future__ import annotations

import pytest
import yaml

from infra.catalog import Catalog
from infra.render.ansible import ansible_files
from infra.render.subnet_manager import subnet_manager_files
from infra.spec import Spec, load_spec_text
from infra.topology import expand

SPEC = (
    "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 64}\n"
    "fabrics:\n  compute: {switch: qm9700, subnet_manager: %s}\n"
)


def _files(text: str, catalog: Catalog) -> tuple[Spec, dict[str, str]]:
    spec = load_spec_text(text, "s.yaml").spec
    return spec, subnet_manager_files(expand(spec, catalog), spec, catalog)


@pytest.mark.parametrize(("sm", "engine"), [("opensm", "updn"), ("nvidia-opensm", "ar_updn")])
def test_auto_picks_an_engine_the_sm_has(catalog: Catalog, sm: str, engine: str) -> None:
    _, files = _files(SPEC % sm, catalog)
    confs = [files[n] for n in sorted(files) if n.startswith("opensm-")]
    assert len(confs) == 2 and all(f"routing_engine {engine}\n" in c for c in confs)
    settings = [x for c in confs for x in c.splitlines() if not x.startswith("#")]
    assert sm == "nvidia-opensm" or not any("ar_" in x for x in settings)


def test_ufm_and_switch_keep_the_spec_routing_engine(catalog: Catalog) -> None:
    text = SPEC.replace("%s}", "%s, routing_engine: ar_ftree}")
    _, ufm = _files(text % "ufm", catalog)
    assert "routing_engine ar_ftree" in ufm["ufm-sm.conf"]
    _, switch = _files(text % "switch", catalog)
    assert "`ar_ftree`" in switch["README.md"]


def test_master_and_standby_get_distinct_priorities(catalog: Catalog) -> None:
    _, files = _files(SPEC % "opensm", catalog)
    master, standby = sorted(n for n in files if n.startswith("opensm-"))
    assert "sm_priority 15\n" in files[master] and "sm_priority 14\n" in files[standby]


def _with_guids(catalog: Catalog, engine: str) -> tuple[Spec, dict[str, str]]:
    base = load_spec_text(SPEC % "opensm", "s.yaml").spec
    plan = expand(base, catalog)
    guids = {
        s.name: [f"0x{i:x}0{r}" for r in range(len(s.hcas))] for i, s in enumerate(plan.servers, 1)
    }
    guids |= {s.name: [f"0xabc{i}"] for i, s in enumerate(plan.switches_in("compute"))}
    data = yaml.safe_load(SPEC % "opensm")
    data["fabrics"]["compute"] |= {"guids": guids, "routing_engine": engine}
    return _files(yaml.safe_dump(data), catalog)


def test_guids_make_root_and_compute_node_files_and_pin_the_port(catalog: Catalog) -> None:
    spec, files = _with_guids(catalog, "ftree")
    plan = expand(spec, catalog)
    master = min(n for n in files if n.startswith("opensm-"))
    host = master.removeprefix("opensm-").removesuffix(".conf")
    conf = files[master]
    assert "root_guid_file /etc/opensm/root_guids.conf" in conf
    assert "cn_guid_file /etc/opensm/cn_guids.conf" in conf
    assert f"guid 0x{int(spec.fabrics.compute.guids[host][0], 16):016x}" in conf  # type: ignore[union-attr]
    roots = [x for x in files["root_guids.conf"].splitlines() if not x.startswith("#")]
    assert len(roots) == len(plan.switches_in("compute", "spine"))
    assert len(files["cn_guids.conf"].split()) == sum(len(s.hcas) for s in plan.servers)
    assert "defmember=limited" in files["partitions.conf"]
    # the plan of the spec with SHARP: the renderer reads SHARP off the plan's facts
    group_vars = ansible_files(spec, catalog, expand(spec, catalog))[
        "inventories/lab/group_vars/subnet_managers.yml"
    ]
    values = yaml.safe_load(group_vars)
    assert [p.rsplit("/", 1)[1] for p in values["rdma_opensm_guid_files"]] == [
        "cn_guids.conf",
        "root_guids.conf",
    ]
    assert set(values["rdma_opensm_port_guids"]) == {
        n.removeprefix("opensm-").removesuffix(".conf") for n in files if n.startswith("opensm-")
    }


def test_without_guids_the_files_say_what_is_missing(catalog: Catalog) -> None:
    _, files = _files(SPEC % "opensm", catalog)
    master = min(n for n in files if n.startswith("opensm-"))
    assert "root_guid_file" not in files[master].replace("# No root GUID file", "")
    assert "detects the roots itself" in files[master]
    assert "NOT ISOLATED" in files["partitions.conf"]
    assert "defmember=limited" not in files["partitions.conf"]


def test_sharp_am_binds_to_the_sm_port_on_nvidia_opensm(catalog: Catalog) -> None:
    base = load_spec_text(SPEC % "nvidia-opensm", "s.yaml").spec
    plan = expand(base, catalog)
    guids = {
        s.name: [f"0x{i:x}0{r}" for r in range(len(s.hcas))] for i, s in enumerate(plan.servers, 1)
    }
    data = yaml.safe_load(SPEC % "nvidia-opensm")
    data["fabrics"]["compute"] |= {"guids": guids, "sharp": True}
    spec, files = _files(yaml.safe_dump(data), catalog)
    master = min(n for n in files if n.startswith("opensm-")).removeprefix("opensm-")[:-5]
    assert f"ib_port_guid 0x{int(guids[master][0], 16):016x}" in files["sharp_am.cfg"]
    # the plan of the spec with SHARP: the renderer reads SHARP off the plan's facts
    group_vars = ansible_files(spec, catalog, expand(spec, catalog))[
        "inventories/lab/group_vars/subnet_managers.yml"
    ]
    values = yaml.safe_load(group_vars)
    assert values["sharp_am_conf"] == {
        "ib_port_guid": "{{ rdma_opensm_port_guids[inventory_hostname] }}"
    }
    assert values["rdma_opensm_port_guids"][master] == f"0x{int(guids[master][0], 16):016x}"


def test_no_root_guid_file_names_an_empty_file(catalog: Catalog) -> None:
    """OpenSM with a root file naming no switch finds no roots and routes with minhop."""
    for sm in ("opensm", "ufm"):
        _, files = _files(SPEC % sm, catalog)
        confs = [t for n, t in files.items() if n.endswith(".conf") and "guids" not in n]
        assert confs and not any("\nroot_guid_file" in t for t in confs), sm
    _, files = _with_guids(catalog, "updn")
    assert "\nroot_guid_file /etc/opensm/root_guids.conf" in min(
        t for n, t in files.items() if n.startswith("opensm-")
    )


def test_index_0_stays_the_shared_default_until_every_host_is_a_member(catalog: Catalog) -> None:
    """A group P_Key at index 0 on some hosts only would split NCCL's P_Key (index 0)."""
    _, files = _files(SPEC % "opensm", catalog)
    assert "indx0" not in files["partitions.conf"]
    base = load_spec_text(SPEC % "opensm", "s.yaml").spec
    first = expand(base, catalog).servers[0]
    data = yaml.safe_load(SPEC % "opensm")
    data["fabrics"]["compute"]["guids"] = {first.name: ["0x1"] * len(first.hcas)}
    _, partial = _files(yaml.safe_dump(data), catalog)
    assert (
        "indx0" not in partial["partitions.conf"] and "NOT ISOLATED" in partial["partitions.conf"]
    )
    _, full = _with_guids(catalog, "updn")
    assert "gpu=0x0001, indx0, ipoib" in full["partitions.conf"]


@pytest.mark.parametrize("sharp", [True, False])
def test_nvidia_opensm_enables_sharp_only_when_the_spec_asks(catalog: Catalog, sharp: bool) -> None:
    """sharp_am finds no trees unless NVIDIA's OpenSM runs with ``sharp_enabled 2``."""
    text = SPEC.replace("%s}", "%s, sharp: " + ("true" if sharp else "false") + "}")
    _, files = _files(text % "nvidia-opensm", catalog)
    confs = [files[n] for n in sorted(files) if n.startswith("opensm-")]
    assert len(confs) == 2
    assert all(("\nsharp_enabled 2\n" in c) == sharp for c in confs)
    # the distributions' OpenSM never gets the key (it has none; lint refuses SHARP there)
    _, upstream = _files(SPEC % "opensm", catalog)
    assert not any("sharp_enabled" in t for t in upstream.values())


def test_ufm_renders_its_sm_for_the_fabric_twin_under_rehearsal_names(catalog: Catalog) -> None:
    """UFM owns its SM's settings; the twin still needs an OpenSM conf of the same SM."""
    _, files = _files(SPEC % "ufm", catalog)
    assert not any(n.startswith("opensm-") for n in files)  # the rdma role installs nothing
    conf = files["rehearsal-opensm.conf"]
    assert "routing_engine updn\n" in conf and "ar_updn; OpenSM 3.3" in conf
    assert "partition_config_file /etc/opensm/rehearsal-partitions.conf\n" in conf
    _, opensm = _files(SPEC % "opensm", catalog)
    assert files["rehearsal-partitions.conf"] == opensm["partitions.conf"]
    assert "rehearsal-opensm.conf" in files["README.md"]
