"""Slurm, subnet-manager and NCCL renderers: properties of the text, not snapshots.

Hostlists are checked with an independent expander that follows Slurm's rule (a range's
numbers are zero-padded to the width of its first bound).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog
from infra.render import nccl_env, slurm, slurm_conf, subnet_manager
from infra.spec import Spec, load_spec_text
from infra.topology import Plan, expand

from .conftest import ROOT

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
_BRACKET = re.compile(r"^([^\[\]]*)\[([^\[\]]*)\]$")


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist (``a[01-03,07],b5``): each range padded to its first bound.

    As Slurm's hostlist.c reads it: a bracket ends its name (``prefix[ranges]``); text after
    ``]`` (``dgx[001-002]-ib``) is refused, as slurmctld refuses it ("Unable to create
    NodeName list"), so no test passes on a list Slurm cannot read.
    """
    names: list[str] = []
    for part in re.split(r",(?![^\[]*\])", expr):
        if "[" not in part and "]" not in part:
            names.append(part)
            continue
        m = _BRACKET.match(part)
        if m is None:
            raise ValueError(f"not a Slurm hostlist: {part!r} (Slurm takes prefix[ranges])")
        prefix, body = m.groups()
        for item in body.split(","):
            lo, _, hi = item.partition("-")
            width = len(lo)
            names += [f"{prefix}{str(n).zfill(width)}" for n in range(int(lo), int(hi or lo) + 1)]
    return names


def load(name: str, **compute: Any) -> Spec:
    data = yaml.safe_load((ROOT / "examples" / name).read_text())
    if compute:
        data["fabrics"]["compute"].update(compute)
    return load_spec_text(yaml.safe_dump(data)).spec


def three_tier() -> Spec:
    """1,250 DGX A100 on QM8790 with SUs of 20: a three-tier fabric."""
    data = {
        "name": "t",
        "site": {"management_cidr": "10.0.0.0/12", "bmc_cidr": "10.32.0.0/12"},
        "node_groups": [{"name": "dgx", "node": "dgx-a100-640gb", "count": 1250}],
        "fabrics": {"compute": {"switch": "qm8790", "su_size": 20, "subnet_manager": "opensm"}},
    }
    return load_spec_text(yaml.safe_dump(data)).spec


@pytest.fixture(scope="module")
def plans(catalog: Catalog) -> dict[str, tuple[Plan, Spec]]:
    out = {}
    for name in EXAMPLES:
        spec = load(name)
        out[name] = (expand(spec, catalog), spec)
    spec = three_tier()
    out["three-tier"] = (expand(spec, catalog), spec)
    return out


def _config_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


# --- hostlists -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["dgx001", "dgx002", "dgx003"], "dgx[001-003]"),
        (["n8", "n9", "n10", "n11"], "n[8-11]"),
        (["x98", "x99", "x100"], "x[98-100]"),
        (["h-01", "h-02", "h-05"], "h-[01-02,05]"),
        (["solo7"], "solo7"),
        # text after the index: Slurm takes nothing after ']', so one by one
        (["dgx001-ib", "dgx002-ib"], "dgx001-ib,dgx002-ib"),
    ],
)
def test_hostlist_ranges(names: list[str], expected: str) -> None:
    servers = [_Named(n, int(re.findall(r"\d+", n)[-1])) for n in names]
    text = slurm.hostlist(servers)  # type: ignore[arg-type]
    assert text == expected
    assert expand_hostlist(text) == names


class _Named:
    def __init__(self, name: str, index: int) -> None:
        self.name, self.index = name, index


def test_hostlist_of_names_with_text_after_the_index_is_slurms_and_in_order() -> None:
    # `n{index:03d}x9` once rendered n[001-002]x9, which slurmctld refuses. n009x9 also
    # ends in digits equal to its index (a range candidate, unlike its neighbours): the list
    # must still expand in the order given, as NodeAddr= pairs addresses by position.
    names = [f"n{i:03d}x9" for i in range(1, 13)]
    servers = [_Named(n, i) for i, n in enumerate(names, start=1)]
    text = slurm.hostlist(servers)  # type: ignore[arg-type]
    assert "]" not in text
    assert expand_hostlist(text) == names
    mixed = [_Named("a1", 1), _Named("b2", 2), _Named("a3", 3)]
    assert expand_hostlist(slurm.hostlist(mixed)) == ["a1", "b2", "a3"]  # type: ignore[arg-type]


def test_the_test_expander_refuses_what_slurm_refuses() -> None:
    with pytest.raises(ValueError, match="not a Slurm hostlist"):
        expand_hostlist("dgx[001-002]-ib")


def test_node_addresses_pair_with_their_names(catalog: Catalog) -> None:
    spec = load_spec_text((ROOT / "tests/data/slurm/suffix-hostnames.yaml").read_text()).spec
    plan = expand(spec, catalog)
    planned = {s.name: s.mgmt_ip for s in plan.servers}
    paired: dict[str, str | None] = {}
    for line in _config_lines(slurm.nodes_conf(plan, spec, catalog)):
        fields = dict(f.split("=", 1) for f in line.split())
        names = expand_hostlist(fields["NodeName"])
        paired.update(zip(names, fields["NodeAddr"].split(","), strict=True))
    assert paired == planned


def test_hostlist_keeps_unpadded_and_padded_names_apart() -> None:
    # "n9" then "n010": same prefix, consecutive indices, but no single Slurm range holds both.
    servers = [_Named("n9", 9), _Named("n010", 10)]
    text = slurm.hostlist(servers)  # type: ignore[arg-type]
    assert expand_hostlist(text) == ["n9", "n010"]


# --- topology.conf ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*EXAMPLES, "three-tier"])
def test_every_server_once_at_the_lowest_level(
    plans: dict[str, tuple[Plan, Spec]], name: str
) -> None:
    plan, _ = plans[name]
    lines = _config_lines(slurm.topology_conf(plan))
    leaves = [line for line in lines if " Nodes=" in line]
    named = [n for line in leaves for n in expand_hostlist(line.split("Nodes=")[1])]
    assert sorted(named) == sorted(s.name for s in plan.servers)
    assert len(named) == len(set(named))
    switches = [line.split()[0].removeprefix("SwitchName=") for line in lines]
    assert len(switches) == len(set(switches))
    for line in lines:  # every child switch is defined
        if " Switches=" in line:
            assert set(line.split("Switches=")[1].split(",")) <= set(switches)


def test_not_rail_optimized_uses_leaf_switches(catalog: Catalog) -> None:
    data = {
        "name": "t",
        "node_groups": [{"name": "g", "node": "dgx-h100", "count": 100}],
        "fabrics": {"compute": {"switch": "qm9700", "rail_optimized": False}},
    }
    plan = expand(load_spec_text(yaml.safe_dump(data)).spec, catalog)
    lines = _config_lines(slurm.topology_conf(plan))
    leaves = [line for line in lines if " Nodes=" in line]
    named = [n for line in leaves for n in expand_hostlist(line.split("Nodes=")[1])]
    assert sorted(named) == sorted(s.name for s in plan.servers)
    leaf_names = {s.name for s in plan.switches_in("compute", "leaf")}
    assert all(line.split()[0].removeprefix("SwitchName=") in leaf_names for line in leaves)


def test_three_tier_fabric_has_pods_under_one_top(plans: dict[str, tuple[Plan, Spec]]) -> None:
    plan, _ = plans["three-tier"]
    lines = _config_lines(slurm.topology_conf(plan))
    pods = [line for line in lines if line.startswith("SwitchName=compute-pod")]
    assert plan.fabrics["compute"].tiers == 3
    assert len(pods) == len({su.pod for su in plan.sus}) > 1
    top = [line for line in lines if line.startswith(f"SwitchName={slurm.TOP_SWITCH} ")]
    assert len(top) == 1 and top[0].count("compute-pod") == len(pods)
    in_pods = [su for line in pods for su in line.split("Switches=")[1].split(",")]
    assert sorted(in_pods) == sorted(su.name for su in plan.sus)


def test_su_switch_lines_name_the_su_servers(plans: dict[str, tuple[Plan, Spec]]) -> None:
    plan, _ = plans["dgx-a100-superpod.yaml"]
    lines = dict(
        line.removeprefix("SwitchName=").split(" Nodes=")
        for line in _config_lines(slurm.topology_conf(plan))
        if " Nodes=" in line
    )
    assert lines["dgx-su01"] == "dgx[001-020]"
    for su in plan.sus:
        assert expand_hostlist(lines[su.name]) == list(su.servers)


# --- gres.conf / slurm.conf ------------------------------------------------------------------


def test_gres_counts_match_the_mig_layout(
    plans: dict[str, tuple[Plan, Spec]], catalog: Catalog
) -> None:
    plan, spec = plans["a100-lab-mig.yaml"]
    nodes = _config_lines(slurm.nodes_conf(plan, spec, catalog))
    gres = {}
    for line in nodes:
        hosts, rest = line.split()[0].removeprefix("NodeName="), line.split(" Gres=")[1]
        counts = {t: int(n) for _, t, n in (g.split(":") for g in rest.split()[0].split(","))}
        gres.update(dict.fromkeys(expand_hostlist(hosts), counts))
    assert sorted(gres) == sorted(s.name for s in plan.servers)
    gpu = catalog.node_gpu("dgx-a100-640gb")
    for server in plan.servers:
        expected: dict[str, int] = {}
        for layout in server.mig:
            profiles = (
                {slurm.gpu_type(gpu): 1}
                if layout is None
                else {
                    slurm.mig_type(gpu, p): n for p, n in spec.mig_layouts[layout].profiles.items()
                }
            )
            for t, n in profiles.items():
                expected[t] = expected.get(t, 0) + n
        assert gres[server.name] == expected
    assert gres["infer01"]["a100_1g.10gb"] == 42  # 6 GPUs x 7
    assert gres["train01"] == {"a100": 8}
    text = slurm.gres_conf(plan, spec, catalog)
    assert "NodeName=infer[01-02] AutoDetect=nvml" in text
    # DGX A100: GPUs 0-1 on NUMA 3 (cores 48-63), ... (catalog gpu_cores)
    train = "NodeName=train[01-02] AutoDetect=off Name=gpu Type=a100"
    assert f"{train} File=/dev/nvidia[0-1] Cores=48-63" in text
    assert f"{train} File=/dev/nvidia[6-7] Cores=80-95" in text


def test_mig_type_follows_slurmd_rounding(catalog: Catalog) -> None:
    a100 = catalog.gpus["a100-sxm4-80gb"]
    assert slurm.mig_type(a100, "4g.40gb") == "a100_4g.39gb"  # 39.25 GiB rounds to 39
    assert slurm.mig_type(catalog.gpus["h100-sxm5-80gb"], "1g.10gb") == "h100_80gb_hbm3_1g.10gb"


def test_node_lines_group_by_su_and_rack(
    plans: dict[str, tuple[Plan, Spec]], catalog: Catalog
) -> None:
    plan, spec = plans["dgx-a100-superpod.yaml"]
    lines = [x for x in _config_lines(slurm.nodes_conf(plan, spec, catalog)) if "NodeName" in x]
    assert len(lines) == len({(s.su, s.rack) for s in plan.servers})
    named = [n for x in lines for n in expand_hostlist(x.split()[0].removeprefix("NodeName="))]
    assert sorted(named) == sorted(s.name for s in plan.servers)
    assert "Features=dgx,su_dgx_su01,rack_dgx_su01_c1,pod_1" in lines[0]


# --- subnet manager ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dgx-a100-superpod.yaml", "dgx-h100-superpod.yaml"])
def test_partitions_conf_has_one_line_per_pkey(catalog: Catalog, name: str) -> None:
    spec = load(name, subnet_manager="nvidia-opensm")
    plan = expand(spec, catalog)
    files = subnet_manager.subnet_manager_files(plan, spec, catalog)
    lines = _config_lines(files["partitions.conf"])
    assert len(lines) == len(plan.pkeys)
    for (_, pkey), line in zip(plan.pkeys.items(), lines, strict=True):
        assert f"={pkey}," in line and line.endswith(";")
    # no GUIDs in the examples: nothing can be isolated yet, and the file says so
    assert lines[0] == "Default=0x7fff, ipoib, defmember=full : ALL=full ;"
    assert "NOT ISOLATED" in files["partitions.conf"]
    confs = [files[n] for n in sorted(files) if n.startswith("opensm-")]
    assert len(confs) == 2  # master and standby
    assert all("routing_engine ar_updn" in c for c in confs)  # NVIDIA's OpenSM has AR engines
    assert "sharp_am.cfg" in files  # both examples enable SHARP
    tier = "core" if plan.fabrics["compute"].tiers == 3 else "spine"
    roots = [x for x in files["root_guids.conf"].splitlines() if "GUID unknown" in x]
    assert roots == [f"# {s.name}: GUID unknown" for s in plan.switches_in("compute", tier)]


def test_ufm_and_switch_modes(plans: dict[str, tuple[Plan, Spec]], catalog: Catalog) -> None:
    plan, spec = plans["dgx-a100-superpod.yaml"]
    ufm = subnet_manager.subnet_manager_files(plan, spec, catalog)
    assert sorted(ufm) == [
        "README.md",
        "rehearsal-opensm.conf",
        "rehearsal-partitions.conf",
        "root_guids.conf",
        "ufm-pkeys.json",
        "ufm-sm.conf",
    ]
    assert "routing_engine ar_updn" in ufm["ufm-sm.conf"]  # the engine is not dropped
    assert [b["pkey"] for b in yaml.safe_load(ufm["ufm-pkeys.json"])] == ["0x0001"]
    plan, spec = plans["a100-lab-mig.yaml"]
    readme = subnet_manager.subnet_manager_files(plan, spec, catalog)["README.md"]
    assert all(pkey in readme for pkey in plan.pkeys.values())
    plan, spec = plans["aws-p4d.yaml"]
    assert subnet_manager.subnet_manager_files(plan, spec, catalog) == {}


# --- NCCL --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*EXAMPLES, "three-tier"])
def test_nccl_ib_hca_in_rail_order(
    plans: dict[str, tuple[Plan, Spec]], catalog: Catalog, name: str
) -> None:
    plan, spec = plans[name]
    conf = nccl_env.nccl_conf(plan, spec, catalog)
    files = nccl_env.nccl_env_files(plan, spec, catalog)
    for group, settings in conf.items():
        servers = plan.servers_in(group)
        env = dict(line.split("=", 1) for line in _config_lines(files[f"{group}.conf"]))
        assert env == settings  # the env file and the Ansible variable agree
        if catalog.nodes[servers[0].node].cloud == "aws":
            assert settings["FI_PROVIDER"] == "efa" and "NCCL_IB_HCA" not in settings
            continue
        hcas = settings["NCCL_IB_HCA"].removeprefix("=").split(",")
        assert settings["NCCL_IB_HCA"].startswith("=")
        assert all(tuple(h.removesuffix(":1") for h in hcas) == s.hcas for s in servers)


def test_collnet_only_with_sharp(plans: dict[str, tuple[Plan, Spec]], catalog: Catalog) -> None:
    plan, spec = plans["dgx-a100-superpod.yaml"]
    assert nccl_env.nccl_conf(plan, spec, catalog)["dgx"]["NCCL_COLLNET_ENABLE"] == "1"
    plan, spec = plans["a100-lab-mig.yaml"]
    assert all(
        "NCCL_COLLNET_ENABLE" not in s for s in nccl_env.nccl_conf(plan, spec, catalog).values()
    )


# --- determinism ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_same_input_same_text(catalog: Catalog, name: str) -> None:
    def render() -> dict[str, str]:
        spec = load(name)
        plan = expand(spec, catalog)
        return {
            **slurm_conf.slurm_files(plan, spec, catalog),
            **{
                f"sm/{k}": v
                for k, v in subnet_manager.subnet_manager_files(plan, spec, catalog).items()
            },
            **{f"nccl/{k}": v for k, v in nccl_env.nccl_env_files(plan, spec, catalog).items()},
        }

    assert render() == render()
