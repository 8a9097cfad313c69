"""The simulator powers off only servers the rendered slurm.conf lets Slurm power off.

Both read one answer, ``plan.facts.control`` (`infra.topology.facts`): the controller, the
OpenSM master and standby, ``exclude_groups`` and servers without a BMC stay on. Each
example is replayed as a Slurm cluster with power saving on (and, with a compute fabric,
with OpenSM on GPU servers too), and the simulator's eligible nodes are compared with the
rendered ``SlurmctldHost``, ``SuspendExcNodes`` and ``bmc-hosts``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.render.slurm_conf import slurm_files
from infra.simulate.engine import Replay
from infra.simulate.policy import SimPolicy
from infra.spec import Spec, load_spec
from infra.spec.scheduling import PowerSaving
from infra.topology import expand
from tests.conftest import ROOT
from tests.sim_helpers import catalog, trace_of
from tests.test_render_files import expand_hostlist

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def _slurm_with_power_saving(spec: Spec, opensm: bool) -> Spec:
    scheduler = spec.scheduler.model_copy(update={"kind": "slurm", "power_saving": PowerSaving()})
    update: dict[str, object] = {"scheduler": scheduler}
    compute = spec.fabrics.compute
    if opensm and compute is not None:
        fabric = compute.model_copy(update={"subnet_manager": "opensm"})
        update["fabrics"] = spec.fabrics.model_copy(update={"compute": fabric})
    return spec.model_copy(update=update)


def _kept_on_by_slurm_conf(files: dict[str, str]) -> set[str]:
    conf = files["slurm.conf"]
    controller = re.search(r"^SlurmctldHost=(\S+)$", conf, re.MULTILINE)
    excluded = re.search(r"^SuspendExcNodes=(\S+)$", conf, re.MULTILINE)
    assert controller is not None
    return {controller.group(1), *(expand_hostlist(excluded.group(1)) if excluded else [])}


@pytest.mark.parametrize("opensm", [False, True], ids=["sm-as-written", "opensm"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).stem)
def test_the_simulator_never_powers_off_a_server_slurm_conf_keeps_on(
    path: Path, opensm: bool
) -> None:
    spec = _slurm_with_power_saving(load_spec(str(path)).spec, opensm)
    cat = catalog()
    plan = expand(spec, cat)
    files = slurm_files(plan, spec, cat)
    kept = _kept_on_by_slurm_conf(files)
    mapped = [line.split()[0] for line in files["bmc-hosts"].splitlines()[1:]]
    run = Replay(spec, plan, cat, trace_of([]), SimPolicy())
    eligible = [n.name for n, may in zip(run.cluster.nodes, run.power.eligible, strict=True) if may]
    assert not kept & set(eligible), sorted(kept & set(eligible))[:5]
    assert eligible == mapped
    if opensm and spec.fabrics.compute is not None:
        assert set(plan.facts.control.subnet_managers) <= kept
