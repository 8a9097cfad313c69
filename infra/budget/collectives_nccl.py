"""NCCL 2.30.7's tuning constants (src/graph/tuning.cc, topo.h, search.cc) and railplan's fitted ones.

The tables are NCCL's, copied from ../shared/facts/fabric.md §3 (latencies in µs, bandwidths
in GB/s; tuple columns LL, LL128, Simple or 1 node, 2 nodes, >= 3 nodes). The few constants
that are not NCCL's are marked FITTED or DERIVED with the measurement rows or arithmetic
behind them; `docs/accuracy.md` shows how the whole model does on held-out rows.
"""

from __future__ import annotations

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
# Per-channel speeds NCCL's topology search tries inside one node, fastest first
# (src/graph/search.cc: speedArrayIntra for SM80 and earlier, sm90SpeedArrayIntra).
INTRA_SPEEDS = {
    "ampere": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
}
# The ring search may find at most MAXCHANNELS / 2 channels (src/init.cc, ringGraph), and
# the communicator runs each found channel twice, up to MAXCHANNELS (src/graph/connect.cc,
# ncclTopoPostset: "Duplication should be complete now"; src/include/device.h MAXCHANNELS 64).
MAX_CHANNELS = 64
RING_SEARCH_MAX_CHANNELS = MAX_CHANNELS // 2
INTER_SPEEDS = {
    "ampere": (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    "hopper": (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3),
}
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0}
# treeCorrectionFactor[proto][log2(bytes / 64)] for 64 B .. 256 MB
# fmt: off
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
           0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
              0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    "simple": (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
               0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
}
# fmt: on
RING_PLATEAU = 1.4  # "Plateau effect of ring" on Ampere and later
# NCCL groups point-to-point operations into rounds (peer = rank +/- round) and runs up to
# NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 of them in one work batch (src/include/device.h;
# ncclP2pSchedule / ncclP2pChannelBaseForRound in src/enqueue.cc, src/include/channel.h).
P2P_ROUNDS_PER_BATCH = 8
# How many of its channels NCCL runs a Ring or Tree collective on (src/enqueue.cc,
# getAlgoInfo, v2.30.7-1): it drops channels while ``nBytes < nc x nt x threadThreshold``,
# nt being the protocol's thread count (src/include/device.h: NCCL_LL_MAX_NTHREADS 512,
# NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512) and the threshold bytes per
# thread (src/include/comm.h: NCCL_LL_THREAD_THRESHOLD 8, NCCL_LL128_THREAD_THRESHOLD 8,
# NCCL_SIMPLE_THREAD_THRESHOLD 64), Ring/LL's multiplied by the ranks (src/graph/tuning.cc,
# ncclTopoTuneModel). So Ring/LL on 8 GPUs takes one channel per 32 KiB. NVLS, NVLS Tree and
# CollNet keep their own channel counts. Same in v2.18.5-1 (enqueue.cc, getAlgoInfo).
MAX_THREADS = {"ll": 512, "ll128": 640, "simple": 512}
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
# Point-to-point sends below this many bytes per channel use LL, larger ones Simple
# (src/enqueue.cc: NCCL_PARAM(P2pLLThreshold, "P2P_LL_THRESHOLD", 16384); the default is
# quoted in ROCm/rccl#2032's diff of the shared enqueue.cc).
P2P_LL_THRESHOLD = 16384

# --- Fitted and derived constants (each with the rows or arithmetic behind it) -------------
# FITTED. NCCL's tuning model doubles NVLS all-reduce bandwidth over the NVLink rate (it ranks
# algorithms, it does not promise times); measured single-node H100/H200 NVLS busbw is 466-482
# GB/s (maintainers: "peak busBw of ~480GB/s", nccl-tests#212), a gain of about 1.6 over
# NVLink's 370.8 x 0.85. Fitted on the fit half's single-node NVLS rows at >= 4 GiB (Azure ND
# H100 v5 and ND H200 v5 8G, nccl-tests#290 4G, nccl-tests#309 peak, ml-engineering 16G): the
# median measured/predicted ratio with the pipeline term below is 1.023 x 1.6 = 1.64.
NVLS_ALLREDUCE_GAIN = 1.64
# The channel count in the (n - 1) / n factor the gain above was fitted with: railplan's
# ring count then, 16. NCCL takes the NVLS graph's own count and per-channel speed there
# (src/graph/tuning.cc), which railplan does not model; the factor stays the one fitted, so
# a change in the ring's channel count does not move NVLS.
NVLS_GAIN_CHANNELS = 16
# FITTED (two constants). NCCL's model is latency + bytes / bandwidth, but measured LL128 and
# Simple times between 1 MiB and 256 MiB lie above that line by a term that grows like the
# square root of the transfer time and then stops growing: the cost of filling a chunked
# pipeline of depth d hops, (sqrt(d a) + sqrt(S/B))^2 = d a + S/B + 2 sqrt(d a S/B), whose
# chunks stop growing at NCCL's maximum chunk size. a (per hop) and the cap were chosen by
# grid search on the fit half's 1-128 MiB and >= 256 MiB rows (Azure ND A100 v4 / ND H100 v5
# sweeps, nccl-tests#309 2-, 4- and 8-node sweeps): a in {0.3 .. 4} us, cap in {100 .. 600} us.
# No per-call launch overhead is added: a fitted 0-10 us made the fit half's small rows worse
# (NCCL's latency constants already sit above measured 8 B times).
PIPELINE_HOP_US = 2.0
PIPELINE_CAP_US = 300.0
# DERIVED. SHARP's aggregation tree climbs one switch tier per level (leaf -> spine -> core)
# and comes back down. NCCL has one network latency per algorithm; we read the part above a
# plain network hop (CollNet/NVLS NET latency minus Ring Simple's 14 µs) as the tree's round
# trip on a two-tier fabric (DGX SuperPOD scale), and scale it with the tiers climbed. No
# published per-tier SHARP latency was found; this is a derivation, not a measurement.
SHARP_REFERENCE_TIERS = 2
# FITTED (two constants, one per aws-ofi-nccl transport; `CommTopology.efa_sendrecv` says
# which runs). EFA adds latency per network step over NCCL's InfiniBand constants, and how
# much depends on the plugin's transport, not on the wire: the RDMA transport (p5 and later,
# a NIC or more per GPU) writes one-sided into a buffer the receiver advertised beforehand,
# as NCCL's own IB transport does; SENDRECV (p4d/p4de, GPUs sharing NICs) hands every message
# to libfabric's EFA provider as a two-sided tagged send, matched in software and, above the
# provider's eager size, exchanged by a rendezvous inside it (aws/aws-ofi-nccl
# doc/rdma-protocol.md, doc/sendrecv-protocol.md). NCCL's maintainer on such a handshake: "adding
# a round trip of latency, i.e. multiplying the network latency by 3 in our critical path"
# (sjeaugey, NVIDIA/nccl#609). Neither figure below is derived from that; each is fitted on
# one fit-half row of awsome-distributed-training's README (source aws-adt-nccl-tests):
# - RDMA: the 2 x p5.48xlarge 8-byte all-reduce, 69.1 µs, met by Tree/LL with 12 µs per step.
# - SENDRECV: the 2 x p4de.24xlarge 1 MiB all-reduce, 309 µs (busbw 6.35 GB/s), met by
#   Ring/LL with 94 µs per step on p4de's Intel CPUs (catalog `aws-p4de.24xlarge`).
# Held out: p4de 8 B (164.3 µs) and 1 GiB, p5 1 MiB and 8 GiB (docs/accuracy.md). The p4de
# 8-byte row wants about 66 µs where the 1 MiB row wants 94: a latency that grows with the
# message, as a rendezvous above the eager size would, which one constant cannot follow.
EFA_NET_LATENCY_US = 12.0
EFA_SENDRECV_NET_LATENCY_US = 94.0
# DERIVED. What one more switch on the path adds to a network message: a Quantum-2 switch's
# cut-through port-to-port latency, which vendor-facing pages put between "under 150 ns" and
# "~330 ns" (router-switch.com's QM9700 vs SN5400 FAQ; yobitel.com's Quantum-2 page; no
# NVIDIA datasheet figure was at hand), taken at 0.3 µs, plus one more cable of about 20 m
# at 5 ns/m (0.1 µs). NCCL's network latency constant is read as the path through one leaf
# (two GPUs on one rail of one SU); leaf -> spine -> leaf adds two switches, a core two more.
SWITCH_HOP_US = 0.4
# NCCL 2.8.4's CollNet LL (src/graph/tuning.cc, v2.8.4-1): the protocol 2.9 removed ('Oneshot
# CollNet only supports Simple'), so 2.30's tables have none. Base latency, NVLink and network
# hop latency (us), and its bandwidth share of CollNet Simple's; NCCL multiplies the NVLink
# hop by 1.8 for LL between nodes. `collectives` uses them only for NCCL < 2.9.6.
COLLNET_LL_2_8 = {"base": 4.4, "nvlink": 0.5, "net": 5.0, "bw_share": 1.0 / 6.0, "ll_intra": 1.8}
# FITTED (one constant). The share of a NIC's point-to-point rate that IB SHARP streaming
# aggregation sustains per NIC under NCCL's CollNet (HDR, Quantum, SHARPv2). NCCL's model
# gives CollNet the full NIC rate; ABCI's 2 x 8 A100 with 4 HDR NICs per node and NCCL 2.8
# (source abci-sharp) reaches 56 GB/s algbw where 4 NICs at NCCL's 24 GB/s would give 96.
# Chosen by grid (0.500-0.700, step 0.005) on the fit half's bandwidth-bound SHARP rows
# (abci-sharp 2 GiB and 128 MiB, marked `fitted:`), minimising their median |error| with the
# model's pipeline term: 0.595, errors +0.4 % and -6.4 %; the held-out 512 MiB and 1 GiB rows
# test it. Cross-check, not fitted: NCCL's maintainer expects "~110GB/s AlgBw or ~220 GB/s
# BusBw" from 8 HDR NICs (NVIDIA/nccl#320, sjeaugey), and 8 x 24 x 0.595 = 114. One system,
# one NCCL version, HDR only: NDR (Quantum-2, SHARPv3) keeps NCCL's full rate, unmeasured, and
# every SHARP prediction beyond the rows' two nodes is flagged extrapolated (`bands`).
SHARP_STREAM_EFFICIENCY = 0.595
SHARP_MEASURED_MAX_GBPS = 200.0  # NIC rates up to HDR: the generation the constant was fitted on
