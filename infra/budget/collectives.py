"""NCCL collective times, with NCCL's own model structure (src/graph/tuning.cc, NCCL 2.30).

For each enabled (algorithm, protocol) pair NCCL estimates ``time = latency + bytes /
algBw`` and runs the fastest; we do the same. Latencies are NCCL's tables (base + hardware
latency per hop, µs). Bandwidths follow NCCL's derivation: a bus bandwidth from the
topology (NVLink inside a node, NICs between nodes), capped per protocol (LL, LL128) and
per channel, then turned into algorithm bandwidth (``busBw * n / nsteps`` for ring-like
algorithms, ``busBw / 2`` for Tree and CollNet). Multi-node NVLS (NVLink SHARP + IB SHARP)
and NVLS Tree take the network rate as tuning.cc does (doubled only for NVLS Tree on two
nodes); SHARP latency grows with the switch tiers the job spans (`sharp`); all-to-all runs as
NCCL's point-to-point rounds (`collectives_p2p`). An oversubscribed leaf tier slows only the
flows that leave a job's leaf group (`CommTopology.uplink_gbs`): a ring or SHARP tree placed in
node order crosses each boundary once, NCCL's double binary tree a few times, all-to-all with
every remote peer's share. The spec's NCCL version gates algorithms
(`infra.catalog.nccl`). Outputs follow nccl-tests: ``algbw = S/t`` and ``busbw = algbw *
factor`` (2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1
for broadcast).

Where NCCL measures at run time (its topology search picks channel counts and per-channel
speeds), we substitute: per-GPU NVLink bandwidth = links x NCCL's per-link speed
(`topo.h`: 20.0 GB/s SM80, 20.6 SM90); per-NIC bandwidth = the fastest inter-node speed in
NCCL's search list not above the NIC's line rate (48 GB/s for NDR, 24 for HDR, 12 for
100 Gb/s EFA). A few constants are fitted to published measurements, not taken from NCCL
(`collectives_nccl`: NVLS gain, pipeline fill, EFA latency per aws-ofi-nccl transport), each
with the rows it was fitted on; `docs/accuracy.md` shows the model against held-out rows.

>>> t = CommTopology("hopper", gpus_per_node=8, nodes=16, nvswitch=True, nvlink_links=18,
...                  nics=8, nic_gbps=400, cpu="intel", sharp=False)
>>> row = predict(t, "all_reduce", 8 * 2**30)  # under NVLS Tree's cap, 8 channels x 45.5 GB/s
>>> row.algorithm, row.protocol, round(row.busbw_GBps)
('nvls_tree', 'simple', 360)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from infra.budget.collectives_nccl import (
    BASE_LAT,
    COLLNET_LL_2_8,
    HW_LAT_NVLINK,
    LL_MAX_BW,
    MAX_THREADS,
    NET_OVERHEAD,
    NVLS_ALLREDUCE_GAIN,
    NVLS_EFFICIENCY,
    NVLS_GAIN_CHANNELS,
    PER_CH_NVLS_TREE,
    PER_CH_RING_LL128,
    PER_CH_TREE,
    PER_CH_TREE_LL128,
    PIPELINE_CAP_US,
    PIPELINE_HOP_US,
    RING_PLATEAU,
    SHARP_MEASURED_MAX_GBPS,
    SHARP_STREAM_EFFICIENCY,
    THREAD_THRESHOLD,
    TREE_CORRECTION,
)
from infra.budget.collectives_p2p import alltoall_time_us, sendrecv_time_us
from infra.budget.communicator import CommTopology
from infra.budget.sharp import sharp_net_latency
from infra.catalog.nccl import nccl_has
from infra.errors import RailplanError

__all__ = [
    "COLLECTIVES",
    "MAX_PREDICT_ROWS",
    "POINT_TO_POINT",
    "CommTopology",
    "Prediction",
    "bus_factor",
    "channels_run",
    "predict",
    "predict_table",
]

Collective = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"
]
COLLECTIVES: tuple[Collective, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "alltoall",
)
POINT_TO_POINT: tuple[Collective, ...] = ("sendrecv",)
"""Not a collective (`COLLECTIVES` fills the HTML report's tables); `predict` times it too."""
PROTOCOLS = ("ll", "ll128", "simple")


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
    if collective in ("broadcast", "sendrecv"):
        return 1.0
    return (n - 1) / n


def _nsteps(collective: Collective, n: int) -> int:
    return {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}.get(
        collective, n
    )


def _algorithms(t: CommTopology, collective: Collective) -> list[str]:
    """The algorithms NCCL enables for this collective on this topology and NCCL version."""
    nvls = (
        t.nvls
        and t.arch == "hopper"
        and t.nvswitch
        and t.gpus_per_node > 1
        and nccl_has(t.nccl, "nvls")
    )
    multi = t.nodes > 1
    # Multi-node NVLS needs CollNet (IB SHARP) and NCCL's inter-node NVLS algorithms.
    nvls_here = nvls and (not multi or (t.sharp and nccl_has(t.nccl, "nvls_ib_sharp")))
    collnet = t.sharp and multi and nccl_has(t.nccl, "collnet")
    algos = ["ring"]
    if collective == "all_reduce":
        if multi:
            algos.append("tree")
        if nvls_here:
            algos.append("nvls")
        if nvls and multi and nccl_has(t.nccl, "nvls_ib_sharp"):
            algos.append("nvls_tree")
        if collnet:
            direct = t.nvswitch and nccl_has(t.nccl, "collnet_direct")
            algos += ["collnet_chain"] + (["collnet_direct"] if direct else [])
    elif (
        collective in ("all_gather", "reduce_scatter")
        and nvls_here
        and (not multi or nccl_has(t.nccl, "nvls_multinode_ag_rs"))
    ):
        algos.append("nvls")
    return algos


def _ring_bus_bw(t: CommTopology, algo: str = "ring") -> float:
    if t.nodes == 1:
        return t.intra_gbs
    inter = t.uplink_gbs(t.tree_crossing) if algo == "tree" else t.inter_gbs
    return min(t.intra_gbs, inter)


def _nvls_bus_bw(t: CommTopology, collective: Collective, algo: str) -> float:
    """tuning.cc: min(intraBw, interBw[, NVLSTree per-channel cap]).

    ``intraBw = bwIntra x nvlsEfficiency x (nCh-1)/nCh``, x2 for all-reduce in NCCL (we use
    the fitted `NVLS_ALLREDUCE_GAIN`), else x (ppn-1)/ppn; ``interBw = bwInter``, doubled only
    for NVLS Tree on two nodes (each half crosses the network once). NCCL takes the minimum
    per channel and multiplies by the NVLS graph's channels (src/tuning/nvls.cc), so NVLS
    Tree's per-channel cap binds at `nvls_channels` x 45.5 GB/s on 3+ Hopper nodes: 364 GB/s
    for 8 GPUs, below 8 NDR NICs' 384 (measured: 365 on 4 nodes, nccl-tests#309). The cap
    (perChMaxNVLSTreeBws) is in 2.28.3's tuning tables but not 2.26.2's, which took
    min(bwIntra, bwInter / 2) per channel on 3+ nodes; like every constant here, the
    2.30.7 form is used whatever the spec's NCCL version.
    """
    nch = NVLS_GAIN_CHANNELS
    intra = t.intra_gbs * NVLS_EFFICIENCY[t.arch] * (nch - 1) / nch
    intra *= (
        NVLS_ALLREDUCE_GAIN
        if collective == "all_reduce"
        else (t.gpus_per_node - 1) / t.gpus_per_node
    )
    if t.nodes == 1:
        return intra
    net = t.uplink_gbs(t.tree_crossing if algo == "nvls_tree" else 1.0)  # NVLS: SHARP
    inter = net * (2 if algo == "nvls_tree" and t.nodes <= 2 else 1)
    per_channel = PER_CH_NVLS_TREE[t.arch][t.scale]
    cap = t.nvls_channels * per_channel if algo == "nvls_tree" else math.inf
    return min(intra, inter, cap)


def channels_run(t: CommTopology, algo: str, proto: str, nbytes: float) -> float:
    """Channels NCCL runs a Ring or Tree collective of ``nbytes`` on (src/enqueue.cc).

    getAlgoInfo drops a channel while ``nbytes < nc x threads x threshold``, down to one
    (`collectives_nccl.THREAD_THRESHOLD`); NVLS, NVLS Tree and CollNet keep theirs. NCCL's
    count is a whole number, so its times saw-tooth between counts (twice as long just
    below two channels as at two); the count is kept fractional here, the envelope, so a
    larger message is never predicted faster. It equals NCCL's at every multiple of the
    per-channel size (32 KiB, 64 KiB, ... for Ring/LL on 8 GPUs).
    """
    if algo not in ("ring", "tree"):
        return float(t.channels)
    per_channel = MAX_THREADS[proto] * THREAD_THRESHOLD[proto]
    if algo == "ring" and proto == "ll":
        per_channel *= t.ranks
    return max(1.0, min(float(t.channels), nbytes / per_channel))


def _bus_bw(
    t: CommTopology,
    collective: Collective,
    algo: str,
    proto: str,
    sharp: float = 1.0,
    run: float = 0.0,
    ranking: bool = False,
) -> float:
    """NCCL's busBw for one (algorithm, protocol), after its per-protocol caps.

    ``sharp`` scales CollNet's network rate (`sharp_efficiency`; 1 = NCCL's own model).
    ``run`` is how many of the channels carry the data (`channels_run`; 0 = all, as NCCL's
    tuning model assumes): each channel carries an equal share of the topology's rate.
    ``ranking``: the per-channel caps (Ring LL128, Tree, Tree LL128) as NCCL's tuning model
    applies them, over its search graph's channels (``graphs[a]->nChannels`` in
    src/graph/tuning.cc, `CommTopology.search_channels`), half the channels the
    communicator runs; that is how NCCL chooses. Otherwise over the running channels, each
    of them a thread block with its own cap: the time of what runs (`_chosen`).
    """
    nch, s = t.channels, t.scale
    run = run or nch
    capped = run * t.search_channels / nch if ranking else run
    if algo in ("nvls", "nvls_tree"):
        return _nvls_bus_bw(t, collective, algo) if proto == "simple" else 0.0
    if algo.startswith("collnet"):
        if proto == "ll" and not nccl_has(t.nccl, "collnet_simple_only"):
            return _collnet_bus_bw(t, algo, sharp) * COLLNET_LL_2_8["bw_share"]
        return _collnet_bus_bw(t, algo, sharp) if proto == "simple" else 0.0
    bw = _ring_bus_bw(t, algo) * run / nch
    ll_cap = LL_MAX_BW[t.arch if t.nodes == 1 else t.cpu][s]
    if algo == "ring":
        return {
            "ll": min(ll_cap, bw * 0.5),
            "ll128": min(bw * 0.92, capped * PER_CH_RING_LL128[t.arch][s]),
            "simple": bw,
        }[proto]
    if t.nodes == 2:  # NCCL uses bwIntra on <= 2 nodes: each half crosses the network once
        bw = min(t.intra_gbs, 2 * t.uplink_gbs(t.tree_crossing)) * run / nch
    tree = min(bw * 0.92, capped * PER_CH_TREE[t.arch][s])
    return {
        "ll": min(tree / 3.8, ll_cap),
        "ll128": min(tree * 120 / 128, capped * PER_CH_TREE_LL128[t.arch][s]),
        "simple": tree,
    }[proto]


def sharp_efficiency(t: CommTopology) -> float:
    """The share of a NIC's rate IB SHARP streaming aggregation sustains (`collectives_nccl`).

    Fitted on HDR (Quantum, SHARPv2) only; faster NICs keep NCCL's full rate, unmeasured.
    """
    return SHARP_STREAM_EFFICIENCY if t.nic_gbps <= SHARP_MEASURED_MAX_GBPS else 1.0


def _collnet_bus_bw(t: CommTopology, algo: str, sharp: float = 1.0) -> float:
    """CollNet (IB SHARP): switches reduce, so each NIC carries the data once, not twice.

    For CollNet Direct NCCL divides by ``factor = ppn / heads - (ppn / heads - 1) / 2`` when a
    node has fewer NICs (CollNet heads) than GPUs; both take 15 % off on Hopper. ``sharp``
    scales the network side (`sharp_efficiency`); NCCL's own model takes 1.
    """
    bw = min(t.intra_gbs, 2 * t.inter_gbs * sharp)
    factor = t.gpus_per_node / max(t.nics, 1)
    if algo == "collnet_direct" and factor > 1:
        bw /= factor - (factor - 1) / 2
    return bw * (0.85 if t.arch == "hopper" else 1.0)


def _latency(t: CommTopology, collective: Collective, algo: str, proto: str) -> float:
    """NCCL's latency (µs) for one (algorithm, protocol)."""
    p = PROTOCOLS.index(proto)
    if algo.startswith("collnet") and proto == "ll":  # NCCL 2.8's CollNet LL (`_bus_bw`)
        c = COLLNET_LL_2_8
        hops = 2 * (t.gpus_per_node - 1) * c["nvlink"] * c["ll_intra"]
        return c["base"] + hops + c["net"] + t.net_latency_extra_us
    base, intra_hw = BASE_LAT[algo][p], HW_LAT_NVLINK[algo][p]
    inter = sharp_net_latency(algo, p, t.tiers) + t.net_latency_extra_us
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


def _time_us(
    t: CommTopology,
    collective: Collective,
    algo: str,
    proto: str,
    nbytes: int,
    sharp: float = 1.0,
    run: float = 0.0,
    ranking: bool = False,
) -> float:
    bus = _bus_bw(t, collective, algo, proto, sharp, run, ranking)
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
    return lat + _transfer_us(t, collective, algo, proto, nbytes / (1000 * alg))


PIPELINED = ("ll128", "simple")


def _pipeline_hops(t: CommTopology, collective: Collective, algo: str) -> float:
    """Sequential hops a chunk crosses from first send to last receive (pipeline depth)."""
    log_nodes = math.log2(t.nodes) if t.nodes > 1 else 0.0
    if algo == "ring":
        return _nsteps(collective, t.ranks)
    if algo == "tree":
        return 2 * (t.gpus_per_node - 1 + log_nodes)
    if algo == "nvls":
        return 2 if t.nodes == 1 else 4
    if algo == "nvls_tree":
        return 2 + 2 * log_nodes
    if algo == "collnet_direct":
        return 4
    return 2 * (t.gpus_per_node - 1) + 2  # collnet_chain


def _transfer_us(
    t: CommTopology, collective: Collective, algo: str, proto: str, wire_us: float
) -> float:
    """Bytes / algBw, plus the fitted pipeline-fill term of chunked protocols.

    A pipeline of depth ``d`` hops moving ``S`` in chunks takes at best
    ``(sqrt(d a) + sqrt(S/B))^2 = d a + S/B + 2 sqrt(d a S/B)``: the cross term grows with
    the message until NCCL's chunks reach their maximum size, then stays (`PIPELINE_CAP_US`).
    LL signals every 8 bytes and streams without filling chunks, so it pays none.
    """
    if proto not in PIPELINED:
        return wire_us
    depth = _pipeline_hops(t, collective, algo) * PIPELINE_HOP_US
    return wire_us + min(2 * math.sqrt(depth * wire_us), PIPELINE_CAP_US)


def predict(
    t: CommTopology, collective: Collective, nbytes: int, algorithms: tuple[str, ...] = ()
) -> Prediction:
    """Predict one nccl-tests row: the fastest enabled (algorithm, protocol) for ``nbytes``.

    ``algorithms`` restricts the choice, as ``NCCL_ALGO`` does (e.g. ``("ring",)``).
    """
    if t.ranks < 2:
        raise ValueError("a collective needs at least 2 GPUs")
    if collective == "alltoall":
        time_us, algo, proto = alltoall_time_us(t, nbytes), "p2p", "simple"
    elif collective == "sendrecv":
        time_us, proto = sendrecv_time_us(t, nbytes)
        algo = "p2p"
    else:
        enabled = [a for a in _algorithms(t, collective) if not algorithms or a in algorithms]
        time_us, algo, proto = _chosen(t, collective, enabled or ["ring"], nbytes)
    algbw = nbytes / (time_us * 1000)
    return Prediction(
        nbytes,
        round(time_us, 2),
        round(algbw, 2),
        round(algbw * bus_factor(collective, t.ranks), 2),
        algo,
        proto,
    )


def _chosen(
    t: CommTopology, collective: Collective, enabled: list[str], nbytes: int
) -> tuple[float, str, str]:
    """(time, algorithm, protocol) of what NCCL runs: the fastest by NCCL's own estimate.

    NCCL ranks every pair as if it ran on all its channels, then runs the winner on the
    channels the size fills (`channels_run`), so railplan ranks on all and times on those.
    With CollNet (IB SHARP) NCCL's model gives SHARP the NICs' full rate, and the run then
    goes at `sharp_efficiency`: ranked at 1, timed at the fitted share. Likewise the
    per-channel caps: ranked over NCCL's search-graph channels as its tuning model applies
    them, timed over the channels that run (`_bus_bw`'s ``ranking``).
    """
    pairs = [(a, p) for a in enabled for p in PROTOCOLS]
    sharp = sharp_efficiency(t) if any(a.startswith("collnet") for a in enabled) else 1.0
    ranked = ((_time_us(t, collective, a, p, nbytes, ranking=True), a, p) for a, p in pairs)
    _, algo, proto = min(ranked)
    run = channels_run(t, algo, proto, nbytes)
    return _time_us(t, collective, algo, proto, nbytes, sharp, run), algo, proto


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
