"""nccl-tests' launch mode: one host thread driving several GPUs (``-g N``) or one per GPU.

A measurement mode of the benchmark, not a property of the cluster: training jobs and
`railplan predict` run one rank per GPU. Read from the sources:

- nccl-tests (src/common.cu, v2.19.6): ``-g`` is the GPUs one thread drives. ``startColl``
  calls ncclGroupStart, then the collective once per GPU on that GPU's communicator and
  stream, then ncclGroupEnd. The timed loop (``benchmark``, default ``-z 0``) enqueues the
  iterations back to back without synchronising and ends the timing with one
  ``completeColl`` (``testStreamSynchronize``: cudaStreamQuery polled on each GPU's stream),
  paid once per ``-n`` iterations; the time printed is the elapsed time over the iterations.
  So the thread's work per iteration and the GPUs' run overlap, and an iteration takes the
  longer of the two.
- NCCL (src/group.cc ``doLaunches``, v2.18.5-1 and later): ncclGroupEnd, on that one thread,
  walks the group's communicators in turn: cudaSetDevice and ncclLaunchPrepare (the kernel
  plan), then cudaSetDevice, uploadWork and the kernel launch, then ncclLaunchFinish (the
  stream and event bookkeeping). NCCL_LAUNCH_MODE defaults to PARALLEL since 2.9 (src/init.cc;
  up to 2.8 a process's communicators launched as one GROUP). N GPUs per thread therefore
  cost N launches of host time per iteration, serially.
- One process (or thread) per GPU: each thread launches one communicator's kernel, about 5 us
  (below), less than the GPU time of any collective NCCL's model knows (its smallest base
  latency is Ring/LL's 6.6 us), so it never shows: the mode equals `predict`.

The cost of one launch, `NCCL_TESTS_LAUNCH_US_PER_GPU`, is railplan's one fitted constant here
(tools/accuracy/calibration: fit-half rows only). Two sources put it at the same size:
NCCL's maintainer, "the CUDA launch time and some overhead", about 5 us (NVIDIA/nccl-tests#123,
sjeaugey), and that issue's own DGX A100 table, ``-g 2`` .. ``-g 8`` on one channel
(NCCL_MAX_NCHANNELS=1, 8-128 B): 10.0 to 33.7 us, 3.95 us more per GPU.
"""

from __future__ import annotations

from dataclasses import replace

from infra.budget.collectives import Prediction

__all__ = ["NCCL_TESTS_LAUNCH_US_PER_GPU", "as_measured", "launch_floor_us"]

# FITTED (one constant, the benchmark's, not the cluster's). Host time to launch one
# communicator's collective when one thread drives several GPUs (nccl-tests -g N): an
# iteration takes at least N of them. Fitted on the fit half's -g 8 rows at or below 64 KiB,
# where every GPU finishes before the thread has launched the last: azure-abg-nd-a100-v4
# 64 KiB (42.5 us), azure-abg-nd-h100-v5 64 KiB (42.2 us) and ml-engineering-network 32 KiB
# (43.8 us); median 42.5 us / 8 GPUs = 5.3 us. Held-out -g 8 rows are the test.
# Cross-checks, not fitted: about 5 us (sjeaugey, NVIDIA/nccl-tests#123); 3.95 us per GPU
# added, 4.2 us each at -g 8, on one channel of a DGX A100 (the same issue's table).
NCCL_TESTS_LAUNCH_US_PER_GPU = 5.3


def launch_floor_us(gpus_per_thread: int) -> float:
    """Host time per iteration when one thread drives ``gpus_per_thread`` GPUs (us).

    Zero for one GPU per thread: the one launch (``NCCL_TESTS_LAUNCH_US_PER_GPU``) hides
    behind any collective's GPU time (NCCL's smallest latency is 6.6 us).
    """
    if gpus_per_thread <= 1:
        return 0.0
    return gpus_per_thread * NCCL_TESTS_LAUNCH_US_PER_GPU


def as_measured(model: Prediction, gpus_per_thread: int, bus_factor: float) -> Prediction:
    """``model`` as nccl-tests prints it when one thread drives ``gpus_per_thread`` GPUs.

    An iteration takes the longer of the GPUs' time (the model's) and the thread's serial
    launches (`launch_floor_us`); ``bus_factor`` is nccl-tests' busbw / algbw of the row.
    One GPU per thread returns ``model`` itself.
    """
    floor = launch_floor_us(gpus_per_thread)
    if model.time_us >= floor:
        return model
    algbw = model.bytes / (floor * 1000)
    return replace(
        model, time_us=floor, algbw_GBps=round(algbw, 2), busbw_GBps=round(algbw * bus_factor, 2)
    )
