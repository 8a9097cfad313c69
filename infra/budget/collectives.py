"""NCCL collective times, with NCCL's own model structure (src/graph/tuning.cc, NCCL 2.30).

For each enabled (algorithm, protocol) pair NCCL estimates ``time = latency + bytes /
algBw`` and runs the fastest; we do the same. Latencies are NCCL's tables (base + hardware
latency per hop, µs). Bandwidths follow NCCL's derivation: a bus bandwidth from the
topology (NVLink inside a node, NICs between nodes), capped per protocol (LL, LL128) and
per channel, then turned into algorithm bandwidth (``busBw * n / nsteps`` for ring-like
algorithms, ``busBw / 2`` for Tree and CollNet). Outputs follow nccl-tests: ``algbw = S/t``
and ``busbw = algbw * factor`` (2(n-1)/n for all-reduce, (n-1)/n for all-gather,
reduce-scatter and all-to-all, 1 for broadcast).

Where NCCL measures at run time (its topology search picks channel counts and per-channel
speeds), we substitute: per-GPU NVLink bandwidth = links x NCCL's per-link speed
(`topo.h`: 20.0 GB/s SM80, 20.6 SM90); per-NIC bandwidth = the fastest inter-node speed in
NCCL's search list not above the NIC's line rate (48 GB/s for NDR, 24 for HDR, 12 for
100 Gb/s EFA; maintainers: "CX-7 at NDR ... up to 48-49GB/s per NIC", "the peak for 200G HDR
is 24GB/s"). NVLS (NVLink SHARP) efficiency is NCCL's `nvlsEfficiency` (0.85 on Hopper).
Two constants are fitted to published measurements, not taken from NCCL: the NVLS
all-reduce gain (1.6, NCCL's model says 2) and a 10 µs per-call overhead (NCCL ranks
algorithms without it; nccl-tests times include it). `docs/accuracy.md` shows how far the
predictions are from 82 published nccl-tests rows.

>>> t = CommTopology("hopper", gpus_per_node=8, nodes=16, nvswitch=True, nvlink_links=18,
...                  nics=8, nic_gbps=400, cpu="intel", sharp=False)
>>> row = predict(t, "all_reduce", 8 * 2**30)
>>> row.algorithm, row.protocol, round(row.busbw_GBps)
('nvls_tree', 'simple', 382)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from infra.errors import RailplanError

__all__ = [
    "COLLECTIVES",
    "MAX_PREDICT_ROWS",
    "CommTopology",
    "Prediction",
    "bus_factor",
    "predict",
    "predict_table",
]

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"]
COLLECTIVES: tuple[Collective, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "alltoall",
)
PROTOCOLS = ("ll", "ll128", "simple")

# --- NCCL 2.30.7 constants (src/graph/tuning.cc), µs and GB/s ------------------------------
BASE_LAT = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0, 0, 0),
    "collnet_chain": (0, 0, 0),
    "nvls": (0, 0, 0),
    "nvls_tree": (0, 0, 0),
}
HW_LAT_NVLINK = {
    "tree": (0.6, 1.25, 4.0),
    "ring": (0.6, 1.9, 3.4),
    "collnet_direct": (0, 0, 3.7),
    "collnet_chain": (0, 0, 2.8),
    "nvls": (0, 0, 25),
    "nvls_tree": (0, 0, 25),
}
HW_LAT_NET = {
    "tree": (5.0, 8.5, 14),
    "ring": (2.7, 4.0, 14.0),
    "collnet_direct": (0, 0, 31),
    "collnet_chain": (0, 0, 30),
    "nvls": (0, 0, 18),
    "nvls_tree": (0, 0, 20.9),
}
# Columns: 1 node, 2 nodes, >= 3 nodes. Multi-node LL rows are keyed by CPU vendor.
LL_MAX_BW = {
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "intel": (39.0, 39.0, 20.4),
    "amd": (87.7, 22.5, 19.0),
}
PER_CH_RING_LL128 = {"ampere": (20, 20, 20), "hopper": (36.7, 36.7, 36.7)}
PER_CH_TREE_LL128 = {"ampere": (20, 20, 20), "hopper": (36.7, 36.7, 29.0)}
PER_CH_TREE = {"ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0)}
PER_CH_NVLS_TREE = {"ampere": (24.0, 23.6, 17.8), "hopper": (0.0, 57.7, 45.5)}
NVLS_EFFICIENCY = {"ampere": 0.0, "hopper": 0.85}
NVLINK_LINK_BW = {"ampere": 20.0, "hopper": 20.6}  # src/graph/topo.h SM80_NVLINK_BW, SM90
INTER_SPEEDS = {
    "ampere": (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    "hopper": (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3),
}
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0}
# treeCorrectionFactor[proto][log2(bytes / 64)] for 64 B .. 256 MB
TREE_CORRECTION = {
    "ll": (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
    ),
    "ll128": (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.8,
        0.9,
        0.9,
        0.9,
        0.9,
        1.0,
        1.0,
        1.0,
    ),
    "simple": (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
        0.9,
    ),
}
RING_PLATEAU = 1.4  # "Plateau effect of ring" on Ampere and later
# Calibration (docs/accuracy.md): NCCL's tuning model doubles NVLS all-reduce bandwidth over
# the NVLink rate; measured H100/H200 single-node NVLS busbw is 466-482 GB/s (maintainers:
# "peak busBw of ~480GB/s", nccl-tests#212), i.e. a gain of about 1.6 over NVLink's 370.8.
NVLS_ALLREDUCE_GAIN = 1.6
# Calibration: NCCL's model has no per-call cost, but nccl-tests times include the kernel
# launch and completion. Measured small and medium rows sit about 5-25 µs above the model
# (A100 and H100, 1-8 nodes, docs/accuracy.md); 10 µs is the round middle of that range.
LAUNCH_OVERHEAD_US = 10.0


@dataclass(frozen=True)
class CommTopology:
    """What NCCL's model needs to know about the ranks of one communicator.

    Attributes:
        arch: GPU architecture.
        gpus_per_node: ranks per node (ppn).
        nodes: nodes in the communicator.
        nvswitch: GPUs of a node meet at NVSwitch chips (enables NVLS on Hopper).
        nvlink_links: NVLink ports per GPU.
        nics: compute-fabric NICs per node.
        nic_gbps: line rate of each NIC, Gb/s.
        cpu: host CPU vendor (NCCL's multi-node LL caps and network overhead depend on it).
        sharp: InfiniBand SHARP is usable (NCCL CollNet; needs a rail-optimized fabric).
    """

    arch: Literal["ampere", "hopper"]
    gpus_per_node: int
    nodes: int
    nvswitch: bool
    nvlink_links: int
    nics: int
    nic_gbps: float
    cpu: Literal["intel", "amd"]
    sharp: bool
    nvls: bool = True  # NCCL_NVLS_ENABLE; NVLS also needs Hopper and NVSwitch

    @property
    def ranks(self) -> int:
        """GPUs in the communicator."""
        return self.gpus_per_node * self.nodes

    @property
    def intra_gbs(self) -> float:
        """Per-GPU NVLink bandwidth NCCL's graph sees (GB/s, one direction)."""
        return self.nvlink_links * NVLINK_LINK_BW[self.arch]

    @property
    def nic_gbs(self) -> float:
        """Achievable GB/s per NIC: the fastest search speed within the line rate."""
        line = self.nic_gbps / 8
        return next((s for s in INTER_SPEEDS[self.arch] if s <= line), line)

    @property
    def inter_gbs(self) -> float:
        """Network bandwidth leaving one node (GB/s)."""
        return self.nics * self.nic_gbs

    @property
    def channels(self) -> int:
        """Channels NCCL typically opens: two per NIC between nodes, 16 inside one."""
        return 2 * self.nics if self.nodes > 1 and self.nics else 16

    @property
    def scale(self) -> int:
        """NCCL's column index: 0 for one node, 1 for two, 2 for three or more."""
        return min(self.nodes, 3) - 1


@dataclass(frozen=True)
class Prediction:
    """One row of a predicted nccl-tests table."""

    bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str


def bus_factor(collective: Collective, n: int) -> float:
    """nccl-tests' busbw = algbw x factor (doc/PERFORMANCE.md)."""
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective == "broadcast":
        return 1.0
    return (n - 1) / n


def _nsteps(collective: Collective, n: int) -> int:
    return {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}.get(
        collective, n
    )


def _algorithms(t: CommTopology, collective: Collective) -> list[str]:
    """The algorithms NCCL enables for this collective on this topology."""
    nvls = t.nvls and t.arch == "hopper" and t.nvswitch and t.gpus_per_node > 1
    algos = ["ring"]
    if collective == "all_reduce":
        if t.nodes > 1:
            algos.append("tree")
        if nvls and (t.nodes == 1 or t.sharp):  # multi-node NVLS needs CollNet (IB SHARP)
            algos.append("nvls")
        if nvls and t.nodes > 1:
            algos.append("nvls_tree")
        if t.sharp and t.nodes > 1:
            algos += ["collnet_chain"] + (["collnet_direct"] if t.nvswitch else [])
    elif collective in ("all_gather", "reduce_scatter") and nvls and (t.nodes == 1 or t.sharp):
        algos.append("nvls")
    return algos


def _ring_bus_bw(t: CommTopology) -> float:
    if t.nodes == 1:
        return t.intra_gbs
    return min(t.intra_gbs, t.inter_gbs)


def _nvls_bus_bw(t: CommTopology, collective: Collective, algo: str) -> float:
    nch = t.channels
    intra = t.intra_gbs * NVLS_EFFICIENCY[t.arch] * (nch - 1) / nch
    intra *= (
        NVLS_ALLREDUCE_GAIN
        if collective == "all_reduce"
        else (t.gpus_per_node - 1) / t.gpus_per_node
    )
    if t.nodes == 1:
        return intra
    # NVLS between nodes runs on IB SHARP (CollNet): the switches reduce, so each NIC
    # carries the data once instead of twice; NVLSTree on two nodes doubles as NCCL does.
    doubled = algo == "nvls" or (algo == "nvls_tree" and t.nodes <= 2)
    inter = t.inter_gbs * (2 if doubled else 1)
    cap = nch * PER_CH_NVLS_TREE[t.arch][t.scale] if algo == "nvls_tree" else math.inf
    return min(intra, inter, cap)


def _bus_bw(t: CommTopology, collective: Collective, algo: str, proto: str) -> float:
    """NCCL's busBw for one (algorithm, protocol), after its per-protocol caps."""
    nch, s = t.channels, t.scale
    if algo in ("nvls", "nvls_tree"):
        return _nvls_bus_bw(t, collective, algo) if proto == "simple" else 0.0
    if algo.startswith("collnet"):
        return _collnet_bus_bw(t) if proto == "simple" else 0.0
    bw = _ring_bus_bw(t)
    ll_cap = LL_MAX_BW[t.arch if t.nodes == 1 else t.cpu][s]
    if algo == "ring":
        return {
            "ll": min(ll_cap, bw * 0.5),
            "ll128": min(bw * 0.92, nch * PER_CH_RING_LL128[t.arch][s]),
            "simple": bw,
        }[proto]
    if t.nodes == 2:  # NCCL uses bwIntra on <= 2 nodes: each half crosses the network once
        bw = min(t.intra_gbs, 2 * t.inter_gbs)
    tree = min(bw * 0.92, nch * PER_CH_TREE[t.arch][s])
    return {
        "ll": min(tree / 3.8, ll_cap),
        "ll128": min(tree * 120 / 128, nch * PER_CH_TREE_LL128[t.arch][s]),
        "simple": tree,
    }[proto]


def _collnet_bus_bw(t: CommTopology) -> float:
    """CollNet (IB SHARP): switches reduce, so each NIC carries the data once, not twice.

    NCCL divides by ``factor = ppn / heads - (ppn / heads - 1) / 2`` when a node has fewer
    NICs (CollNet heads) than GPUs, and takes 15 % off on Hopper.
    """
    bw = min(t.intra_gbs, 2 * t.inter_gbs)
    factor = t.gpus_per_node / max(t.nics, 1)
    if factor > 1:
        bw /= factor - (factor - 1) / 2
    return bw * (0.85 if t.arch == "hopper" else 1.0)


def _latency(t: CommTopology, collective: Collective, algo: str, proto: str) -> float:
    """NCCL's latency (µs) for one (algorithm, protocol)."""
    p = PROTOCOLS.index(proto)
    base, intra_hw, inter = BASE_LAT[algo][p], HW_LAT_NVLINK[algo][p], HW_LAT_NET[algo][p]
    overhead = NET_OVERHEAD[t.cpu] * (3 if proto == "simple" else 1) if t.nodes > 1 else 0.0
    intra = max(intra_hw, overhead)
    log_nodes = math.log2(t.nodes) if t.nodes > 1 else 0.0
    ppn, n = t.gpus_per_node, t.ranks
    if algo == "ring":
        steps = _nsteps(collective, n)
        inter_steps = (2 if collective == "all_reduce" else 1) * (t.nodes - 1)
        return base + (steps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return base + 2 * ((ppn - 1) * intra + log_nodes * inter)
    if algo == "nvls":
        return intra + (inter if t.nodes > 1 else 0.0)
    if algo == "nvls_tree":
        return base + intra + 2 * log_nodes * inter
    if algo == "collnet_direct":
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    return base + 2 * (ppn - 1) * intra + inter  # collnet_chain


def _time_us(t: CommTopology, collective: Collective, algo: str, proto: str, nbytes: int) -> float:
    bus = _bus_bw(t, collective, algo, proto)
    if bus <= 0:
        return math.inf
    n = t.ranks
    ring_like = algo in ("ring", "nvls", "nvls_tree")
    alg = bus * n / _nsteps(collective, n) if ring_like else bus * 0.5
    if algo in ("tree", "nvls_tree") and collective == "all_reduce" and nbytes >= 64:
        index = min(int(math.log2(nbytes / 64)), 23)
        if algo == "tree":
            alg *= TREE_CORRECTION[proto][index]
    lat = _latency(t, collective, algo, proto)
    if (
        algo == "ring"
        and proto == "simple"
        and collective == "all_reduce"
        and t.nodes > 1
        and nbytes / (t.channels * n) >= 64
    ):
        lat *= RING_PLATEAU
    return lat + nbytes / (1000 * alg)


def _alltoall(t: CommTopology, nbytes: int) -> tuple[float, str]:
    """All-to-all runs as point-to-point sends: bounded by NVLink inside, NICs between."""
    n, ppn = t.ranks, t.gpus_per_node
    per_rank = nbytes / n  # each rank sends S/n to every other rank
    intra_bytes = per_rank * (ppn - 1)
    inter_bytes = per_rank * (n - ppn)
    nic_per_gpu = t.inter_gbs / ppn if t.nodes > 1 else math.inf
    seconds_us = max(intra_bytes / (1000 * t.intra_gbs), inter_bytes / (1000 * nic_per_gpu))
    lat = (
        BASE_LAT["ring"][2]
        + HW_LAT_NVLINK["ring"][2]
        + (HW_LAT_NET["ring"][2] if t.nodes > 1 else 0.0)
    )
    return lat + seconds_us, "p2p"


def predict(
    t: CommTopology, collective: Collective, nbytes: int, algorithms: tuple[str, ...] = ()
) -> Prediction:
    """Predict one nccl-tests row: the fastest enabled (algorithm, protocol) for ``nbytes``.

    ``algorithms`` restricts the choice, as ``NCCL_ALGO`` does (e.g. ``("ring",)``).
    """
    if t.ranks < 2:
        raise ValueError("a collective needs at least 2 GPUs")
    if collective == "alltoall":
        time_us, algo = _alltoall(t, nbytes)
        proto = "simple"
    else:
        enabled = [a for a in _algorithms(t, collective) if not algorithms or a in algorithms]
        candidates = [
            (_time_us(t, collective, a, p, nbytes), a, p)
            for a in enabled or ["ring"]
            for p in PROTOCOLS
        ]
        time_us, algo, proto = min(candidates)
    time_us += LAUNCH_OVERHEAD_US  # NCCL ranks on time without it; nccl-tests measures it
    algbw = nbytes / (time_us * 1000)
    return Prediction(
        nbytes,
        round(time_us, 2),
        round(algbw, 2),
        round(algbw * bus_factor(collective, t.ranks), 2),
        algo,
        proto,
    )


MAX_PREDICT_ROWS = 10_000
"""Most rows `predict_table` makes: nccl-tests' own sweeps have tens; 10,000 stay within
seconds and a few MB, while ``--step-factor 1.000001`` over 8 B..8 GiB would need 22 million."""


def table_rows(min_bytes: int, max_bytes: int, step_factor: float) -> int:
    """How many rows a sweep from ``min_bytes`` to ``max_bytes`` by ``step_factor`` has.

    Raises:
        RailplanError: a bound or the factor is not finite, or the sweep has more than
            `MAX_PREDICT_ROWS` rows (the hint names the smallest factor that fits).
    """
    if not math.isfinite(step_factor) or step_factor <= 1 or not 1 <= min_bytes <= max_bytes:
        raise RailplanError(
            "need 1 <= --min-bytes <= --max-bytes and a finite --step-factor > 1",
            hint="e.g. --min-bytes 8 --max-bytes 8GiB --step-factor 2",
        )
    ratio = math.log(max_bytes / min_bytes)
    rows = math.floor(ratio / math.log(step_factor) + 1e-9) + 1
    if rows > MAX_PREDICT_ROWS:
        least = math.exp(ratio / (MAX_PREDICT_ROWS - 1))
        raise RailplanError(
            f"--step-factor {step_factor} gives {rows:,} rows, more than the "
            f"{MAX_PREDICT_ROWS:,} railplan makes",
            hint=f"use --step-factor {math.ceil(least * 1e6) / 1e6:g} or more, "
            "or a narrower --min-bytes..--max-bytes",
        )
    return rows


def predict_table(
    t: CommTopology,
    collective: Collective,
    min_bytes: int,
    max_bytes: int,
    step_factor: float = 2.0,
) -> list[Prediction]:
    """Rows from ``min_bytes`` to ``max_bytes`` multiplying by ``step_factor`` (nccl-tests -f).

    Raises:
        RailplanError: see `table_rows` (at most `MAX_PREDICT_ROWS` rows, finite factor).
    """
    count = table_rows(min_bytes, max_bytes, step_factor)
    rows: list[Prediction] = []
    size = float(min_bytes)
    while size <= max_bytes and len(rows) < count:
        rows.append(predict(t, collective, int(size)))
        size *= step_factor
    return rows
