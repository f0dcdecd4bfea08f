"""Training FLOPs, tokens per second, MFU and hours.

FLOPs per token (Kaplan et al. 2020; PaLM appendix B for the attention term):

* forward ``F = 2 * N_matmul + 4 * layers * seq * d_attn`` (every matmul weight once; ``Q K^T``
  and ``A V``); the input embedding is a lookup and costs nothing;
* full training ``3F`` (backward = activation gradients + weight gradients);
* LoRA / QLoRA ``2F`` (frozen weights need no weight gradient, only the activation gradient);
* gradient checkpointing recomputes the forward: ``+F`` of hardware work, not of model FLOPs.

Step time on one GPU is a two-term roofline: matmul FLOPs at a sustained share of the dense peak,
plus the memory traffic of the bandwidth-bound kernels (norms, activations, softmax, dropout,
optimizer update, QLoRA dequantization) at the card's bandwidth. Several GPUs add gradient
all-reduce (DDP, ZeRO-1/2) or parameter all-gathers (ZeRO-3/FSDP), mostly hidden behind compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer.estimator import calibration as cal
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.memory import ZERO_STAGE, MemoryParts, layer_bytes_per_token
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.workload import Workload

GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class Throughput:
    model_flops_per_token: float
    hardware_flops_per_token: float
    tokens_per_second: float  # all GPUs together
    mfu: float
    step_seconds: float
    compute_seconds: float
    memory_seconds: float
    comm_seconds: float
    peak_tflops: float


def forward_flops_per_token(shape: ModelShape, seq_len: int) -> float:
    attention = 4.0 * shape.layers * seq_len * shape.q_dim
    return 2.0 * shape.matmul_params + attention


def training_flops_per_token(shape: ModelShape, w: Workload) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) per token."""
    fwd = forward_flops_per_token(shape, w.seq_len)
    model = 3.0 * fwd if w.method == "full" else 2.0 * fwd
    hardware = model + (fwd if w.gradient_checkpointing else 0.0)
    return model, hardware


def train_flops(shape: ModelShape, w: Workload) -> float:
    """Model FLOPs of the whole run (``6 N D``-style for full training)."""
    return training_flops_per_token(shape, w)[0] * w.total_tokens


def effective_peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Dense peak the training matmuls run at.

    fp32 on Ampere and newer runs on TF32 tensor cores (half the fp16 rate), as NVIDIA's and
    Lambda's BERT benchmarks do and Lightning recommends; older cards use plain fp32 FMA.
    """
    if precision == "fp32":
        return gpu.fp16_tensor_tflops / 2 if gpu.supports_bf16 else gpu.fp32_tflops
    return gpu.peak_tflops(precision)


def _intra_node_gbs(gpu: GpuSpec) -> float:
    if gpu.interconnect == "nvlink" and gpu.nvlink_gbs > 0:
        return gpu.nvlink_gbs / 2  # one direction
    return cal.PCIE_GBS.value


def comm_seconds(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str, trainable: int) -> float:
    """Communication per micro-step: gradient reduction (every optimizer step) and, under
    ZeRO-3/FSDP, two all-gathers of the 16-bit weights (forward, backward).

    Collectives are hierarchical, as NCCL runs them: within a node over NVLink/PCIe, between
    nodes each GPU moves 1/8 of the data over its own network port; weights are sharded within
    a node (hybrid sharding), so all-gathers stay on NVLink.
    """
    if gpu_count <= 1:
        return 0.0
    stage = ZERO_STAGE[sharding]
    local = min(gpu_count, GPUS_PER_NODE)
    nodes = math.ceil(gpu_count / GPUS_PER_NODE)
    grad_bytes = trainable * 2.0 / w.gradient_accumulation_steps
    intra = 2.0 * (local - 1) / local * grad_bytes
    inter = 2.0 * (nodes - 1) / nodes * grad_bytes / local if nodes > 1 else 0.0
    if stage >= 3:
        intra += 2.0 * (local - 1) / local * shape.params * 2.0
    return intra / (_intra_node_gbs(gpu) * 1e9) + inter / (cal.INTER_NODE_GBS.value * 1e9)


def dispatch_seconds(shape: ModelShape, w: Workload) -> float:
    """Host time to launch one micro-step's kernels (eager PyTorch: tens of microseconds per op,
    ~100+ ops per block forward and backward). The GPU cannot finish a step faster than that."""
    passes = 4.0 / 3.0 if w.gradient_checkpointing else 1.0
    return cal.DISPATCH_S_PER_LAYER.value * shape.layers * passes


def throughput(
    shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str, mem: MemoryParts
) -> Throughput:
    model_fpt, hw_fpt = training_flops_per_token(shape, w)
    peak = effective_peak_tflops(gpu, w.precision)
    tokens = w.micro_batch_size * w.seq_len
    compute_s = tokens * hw_fpt / (peak * 1e12 * cal.MATMUL_EFFICIENCY.value)

    # Bandwidth-bound work per micro-step.
    act = shape.layers * tokens * layer_bytes_per_token(
        shape, w, mem.flash_attention, mem.residual_bytes, w.seq_len
    )
    traffic = cal.ACTIVATION_TRAFFIC.value * (act + mem.logits)
    if w.gradient_checkpointing:
        traffic *= 4.0 / 3.0  # the recomputed forward writes its activations again
    # Weights are read by the forward and both backward matmuls (16-bit copies under autocast).
    weight_bytes = mem.weights
    traffic += (3.0 if w.method == "full" else 2.0) * weight_bytes
    if w.method == "qlora":
        # Dequantize: read 4-bit, write and read the 16-bit matrix, per use.
        traffic += cal.QLORA_DEQUANT_PASSES.value * shape.linear_layer_params * (0.5 + 2.0 + 2.0)
    # Optimizer update reads and writes weights, gradients and states once per optimizer step.
    traffic += 2.0 * (mem.weights + mem.gradients + mem.optimizer) / w.gradient_accumulation_steps
    memory_s = traffic / (gpu.mem_bw_gbs * 1e9 * cal.MEMORY_BW_EFFICIENCY.value)
    local_s = compute_s + memory_s

    local_s = max(local_s, dispatch_seconds(shape, w))
    comm_s = comm_seconds(shape, w, gpu, gpu_count, sharding, mem.trainable_params)
    hidden = cal.OVERLAP_COMM.value * min(local_s, comm_s)
    step_s = local_s + comm_s - hidden
    tps = gpu_count * tokens / step_s
    mfu = model_fpt * tps / (gpu_count * peak * 1e12)
    return Throughput(
        model_flops_per_token=model_fpt,
        hardware_flops_per_token=hw_fpt,
        tokens_per_second=tps,
        mfu=mfu,
        step_seconds=step_s,
        compute_seconds=compute_s,
        memory_seconds=memory_s,
        comm_seconds=comm_s,
        peak_tflops=peak,
    )


def run_hours(
    total_tokens: float,
    tokens_per_second: float,
    shape: ModelShape,
    w: Workload,
    mem: MemoryParts,
    gpu_count: int,
    sharding: str,
) -> tuple[float, dict[str, float]]:
    """Wall-clock hours of one run: training plus fixed per-run overhead."""
    train_h = total_tokens / tokens_per_second / 3600.0
    download_h = shape.params * 2.0 / (cal.DOWNLOAD_GBS.value * 1e9) / 3600.0
    # One checkpoint per training hour (at least one): adapters only for LoRA, full state otherwise.
    sharded = gpu_count > 1 and ZERO_STAGE[sharding] > 0
    ckpt_bytes = (mem.weights + mem.optimizer) * (gpu_count if sharded else 1)
    if w.method != "full":
        ckpt_bytes = mem.trainable_params * 4.0 * 3
    saves = max(1.0, train_h)
    ckpt_h = saves * ckpt_bytes / (cal.CHECKPOINT_WRITE_GBS.value * 1e9) / 3600.0
    overhead = cal.SETUP_HOURS.value + download_h + ckpt_h
    return train_h + overhead, {
        "train_hours": train_h,
        "setup_hours": cal.SETUP_HOURS.value,
        "download_hours": download_h,
        "checkpoint_hours": ckpt_h,
    }


def baseline_tokens_per_second(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int) -> float:
    """The simple rule: ``6 N`` FLOPs per token at 50% of the dense peak (used by the bench)."""
    return gpu_count * 0.5 * gpu.peak_tflops(w.precision) * 1e12 / (6.0 * shape.params)
