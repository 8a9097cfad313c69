"""Two training regimes the step model once missed, what was tried on them, with what result.

The regimes: small Hopper models at TP 1, and ZeRO-3's overlap of its collectives.

This module owns the text of docs/accuracy.md's "Hopper across model sizes" and "ZeRO-3
overlap" subsections (`train_accuracy.training_markdown` puts them in the Training section):
per-row errors before and after each mechanism, the sources each one follows, the
mechanisms tried and rejected, and what was looked for after the held-out errors were seen.
The figures are those of the runs that adopted or rejected each mechanism; the rows' current
errors are in the generated table.
"""

from __future__ import annotations

__all__ = ["hopper_lines", "zero3_lines"]


def hopper_lines() -> list[str]:
    """Small models at TP 1 on H100: three mechanisms, one adopted (NeMo's TP overlap)."""
    return [
        "### Hopper across model sizes",
        "",
        (
            "NeMo 24.07's held-out FP8 rows at TP 1 came out far too fast with one Hopper share "
            "(GPT3-5B on 64 H100 +42.0 %, Llama 2 7B SFT +30.7 %, Llama 2 7B +27.2 %, 13B "
            "+18.1 %, 7B at 8K tokens +19.3 %) while the TP-4 and TP-8 rows were within 7 %. "
            "Three mechanisms were tried; each fitted constant was refitted by its own grid on "
            "the fitting rows only (`fit()`, `fit_fp8_share()`), never on a held-out row:"
        ),
        "",
        (
            "- **Wave quantization** (NVIDIA, *Matrix Multiplication Background User's Guide*, "
            "§3.2: output tiles of 128 x 256 spread over the SMs in whole waves): rejected. These "
            "shapes fill an H100's 132 SMs in many waves (5B's QKV GEMM: 3,072 tiles, 97 %), so "
            "it does not separate small from large models; it mostly penalises TP-8 A100 "
            "GEMMs, the grid refits to ampere 0.58 with no element-wise term, and the held-out "
            "median goes 4.3 % to 14.0 % (9 rows beyond 30 %, GPT3-5B +61 %)."
        ),
        (
            "- **FP8 needs twice the reuse** (an FP8 GEMM's fixed overhead is the same seconds "
            "at twice the math rate, so its half-efficiency dimension doubles): rejected. The "
            "fp8 share refits to 0.89; GPT3-5B +28 %, Llama 2 7B SFT +20 %, but 70B SFT -10 %; "
            "held-out median 4.3 % to 6.2 %."
        ),
        (
            "- **NeMo overlaps TP communication** (NeMo-Framework-Launcher's gpt3/175b.yaml "
            "`ub_tp_comm_overlap: True`; the `nemo-2024` preset now sets `tp_overlap`): adopted. "
            "The TP all-gathers and reduce-scatters hide behind the linear GEMMs and cost only "
            "NCCL's SM share (16 of 132). Refitted on the three fitting FP8 rows, the fp8 share "
            "goes 1.0 to 0.73 (their median |error| 6.2 % to 0.1 %); TransformerEngine's GEMM "
            "profiling guide, independently, measures FP8 with its quantization at 1.69x BF16 "
            "(0.85 of the doubled peak) for a 5B shape on H200 NVL. Held-out, before to after: "
            "GPT3-5B +42.0 to +14.6 %, Llama 2 7B SFT +30.7 to +9.5 %, Llama 2 7B +27.2 to "
            "+4.8 %, 13B +18.1 to -1.8 %, 7B 8K +19.3 to +2.2 %, GPT3-20B +4.3 to -4.0 %, "
            "GPT3-175B on 512 +4.2 to -2.0 %; worse: Llama 2 13B SFT +3.0 to -14.7 %, MLPerf "
            "v4.0 GPT-3 on 10,752/11,616 H100 +10.4 to +14.3 %, MLPerf v3.1 rows from within "
            "1.4 % to within 5.0 %, MLPerf v4.0 on 512 0.0 to +6.6 %. Held-out median 4.25 % "
            "to 4.28 %; rows beyond 30 %: 3 to 1. No A100 row changes (no A100 row runs NeMo). "
            "Disclosure: the mechanism was looked for after the held-out errors were seen; its "
            "one constant was refitted on fitting rows only. Not every NeMo recipe sets the "
            "overlap (the launcher's llama2_70b.yaml at d24f8efb says false), so it is the "
            "preset's assumption. Megatron-Core's H100 weak-scaling table (1.7B +27 % to 462B) "
            "is not in the data file, so its rows were not re-checked."
        ),
    ]


def zero3_lines() -> list[str]:
    """ZeRO-3 at 384 and 640 A100: DeepSpeed's defaults checked, the reuse distance adopted."""
    return [
        "### ZeRO-3 overlap",
        "",
        (
            "At 384 (175B) and 640 (530B) A100 the model hid more ZeRO-3 traffic than DeepSpeed "
            "did: SC21's 384-GPU step is about 82 s where the model gave 64.7 s (55 s of "
            "compute, 49 s of gathers and reduce-scatters, 9.7 s of it exposed). DeepSpeed's "
            "documented defaults (deepspeed.ai/docs/config-json, ZeRO Optimizations) were "
            "checked against the model: `stage3_prefetch_bucket_size` 5e7 is less than one "
            "GPT-3 weight matrix, so DeepSpeed prefetches one matrix ahead, which hides the same "
            "share per matrix as the model's per-pass overlap (gathers and compute both scale "
            "with the matrix); `reduce_bucket_size` 5e8 was already timed. "
            "`stage3_max_reuse_distance` (1e9 elements) was not: the model assumed the backward "
            "reuses the weights its recomputed forward gathered. DeepSpeed's "
            "`__params_to_release` keeps a module's weights only if they reappear within 1e9 "
            "elements of recorded modules; with full recomputation a matrix reappears after "
            "itself and twice the later matrices of its layer, so for GPT-3 175B QKV, projection "
            "and MLP-up are gathered a third time and for 530B all four (`_regathered`). Adopted "
            "(no constant; not fitted on these rows). Held out, before to after, TFLOP/s per GPU: "
            "175B on 384 +26.1 to +19.4 %, 768 +20.6 to -0.1 %, 1,536 +17.5 to -3.5 %; 530B on "
            "640 +36.9 to +17.7 %, 1,120 +9.4 to -16.0 %, 2,240 +9.5 to -16.3 %. Worse: the "
            "falls relative to the smallest count, 175B 1,536/384 -6.8 to -19.2 % and 768/384 "
            "-4.3 to -16.3 %, 530B 1,120/640 -20.1 to -28.6 % and 2,240/640 -20.0 to -28.9 % "
            "(beyond the 25 % trend target). Held-out median 4.28 % to 4.00 %; rows beyond "
            "30 %: 1 to 0. What remains is that where compute covers the traffic (384 and 640 "
            "GPUs) DeepSpeed was still slower than the model, and where traffic dominates it "
            "was faster: a sharing of SMs and HBM between NCCL and the GEMMs beyond one channel "
            "share per SM, or settings of the SC21 runs the paper does not print, would do it, "
            "but neither is sourced, so neither is modelled."
        ),
    ]
