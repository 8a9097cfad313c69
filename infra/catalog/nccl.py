"""NCCL feature gates: the first NCCL release that has each algorithm railplan models or lints.

One table, shared by lint (a spec that asks for a feature its NCCL lacks) and the performance
model (an algorithm is never predicted below the release that added it). Each gate cites the
release note or source that introduced it; versions compare numerically, component by
component (``2.18.1`` < ``2.18.10``), and a shorter version is padded with zeros.

>>> nccl_has("2.16.5", "nvls")
False
>>> nccl_has("2.21.5", "nvls_ib_sharp")
True
>>> NCCL_FEATURES["collnet"].minimum
'2.7.3'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class NcclFeature:
    """One NCCL capability, the first release with it, and where that is documented."""

    name: str
    minimum: str
    what: str
    source: str


NCCL_FEATURES: Final[dict[str, NcclFeature]] = {
    feature.name: feature
    for feature in (
        NcclFeature(
            "collnet",
            "2.7.3",
            "IB SHARP through the CollNet algorithm and the NCCL-RDMA-SHARP plugin",
            "https://docs.nvidia.com/networking/display/sharpltsv391/"
            "using+nvidia+sharp+with+nvidia+nccl ('NCCL version 2.7.3 or higher')",
        ),
        NcclFeature(
            "collnet_direct",
            "2.14.3",
            "CollNet Direct (all-to-all inside the node, IB SHARP between nodes) beside CollNet "
            "Chain; before it NCCL had one CollNet algorithm, a chain through the node's GPUs",
            "NVIDIA/nccl src/include/devcomm.h: NCCL_ALGO_COLLNET only up to v2.13.4-1, "
            "NCCL_ALGO_COLLNET_DIRECT and _CHAIN from v2.14.3-1 (read in the repository's tags)",
        ),
        NcclFeature(
            "collnet_simple_only",
            "2.9.6",
            "CollNet without the LL protocol ('Oneshot CollNet only supports Simple'); before it "
            "CollNet also ran LL, the low-latency path of small SHARP all-reduces",
            "NVIDIA/nccl src/graph/tuning.cc: v2.8.4-1 gives CollNet LL a bandwidth ('busBw *= "
            "1.0/6.0') and latencies; v2.9.6-1 sets it to 0 (read in the repository's tags)",
        ),
        NcclFeature(
            "pxn",
            "2.12.6",
            "PXN: cross-rail traffic moved over NVLink to the GPU owning the right NIC",
            "NVIDIA/nccl commit d427af5d (2.12.6-1); ../shared/facts/fabric.md",
        ),
        NcclFeature(
            "nvls",
            "2.17.1",
            "NVLink SHARP (NVLS) inside one NVSwitch domain",
            "https://docs.nvidia.com/deeplearning/nccl/release-notes/rel_2-17-1.html "
            "('Add support for NVLink SHARP Reduction / Broadcast to accelerate intra-node "
            "allreduce operations', as quoted by a third party; the page itself was not read); "
            "NVIDIA/nccl v2.17.1 src/transport/nvls.cc has NCCL_NVLS_ENABLE and needs CUDA 12.1",
        ),
        NcclFeature(
            "nvls_ib_sharp",
            "2.18.1",
            "inter-node NVLS: NVLink SHARP + IB SHARP (NVLS) and NVLink SHARP + Tree (NVLSTree)",
            "https://docs.nvidia.com/deeplearning/nccl/release-notes/rel_2-18-1.html "
            "('Add inter-node algorithms for NVLink SHARP: NVLink SHARP + IB SHARP (NVLS), "
            "NVLink SHARP + Tree (NVLSTREE)')",
        ),
        NcclFeature(
            "nvls_multinode_ag_rs",
            "2.27.3",
            "all_gather and reduce_scatter on NVLS across nodes (NVLink SHARP + IB SHARP)",
            "PARTLY VERIFIED: NVIDIA/nccl src/device/all_gather.h has no network path for "
            "NVLS in 2.21.5 or 2.26.2 and a '// NVLS + IB SHARP' branch with user-buffer "
            "registration (netRegUsed) in a later tree, so it came after 2.26.2; that 2.27.3 "
            "is the first such release is assumed, not read in release notes",
        ),
        NcclFeature(
            "pat",
            "2.23.4",
            "PAT (Parallel Aggregated Trees) for all_gather and reduce_scatter at one GPU per node",
            "NVIDIA/nccl src/graph/tuning.cc: no PAT in 2.22.3, NCCL_ALGO_PAT for all_gather "
            "and reduce_scatter in 2.23.4 ('PAT only supports 1 GPU per node' by 2.25.1); "
            "sjeaugey, NVIDIA/nccl#1473: 'in 2.23 we introduced the PAT algorithms'",
        ),
    )
}


def version_key(version: str) -> tuple[int, ...]:
    """Numeric key of a dotted version, padded to four components (``2.18`` = ``2.18.0.0``)."""
    parts = tuple(int(part) for part in version.split("."))
    return parts + (0,) * (4 - len(parts))


def nccl_has(version: str, feature: str) -> bool:
    """Whether NCCL ``version`` has ``feature`` (a key of `NCCL_FEATURES`)."""
    return version_key(version) >= version_key(NCCL_FEATURES[feature].minimum)


__all__ = ["NCCL_FEATURES", "NcclFeature", "nccl_has", "version_key"]
