"""The least GPU-seconds per token any recipe the estimator may choose can take on one GPU type.

``candidates.bounds`` turns this into a floor on GPU-hours (and so on a rental's cost). It follows
``estimator.throughput`` term by term and keeps only what it can bound whatever option generation
picks. A priced configuration trains ``n`` GPUs (they divide the global batch, ``candidates.batch``)
at micro-batch ``m`` and accumulation ``a`` with ``n * m * a = global_batch_size`` exactly (a recipe
running another batch is rejected); checkpointing, sharding and the micro-batch come from what
the workload leaves to ``auto`` (the headroom rule only picks among the same choices); precision
is resolved per card (``precision: auto``), so it is fixed for a GPU type.

A run's GPU-seconds are ``run_tokens / (m * ps) * step_s`` (``ps`` tokens per sample), and

    step_s >= max(g, d) + A * min(g, d) + overhead / a + offload

because communication hides at most itself (``OVERLAP_COMM <= 1``), the data-parallel step cost
and the checkpoint copies are non-negative. Here ``g`` (GPU time) is compute plus memory traffic
and ``d`` the launch time; per micro-step they split into parts that grow with ``m`` (compute,
activations and logits, QLoRA's per-token casts) and parts that do not (weight reads, QLoRA's
dequantisation, launches). Per token the fixed parts shrink as ``m`` grows and ``max + A * min``
(``A <= 1``) is increasing and of degree one, so the largest allowed ``m`` (``max_micro_batch``)
gives the least. Costs paid once per optimizer step by each GPU (the optimizer's update traffic,
the per-step overhead, CPU-Adam and its copies under offload) come to at least their value for
the whole step on one GPU, spread over the global batch: their per-GPU share times ``n`` is at
least the unsharded amount, and ``m * a = global_batch_size / n``. Parameter streaming under
``optimizer+params`` moves each GPU's shard per micro-step: at least the whole weights per
``global_batch_size`` samples, since ``n * m <= global_batch_size``.

What depends on the ZeRO stage (fp32 AMP weights, the residual stream's width, sharded states)
is taken at its least over the stages any count can run: one GPU, and each scheme on two GPUs
(where only ``n > 1`` matters, two stands for every count; sharded states times ``n`` grow with
``n``). Each checkpointing choice the workload allows is bounded and the least one kept.
"""

from __future__ import annotations

from optimizer.estimator import calibration as cal
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.estimate import memory_model, on_clear
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.precision import with_precision
from optimizer.estimator.recipe import checkpointing_choices, concrete_workload
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.stacks import stack_profile
from optimizer.estimator.throughput import (
    _activation_traffic_bytes,
    _linear_io_elements,
    conv_work_share,
    dequant_bytes,
    dispatch_seconds,
    effective_peak_tflops,
    matmul_efficiency,
    nchw_transpose_bytes,
    offload_seconds,
    tokens_per_sample,
    training_flops_per_token,
)
from optimizer.estimator.workload import Workload

# (GPUs, sharding) standing for every layout of the states: one GPU, and each scheme on several.
LAYOUTS = ((1, "ddp"), (2, "ddp"), (2, "zero1"), (2, "zero2"), (2, "zero3"), (2, "fsdp"))


def max_micro_batch(w: Workload) -> int:
    """The largest micro-batch a priced recipe can run (``n * m * a = global_batch_size``)."""
    gbs = w.global_batch_size
    out = gbs if w.micro_batch_size == "auto" else min(int(w.micro_batch_size), gbs)
    if w.gradient_accumulation_steps is not None:
        out = min(out, gbs // w.gradient_accumulation_steps)
    return max(1, out)


def _local_floor(g: float, d: float) -> float:
    """``max(g, d) + A * min(g, d)``: what the estimator charges for GPU time ``g`` beside launch
    time ``d`` (increasing in both, of degree one)."""
    return max(g, d) + cal.DISPATCH_ADDITIVE_SHARE.value * min(g, d)


def _per_token_floor(shape: ModelShape, w: Workload, gpu: GpuSpec, micro: int) -> float:
    """GPU-seconds per token for one checkpointing choice (``w`` concrete: micro-batch 1, its
    checkpointing, accumulation 1), at micro-batch ``micro`` or less."""
    ps = tokens_per_sample(shape, w)
    gbs = w.global_batch_size
    _, hw_fpt = training_flops_per_token(shape, w)
    peak = effective_peak_tflops(gpu, w.precision, convolutions=shape.arch == "cnn")
    eff = matmul_efficiency(gpu, shape, w.precision)
    compute_tok = hw_fpt * conv_work_share(shape, w, gpu) / (peak * 1e12 * eff)
    bw = gpu.mem_bw_gbs * 1e9 * cal.MEMORY_BW_EFFICIENCY.value

    grow = fixed = states = float("inf")  # bytes per sample, per micro-step, per optimizer step
    for n, sharding in LAYOUTS:
        # The estimator's memory model, kept per attention kernel: a plan bounds every card type.
        mem = memory_model(shape, w, gpu, n, sharding)
        g_bytes = _activation_traffic_bytes(shape, w, mem)  # ``w`` runs one sample per micro-step
        g_bytes += nchw_transpose_bytes(shape, w, gpu)  # NCHW layout transposes, per sample too
        gathered = n if sharding in ("zero3", "fsdp") else 1
        f_bytes = (3.0 if w.method == "full" else 2.0) * mem.weights * gathered
        if w.method == "qlora":
            uses = 3.0 if w.gradient_checkpointing else 2.0
            f_bytes += dequant_bytes(shape, w)  # the estimator's own term (nf4 or gptq)
            if mem.residual_bytes == 4.0:
                g_bytes += uses * ps * shape.layers * _linear_io_elements(shape) * (4.0 + 2.0)
        grow = min(grow, g_bytes)
        fixed = min(fixed, f_bytes)
        states = min(states, 2.0 * n * (mem.weights + mem.gradients + mem.optimizer))
    gpu_tok = compute_tok + (grow / ps + states / (gbs * ps) + fixed / (micro * ps)) / bw
    launch_tok = dispatch_seconds(shape, w) / (micro * ps)
    out = _local_floor(gpu_tok, launch_tok)
    out += cal.STEP_OVERHEAD_S.value * stack_profile(w.stack).dispatch_share / (gbs * ps)
    if w.offload != "none":
        # ``gbs`` GPUs of one sample each, no accumulation: every GPU's share of the optimizer
        # step and of the streamed weights is the least per token any layout reaches.
        mem = memory_model(shape, w, gpu, gbs, "zero3")
        out += offload_seconds(shape, w, gbs, mem) / ps
    return out


# A plan bounds each job's rentals on every card type, and again in the next plan with the job: the
# floor is per token, so it is kept per workload without its amount (``rate_key``) and card, and
# forgotten with the estimates (after calibration constants change).
_FLOORS: LruMemo[tuple[str, str], float] = LruMemo(4096)
on_clear(_FLOORS.clear)


def gpu_seconds_per_token_floor(shape: ModelShape, w: Workload, gpu: GpuSpec) -> float:
    """The least GPU-seconds per token (per image for a CNN) of ``w`` on ``gpu`` (module doc)."""
    return _FLOORS.get_or_compute((w.rate_key(), gpu.name), lambda: _floor(shape, w, gpu))


def _floor(shape: ModelShape, w: Workload, gpu: GpuSpec) -> float:
    w = with_precision(w, gpu)
    micro = max_micro_batch(w)
    out = float("inf")
    for ckpt in checkpointing_choices(w):
        one = concrete_workload(w, w.global_batch_size, 1, ckpt)
        if one.gradient_accumulation_steps != 1:
            one = one.model_copy(update={"gradient_accumulation_steps": 1})
        out = min(out, _per_token_floor(shape, one, gpu, micro))
    return out
