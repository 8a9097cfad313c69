"""`railplan render`: the inventory Ansible reads, the entry playbook, and the CLI contract.

Inventories are read back with the real `ansible-inventory`, so what is asserted is what
Ansible sees, not what we meant to write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.render.ansible import ansible_files
from infra.render.ansible_vars import ACCEPTANCE_BYTES, node_group_vars
from infra.render.tree import render_tree
from infra.spec import load_spec, load_spec_text
from infra.spec.base import reserved_group
from infra.topology import expand

from .cli_run import run_cli

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
HOST_VARS = {
    "ansible_host",
    "railplan_index",
    "railplan_su",
    "railplan_slot",
    "railplan_rack",
    "railplan_rack_unit",
    "railplan_pod",
    "railplan_bmc_ip",
}


def _render(spec_file: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`railplan render` in-process (the Ansible tools below run as real processes)."""
    return run_cli("render", str(spec_file), "--root", str(root), *args)


def _inventory(root: Path, name: str) -> dict[str, object]:
    out = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(root / "inventories" / name), "--list"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg")},
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def superpod(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("superpod")
    result = _render(ROOT / "examples/dgx-a100-superpod.yaml", root)
    assert result.returncode == 0, result.stderr
    name = load_spec(str(ROOT / "examples/dgx-a100-superpod.yaml")).spec.name
    return root, _inventory(root, name)


def _play_hosts(root: Path, name: str, pattern: str) -> list[str]:
    """The hosts a play on ``pattern`` runs on, in Ansible's order (`ansible --list-hosts`)."""
    out = subprocess.run(
        [str(BIN / "ansible"), "-i", f"inventories/{name}", pattern, "--list-hosts"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    return [line.strip() for line in out.stdout.splitlines()[1:]]


def _hosts(inventory: dict[str, object], group: str) -> list[str]:
    entry = inventory.get(group, {})
    assert isinstance(entry, dict)
    hosts = entry.get("hosts", [])
    assert isinstance(hosts, list)
    return hosts


_GET_HOSTS = """
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
inventory = InventoryManager(loader=DataLoader(), sources=[sys.argv[1]])
print(json.dumps({p: [h.name for h in inventory.get_hosts(p)] for p in sys.argv[2:]}))
"""


def _plays_hosts(root: Path, name: str, patterns: list[str]) -> dict[str, list[str]]:
    """`_play_hosts` of many patterns in one Ansible process (each ``ansible`` run is 1.5 s
    of CPU): the inventory manager's `get_hosts`, which the CLI and a play both call."""
    out = subprocess.run(
        [sys.executable, "-c", _GET_HOSTS, f"inventories/{name}", *patterns],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,  # the tree's ansible.cfg, as for `ansible`
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_every_server_is_in_one_node_group_one_su_and_one_rack(
    superpod: tuple[Path, dict[str, object]],
) -> None:
    root, inventory = superpod
    spec = load_spec(str(ROOT / "examples/dgx-a100-superpod.yaml")).spec
    plan = expand(spec, load_catalog())
    names = [s.name for s in plan.servers]
    racks = [h for g in inventory if g.startswith("rack_") for h in _hosts(inventory, g)]
    assert sorted(racks) == sorted(names)
    sus = {f"su_{su.name.replace('-', '_')}": list(su.servers) for su in plan.sus}
    hosts = _plays_hosts(root, spec.name, [*sus, "dgx", "nvswitch_servers"])
    assert {pattern: hosts[pattern] for pattern in sus} == sus
    # index order: the rolling plays' one-SU batches depend on it
    assert hosts["dgx"] == names == _play_hosts(root, spec.name, "dgx")
    assert sorted(hosts["nvswitch_servers"]) == sorted(names)


def test_host_vars_hold_only_what_differs_per_host(
    superpod: tuple[Path, dict[str, object]],
) -> None:
    _, inventory = superpod
    hostvars = inventory["_meta"]["hostvars"]  # type: ignore[index]
    first = hostvars["dgx001"]
    assert set(first) | {"railplan_pod"} >= HOST_VARS
    assert first["railplan_su"] == "dgx-su01" and first["railplan_slot"] == 1
    spec = load_spec(str(ROOT / "examples/dgx-a100-superpod.yaml")).spec
    assert first["nvidia_driver_version"] == spec.software.driver  # from group_vars/all.yml
    assert "dgx001" in hostvars and len(hostvars) == spec.gpu_servers  # nothing but servers
    assert len({v["ansible_host"] for v in hostvars.values()}) == len(hostvars)


def test_host_vars_files_carry_no_group_values(superpod: tuple[Path, dict[str, object]]) -> None:
    root, _ = superpod
    for path in (root / "inventories").glob("*/host_vars/*.yml"):
        assert set(yaml.safe_load(path.read_text())) <= HOST_VARS, path


def test_nccl_hcas_follow_the_rails(superpod: tuple[Path, dict[str, object]]) -> None:
    root, _ = superpod
    group_vars = yaml.safe_load((root / "inventories/a100-superpod/group_vars/dgx.yml").read_text())
    spec = load_spec(str(ROOT / "examples/dgx-a100-superpod.yaml")).spec
    plan = expand(spec, load_catalog())
    assert group_vars["nccl_ib_hca"] == list(plan.servers[0].hcas)
    assert group_vars["acceptance_ib_rate_gbps"] == 200
    assert group_vars["acceptance_su_expected_busbw_gbytes_per_s"] > 0


@pytest.mark.parametrize(("planes", "per_plane"), [(1, 8), (2, 4), (8, 1)])
def test_acceptance_knows_the_rails_of_one_plane(planes: int, per_plane: int) -> None:
    """A server alone in its SU measures HCA k against its next HCA of the same plane, so the
    role must know where the planes split the rails (rail r in plane r * P // rails)."""
    text = yaml.safe_dump(
        {
            "name": "t",
            "site": {"management_cidr": "10.0.0.0/8", "bmc_cidr": "11.0.0.0/8"},
            "node_groups": [{"name": "gpu", "node": "dgx-h100", "count": 64}],
            "fabrics": {"compute": {"switch": "qm9700", "su_size": 32, "planes": planes}},
        }
    )
    spec = load_spec_text(text).spec
    catalog = load_catalog()
    plan = expand(spec, catalog)
    values = node_group_vars(spec, catalog, plan, spec.node_groups[0])
    assert len(values["nccl_ib_hca"]) == 8
    assert values["acceptance_ib_rails_per_plane"] == per_plane


def test_acceptance_runs_at_the_size_the_thresholds_were_predicted_at() -> None:
    defaults = yaml.safe_load((ROOT / "playbooks/roles/acceptance/defaults/main.yml").read_text())
    assert defaults["acceptance_nccl_size"] == f"{ACCEPTANCE_BYTES >> 30}G"


def _playbook(spec_text: str) -> list[dict[str, object]]:
    spec = load_spec_text(spec_text).spec
    catalog = load_catalog()
    files = ansible_files(spec, catalog, expand(spec, catalog))
    plays = yaml.safe_load(files[f"playbooks/{spec.name}.yml"])
    assert isinstance(plays, list)
    return plays


def _roles(plays: list[dict[str, object]]) -> set[str]:
    names = set()
    for play in plays:
        names |= {r["role"] for r in play.get("roles", [])}  # type: ignore[attr-defined, index]
        for task in play.get("post_tasks", []):  # type: ignore[attr-defined]
            for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if key in task:
                    names.add(task[key]["name"])
    return names


LAB = """
name: lab
node_groups:
  - {name: train, node: dgx-h100, count: 8, hostname: "t{index:02d}"}
fabrics:
  compute: {switch: qm9700, su_size: 4, rail_optimized: true}
"""


def test_the_playbook_imports_only_the_roles_the_cluster_needs() -> None:
    plain = _roles(_playbook(LAB))
    assert "mig" not in plain and "sharp" not in plain
    assert {"nvidia_driver", "fabric_manager", "nccl", "dcgm", "acceptance"} <= plain
    sharp = LAB.replace(
        "rail_optimized: true", "rail_optimized: true, sharp: true, subnet_manager: opensm"
    )
    plays = _playbook(sharp)
    assert "sharp" in _roles(plays)
    rolling = [p["hosts"] for p in plays if "serial" in p]
    assert rolling == ["train:!control_hosts", "control_hosts"]  # the subnet managers last


def test_disruptive_plays_roll_one_su_at_a_time() -> None:
    rolling = [p for p in _playbook(LAB) if "serial" in p]
    assert [p["hosts"] for p in rolling] == ["train"]
    play = rolling[0]
    assert play["serial"] == "{{ railplan_rolling_batch | default(4) }}"
    assert play["max_fail_percentage"] == 10 and play["strategy"] == "linear"
    assert {r["role"] for r in play["roles"]} >= {"nvidia_driver"}  # type: ignore[attr-defined, index]


def test_render_is_deterministic() -> None:
    spec = load_spec(str(ROOT / "examples/a100-lab-mig.yaml")).spec
    catalog = load_catalog()
    first = render_tree(spec, catalog, expand(spec, catalog))
    second = render_tree(spec, catalog, expand(spec, catalog))
    assert first == second


def test_a_second_render_is_byte_identical_and_an_edit_is_kept(tmp_path: Path) -> None:
    spec_file = ROOT / "examples/a100-lab-mig.yaml"
    assert _render(spec_file, tmp_path).returncode == 0
    snapshot = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    again = _render(spec_file, tmp_path)
    assert again.returncode == 0 and "0 files written" in again.stdout
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == snapshot
    edited = tmp_path / "inventories/a100-lab/group_vars/train.yml"
    edited.write_text(edited.read_text() + "my_setting: 1\n")
    refused = _render(spec_file, tmp_path)
    assert refused.returncode == 1
    assert "inventories/a100-lab/group_vars/train.yml" in refused.stderr
    assert "my_setting" in edited.read_text()
    forced = _render(spec_file, tmp_path, "--force")
    assert forced.returncode == 0 and "my_setting" not in edited.read_text()


def test_a_spec_with_lint_errors_renders_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nnode_groups: [{name: g, node: dgx-a100-640gb, count: 2, mig: nope}]\n"
    )
    result = _render(bad, tmp_path / "out")
    assert result.returncode == 1
    assert "not rendered" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_node_group_named_like_a_reserved_group_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nnode_groups: [{name: gpu_servers, node: dgx-h100, count: 1}]\n")
    result = _render(spec, tmp_path / "out")
    # lint's RP005 refuses it first, located (render's own check stays as a backstop)
    assert result.returncode == 1
    assert f"{spec}:2:" in result.stderr and "RP005" in result.stderr
    assert "reserved" in result.stderr and "Traceback" not in result.stderr


_NAMES = st.from_regex(r"[a-z]([a-z0-9_]{0,7}[a-z0-9])?", fullmatch=True).filter(
    lambda n: not reserved_group(n)
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=st.from_regex(r"[a-z]([a-z0-9-]{0,11}[a-z0-9])?", fullmatch=True),
    groups=st.lists(_NAMES, min_size=1, max_size=3, unique=True),
    prefix=st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True),
    counts=st.lists(st.integers(1, 9), min_size=3, max_size=3),
)
def test_any_valid_spec_renders_yaml_that_parses_inside_its_tree(
    cluster: str, groups: list[str], prefix: str, counts: list[int]
) -> None:
    """Spec values reach paths, YAML and JSON: whatever the spec allows must stay valid."""
    lines = [f"name: {cluster}", "node_groups:"]
    for i, name in enumerate(groups):
        lines.append(
            f"  - {{name: {name}, node: dgx-h100, count: {counts[i]}, "
            f"hostname: '{prefix}{i}-{{index:02d}}'}}"
        )
    lines += ["fabrics:", "  compute: {switch: qm9700, su_size: 4}"]
    spec = load_spec_text("\n".join(lines) + "\n").spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    for path, data in tree.items():
        assert not path.startswith(("/", "..")) and "/../" not in path
        if path.endswith(".yml") and not path.startswith("playbooks/roles/"):
            assert yaml.safe_load(data) is not None, path
    hosts = json.loads(tree[f"inventories/{cluster}/hosts.yml"])
    listed = [h for g in groups for h in hosts["all"]["children"][g]["hosts"]]
    assert len(listed) == sum(counts[: len(groups)])


def _group_vars(spec_text: str) -> dict[str, dict[str, object]]:
    """Each group_vars file of the rendered inventory, by file stem."""
    spec = load_spec_text(spec_text).spec
    catalog = load_catalog()
    files = ansible_files(spec, catalog, expand(spec, catalog))
    prefix = f"inventories/{spec.name}/group_vars/"
    return {
        path[len(prefix) : -len(".yml")]: yaml.safe_load(text)
        for path, text in files.items()
        if path.startswith(prefix)
    }


MIXED = """
name: mixed
node_groups:
  - {name: h100, node: dgx-h100, count: 2, hostname: "h{index:02d}"}
  - {name: a100, node: dgx-a100-640gb, count: 2, hostname: "a{index:02d}"}
software: {driver: %s%s}
"""


@pytest.mark.parametrize(
    ("driver", "choice", "h100", "a100"),
    [
        ("550.90.07", "", "open", "proprietary"),  # auto: open on Hopper; A100 below R560
        ("560.35.03", "", "open", "open"),  # auto: open is NVIDIA's default from R560
        ("550.90.07", ", gpu_kernel_modules: proprietary", "proprietary", "proprietary"),
        ("550.90.07", ", gpu_kernel_modules: open", "open", "open"),
    ],
)
def test_each_node_group_gets_the_kernel_module_flavour_of_its_gpu(
    driver: str, choice: str, h100: str, a100: str
) -> None:
    group_vars = _group_vars(MIXED % (driver, choice))
    assert group_vars["h100"]["nvidia_driver_kernel_modules"] == h100
    assert group_vars["a100"]["nvidia_driver_kernel_modules"] == a100


def test_on_kubernetes_the_gpu_operator_owns_mig_and_dcgm() -> None:
    spec_text = (ROOT / "examples/a100-lab-mig.yaml").read_text()
    group_vars = _group_vars(spec_text)
    assert group_vars["all"]["dcgm_service_enabled"] is False
    assert group_vars["all"]["dcgm_exporter_enabled"] is False
    mig_groups = [v for k, v in group_vars.items() if "mig_config_name" in v]
    assert mig_groups and all(v["mig_manager_owner"] == "gpu_operator" for v in mig_groups)
    slurm = _group_vars(spec_text.replace("kind: kubernetes", "kind: slurm"))
    assert "dcgm_service_enabled" not in slurm["all"]  # the role default: the host engine runs
    assert all("mig_manager_owner" not in v for v in slurm.values())


def test_the_acceptance_ib_rate_follows_a_groups_stated_nics() -> None:
    """`node_groups[].compute_nics` (a server the catalog lacks): the acceptance role checks
    each rail's ib_write_bw against the group's NIC rate, not the catalog node's."""
    catalog = load_catalog()
    rates = {}
    for extra in ("", ", compute_nics: {count: 8, gbps: 200}"):
        spec = load_spec_text(
            LAB.replace('hostname: "t{index:02d}"', f'hostname: "t{{index:02d}}"{extra}')
        ).spec
        files = ansible_files(spec, catalog, expand(spec, catalog))
        group_vars = yaml.safe_load(files["inventories/lab/group_vars/train.yml"])
        rates[extra] = group_vars["acceptance_ib_rate_gbps"]
    assert list(rates.values()) == [400, 200]  # NDR ConnectX-7 by the catalog; as stated
