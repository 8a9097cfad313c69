"""Rules about the node software stack: driver and Fabric Manager."""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups


@rule(
    "RP030",
    "fabric-manager-version-mismatch",
    Severity.ERROR,
    "Fabric Manager version differs from the driver version.",
)
def fabric_manager_version_mismatch(ctx: LintContext) -> Iterator[Violation]:
    """`software.fabric_manager` must equal `software.driver` (or be `auto`).

    Why: "the version of fabricmanager must match the NVIDIA driver installed"
    (NVIDIA/yum-packaging-fabric-manager README); nv-fabricmanager refuses to start on a
    mismatch, NVSwitch training is never done and every CUDA job on the node fails with
    "system not yet initialized" — the classic 3 a.m. page after a driver-only upgrade.
    Fix: set `fabric_manager: auto` so it follows the driver, or pin both to one version.
    """
    sw = ctx.loaded.spec.software
    if sw.fabric_manager not in ("auto", "disabled") and sw.fabric_manager != sw.driver:
        yield Violation(
            "software.fabric_manager",
            f"Fabric Manager {sw.fabric_manager} does not match driver {sw.driver}",
            "set fabric_manager: auto (it then follows the driver version)",
        )


@rule(
    "RP031",
    "fabric-manager-disabled-nvswitch",
    Severity.ERROR,
    "Fabric Manager is disabled but nodes have NVSwitch.",
)
def fabric_manager_disabled_nvswitch(ctx: LintContext) -> Iterator[Violation]:
    """NVSwitch systems (HGX/DGX A100, H100, H200; p4d, p5) need Fabric Manager running.

    Why: on NVSwitch baseboards the Fabric Manager configures the NVSwitch routing; without it
    GPUs cannot be used for CUDA work at all ("As of v2.x, DCGM no longer includes the Fabric
    Manager, which is a separate component that needs to be installed for NVSwitch based
    systems").
    Fix: set `software.fabric_manager: auto`.
    """
    if ctx.loaded.spec.software.fabric_manager != "disabled":
        return
    nvswitch_groups = sorted({g.name for _, g, node, _ in known_groups(ctx) if node.nvswitches})
    if nvswitch_groups:
        yield Violation(
            "software.fabric_manager",
            "Fabric Manager is disabled but node groups "
            f"{', '.join(nvswitch_groups)} have NVSwitch",
            "set fabric_manager: auto",
        )
