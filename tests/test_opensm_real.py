"""The rendered OpenSM files, run by Debian's real opensm 3.3.23 on a simulated fabric.

Only the hardware is simulated (ibsim, from the golden input's own cabling, see
tests/ibsim_fabric.py): opensm parses the rendered opensm-<host>.conf, partitions.conf and
root_guids.conf, sets up the routing engine and programs the simulated switches and HCAs,
whose P_Key tables smpquery then reads back.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from infra.catalog import Catalog
from infra.render.subnet_manager import subnet_manager_files
from infra.spec import Spec, load_spec_text
from infra.topology import expand
from infra.topology.model import Plan
from tests.ibsim_fabric import discovered, run_opensm, run_sim, simulated, tools_or_skip

GOLDEN = Path(__file__).parent / "golden" / "inputs" / "h100-slurm-opensm.yaml"
# Lines opensm 3.3.23 writes when it ignores or replaces part of a configuration.
REJECTED = ("Unrecognized token", "cannot find or setup routing engine", "PARSE ERROR")


def _spec(guids: dict[str, list[str]] | None = None) -> Spec:
    data = yaml.safe_load(GOLDEN.read_text())
    if guids:
        data["fabrics"]["compute"]["guids"] = guids
    return load_spec_text(yaml.safe_dump(data), "h100-slurm-opensm.yaml").spec


def _install(plan: Plan, spec: Spec, catalog: Catalog, workdir: Path) -> dict[str, str]:
    """Write the rendered files where opensm reads them (/etc/opensm -> the test's dir)."""
    files = subnet_manager_files(plan, spec, catalog)
    for name, text in files.items():
        (workdir / name).write_text(text.replace("/etc/opensm", str(workdir)))
    return files


def _accepted(out: str, log: str, engine: str) -> None:
    for line in REJECTED:
        assert line not in out + log, (out, log)
    # the engine really routed: opensm names the engine whose tables it loaded
    assert f"{engine} tables configured on all switches" in log, log
    assert "SUBNET UP" in log


def _pkeys(sim_host: str, workdir: Path, lid: int, port: int | None = None) -> list[str]:
    args = ["smpquery", "pkeys", str(lid)] + ([str(port)] if port else [])
    out = run_sim(args, sim_host, workdir)
    return [word for line in out.splitlines() if ":" in line for word in line.split()[1:]]


@pytest.fixture(scope="module")
def plan(catalog: Catalog) -> Plan:
    return expand(_spec(), catalog)


def test_opensm_routes_with_the_rendered_conf_before_the_guids_are_known(
    plan: Plan, catalog: Catalog, tmp_path: Path
) -> None:
    tools_or_skip()
    spec = _spec()
    files = _install(plan, spec, catalog, tmp_path)
    assert "routing_engine updn" in files["opensm-gpu01.conf"]
    with simulated(plan, tmp_path):
        out, log = run_opensm(tmp_path / "opensm-gpu01.conf", "gpu01 mlx5_0", tmp_path)
        _accepted(out, log, "updn")
        # no GUIDs yet: the default partition stays full (0xffff), nothing is isolated
        assert "0xffff" in _pkeys("gpu01 mlx5_0", tmp_path, _lid(tmp_path, "gpu02 mlx5_0"))


def _lid(workdir: Path, node: str) -> int:
    return discovered("gpu01 mlx5_0", workdir)[node][1]


def test_opensm_takes_the_guids_roots_priority_and_isolates_the_hosts(
    plan: Plan, catalog: Catalog, tmp_path: Path
) -> None:
    tools_or_skip()
    with simulated(plan, tmp_path):
        found = discovered("gpu01 mlx5_0", tmp_path)
        guids = {"ib0-leaf-01": [found["ib0-leaf-01"][0]]}
        guids |= {s.name: [found[f"{s.name} {h}"][0] for h in s.hcas] for s in plan.servers}
        files = _install(plan, _spec(guids), catalog, tmp_path)
        assert (
            f"root_guid_file {tmp_path}/root_guids.conf"
            in (tmp_path / "opensm-gpu05.conf").read_text()
        )
        assert "sm_priority 14" in files["opensm-gpu05.conf"]
        out, log = run_opensm(tmp_path / "opensm-gpu05.conf", "gpu05 mlx5_0", tmp_path)
        _accepted(out, log, "updn")
        # opensm's console cuts each option line at 126 characters (a 128-byte buffer with its
        # newline), which pytest-xdist's longer temporary paths reach
        loaded = f" Loading Cached Option:root_guid_file = {tmp_path}/root_guids.conf"
        assert loaded[:126] in out
        assert "Loading Cached Option:sm_priority = 14" in out
        # the SM bound to the pinned port: gpu05's first compute HCA
        assert f"Setting IS_SM on port {guids['gpu05'][0]}" in log
        lids = discovered("gpu05 mlx5_0", tmp_path)  # the SM has assigned the LIDs now
        host = _pkeys("gpu05 mlx5_0", tmp_path, lids["gpu02 mlx5_0"][1])
        sm = _pkeys("gpu05 mlx5_0", tmp_path, lids["gpu05 mlx5_0"][1])
    # index 0: full member of the node group's P_Key 0x0001; the default one only limited
    assert host[:2] == ["0x8001", "0x7fff"], host
    # the SM's own port stays a full member of the default partition
    assert sm[:2] == ["0x8001", "0xffff"], sm


def _keys(text: str) -> set[str]:
    return {line.split()[0] for line in text.splitlines() if line and not line.startswith("#")}


@pytest.mark.parametrize("engine", ["auto", "updn", "ftree"])
def test_every_rendered_key_is_one_the_installed_opensm_knows(
    plan: Plan, catalog: Catalog, tmp_path: Path, engine: str
) -> None:
    """`opensm -c` writes every option the installed build has: the authoritative key list."""
    tools_or_skip()
    done = subprocess.run(
        ["opensm", "-c", str(tmp_path / "d.conf")], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    known = _keys((tmp_path / "d.conf").read_text())
    assert {"routing_engine", "root_guid_file", "cn_guid_file", "sm_priority", "guid"} <= known
    guids = {s.name: [f"0x{i + 1:x}"] * len(s.hcas) for i, s in enumerate(plan.servers)}
    data = yaml.safe_load(GOLDEN.read_text())
    data["fabrics"]["compute"] |= {
        "routing_engine": engine,
        "guids": guids | {"ib0-leaf-01": ["0x99"]},
    }
    for spec in (_spec(), load_spec_text(yaml.safe_dump(data), "g.yaml").spec):
        files = subnet_manager_files(plan, spec, catalog)
        for name in (n for n in files if n.startswith("opensm-")):
            assert _keys(files[name]) <= known, (name, _keys(files[name]) - known)


TWO_TIER = (
    "name: two\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 16, hostname: 'gpu{index:02d}'}\n"
    "fabrics:\n  compute: {switch: qm9700, su_size: 4, subnet_manager: opensm, %s}\n"
)


@pytest.mark.parametrize(
    ("engine", "with_guids"), [("updn", False), ("updn", True), ("ftree", True)]
)
def test_a_two_tier_fat_tree_routes_with_the_rendered_engine(
    catalog: Catalog, tmp_path: Path, engine: str, with_guids: bool
) -> None:
    """32 leaves and 2 spines: without GUIDs updn finds the spines itself; with them, the
    root GUID file (and for ftree the compute-node file) names them."""
    tools_or_skip()
    spec = load_spec_text(TWO_TIER % f"routing_engine: {engine}", "two.yaml").spec
    plan = expand(spec, catalog)
    assert plan.fabrics["compute"].tiers == 2
    with simulated(plan, tmp_path):
        if with_guids:
            found = discovered("gpu01 mlx5_0", tmp_path)
            guids = {s.name: [found[s.name][0]] for s in plan.switches_in("compute")}
            guids |= {s.name: [found[f"{s.name} {h}"][0] for h in s.hcas] for s in plan.servers}
            data = yaml.safe_load(TWO_TIER % f"routing_engine: {engine}")
            data["fabrics"]["compute"]["guids"] = guids
            spec = load_spec_text(yaml.safe_dump(data), "two.yaml").spec
        files = _install(plan, spec, catalog, tmp_path)
        assert (
            "root_guid_file" in files["opensm-gpu01.conf"].replace("# No root", "")
        ) == with_guids
        out, log = run_opensm(tmp_path / "opensm-gpu01.conf", "gpu01 mlx5_0", tmp_path)
    _accepted(out, log, engine)
    if engine == "ftree":
        assert f"Loading Cached Option:cn_guid_file = {tmp_path}/cn_guids.conf" in out


def test_sharp_enabled_is_a_key_of_nvidia_opensm_only(catalog: Catalog, tmp_path: Path) -> None:
    """The rendered ``sharp_enabled 2`` goes to NVIDIA's OpenSM alone: Debian's 3.3.23 does not
    know the key (it would log it as unrecognized), so the upstream conf must never carry it."""
    tools_or_skip()
    data = yaml.safe_load(
        (Path(__file__).parent / "golden" / "inputs" / "a100-nvidia-opensm-sharp.yaml").read_text()
    )
    spec = load_spec_text(yaml.safe_dump(data), "s.yaml").spec
    plan = expand(spec, catalog)
    nvidia = subnet_manager_files(plan, spec, catalog)
    conf = next(t for n, t in sorted(nvidia.items()) if n.startswith("opensm-"))
    assert "\nsharp_enabled 2\n" in conf
    (tmp_path / "nvidia.conf").write_text("sharp_enabled 2\n")
    done = subprocess.run(
        ["opensm", "-F", str(tmp_path / "nvidia.conf"), "-c", str(tmp_path / "d.conf")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 'Unrecognized token: "sharp_enabled"' in done.stdout + done.stderr
    data["fabrics"]["compute"] |= {"subnet_manager": "opensm", "sharp": False}
    upstream_spec = load_spec_text(yaml.safe_dump(data), "s.yaml").spec
    upstream = subnet_manager_files(expand(upstream_spec, catalog), upstream_spec, catalog)
    assert not any("sharp_enabled" in t for t in upstream.values())


@pytest.mark.parametrize("engine", ["auto", "ar_ftree"])
def test_a_ufm_spec_rehearses_its_sm_with_the_real_opensm(
    catalog: Catalog, tmp_path: Path, engine: str
) -> None:
    """UFM owns its SM's settings; the rehearsal conf runs the same SM on the fabric twin.

    UFM's engine (ar_updn for `auto` on adaptive-routing switches, or ar_ftree) becomes the
    distributions' updn or ftree, which Debian's opensm loads and routes the two tiers with.
    """
    tools_or_skip()
    text = TWO_TIER.replace("subnet_manager: opensm", "subnet_manager: ufm")
    spec = load_spec_text(text % f"routing_engine: {engine}", "ufm.yaml").spec
    plan = expand(spec, catalog)
    files = _install(plan, spec, catalog, tmp_path)
    assert not any(n.startswith("opensm-") for n in files)  # nothing for the rdma role
    twin = "ftree" if engine == "ar_ftree" else "updn"
    assert f"\nrouting_engine {twin}\n" in files["rehearsal-opensm.conf"]
    subprocess.run(["opensm", "-c", str(tmp_path / "d.conf")], capture_output=True, check=True)
    known = _keys((tmp_path / "d.conf").read_text())
    assert _keys(files["rehearsal-opensm.conf"]) <= known
    with simulated(plan, tmp_path):
        out, log = run_opensm(tmp_path / "rehearsal-opensm.conf", "gpu01 mlx5_0", tmp_path)
    _accepted(out, log, twin)
    assert f"Loading Cached Option:routing_engine = {twin}" in out
