"""Peak GPU memory of one training GPU: model states plus the largest of the step's phases.

Model states (bytes per parameter):

=====================  =========  ==========  ==================================================
precision / setup      weights    gradients   optimizer (AdamW)
=====================  =========  ==========  ==================================================
fp32 / tf32            4          4           8 (m, v)
fp16/bf16, one GPU     4 + 2*     4           8         (torch AMP: fp32 params, 16-bit casts*)
fp16/bf16, ZeRO/FSDP   2          2           4 + 8     (fp32 master copy + m, v; ZeRO paper)
bf16-true              2          2           4 (bf16 m, v; no master copy)
=====================  =========  ==========  ==================================================

(*) autocast keeps a 16-bit copy of every matmul weight alive from forward to backward.
8-bit Adam stores 2 B/param of states, SGD with momentum one state, Adafactor (no first moment,
as transformers runs it) a row and a column second moment per matrix. LoRA keeps the base frozen in
16 bits (fp32 under ``fp32``) and trains only the adapters. QLoRA stores the block linear weights
as NF4 (0.5 B/param) plus quantization constants; under transformers + PEFT
(``prepare_model_for_kbit_training``) every other weight (embeddings, head, norms) is upcast to
fp32, so the residual stream is fp32 too (the LM head still runs in 16 bits under autocast).

Sharding (Rajbhandari et al. 2019, ZeRO, arXiv 1910.02054): DDP replicates everything; ZeRO-1
divides optimizer states by the GPU count, ZeRO-2 also gradients, ZeRO-3/FSDP also weights. The
quantized weights of QLoRA are not divided (the stacks shard only floating-point parameters).
Offload (ZeRO-Offload, FSDP CPU offload) moves the fp32 master copy, the optimizer states and the
gradient partitions to host RAM, and with ``optimizer+params`` the weights too.

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198, s.4.1), ``s*b*h*(34 + 5*a*s/h)``
bytes per layer at 16 bits, rebuilt tensor by tensor so that it also covers grouped-query
attention, gated MLPs, models without dropout, fp32, autocast (norms, the residual stream and
softmax stay in fp32), frozen linears (no weight gradient, so their inputs are not kept unless
bitsandbytes' 4-bit matmul keeps them) and fused attention (no ``5*a*s/h`` score term).

Peak = states + the largest phase (each is in the estimate's details):

* ``loss``: every saved activation plus the logits and the loss's fp32 buffers (forward end and
  the start of backward);
* ``backward``: the saved activations plus one block's backward working set (with checkpointing:
  the recomputed block and its gradients), the ZeRO-3/FSDP gathered blocks and root unit, QLoRA's
  dequantized weight;
* ``optimizer``: the step's temporaries (PyTorch's foreach AdamW builds one state-sized buffer;
  DeepSpeed casts each gradient partition to fp32).

Gradients are counted in every phase: after the first step their blocks stay reserved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from optimizer.estimator import calibration as cal
from optimizer.estimator import vision
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.precision import with_precision
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.stacks import loss_logits_bytes, stack_profile
from optimizer.estimator.states import (
    adafactor_state_bytes,
    effective_stage,
    kbit_upcast,
    sharded_qlora,
    state_bytes,
    trainable_params,
)
from optimizer.estimator.workload import Workload

__all__ = [
    "GB", "ZERO_STAGE", "MemoryParts", "adafactor_state_bytes", "baseline_states_gb", "flash_attention_available",
    "fused_attention_available", "layer_bytes_per_token", "memory_parts", "trainable_params",
]

GB = 1e9
ZERO_STAGE = {"ddp": 0, "auto": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class MemoryParts:
    """Bytes per GPU (not GB), so tests can check exact arithmetic.

    ``activations``, ``logits`` and ``temporary`` are the working memory of the peak phase;
    ``phases`` holds the allocated bytes of every phase.
    """

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    temporary: float  # transient buffers of the peak phase
    context: float
    fragmentation: float
    trainable_params: int
    flash_attention: bool
    residual_bytes: float  # bytes per element of the residual stream and norm inputs
    phases: tuple[tuple[str, float], ...] = ()
    peak_phase: str = "loss"
    stage: int = 0  # the ZeRO stage the states are laid out by
    host_offload: float = 0.0  # bytes this GPU's process keeps in host RAM instead
    saved_activations: float = 0.0  # all saved activations of a micro-step (for the traffic model)
    logits_bytes: float = 0.0  # logits and loss buffers of a micro-step
    layer_bytes: float = 0.0  # what one block saves per micro-step without checkpointing
    host_activations: float = 0.0  # checkpointed activations kept in host RAM (checkpointing "offload")

    def __init__(
        self, weights: float, gradients: float, optimizer: float, activations: float, logits: float, temporary: float,
        context: float, fragmentation: float, trainable_params: int, flash_attention: bool, residual_bytes: float,
        phases: tuple[tuple[str, float], ...] = (), peak_phase: str = "loss", stage: int = 0,
        host_offload: float = 0.0, saved_activations: float = 0.0, logits_bytes: float = 0.0,
        layer_bytes: float = 0.0, host_activations: float = 0.0,
    ) -> None:
        self.weights = weights
        self.gradients = gradients
        self.optimizer = optimizer
        self.activations = activations
        self.logits = logits
        self.temporary = temporary
        self.context = context
        self.fragmentation = fragmentation
        self.trainable_params = trainable_params
        self.flash_attention = flash_attention
        self.residual_bytes = residual_bytes
        self.phases = phases
        self.peak_phase = peak_phase
        self.stage = stage
        self.host_offload = host_offload
        self.saved_activations = saved_activations
        self.logits_bytes = logits_bytes
        self.layer_bytes = layer_bytes
        self.host_activations = host_activations

    @property
    def allocated_peak(self) -> float:
        """What ``torch.cuda.max_memory_allocated`` would report."""
        return (
            self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.temporary
        )

    @property
    def overhead(self) -> float:
        return self.context + self.fragmentation

    @property
    def total(self) -> float:
        return self.allocated_peak + self.overhead


def fused_attention_available(gpu: GpuSpec | None, workload: Workload, head_dim: int) -> bool:
    """Attention without an ``s x s`` score matrix, by the kernels PyTorch's SDPA dispatches to.

    FlashAttention-2 needs Ampere or newer (Dao-AILab/flash-attention README). The memory-efficient
    kernel (xFormers' cutlass kernel inside ``torch.nn.functional.scaled_dot_product_attention``)
    also runs on Volta and Turing for fp16/fp32 when the head size is a multiple of 8; it has no
    bf16 path before Ampere, so bf16 on those cards falls back to the math kernel.
    """
    if not workload.flash_attention:
        return False
    if gpu is None or gpu.generation in ("ampere", "ada", "hopper", "blackwell", "cdna"):
        return True
    if gpu.generation in ("volta", "turing"):
        return head_dim % 8 == 0 and workload.precision not in ("bf16", "bf16-true")
    return False


def flash_attention_available(gpu: GpuSpec | None, workload: Workload) -> bool:
    """Fused attention for a typical head size (64/128): see ``fused_attention_available``."""
    return fused_attention_available(gpu, workload, 64)


def _saves_linear_inputs(w: Workload) -> tuple[bool, bool, bool, bool]:
    """Whether the inputs of (qkv, o-proj, MLP up/gate, MLP down) are kept for backward.

    A linear layer keeps its input only to form its weight's gradient (or a LoRA adapter's);
    bitsandbytes' ``MatMul4Bit`` keeps it in any case.
    """
    if w.method in ("full", "qlora"):
        return True, True, True, True
    all_linear = w.lora_targets == "all-linear"
    return True, w.lora_targets != "qv", all_linear, all_linear


def layer_bytes_per_token(shape: ModelShape, w: Workload, flash: bool, resid_b: float, seq: int) -> float:
    """Bytes one block saves for backward, per token (Korthikanti et al. 2022, tensor by tensor)."""
    c = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    autocast = w.precision in ("fp16", "bf16")
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    qkv_in, o_in, mlp_in, down_in = _saves_linear_inputs(w)
    norms = 2 * h * resid_b  # inputs of the two norms, in the residual stream's dtype
    attn = (h * qkv_in + q + 2 * kv + q * o_in) * c  # qkv input; q, k, v; attention output
    if shape.gated_mlp:
        mlp = (h * mlp_in + 3 * i + i * down_in) * c  # gate, up, act(gate); product = down input
    else:
        mlp = (h * mlp_in + i + i * down_in) * c  # pre-activation; activation = fc2 input
    if w.method == "qlora" and resid_b > c:
        # The fp32 norm outputs are cast to 16 bits for the 4-bit matmuls; LoRA keeps the fp32 ones.
        attn += h * resid_b
        mlp += h * resid_b * (w.lora_targets == "all-linear")
    drop = 2 * h if shape.dropout else 0.0  # 1-byte masks after attention and MLP
    score = 0.0
    if not flash:
        sm = 4.0 if (autocast or c == 4) else 2.0  # autocast runs softmax in fp32
        per_score = sm + (c if sm != c else 0.0)  # softmax output + 16-bit copy for the AV matmul
        if shape.dropout:
            per_score = sm + 1.0 + c  # + mask; the dropped probabilities feed the AV matmul
        score = shape.heads * seq * per_score
    return (norms + attn + mlp + drop + score) * stack_profile(w.stack).activation_share


def _block_weight_params(shape: ModelShape) -> float:
    return shape.linear_layer_params / shape.layers


def _vision_activations(shape: ModelShape, w: Workload, resid_b: float, flash: bool) -> tuple[float, float, int]:
    """(saved bytes, one block's working set, sequence length) of an image micro-batch."""
    b = cast(int, w.micro_batch_size)
    c = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    if shape.arch == "cnn":
        fig = vision.resnet_figures(shape.depths, w.image_size, num_classes=shape.num_classes)
        saved = b * fig.saved_elements * c
        if w.gradient_checkpointing:
            saved *= cal.CNN_CHECKPOINT_SHARE.value
        # Backward of a convolution unit holds a few feature maps of gradients plus cuDNN workspace.
        working = b * fig.largest_map_elements * c * 4
        return saved * stack_profile(w.stack).activation_share, working, 1
    seq = vision.vit_tokens(w.image_size, shape.patch_size)
    tokens = b * seq
    per_layer = tokens * layer_bytes_per_token(shape, w, flash, resid_b, seq)
    if w.gradient_checkpointing:
        saved = shape.layers * tokens * shape.hidden * resid_b
    else:
        saved = shape.layers * per_layer
    saved += b * 3 * w.image_size * w.image_size * c + tokens * shape.hidden * 2 * resid_b  # pixels, patches
    working = per_layer * (2.0 if w.gradient_checkpointing else 1.0)
    return saved, working, seq


def memory_parts(
    shape: ModelShape, w: Workload, gpu: GpuSpec | None, gpu_count: int, sharding: str
) -> MemoryParts:
    w = with_precision(w, gpu)  # "auto" -> the card's mixed precision
    stage = effective_stage(w, ZERO_STAGE[sharding] if gpu_count > 1 else 0)
    n = gpu_count
    trainable = trainable_params(shape, w)
    weights, grads, opt, offloaded = state_bytes(shape, w, stage, n, trainable)
    prof = stack_profile(w.stack)

    flash = fused_attention_available(gpu, w, shape.attn_head_dim)
    b, s = cast(int, w.micro_batch_size), w.seq_len
    # The residual stream has the weights' dtype: fp32 under fp32 and under torch AMP (fp32
    # parameters) and QLoRA's k-bit upcast; 16 bits for frozen 16-bit bases, bf16-true and
    # sharded mixed precision.
    amp_fp32_params = w.method == "full" and w.precision in ("fp16", "bf16") and stage == 0
    upcast = kbit_upcast(w, stage, n)
    resid_b = 4.0 if (w.precision in ("fp32", "tf32") or amp_fp32_params or upcast) else 2.0

    logits = 0.0
    per_layer = 0.0
    host_activations = 0.0
    if shape.is_vision:
        activations, block_work, _ = _vision_activations(shape, w, resid_b, flash)
        tokens = b
    else:
        tokens = b * s
        per_layer = tokens * layer_bytes_per_token(shape, w, flash, resid_b, s)
        checkpoint = tokens * shape.hidden * resid_b  # one block's input, what checkpointing keeps
        if w.gradient_checkpointing == "offload":
            # Offloaded checkpointing (Unsloth, 2024-04 "long context" blog; torch
            # save_on_cpu): each block's input is copied to host RAM after its forward and
            # brought back for its backward; the GPU holds the one in flight each way.
            host_activations = shape.layers * checkpoint
            activations = cal.OFFLOADED_CHECKPOINTS_ON_GPU.value * checkpoint
        elif w.gradient_checkpointing:
            activations = shape.layers * checkpoint
        else:
            activations = shape.layers * per_layer
        # Embedding output (+ its dropout mask) and the final norm's input.
        activations += tokens * shape.hidden * (2 * resid_b + (1 if shape.dropout else 0))
        # While one block runs backward its recomputed activations (checkpointing) and the
        # gradients flowing through it are alive at once.
        block_work = per_layer * (prof.recompute_work if w.gradient_checkpointing else 1.0)
        if shape.lm_head:
            # Under autocast the (upcast, fp32) LM head still computes in 16 bits.
            c = 4.0 if w.precision in ("fp32", "tf32") or (upcast and w.precision == "bf16-true") else 2.0
            logits = tokens * shape.vocab * loss_logits_bytes(prof, w.cross_entropy, c, cal.LOGITS_FP32_BUFFERS.value)

    backward_extra = 0.0
    loss_extra = 0.0
    # Gathered weights are in the compute dtype (fp32 runs gather fp32).
    gathered_b = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    if w.offload == "optimizer+params" and w.method != "qlora" and sharding != "fsdp":
        # DeepSpeed ZeRO-3 with parameter offload keeps fetched parameters on the GPU while they
        # will be reused soon: up to stage3_max_live_parameters (default 1e9) of them.
        live = min(shape.params, cal.DS_MAX_LIVE_PARAMETERS.value) * gathered_b
        backward_extra += live
        loss_extra += live
    elif (stage >= 3 and n > 1) or w.offload == "optimizer+params":
        if w.method != "qlora":
            # ZeRO-3/FSDP gathers one block's weights and prefetches the next; the root unit
            # (embeddings, head) stays gathered through forward and backward.
            keep = (1 - 1 / n) if w.offload == "none" else 1.0
            backward_extra += 2 * gathered_b * _block_weight_params(shape) * keep
            root = (shape.params - shape.linear_layer_params) * gathered_b * keep
            backward_extra += root
            loss_extra += root
    if w.method == "qlora":
        if sharded_qlora(w, stage, n):
            # FSDP/ZeRO-3 gather each block's 4-bit weights at their stored size (packed NF4 +
            # constants in the quant_storage container) and prefetch the next; the root unit
            # (embeddings, head: 16-bit) stays gathered through forward and backward.
            keep = (1 - 1 / n) if w.offload == "none" else 1.0
            nf4_b = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            backward_extra += 2 * nf4_b * _block_weight_params(shape) * keep
            root = (shape.params - shape.linear_layer_params) * gathered_b * keep
            backward_extra += root
            loss_extra += root
        # bitsandbytes dequantizes a block's weights to 16 bits, one linear per matmul; the
        # caching allocator keeps the block's differently sized buffers: one block's 16-bit weights.
        backward_extra += cal.QLORA_DEQUANT_BLOCKS.value * 2.0 * _block_weight_params(shape)
        if w.stack == "litgpt":
            # litgpt's published QLoRA peaks sit above everything itemised here by ~0.3 B per
            # quantized weight (cause not itemised by the source; fitted on its rows only).
            backward_extra += cal.QLORA_EXTRA_BYTES_PER_PARAM.value * shape.linear_layer_params

    optimizer_temp = 0.0
    if w.offload == "none":
        sharded = stage >= 1 and n > 1
        if w.optimizer == "adamw" and prof.foreach_optimizer and not sharded:
            state_b = 2.0 if w.precision == "bf16-true" else 4.0
            optimizer_temp = trainable * state_b * cal.ADAM_FOREACH_TEMP_COPIES.value
        elif w.optimizer == "adafactor":
            # transformers' Adafactor builds a full-size fp32 update per parameter, one at a time.
            largest = max(shape.vocab * shape.hidden, shape.hidden * shape.intermediate)
            optimizer_temp = 2 * 4.0 * (largest if w.method == "full" else min(largest, trainable))
        if sharded and w.precision in ("fp16", "bf16"):
            # DeepSpeed casts each gradient partition to fp32 for the step (FSDP keeps fp32 shards
            # of the same size): one fp32 partition.
            optimizer_temp += trainable * 4.0 / n

    states = weights + grads + opt
    phases = (
        ("loss", activations + logits + loss_extra),
        ("backward", activations + block_work + backward_extra),
        ("optimizer", optimizer_temp),
    )
    peak_name, peak_work = max(phases, key=lambda kv: kv[1])
    if peak_name == "loss":
        act, lg, tmp = activations, logits, loss_extra
    elif peak_name == "backward":
        act, lg, tmp = activations, 0.0, block_work + backward_extra
    else:
        act, lg, tmp = 0.0, 0.0, optimizer_temp
    allocated = states + peak_work
    frag = allocated * cal.FRAGMENTATION.value
    return MemoryParts(
        weights=weights,
        gradients=grads,
        optimizer=opt,
        activations=act,
        logits=lg,
        temporary=tmp,
        context=cal.CUDA_CONTEXT_GB.value * GB,
        fragmentation=frag,
        trainable_params=trainable,
        flash_attention=flash,
        residual_bytes=resid_b,
        phases=tuple((name, states + work) for name, work in phases),
        peak_phase=peak_name,
        stage=stage,
        host_offload=offloaded,
        saved_activations=activations,
        logits_bytes=logits,
        layer_bytes=per_layer,
        host_activations=host_activations,
    )


def baseline_states_gb(shape: ModelShape, w: Workload) -> float:
    """The common calculator: weights + gradients + Adam states only (``accelerate estimate-memory``
    style: 4x the weights' size), no activations, logits or overhead. Used by the bench."""
    bytes_per = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    trainable = trainable_params(shape, w)
    if w.method == "full":
        return shape.params * bytes_per * 4 / GB
    base = shape.params * (0.5 if w.method == "qlora" else bytes_per)
    return (base + trainable * bytes_per * 3) / GB
