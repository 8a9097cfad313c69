"""Rules about the node software stack: driver against CUDA, GPU and MIG; Fabric Manager."""

from __future__ import annotations

from collections.abc import Iterator

from infra.catalog.distro_slurm import distro_slurm
from infra.catalog.drivers import (
    CUDA_DRIVER_MINIMUMS,
    OPEN_MODULES_FIRST_BRANCH,
    comparable,
    cuda_major,
    cuda_min_driver,
)
from infra.catalog.nccl import version_key
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups, known_mig_uses


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


def _older(version: str, minimum: str) -> bool:
    """Whether dotted ``version`` is below ``minimum`` (numerically, zero-padded)."""
    return version_key(version) < version_key(minimum)


@rule(
    "RP032",
    "driver-below-cuda-minimum",
    Severity.ERROR,
    "The NVIDIA driver is older than the CUDA version's minimum driver, or CUDA is unknown.",
)
def driver_below_cuda_minimum(ctx: LintContext) -> Iterator[Violation]:
    """`software.driver` must be at least the minimum driver of `software.cuda`'s major release.

    Why: CUDA 11 and later run on any driver of their major family's minimum or newer
    (minor-version compatibility), and on nothing older: the CUDA Toolkit release notes'
    table "CUDA Toolkit and Corresponding Driver Versions" gives CUDA 12.x >= 525.60.13 and
    CUDA 11.x >= 450.80.02 on Linux, and NVIDIA's CUDA Compatibility guide CUDA 13.x >= 580
    (`infra.catalog.drivers`). Below it every CUDA program fails with "CUDA driver version is
    insufficient for CUDA runtime version". A CUDA major release railplan has no minimum for
    is reported too: the version cannot be checked and is likely a typo.
    Fix: raise `software.driver` to the minimum (or the driver shipped with the toolkit), or
    use a CUDA release of the driver's family.
    """
    sw = ctx.loaded.spec.software
    if not comparable(sw.driver, sw.cuda):
        return  # no release has such a version; the schema bounds versions
    minimum = cuda_min_driver(sw.cuda)
    if minimum is None:
        known = ", ".join(f"{m}.x" for m in sorted(CUDA_DRIVER_MINIMUMS))
        yield Violation(
            "software.cuda",
            f"CUDA {sw.cuda}: railplan knows no CUDA {cuda_major(sw.cuda)}.x release "
            f"(known: {known}), so its driver minimum cannot be checked",
            "use a released CUDA version, e.g. 12.4",
        )
    elif _older(sw.driver, minimum.driver):
        yield Violation(
            "software.driver",
            f"driver {sw.driver} is older than CUDA {sw.cuda}'s minimum driver "
            f"{minimum.driver} (CUDA {minimum.cuda_major}.x needs >= {minimum.driver})",
            f"use driver {minimum.driver} or later, or an older CUDA",
        )


@rule(
    "RP033",
    "driver-below-gpu-minimum",
    Severity.ERROR,
    "The NVIDIA driver branch predates the first branch that supports a node's GPU.",
)
def driver_below_gpu_minimum(ctx: LintContext) -> Iterator[Violation]:
    """`software.driver` must be of a branch that supports every node group's GPU.

    Why: a driver older than the GPU does not know its PCI id: nvidia-smi finds no device and
    the node has no GPUs. The first production branches are R450 for A100, R525 for H100 and
    R550 for H200 (catalog `mig-driver-branches`, the branch that first shipped each GPU).
    Fix: raise `software.driver` to a driver of that branch or later.
    """
    sw = ctx.loaded.spec.software
    if not comparable(sw.driver):
        return
    reported: set[str] = set()
    for _, group, _, gpu in known_groups(ctx):
        first = gpu.first_driver_branch
        if first is not None and sw.driver_branch < first and gpu.name not in reported:
            reported.add(gpu.name)
            yield Violation(
                "software.driver",
                f"driver {sw.driver} (R{sw.driver_branch}) predates {gpu.name} (node group "
                f"{group.name!r}): its first supported branch is R{first}",
                f"use an R{first} driver or later",
            )


@rule(
    "RP035",
    "kernel-modules-unusable",
    Severity.ERROR,
    "The chosen NVIDIA kernel-module flavour cannot drive a node's GPU on this driver branch.",
)
def kernel_modules_unusable(ctx: LintContext) -> Iterator[Violation]:
    """`software.gpu_kernel_modules` must be a flavour the driver branch has and the GPU runs.

    Why: NVIDIA ships two flavours of its kernel modules (driver installation guide, "Kernel
    Modules"): the open ones only from the 515 branch on, so `open` on an older branch
    installs packages that do not exist; and GPUs the catalog marks `open_kernel_modules:
    required` (Grace Hopper, Blackwell) are driven by the open flavour only, so
    `proprietary` leaves the node without GPUs. DMA-BUF GPUDirect RDMA also needs the open
    flavour: with `proprietary` the rdma role falls back to nvidia-peermem.
    Fix: set `gpu_kernel_modules: auto` (NVIDIA's recommendation per GPU and branch), or
    raise the driver to R515 or later for `open`.
    """
    sw = ctx.loaded.spec.software
    first = OPEN_MODULES_FIRST_BRANCH
    if sw.gpu_kernel_modules == "open" and comparable(sw.driver) and sw.driver_branch < first:
        yield Violation(
            "software.gpu_kernel_modules",
            f"open kernel modules on driver {sw.driver} (R{sw.driver_branch}): NVIDIA "
            f"ships them from R{first} on",
            f"use gpu_kernel_modules: auto, or an R{first} driver or later",
        )
    if sw.gpu_kernel_modules != "proprietary":
        return
    reported: set[str] = set()
    for _, group, _, gpu in known_groups(ctx):
        if gpu.open_kernel_modules == "required" and gpu.name not in reported:
            reported.add(gpu.name)
            yield Violation(
                "software.gpu_kernel_modules",
                f"{gpu.name} (node group {group.name!r}) runs only on NVIDIA's open kernel "
                "modules, not the proprietary ones",
                "set gpu_kernel_modules: auto or open",
            )


@rule(
    "RP018",
    "mig-driver-too-old",
    Severity.ERROR,
    "MIG is used on a GPU with a driver older than the GPU's first MIG driver.",
)
def mig_driver_too_old(ctx: LintContext) -> Iterator[Violation]:
    """A MIG node group needs at least the exact first driver with MIG on its GPU.

    Why: NVIDIA's MIG user guide ("Deployment Considerations") lists the minimum driver for MIG
    per GPU: A100 R450 (>= 450.80.02), H100 R525 (>= 525.85.12), H200 R550 (>= 550.90.07).
    Within the first branch, earlier drivers lack MIG or parts of it, so mig-parted fails on
    the node. A driver of an older branch is reported by RP033 (and RP011), not here.
    Fix: raise `software.driver` to the minimum the message names, or later.
    """
    sw = ctx.loaded.spec.software
    if not comparable(sw.driver):
        return
    reported: set[str] = set()
    for use, _, gpu in known_mig_uses(ctx):
        mig = gpu.mig
        if mig is None or mig.min_driver is None or gpu.name in reported:
            continue
        if not use.state.splits:
            continue
        if sw.driver_branch >= mig.min_driver_branch and _older(sw.driver, mig.min_driver):
            reported.add(gpu.name)
            yield Violation(
                "software.driver",
                f"driver {sw.driver} is older than {gpu.name}'s first MIG driver "
                f"{mig.min_driver} ({use.label} uses MIG)",
                f"use driver {mig.min_driver} or later",
            )


# DCGM 4.2.3 is the release the dcgm role's exporter package pin (datacenter-gpu-manager-exporter
# 4.1.3) is paired with: dcgm-exporter tag 4.2.3-4.1.3 (NVIDIA/gpu-operator#1475).
EXPORTER_PAIRED_DCGM = "4.2.3"


@rule(
    "RP036",
    "slurm-gpu-metrics-need-dcgm4",
    Severity.WARNING,
    "A Slurm cluster on DCGM 3 gets no GPU metrics: NVIDIA packages dcgm-exporter for DCGM 4.",
)
def slurm_gpu_metrics_need_dcgm4(ctx: LintContext) -> Iterator[Violation]:
    """Slurm hosts run dcgm-exporter from NVIDIA's package, which exists for DCGM 4 only.

    Why: on Slurm nothing but the host exporter (the dcgm role) feeds the alert rules railplan
    renders under `files/monitoring/`. NVIDIA publishes dcgm-exporter for DCGM 3 as container
    images only; the `datacenter-gpu-manager-exporter` package in the CUDA repository depends
    on DCGM 4. With `software.dcgm` 3.x the renderer leaves the exporter off (it would need a
    binary you build and host), so the cluster runs with no GPU metrics and no alert can fire.
    Fix: set `software.dcgm: "4.2.3"` (paired with the role's exporter 4.1.3), or host a DCGM 3
    exporter binary and set `dcgm_exporter_binary_url` and `dcgm_exporter_enabled: true` in the
    inventory.
    """
    spec = ctx.loaded.spec
    if spec.scheduler.kind == "slurm" and version_key(spec.software.dcgm)[:1] < (4,):
        yield Violation(
            "software.dcgm",
            f"DCGM {spec.software.dcgm} on a Slurm cluster: NVIDIA packages dcgm-exporter for "
            "DCGM 4 only, so the hosts export no GPU metrics and the GPU alerts never fire",
            f'set software.dcgm: "{EXPORTER_PAIRED_DCGM}", or host a DCGM 3 exporter binary '
            "(dcgm_exporter_binary_url)",
        )


@rule(
    "RP037",
    "slurm-mig-needs-nvml",
    Severity.WARNING,
    "MIG on Slurm needs a Slurm built with NVML; the target OS's own Slurm has none.",
)
def slurm_mig_needs_nvml(ctx: LintContext) -> Iterator[Violation]:
    """A MIG-partitioned node group on Slurm, on an OS whose own Slurm cannot detect MIG.

    Why: railplan's gres.conf describes MIG devices with `AutoDetect=nvml`, as SchedMD
    documents for MIG: slurmd asks NVML for each GPU's MIG devices and their
    /dev/nvidia-caps files. That needs Slurm's gpu/nvml plugin, which is built only against
    NVIDIA's NVML headers; the slurm role installs the distribution's Slurm, and neither
    Ubuntu 22.04's 21.08 nor 24.04's 23.11 has it (`infra.catalog.distro_slurm`). slurmd on
    those nodes stops with "We were configured to autodetect nvml functionality, but we
    weren't able to find that lib when Slurm was configured" (seen on the cluster twin).
    Fix: install a Slurm built with NVML on those nodes (SchedMD's or NVIDIA's packages,
    through the slurm role's package variables or a site repository), or schedule the MIG
    groups with Kubernetes (`scheduler.kind: kubernetes`), whose device plugin reads MIG
    itself.
    """
    spec = ctx.loaded.spec
    distro = distro_slurm(spec.software.os)
    if spec.scheduler.kind != "slurm" or distro is None or distro.nvml:
        return
    for i, (group, mig) in enumerate(zip(spec.node_groups, ctx.migs, strict=True)):
        if mig.split:
            yield Violation(
                f"node_groups[{i}].mig",
                f"node group '{group.name}' is MIG-partitioned on Slurm, but {spec.software.os}'s "
                f"Slurm {distro.version} has no NVML support: slurmd cannot detect the MIG "
                "devices (gres.conf AutoDetect=nvml) and stops on these nodes",
                "install a Slurm built with NVML on these nodes, or schedule MIG groups "
                "with Kubernetes",
            )
