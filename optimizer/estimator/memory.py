"""Peak GPU memory of one training GPU, by part.

Model states (bytes per parameter):

=====================  =========  ==========  ==================================================
precision / setup      weights    gradients   optimizer (AdamW)
=====================  =========  ==========  ==================================================
fp32                   4          4           8 (m, v)
fp16/bf16, one GPU     4 + 2*     4           8         (torch AMP: fp32 params, 16-bit casts*)
fp16/bf16, ZeRO/FSDP   2          2           4 + 8     (fp32 master copy + m, v; ZeRO paper)
bf16-true              2          2           4 (bf16 m, v; no master copy)
=====================  =========  ==========  ==================================================

(*) autocast keeps a 16-bit copy of every matmul weight alive from forward to backward.
8-bit Adam stores 2 B/param of states, SGD with momentum one state. LoRA keeps the base frozen in
16 bits (fp32 under ``fp32``) and trains only the adapters; QLoRA stores the block linear weights
as NF4 (0.5 B/param) plus quantization constants.

Sharding (Rajbhandari et al. 2019, ZeRO, arXiv 1910.02054): DDP replicates everything; ZeRO-1
divides optimizer states by the GPU count, ZeRO-2 also gradients, ZeRO-3/FSDP also weights (plus
one gathered block in flight).

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198, s.4.1), ``s*b*h*(34 + 5*a*s/h)``
bytes per layer at 16 bits, rebuilt tensor by tensor so that it also covers grouped-query
attention, gated MLPs, models without dropout, fp32 and autocast (where norms, the residual stream
and softmax stay in fp32). Fused attention (FlashAttention / SDPA) drops the ``5*a*s/h`` score
term. Full recomputation keeps each block's input plus one block's working set. Logits add
``b*s*vocab`` elements in the compute dtype and two fp32 buffers of the same size for the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.estimator import calibration as cal
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.shapes import ModelShape, lora_trainable_params
from optimizer.estimator.workload import Workload

GB = 1e9
ZERO_STAGE = {"ddp": 0, "auto": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}


@dataclass(frozen=True, slots=True)
class MemoryParts:
    """Bytes per GPU (not GB), so tests can check exact arithmetic."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    temporary: float  # transient buffers: one block's recompute / gradient working set, dequant
    context: float
    fragmentation: float
    trainable_params: int
    flash_attention: bool
    residual_bytes: float  # bytes per element of the residual stream and norm inputs

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


def flash_attention_available(gpu: GpuSpec | None, workload: Workload) -> bool:
    """Fused attention without an ``s x s`` score matrix.

    FlashAttention-2 runs on Ampere, Ada and Hopper (Dao-AILab/flash-attention README); bf16 tensor
    cores are the marker of those generations in the GPU catalog. On older cards (V100, T4, RTX 20xx)
    training stacks fall back to eager attention and keep the scores.
    """
    if not workload.flash_attention:
        return False
    return gpu is None or gpu.supports_bf16


def trainable_params(shape: ModelShape, workload: Workload) -> int:
    if workload.method == "full":
        return shape.params
    return lora_trainable_params(shape, workload.lora_rank, workload.lora_targets)


def _state_bytes(shape: ModelShape, w: Workload, stage: int, n: int, trainable: int) -> tuple[float, float, float]:
    """Weights, gradients and optimizer bytes per GPU."""
    N = shape.params
    p = w.precision
    if w.method == "full":
        if p == "fp32":
            wb, gb, master = 4.0, 4.0, 0.0
        elif p == "bf16-true":
            wb, gb, master = 2.0, 2.0, 0.0
        elif stage == 0:
            # torch AMP: fp32 parameters (they are the master copy) and fp32 gradients, plus the
            # 16-bit casts autocast keeps for backward.
            wb, gb, master = 4.0, 4.0, 0.0
        else:
            wb, gb, master = 2.0, 2.0, 4.0
        state_b = {"adamw": 8.0, "adamw_8bit": cal.ADAM8BIT_BYTES_PER_PARAM.value, "sgd": 4.0}[w.optimizer]
        if p == "bf16-true" and w.optimizer != "adamw_8bit":
            state_b /= 2  # states are created in the parameters' dtype
        weights = N * wb
        if p in ("fp16", "bf16") and stage == 0:
            weights += shape.matmul_params * 2.0
        grads = N * gb
        opt = N * (state_b + master)
    else:
        base_b = 4.0 if p == "fp32" else 2.0
        if w.method == "qlora":
            quant = shape.linear_layer_params
            per = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            weights = quant * per + (N - quant) * base_b
        else:
            weights = N * base_b
        ad_b = 2.0 if p == "bf16-true" else 4.0
        weights += trainable * ad_b
        grads = trainable * ad_b
        state_b = {"adamw": 8.0, "adamw_8bit": cal.ADAM8BIT_BYTES_PER_PARAM.value, "sgd": 4.0}[w.optimizer]
        if p == "bf16-true" and w.optimizer != "adamw_8bit":
            state_b /= 2
        opt = trainable * state_b
    if n > 1:
        if stage >= 1:
            opt /= n
        if stage >= 2:
            grads /= n
        if stage >= 3:
            weights /= n
    return weights, grads, opt


def layer_bytes_per_token(shape: ModelShape, w: Workload, flash: bool, resid_b: float, seq: int) -> float:
    """Bytes one block saves for backward, per token (Korthikanti et al. 2022, tensor by tensor)."""
    c = 4.0 if w.precision == "fp32" else 2.0
    autocast = w.precision in ("fp16", "bf16")
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    norms = 2 * h * resid_b  # inputs of the two norms, in the residual stream's dtype
    attn = (h + q + 2 * kv + q) * c  # qkv input; q, k, v; attention output (o-proj input)
    mlp = (h + (4 * i if shape.gated_mlp else 2 * i)) * c
    drop = 2 * h if shape.dropout else 0.0  # 1-byte masks after attention and MLP
    score = 0.0
    if not flash:
        sm = 4.0 if (autocast or c == 4) else 2.0  # autocast runs softmax in fp32
        per_score = sm + (c if sm != c else 0.0)  # softmax output + 16-bit copy for the AV matmul
        if shape.dropout:
            per_score = sm + 1.0 + c  # + mask; the dropped probabilities feed the AV matmul
        score = shape.heads * seq * per_score
    return norms + attn + mlp + drop + score


def memory_parts(
    shape: ModelShape, w: Workload, gpu: GpuSpec | None, gpu_count: int, sharding: str
) -> MemoryParts:
    stage = ZERO_STAGE[sharding] if gpu_count > 1 else 0
    trainable = trainable_params(shape, w)
    weights, grads, opt = _state_bytes(shape, w, stage, gpu_count, trainable)

    flash = flash_attention_available(gpu, w)
    b, s = w.micro_batch_size, w.seq_len
    tokens = b * s
    # The residual stream has the weights' dtype: fp32 under fp32 and under torch AMP (fp32
    # parameters); 16 bits for frozen 16-bit bases, bf16-true and sharded mixed precision.
    amp_fp32_params = w.method == "full" and w.precision in ("fp16", "bf16") and stage == 0
    resid_b = 4.0 if (w.precision == "fp32" or amp_fp32_params) else 2.0
    per_layer = tokens * layer_bytes_per_token(shape, w, flash, resid_b, s)
    if w.gradient_checkpointing:
        activations = shape.layers * tokens * shape.hidden * resid_b
    else:
        activations = shape.layers * per_layer
    # Embedding output (+ its dropout mask) and the final norm's input.
    activations += tokens * shape.hidden * (2 * resid_b + (1 if shape.dropout else 0))
    # While one block runs backward its recomputed activations (checkpointing) and the gradients
    # flowing through it are alive at once.
    temporary = per_layer * (2.0 if w.gradient_checkpointing else 1.0)
    if stage >= 3:
        # ZeRO-3/FSDP gathers one block's full 16-bit weights (and prefetches the next).
        temporary += 2 * 2.0 * shape.linear_layer_params / shape.layers
    if w.method == "qlora":
        # The largest weight matrix dequantized to 16 bits while it is used.
        temporary += 2.0 * shape.hidden * max(shape.intermediate, shape.q_dim)
        temporary += cal.QLORA_EXTRA_BYTES_PER_PARAM.value * shape.linear_layer_params

    logits = 0.0
    if shape.lm_head:
        c = 4.0 if w.precision == "fp32" else 2.0
        per_elem = c + 4.0 * cal.LOGITS_FP32_BUFFERS.value
        if c == 4.0:
            per_elem = 4.0 * (1 + cal.LOGITS_FP32_BUFFERS.value)
        logits = tokens * shape.vocab * per_elem

    allocated = weights + grads + opt + activations + logits + temporary
    frag = allocated * cal.FRAGMENTATION.value
    return MemoryParts(
        weights=weights,
        gradients=grads,
        optimizer=opt,
        activations=activations,
        logits=logits,
        temporary=temporary,
        context=cal.CUDA_CONTEXT_GB.value * GB,
        fragmentation=frag,
        trainable_params=trainable,
        flash_attention=flash,
        residual_bytes=resid_b,
    )


def baseline_states_gb(shape: ModelShape, w: Workload) -> float:
    """The common calculator: weights + gradients + Adam states only (``accelerate estimate-memory``
    style: 4x the weights' size), no activations, logits or overhead. Used by the bench."""
    bytes_per = 4.0 if w.precision == "fp32" else 2.0
    trainable = trainable_params(shape, w)
    if w.method == "full":
        return shape.params * bytes_per * 4 / GB
    base = shape.params * (0.5 if w.method == "qlora" else bytes_per)
    return (base + trainable * bytes_per * 3) / GB
