"""Training FLOPs, tokens (or images) per second, MFU and hours.

FLOPs per token (Kaplan et al. 2020; PaLM appendix B for the attention term):

* forward ``F = 2 * N_matmul + 4 * layers * seq * d_attn`` (every matmul weight once; ``Q K^T``
  and ``A V``); the input embedding is a lookup and costs nothing;
* full training ``3F`` (backward = activation gradients + weight gradients);
* LoRA / QLoRA ``2F`` (frozen weights need no weight gradient, only the activation gradient);
* gradient checkpointing recomputes the forward: ``+F`` of hardware work, not of model FLOPs.

Image models count FLOPs per image: a ResNet's convolutions layer by layer
(``optimizer.estimator.vision``), a ViT as a transformer over its patch tokens.

Step time on one GPU is a two-term roofline: matmul FLOPs at a sustained share of the dense peak
(a fitted share times what large GEMMs reach on that GPU generation, at the precision's peak:
fp32 on CUDA cores unless TF32 is asked for, bf16 emulated at the fp32 rate before Ampere), plus
the memory traffic of the bandwidth-bound kernels (norms, activations, softmax, dropout, optimizer
update, QLoRA dequantization) at the card's bandwidth. Host launch time is mostly hidden behind
the GPU (a floor), but a share of it and a fixed per-optimizer-step cost add. Several GPUs add
gradient all-reduce (DDP, ZeRO-1/2) or parameter all-gathers (ZeRO-3/FSDP), mostly hidden behind
compute. Offload adds the host's optimizer step and the PCIe transfers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from optimizer.estimator import calibration as cal
from optimizer.estimator import vision
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.memory import ZERO_STAGE, MemoryParts, layer_bytes_per_token
from optimizer.estimator.precision import resolve_precision, with_precision
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.stacks import stack_profile
from optimizer.estimator.workload import Workload

GPUS_PER_NODE = 8


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class Throughput:
    model_flops_per_token: float
    hardware_flops_per_token: float
    tokens_per_second: float  # all GPUs together (images per second for image models)
    mfu: float
    step_seconds: float
    compute_seconds: float
    memory_seconds: float
    comm_seconds: float
    peak_tflops: float
    samples_per_second: float = 0.0
    dispatch_seconds: float = 0.0
    step_overhead_seconds: float = 0.0
    offload_seconds: float = 0.0
    matmul_efficiency: float = 0.0

    def __init__(
        self, model_flops_per_token: float, hardware_flops_per_token: float, tokens_per_second: float, mfu: float,
        step_seconds: float, compute_seconds: float, memory_seconds: float, comm_seconds: float, peak_tflops: float,
        samples_per_second: float = 0.0, dispatch_seconds: float = 0.0, step_overhead_seconds: float = 0.0,
        offload_seconds: float = 0.0, matmul_efficiency: float = 0.0,
    ) -> None:
        self.model_flops_per_token = model_flops_per_token
        self.hardware_flops_per_token = hardware_flops_per_token
        self.tokens_per_second = tokens_per_second
        self.mfu = mfu
        self.step_seconds = step_seconds
        self.compute_seconds = compute_seconds
        self.memory_seconds = memory_seconds
        self.comm_seconds = comm_seconds
        self.peak_tflops = peak_tflops
        self.samples_per_second = samples_per_second
        self.dispatch_seconds = dispatch_seconds
        self.step_overhead_seconds = step_overhead_seconds
        self.offload_seconds = offload_seconds
        self.matmul_efficiency = matmul_efficiency


def tokens_per_sample(shape: ModelShape, w: Workload) -> int:
    """Tokens a sample carries: ``seq_len`` for text, patches + class token for a ViT, 1 for a CNN."""
    if shape.arch == "vit":
        return vision.vit_tokens(w.image_size, shape.patch_size)
    if shape.arch == "cnn":
        return 1
    return w.seq_len


def forward_flops_per_token(shape: ModelShape, seq_len: int, image_size: int = 224) -> float:
    if shape.arch == "cnn":
        return vision.resnet_figures(shape.depths, image_size, num_classes=shape.num_classes).forward_flops
    attention = 4.0 * shape.layers * seq_len * shape.q_dim
    return 2.0 * shape.matmul_params + attention


def training_flops_per_token(shape: ModelShape, w: Workload) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) per token (per image for a CNN).

    LoRA's frozen linears need only the activation gradient in backward (1x their forward), but
    attention's ``Q K^T`` and ``A V`` have no weights to freeze: their backward forms dQ, dK and dV
    (2x the forward) whatever the method, so attention counts 3x for LoRA as for full training."""
    seq = tokens_per_sample(shape, w)
    fwd = forward_flops_per_token(shape, seq, w.image_size)
    if w.method == "full":
        model = 3.0 * fwd
    else:
        attention = 0.0 if shape.arch == "cnn" else 4.0 * shape.layers * seq * shape.q_dim
        model = 2.0 * (fwd - attention) + 3.0 * attention
    hardware = model + (fwd if w.gradient_checkpointing else 0.0)
    return model, hardware


def train_flops(shape: ModelShape, w: Workload) -> float:
    """Model FLOPs of the whole run (``6 N D``-style for full training)."""
    return training_flops_per_token(shape, w)[0] * run_tokens(shape, w)


def run_tokens(shape: ModelShape, w: Workload) -> float:
    """Tokens (images for a CNN) the run processes."""
    if shape.is_vision:
        images = w.total_samples if w.total_samples is not None else cal.DEFAULT_IMAGES.value
        return images * tokens_per_sample(shape, w)
    return w.total_tokens


def _tensor_core_gen(gpu: GpuSpec) -> bool:
    return gpu.generation in ("ampere", "ada", "hopper", "blackwell", "cdna")


def effective_peak_tflops(gpu: GpuSpec, precision: str, convolutions: bool = False) -> float:
    """Dense peak the training matmuls run at.

    ``fp32``: PyTorch leaves TF32 off for matmuls (``torch.backends.cuda.matmul.allow_tf32`` is
    False since 1.12), so they run on the CUDA cores; cuDNN convolutions allow TF32 by default.
    ``tf32``: TF32 tensor cores (half the fp16 dense rate) on Ampere and newer. bf16 on cards
    without bf16 tensor cores (V100, T4) is emulated at the fp32 rate.
    """
    precision = resolve_precision(precision, gpu)
    if precision == "tf32" or (precision == "fp32" and convolutions):
        return gpu.fp16_tensor_tflops / 2 if _tensor_core_gen(gpu) else gpu.fp32_tflops
    if precision == "fp32":
        return gpu.fp32_tflops
    return gpu.peak_tflops(precision)


def gemm_attainable(gpu: GpuSpec, tensor_cores: bool = True) -> float:
    """Share of the datasheet's dense peak large GEMMs reach on this GPU. GeForce cards run their
    tensor cores above the rated boost clock their datasheet peak assumes (GEFORCE_GEMM_ATTAINABLE)."""
    if tensor_cores and gpu.vendor == "nvidia" and gpu.gpu_class == "consumer" and _tensor_core_gen(gpu):
        return cal.GEFORCE_GEMM_ATTAINABLE.value
    return cal.GEMM_ATTAINABLE.get(gpu.generation, cal.GEMM_ATTAINABLE["other"]).value


def _tensor_core_matmuls(gpu: GpuSpec, shape: ModelShape, precision: str) -> bool:
    """Whether the step's matmuls run on tensor cores: not plain fp32 ones (PyTorch leaves TF32 off
    for matmuls; convolutions get TF32 from Ampere on) and not bf16 emulated before Ampere."""
    p = resolve_precision(precision, gpu)
    if p == "fp32":
        return shape.arch == "cnn" and _tensor_core_gen(gpu)
    return p == "fp16" or gpu.supports_bf16


def matmul_efficiency(gpu: GpuSpec, shape: ModelShape, precision: str = "bf16") -> float:
    """Share of the dense peak the step's matmuls sustain on this GPU."""
    eff = cal.MATMUL_EFFICIENCY.value * gemm_attainable(gpu, _tensor_core_matmuls(gpu, shape, precision))
    if shape.arch == "cnn":
        eff *= cal.CONV_EFFICIENCY_SHARE.value
        if precision in ("fp32", "tf32") and _tensor_core_gen(gpu):
            eff *= cal.TF32_CONV_SHARE.value  # TF32 convolutions, priced apart from fp16 ones
    return eff


def _cuda_core_convs(gpu: GpuSpec, precision: str) -> bool:
    """fp32 convolutions on a card without TF32 tensor cores run on its CUDA cores."""
    return not _tensor_core_gen(gpu) and resolve_precision(precision, gpu) in ("fp32", "tf32")


def conv_work_share(shape: ModelShape, w: Workload, gpu: GpuSpec) -> float:
    """Share of a CNN's counted FLOPs the GPU really multiplies: fp32 convolutions on CUDA cores
    run their 3x3 stride-1 layers as Winograd (fewer multiplies); elsewhere 1."""
    if shape.arch != "cnn" or not _cuda_core_convs(gpu, w.precision):
        return 1.0
    fig = vision.resnet_figures(shape.depths, w.image_size, num_classes=shape.num_classes)
    share = fig.winograd_flops / fig.forward_flops if fig.forward_flops else 0.0
    return 1.0 - share * (1.0 - 1.0 / cal.WINOGRAD_MULTIPLY_SAVING.value)


_TENSOR_CORE_FP16 = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")


def _tensor_core_convs(gpu: GpuSpec, precision: str) -> bool:
    """Whether cuDNN runs the convolutions on NVIDIA tensor cores (which take NHWC data): fp16 from
    Volta on; bf16, and TF32 for fp32 storage (cuDNN allows TF32 by default), from Ampere on."""
    if gpu.vendor != "nvidia":
        return False  # MIOpen on AMD cards: its own layouts, not priced here
    p = resolve_precision(precision, gpu)
    if p == "fp16":
        return gpu.generation in _TENSOR_CORE_FP16
    return _tensor_core_gen(gpu)  # bf16, bf16-true, tf32, fp32 (TF32 convolutions)


def nchw_transpose_bytes(shape: ModelShape, w: Workload, gpu: GpuSpec) -> float:
    """Memory traffic per micro-step of the layout transposes cuDNN adds around tensor-core
    convolutions when the feature maps are NCHW (PyTorch's default): each of the forward, data-
    and weight-gradient calls of every convolution transposes its input to NHWC and its output back
    (``NCHW_TRANSPOSES_PER_CONV`` maps of input or output size, each read and written). Nothing for
    channels-last maps, for CUDA-core convolutions, or for models without convolutions."""
    if shape.arch != "cnn" or w.memory_format != "nchw" or not _tensor_core_convs(gpu, w.precision):
        return 0.0
    fig = vision.resnet_figures(shape.depths, w.image_size, num_classes=shape.num_classes)
    c = 4.0 if resolve_precision(w.precision, gpu) in ("fp32", "tf32") else 2.0
    # Half the transposes are of input-sized maps, half of output-sized: io elements x count / 2,
    # each read and written (x 2).
    moved = cast(int, w.micro_batch_size) * fig.conv_io_elements * cal.NCHW_TRANSPOSES_PER_CONV.value * c
    if w.gradient_checkpointing:
        moved *= 4.0 / 3.0  # the recomputed forward transposes again
    return moved


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
    grad_bytes = trainable * 2.0 / w.accumulation_steps
    intra = 2.0 * (local - 1) / local * grad_bytes
    inter = 2.0 * (nodes - 1) / nodes * grad_bytes / local if nodes > 1 else 0.0
    if stage >= 3:
        # Weights are gathered at their stored size: 16-bit, or QLoRA's packed 4-bit + constants
        # (its 16-bit embeddings and head as they are).
        weight_bytes = shape.params * 2.0
        if w.method == "qlora":
            nf4_b = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            weight_bytes = shape.linear_layer_params * nf4_b + (shape.params - shape.linear_layer_params) * 2.0
        intra += 2.0 * (local - 1) / local * weight_bytes
    return intra / (_intra_node_gbs(gpu) * 1e9) + inter / (cal.INTER_NODE_GBS.value * 1e9)


def _linear_io_elements(shape: ModelShape) -> float:
    """Input plus output elements per token of a block's seven linears (q, k, v, o, gate, up, down)."""
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    ins = 3 * h + q + 2 * h + i if shape.gated_mlp else 3 * h + q + h + i
    outs = q + 2 * kv + h + (2 * i if shape.gated_mlp else i) + h
    return float(ins + outs)


def dispatch_seconds(shape: ModelShape, w: Workload) -> float:
    """Host time to launch one micro-step's kernels (eager PyTorch: tens of microseconds per op,
    ~100+ ops per block forward and backward; QLoRA adds a dequantize and casts per linear)."""
    passes = 4.0 / 3.0 if w.gradient_checkpointing else 1.0
    per_layer = cal.DISPATCH_S_PER_LAYER.value
    if shape.arch == "cnn":
        per_layer *= cal.CNN_DISPATCH_SHARE.value
    if w.method == "qlora":
        per_layer *= cal.QLORA_DISPATCH_FACTOR.value
    if w.method in ("lora", "qlora") and shape.arch != "cnn":
        per_layer += cal.LORA_DISPATCH_S_PER_ADAPTER.value * adapted_linears(w)
    return per_layer * shape.layers * passes * stack_profile(w.stack).dispatch_share


def dequant_bytes(shape: ModelShape, w: Workload) -> float:
    """QLoRA's memory traffic per micro-step to turn the 4-bit weights into 16-bit matrices.

    ``nf4`` (bitsandbytes): each use dequantizes afresh (read 4-bit, write and read the 16-bit
    matrix) in forward, in the activation gradient (frozen W has no weight gradient; bitsandbytes'
    MatMul4Bit keeps only the 4-bit weight) and, with checkpointing, in the recomputed forward, at
    a share of the streaming rate (a table lookup per weight). ``gptq`` (auto-gptq's PyTorch path):
    every forward unpacks through a chain of plain elementwise ops; backward reads the 16-bit matrix
    autograd saved."""
    if w.method != "qlora":
        return 0.0
    if w.quantization == "gptq":
        forwards = 2.0 if w.gradient_checkpointing else 1.0
        per = forwards * cal.GPTQ_FORWARD_DEQUANT_BYTES_PER_PARAM.value + cal.GPTQ_BACKWARD_BYTES_PER_PARAM.value
        return shape.linear_layer_params * per
    uses = 3.0 if w.gradient_checkpointing else 2.0
    return uses * shape.linear_layer_params * (0.5 + 2.0 + 2.0) / cal.QLORA_DEQUANT_BW_SHARE.value


def adapted_linears(w: Workload) -> int:
    """Linears per block that carry a LoRA adapter (q, k, v, o; q, v; or all seven)."""
    return {"attention": 4, "qv": 2, "all-linear": 7}[w.lora_targets]


def offload_seconds(shape: ModelShape, w: Workload, gpu_count: int, mem: MemoryParts) -> float:
    """Host optimizer step and PCIe traffic per micro-step under offload.

    DeepSpeed's CPU Adam updates this process's partition on its share of the host's cores;
    16-bit gradients go to the host and 16-bit weights come back once per optimizer step (and
    with parameter offload the weights stream in for forward and backward of every micro-step).
    """
    if w.offload == "none":
        return 0.0
    share = gpu_count if mem.stage >= 1 else 1
    params = mem.trainable_params / share
    cores = cal.OFFLOAD_CORES_PER_GPU.value
    cpu_s = params / (cal.CPU_ADAM_PARAMS_PER_S_PER_CORE.value * cores)
    link = cal.HOST_LINK_GBS.value * 1e9
    transfer = 2.0 * 2.0 * params / link  # gradients out, weights back
    per_step = cpu_s + (1.0 - cal.OVERLAP_COMM.value) * transfer
    stream = 0.0
    if w.offload == "optimizer+params":
        weight_bytes = shape.params * 2.0
        if w.method == "qlora":  # the 4-bit weights stream at their stored size
            nf4_b = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            weight_bytes = shape.linear_layer_params * nf4_b + (shape.params - shape.linear_layer_params) * 2.0
        stream = 2.0 * weight_bytes / share / link
    return per_step / w.accumulation_steps + stream


def _activation_traffic_bytes(shape: ModelShape, w: Workload, mem: MemoryParts) -> float:
    prof = stack_profile(w.stack)
    if shape.arch == "cnn":
        fig = vision.resnet_figures(shape.depths, w.image_size, num_classes=shape.num_classes)
        c = 4.0 if w.precision in ("fp32", "tf32") else 2.0
        act = cast(int, w.micro_batch_size) * fig.saved_elements * c
        passes = cal.CNN_TRAFFIC.value
    else:
        if mem.layer_bytes:
            act = shape.layers * mem.layer_bytes
        else:  # a ViT: its blocks over the patch tokens
            seq = tokens_per_sample(shape, w)
            tokens = cast(int, w.micro_batch_size) * seq
            act = shape.layers * tokens * layer_bytes_per_token(shape, w, mem.flash_attention, mem.residual_bytes, seq)
        passes = cal.ACTIVATION_TRAFFIC.value
    c = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    logits = 0.0
    if shape.lm_head:
        # Fused losses never hold the logits but still write and read them chunk by chunk.
        logits = max(mem.logits_bytes, cast(int, w.micro_batch_size) * w.seq_len * shape.vocab * c)
    traffic = passes * prof.traffic_share * (act + logits)
    if w.gradient_checkpointing:
        traffic *= 4.0 / 3.0  # the recomputed forward writes its activations again
    return traffic


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class StepTerms:
    """What a workload's micro-step costs whatever the card: FLOPs per token, tokens per sample and
    the host's kernel launch time."""

    model_flops_per_token: float
    hardware_flops_per_token: float
    tokens_per_sample: int
    dispatch_seconds: float

    def __init__(
        self, model_flops_per_token: float, hardware_flops_per_token: float, tokens_per_sample: int,
        dispatch_seconds: float,
    ) -> None:
        self.model_flops_per_token = model_flops_per_token
        self.hardware_flops_per_token = hardware_flops_per_token
        self.tokens_per_sample = tokens_per_sample
        self.dispatch_seconds = dispatch_seconds


def _step_terms(shape: ModelShape, w: Workload) -> StepTerms:
    model, hardware = training_flops_per_token(shape, w)
    return StepTerms(model, hardware, tokens_per_sample(shape, w), dispatch_seconds(shape, w))


# A quote asks ``throughput`` of one workload on ~130 (card, count) pairs: its card-independent
# terms are kept per workload without its amount (bounded like the estimator's speed memo, and
# forgotten with it: ``estimate.clear_cache``).
_STEP_TERMS: LruMemo[str, StepTerms] = LruMemo(4096)


def step_terms(shape: ModelShape, w: Workload) -> StepTerms:
    """``w``'s card-independent step terms (``shape``: ``w``'s model), kept per ``w.rate_key()``."""
    return _STEP_TERMS.get_or_compute(w.rate_key(), lambda: _step_terms(shape, w))


def forget_step_terms() -> None:
    _STEP_TERMS.clear()


def throughput(
    shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str, mem: MemoryParts
) -> Throughput:
    # "auto" -> the card's mixed precision (one shared copy per choice: its terms are kept too).
    w = with_precision(w, gpu)
    terms = step_terms(shape, w)
    model_fpt, hw_fpt = terms.model_flops_per_token, terms.hardware_flops_per_token
    peak = effective_peak_tflops(gpu, w.precision, convolutions=shape.arch == "cnn")
    per_sample = terms.tokens_per_sample
    tokens = cast(int, w.micro_batch_size) * per_sample
    eff = matmul_efficiency(gpu, shape, w.precision)
    compute_s = tokens * hw_fpt * conv_work_share(shape, w, gpu) / (peak * 1e12 * eff)

    # Bandwidth-bound work per micro-step.
    traffic = _activation_traffic_bytes(shape, w, mem) + nchw_transpose_bytes(shape, w, gpu)
    # Weights are read by the forward and both backward matmuls (16-bit copies under autocast).
    # ZeRO-3/FSDP gather each block before its matmuls, so the whole block is read, not the shard
    # (QLoRA's 4-bit weights too: they shard in their 16-bit quant_storage container).
    gathered = gpu_count if sharding in ("zero3", "fsdp") else 1
    traffic += (3.0 if w.method == "full" else 2.0) * mem.weights * gathered
    if w.method == "qlora":
        # Per call, whatever the micro-batch: this is what short micro-steps cannot amortise.
        traffic += dequant_bytes(shape, w)
        uses = 3.0 if w.gradient_checkpointing else 2.0
        if mem.residual_bytes == 4.0:
            # Per token: with PEFT's fp32 upcast every 4-bit linear casts its fp32 input to 16 bits
            # and its 16-bit output back (bitsandbytes Linear4bit.forward), in each use.
            traffic += uses * tokens * shape.layers * _linear_io_elements(shape) * (4.0 + 2.0)
    # Optimizer update reads and writes weights, gradients and states once per optimizer step.
    traffic += 2.0 * (mem.weights + mem.gradients + mem.optimizer) / w.accumulation_steps
    memory_s = traffic / (gpu.mem_bw_gbs * 1e9 * cal.MEMORY_BW_EFFICIENCY.value)
    gpu_s = compute_s + memory_s

    dispatch_s = terms.dispatch_seconds
    # Launches overlap GPU work (a floor), but part of the host time is exposed every step.
    local_s = max(gpu_s, dispatch_s) + cal.DISPATCH_ADDITIVE_SHARE.value * min(gpu_s, dispatch_s)
    step_overhead = cal.STEP_OVERHEAD_S.value * stack_profile(w.stack).dispatch_share / w.accumulation_steps
    local_s += step_overhead
    offload_s = offload_seconds(shape, w, gpu_count, mem)
    if mem.host_activations:
        # Checkpointing "offload": block inputs go out in forward and come back in backward over
        # PCIe, asynchronously: only what compute cannot hide adds.
        copy_s = 2.0 * mem.host_activations / (cal.HOST_LINK_GBS.value * 1e9)
        offload_s += max(copy_s - cal.OVERLAP_COMM.value * local_s, (1.0 - cal.OVERLAP_COMM.value) * copy_s)
    local_s += offload_s
    comm_s = comm_seconds(shape, w, gpu, gpu_count, sharding, mem.trainable_params)
    hidden = cal.OVERLAP_COMM.value * min(local_s, comm_s)
    step_s = local_s + comm_s - hidden
    if gpu_count > 1:
        # What data parallelism costs every optimizer step whatever its length (bucket latency,
        # the last bucket, the slowest process): short steps cannot hide it.
        step_s += cal.DP_STEP_OVERHEAD_S.value * math.log2(gpu_count) / w.accumulation_steps
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
        samples_per_second=gpu_count * cast(int, w.micro_batch_size) / step_s,
        dispatch_seconds=dispatch_s,
        step_overhead_seconds=step_overhead,
        offload_seconds=offload_s,
        matmul_efficiency=eff,
    )


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class RunTerms:
    """What a run's hours follow from besides its tokens: its speed and its fixed per-run costs
    (``run_terms``). The same for every amount of training, so kept with a kept estimate."""

    tokens_per_second: float
    setup_hours: float
    download_hours: float
    checkpoint_bytes: float  # what one checkpoint writes

    def __init__(
        self, tokens_per_second: float, setup_hours: float, download_hours: float, checkpoint_bytes: float,
    ) -> None:
        self.tokens_per_second = tokens_per_second
        self.setup_hours = setup_hours
        self.download_hours = download_hours
        self.checkpoint_bytes = checkpoint_bytes


def run_terms(tokens_per_second: float, shape: ModelShape, w: Workload, mem: MemoryParts, gpu_count: int) -> RunTerms:
    """``run_hours``' terms for ``w`` at ``tokens_per_second`` on ``gpu_count`` GPUs."""
    download_h = shape.params * 2.0 / (cal.DOWNLOAD_GBS.value * 1e9) / 3600.0
    # One checkpoint per training hour (at least one): adapters only for LoRA, full state otherwise.
    sharded = gpu_count > 1 and mem.stage > 0
    ckpt_bytes = (mem.weights + mem.optimizer + mem.host_offload) * (gpu_count if sharded else 1)
    if w.method != "full":
        ckpt_bytes = mem.trainable_params * 4.0 * 3
    return RunTerms(tokens_per_second, cal.SETUP_HOURS.value, download_h, ckpt_bytes)


def run_hours(total_tokens: float, t: RunTerms) -> tuple[float, float, float]:
    """Wall-clock hours of one run (training plus fixed per-run overhead), its training hours and
    its checkpoint hours."""
    train_h = total_tokens / t.tokens_per_second / 3600.0
    saves = max(1.0, train_h)
    ckpt_h = saves * t.checkpoint_bytes / (cal.CHECKPOINT_WRITE_GBS.value * 1e9) / 3600.0
    return train_h + (t.setup_hours + t.download_hours + ckpt_h), train_h, ckpt_h


def baseline_tokens_per_second(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int) -> float:
    """The simple rule: ``6 N`` FLOPs per token at 50% of the dense peak (used by the bench)."""
    per_token = 6.0 * shape.params
    if shape.is_vision:
        per_token = 3.0 * forward_flops_per_token(shape, tokens_per_sample(shape, w), w.image_size)
    return gpu_count * 0.5 * gpu.peak_tflops(w.precision) * 1e12 / per_token
