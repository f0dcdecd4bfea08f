"""Model states per GPU: weights, gradients and optimizer states by method, precision, optimizer,
ZeRO stage and offload (the table in ``optimizer.estimator.memory``'s docstring)."""

from __future__ import annotations

from optimizer.estimator import calibration as cal
from optimizer.estimator.shapes import ModelShape, lora_trainable_params
from optimizer.estimator.workload import Workload

_STATE_BYTES = {"adamw": 8.0, "sgd": 4.0}


def trainable_params(shape: ModelShape, workload: Workload) -> int:
    if workload.method == "full":
        return shape.params
    return lora_trainable_params(shape, workload.lora_rank, workload.lora_targets)


def sharded_qlora(w: Workload, stage: int, n: int) -> bool:
    """QLoRA under FSDP / ZeRO-3 (or parameter offload): the 4-bit weights are stored in a 16-bit
    container (bitsandbytes ``bnb_4bit_quant_storage``), so FSDP/ZeRO-3 shard and offload them like
    any floating-point parameter (bitsandbytes docs ``fsdp_qlora.md``; Answer.AI FSDP-QLoRA, 2024-03)."""
    return w.method == "qlora" and ((stage >= 3 and n > 1) or w.offload == "optimizer+params")


def kbit_upcast(w: Workload, stage: int = 0, n: int = 1) -> bool:
    """PEFT's ``prepare_model_for_kbit_training`` runs (transformers stacks): non-quantized
    weights, the residual stream and the logits become fp32. Not for sharded QLoRA: TRL skips it
    when the 4-bit weights sit on cpu/meta for FSDP or ZeRO-3 (trl ``_prepare_peft_model``,
    ``is_sharded_qlora``: "one should never call prepare_model_for_kbit_training when doing QLoRA +
    FSDP / DS-Zero3"). Not for GPTQ either: PEFT skips the upcast when the model's
    ``quantization_method`` is ``gptq`` (peft/utils/other.py ``prepare_model_for_kbit_training``)."""
    if w.quantization == "gptq":
        return False
    return w.method == "qlora" and w.stack in ("hf", "compiled") and not sharded_qlora(w, stage, n)


def adafactor_state_bytes(shape: ModelShape) -> float:
    """fp32 row and column second moments per block matrix; full second moments for vectors."""
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    mats = [(h, q), (h, kv), (h, kv), (q, h)] + ([(h, i)] * (3 if shape.gated_mlp else 2))
    per_block = sum(4.0 * (a + b) for a, b in mats)
    vectors = shape.params - shape.linear_layer_params - shape.embedding_params
    embed = 4.0 * (shape.vocab + shape.hidden) if shape.embedding_params else 0.0
    return shape.layers * per_block + 4.0 * max(vectors, 0) + embed


def _optimizer_state_bytes(shape: ModelShape, w: Workload, trainable: int) -> float:
    if w.optimizer == "adamw_8bit":
        return trainable * cal.ADAM8BIT_BYTES_PER_PARAM.value
    if w.optimizer == "adafactor":
        if w.method == "full":
            return adafactor_state_bytes(shape)
        return 4.0 * trainable * 0.5  # LoRA factors are thin: rank-wide row/column moments ~ half
    b = _STATE_BYTES[w.optimizer] * trainable
    if w.precision == "bf16-true":
        b /= 2  # states are created in the parameters' dtype
    return b


def effective_stage(w: Workload, stage: int) -> int:
    """Offload runs under DeepSpeed: ZeRO-Offload is stage 2, parameter offload needs stage 3."""
    if w.offload == "optimizer+params":
        return 3
    if w.offload == "optimizer":
        return max(stage, 2)
    return stage


def state_bytes(
    shape: ModelShape, w: Workload, stage: int, n: int, trainable: int
) -> tuple[float, float, float, float]:
    """Weights, gradients, optimizer bytes per GPU, and the bytes offloaded to host RAM."""
    N = shape.params
    p = w.precision
    master = 0.0
    if w.method == "full":
        if p in ("fp32", "tf32"):
            wb, gb = 4.0, 4.0
        elif p == "bf16-true":
            wb, gb = 2.0, 2.0
        elif stage == 0:
            # torch AMP: fp32 parameters (they are the master copy) and fp32 gradients, plus the
            # 16-bit casts autocast keeps for backward.
            wb, gb = 4.0, 4.0
        else:
            wb, gb, master = 2.0, 2.0, 4.0
        weights = N * wb
        if p in ("fp16", "bf16") and stage == 0:
            weights += shape.matmul_params * 2.0
        grads = N * gb
        opt = _optimizer_state_bytes(shape, w, trainable) + N * master
        quantized = 0.0
    else:
        base_b = 4.0 if p in ("fp32", "tf32") else 2.0
        quantized = 0.0
        if w.method == "qlora":
            quant = shape.linear_layer_params
            per = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            quantized = quant * per
            weights = (N - quant) * (4.0 if kbit_upcast(w, stage, n) else base_b)
        else:
            weights = N * base_b
        ad_b = 2.0 if p == "bf16-true" else 4.0
        weights += trainable * ad_b
        grads = trainable * ad_b
        opt = _optimizer_state_bytes(shape, w, trainable)
    offloaded = 0.0
    if w.offload != "none":
        # The fp32 master copy, the states and the fp32 gradient partition live on the host;
        # the GPU keeps only reduce buckets of 16-bit gradients.
        offloaded = opt + trainable * 4.0
        opt = 0.0
        grads = min(grads, cal.OFFLOAD_BUCKET_PARAMS.value * 2.0)
    if w.offload == "optimizer+params":
        offloaded += weights + quantized
        weights = quantized = 0.0
    if n > 1:
        if stage >= 1:
            opt /= n
            offloaded /= n
        if stage >= 2:
            grads /= n
        if stage >= 3:
            weights /= n
            # 4-bit weights in a 16-bit quant_storage container shard like the others.
            quantized /= n
    return weights + quantized, grads, opt, offloaded
