"""Memory per GPU: bytes per parameter, sharding, Korthikanti activations, logits, overhead."""

from __future__ import annotations

import pytest

from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.memory import (
    GB,
    adafactor_state_bytes,
    fused_attention_available,
    layer_bytes_per_token,
    memory_parts,
)
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import ModelDims, Workload


def _w(**kw: object) -> Workload:
    base: dict[str, object] = {"model": "llama-2-7b", "micro_batch_size": 1, "seq_len": 512,
                              "gradient_checkpointing": False}
    base.update(kw)
    return Workload.model_validate(base)


def _states_gb(w: Workload, n: int = 1, sharding: str = "ddp") -> float:
    mem = memory_parts(resolve_model(w.model), w, gpu_spec("A100-80GB"), n, sharding)
    return (mem.weights + mem.gradients + mem.optimizer) / GB


@pytest.mark.parametrize(
    ("sharding", "expected_gb"),
    # ZeRO paper (Rajbhandari et al. 2019) Figure 1: 7.5B model, 64 GPUs, mixed-precision Adam,
    # model states only: baseline 120 GB; P_os 31.4; P_os+g 16.6; P_os+g+p 1.9.
    [("zero1", 31.4), ("zero2", 16.6), ("zero3", 1.9)],
)
def test_zero_paper_model_states(sharding: str, expected_gb: float) -> None:
    w = _w(model=ModelDims(params_b=7.5), precision="fp16")
    assert _states_gb(w, 64, sharding) == pytest.approx(expected_gb, rel=0.02)


def test_mixed_precision_sharded_is_16_bytes_per_param() -> None:
    w = _w(model=ModelDims(params_b=7.5), precision="bf16")
    # Unsharded equivalent: 2 (weights) + 2 (grads) + 12 (fp32 master + m + v) bytes per parameter.
    zero3_one_gpu_share = _states_gb(w, 8, "zero3") * 8
    assert zero3_one_gpu_share == pytest.approx(7.5 * 16, rel=1e-6)


def test_single_gpu_amp_and_pure_bf16_bytes() -> None:
    shape = resolve_model("llama-2-7b")
    n = shape.params
    amp = memory_parts(shape, _w(precision="bf16"), None, 1, "ddp")
    # torch AMP: fp32 weights + fp32 grads + two fp32 Adam states, plus 16-bit casts of matmul weights.
    assert amp.weights == 4 * n + 2 * shape.matmul_params
    assert amp.gradients == 4 * n and amp.optimizer == 8 * n
    pure = memory_parts(shape, _w(precision="bf16-true"), None, 1, "ddp")
    assert (pure.weights, pure.gradients, pure.optimizer) == (2 * n, 2 * n, 4 * n)
    adam8 = memory_parts(shape, _w(precision="bf16-true", optimizer="adamw_8bit"), None, 1, "ddp")
    assert adam8.optimizer == 2 * n


def test_lora_and_qlora_weights() -> None:
    shape = resolve_model("llama-2-7b")
    lora = memory_parts(shape, _w(method="lora"), None, 1, "ddp")
    qlora = memory_parts(shape, _w(method="qlora"), None, 1, "ddp")
    # Frozen bf16 base (13.48 GB) + fp32 adapters.
    assert lora.weights == shape.params * 2 + lora.trainable_params * 4
    assert shape.params * 2 / GB == pytest.approx(13.48, abs=0.01)
    # NF4: 0.5 B/param + 0.127 bit/param of double-quantized constants on the block linears;
    # embeddings, LM head and norms stay in 16 bits.
    quant = shape.linear_layer_params
    expected = quant * (0.5 + 0.127 / 8) + (shape.params - quant) * 2
    litgpt = memory_parts(shape, _w(method="qlora", stack="litgpt"), None, 1, "ddp")
    assert litgpt.weights - lora.trainable_params * 4 == pytest.approx(expected, rel=1e-3)
    assert 3.5 < litgpt.weights / GB < 4.2
    # transformers + PEFT: prepare_model_for_kbit_training upcasts embeddings, head and norms to fp32.
    upcast = quant * (0.5 + 0.127 / 8) + (shape.params - quant) * 4
    assert qlora.weights - lora.trainable_params * 4 == pytest.approx(upcast, rel=1e-3)
    assert qlora.residual_bytes == 4.0 and litgpt.residual_bytes == 2.0
    assert lora.optimizer == 8 * lora.trainable_params


def test_korthikanti_formula_reproduced() -> None:
    """GPT-style block (MHA, 4h MLP, dropout) in 16 bits without fused attention:
    Korthikanti et al. 2022 eq. (1): s*b*h*(34 + 5*a*s/h) bytes per layer."""
    shape = resolve_model("gpt2-medium")
    s, b = 1024, 4
    w = _w(model="gpt2-medium", precision="bf16-true", seq_len=s, micro_batch_size=b, flash_attention=False)
    per_layer = s * b * layer_bytes_per_token(shape, w, False, 2.0, s)
    h, a = shape.hidden, shape.heads
    assert per_layer == s * b * h * (34 + 5 * a * s / h)
    fused = s * b * layer_bytes_per_token(shape, w, True, 2.0, s)
    assert fused == s * b * h * 34


def test_fused_attention_by_kernel_rules() -> None:
    shape = resolve_model("bert-base")  # head size 64
    w = _w(model="bert-base", seq_len=512, micro_batch_size=16, precision="fp16")
    assert memory_parts(shape, w, gpu_spec("A100"), 1, "ddp").flash_attention
    # Memory-efficient SDPA runs on Volta/Turing for fp16/fp32 and head sizes divisible by 8 ...
    assert memory_parts(shape, w, gpu_spec("V100"), 1, "ddp").flash_attention
    assert memory_parts(shape, w, gpu_spec("T4"), 1, "ddp").flash_attention
    # ... but has no bf16 path there, and needs the head size to be a multiple of 8.
    assert not memory_parts(shape, w.model_copy(update={"precision": "bf16"}), gpu_spec("V100"), 1, "ddp").flash_attention
    assert fused_attention_available(gpu_spec("V100"), w, 60) is False
    assert fused_attention_available(gpu_spec("A100"), w, 60) is True
    assert not memory_parts(shape, w.model_copy(update={"flash_attention": False}), gpu_spec("A100"), 1, "ddp").flash_attention
    assert not fused_attention_available(gpu_spec("P100"), w, 64)


def test_checkpointing_keeps_block_inputs() -> None:
    shape = resolve_model("llama-2-7b")
    w = _w(method="lora", seq_len=2048, micro_batch_size=2, gradient_checkpointing=True)
    mem = memory_parts(shape, w, None, 1, "ddp")
    tokens = 2 * 2048
    block_inputs = shape.layers * tokens * shape.hidden * 2
    assert mem.activations == pytest.approx(block_inputs + tokens * shape.hidden * 4, rel=1e-9)


def test_logits_grow_with_vocab() -> None:
    w8 = _w(model="llama-3-8b", method="lora", seq_len=2048, micro_batch_size=4)
    mem = memory_parts(resolve_model("llama-3-8b"), w8, None, 1, "ddp")
    # 4 x 2048 tokens x 128,256 vocab: bf16 logits + three fp32 buffers (upcast, shifted copy,
    # log-probabilities; issue 18: Unsloth's HF+FA2 context table) = 14 bytes per element.
    assert mem.logits_bytes == 4 * 2048 * 128256 * 14
    assert mem.logits_bytes / GB > 10  # the 128k vocabulary alone needs more than 10 GB here
    assert mem.peak_phase == "loss" and mem.logits == mem.logits_bytes
    enc = memory_parts(resolve_model("bert-base"), _w(model="bert-base"), None, 1, "ddp")
    assert enc.logits == 0  # encoders are fine-tuned with task heads


def test_overhead_is_context_plus_fragmentation() -> None:
    mem = memory_parts(resolve_model("gpt2"), _w(model="gpt2"), None, 1, "ddp")
    assert mem.context == pytest.approx(0.5 * GB)
    assert mem.fragmentation == pytest.approx(0.05 * mem.allocated_peak)
    assert mem.total == pytest.approx(mem.allocated_peak + mem.overhead)


def test_peak_is_the_largest_phase_not_the_sum() -> None:
    shape = resolve_model("llama-3-8b")
    w = _w(model="llama-3-8b", method="lora", seq_len=2048, micro_batch_size=2, gradient_checkpointing=True)
    mem = memory_parts(shape, w, None, 1, "ddp")
    phases = dict(mem.phases)
    states = mem.weights + mem.gradients + mem.optimizer
    # The logits' peak (start of backward) and the recomputed block (later) are not alive together.
    assert phases["loss"] - states == pytest.approx(mem.saved_activations + mem.logits_bytes)
    assert mem.allocated_peak == max(phases.values())
    assert mem.allocated_peak < states + mem.saved_activations + mem.logits_bytes + (phases["backward"] - states)
    # Full fine-tuning of a small model peaks at the optimizer step: foreach AdamW's sqrt(v) buffer.
    small = memory_parts(resolve_model("gpt2"), _w(model="gpt2", precision="fp32", micro_batch_size=1, seq_len=64), None, 1, "ddp")
    assert small.peak_phase == "optimizer"
    assert small.temporary == pytest.approx(4 * small.trainable_params)


def test_stacks_change_the_loss_buffers() -> None:
    shape = resolve_model("llama-3-8b")
    w = _w(model="llama-3-8b", method="lora", seq_len=2048, micro_batch_size=2)
    per_elem = {st: memory_parts(shape, w.model_copy(update={"stack": st}), None, 1, "ddp").logits_bytes
                / (2 * 2048 * shape.vocab) for st in ("hf", "compiled", "fused", "litgpt")}
    # hf: bf16 logits + fp32 upcast + fp32 log-probabilities; compiled fuses one; litgpt keeps
    # 16-bit chunks; fused linear cross-entropy never holds them.
    assert per_elem == {"hf": 14.0, "compiled": 6.0, "fused": 0.0, "litgpt": 6.0}


def test_qlora_shards_4bit_weights_under_zero3() -> None:
    """Issue 18: FSDP/ZeRO-3 shard QLoRA's 4-bit weights (bnb_4bit_quant_storage), TRL skips the
    fp32 upcast for sharded QLoRA, and the gathers are of 4-bit blocks, not 16-bit ones."""
    shape = resolve_model("llama-2-7b")
    one = memory_parts(shape, _w(method="qlora"), None, 1, "ddp")
    eight = memory_parts(shape, _w(method="qlora"), None, 8, "zero3")
    nf4 = 0.5 + (8 / 64 + 32 / (64 * 256)) / 8
    quant = shape.linear_layer_params * nf4
    rest = shape.params - shape.linear_layer_params
    trainable = one.trainable_params
    # Quantized weights and the 16-bit (not fp32-upcast) rest, divided by 8, plus the fp32 adapters.
    assert eight.weights == pytest.approx((quant + rest * 2.0) / 8 + trainable * 4.0 / 8, rel=1e-6)
    assert one.weights == pytest.approx(quant + rest * 4.0 + trainable * 4.0, rel=1e-6)
    assert eight.residual_bytes == 2.0 and one.residual_bytes == 4.0
    # The backward gathers two 4-bit blocks and the 16-bit root unit, and dequantizes one block.
    block = shape.linear_layer_params / shape.layers
    gathered = 2 * nf4 * block * (1 - 1 / 8) + rest * 2.0 * (1 - 1 / 8) + 2.0 * block
    back = dict(eight.phases)["backward"] - (eight.weights + eight.gradients + eight.optimizer)
    assert back - eight.saved_activations == pytest.approx(gathered + eight.layer_bytes, rel=1e-6)


def test_qlora_per_gpu_memory_falls_with_gpus_and_offload_moves_it_to_the_host() -> None:
    shape = resolve_model("llama-2-7b")
    totals = [memory_parts(shape, _w(method="qlora"), None, n, "fsdp").total for n in (2, 4, 8)]
    assert totals[0] > totals[1] > totals[2]
    off = memory_parts(shape, _w(method="qlora", offload="optimizer+params"), None, 2, "fsdp")
    assert off.weights == 0.0
    nf4 = 0.5 + (8 / 64 + 32 / (64 * 256)) / 8
    assert off.host_offload >= shape.linear_layer_params * nf4 / 2


def test_qlora_saves_the_4bit_matmul_inputs() -> None:
    shape = resolve_model("llama-2-7b")
    lora = memory_parts(shape, _w(method="lora", seq_len=2048), None, 1, "ddp")
    qlora = memory_parts(shape, _w(method="qlora", seq_len=2048, stack="litgpt"), None, 1, "ddp")
    litlora = memory_parts(shape, _w(method="lora", seq_len=2048, stack="litgpt"), None, 1, "ddp")
    # Frozen 16-bit MLP linears keep no inputs; bitsandbytes' MatMul4Bit keeps them (h + i per token).
    extra = (shape.hidden + shape.intermediate) * 2 * 2048 * shape.layers
    assert qlora.saved_activations - litlora.saved_activations == pytest.approx(extra, rel=1e-9)
    assert lora.saved_activations == litlora.saved_activations


def test_offload_moves_optimizer_to_host() -> None:
    shape = resolve_model("llama-2-7b")
    w = _w(method="full", precision="bf16", gradient_checkpointing=True)
    base = memory_parts(shape, w, None, 8, "zero2")
    off = memory_parts(shape, w.model_copy(update={"offload": "optimizer"}), None, 8, "zero2")
    # fp32 master + m + v (12 B) and the fp32 gradient partition (4 B) per parameter, per GPU's share.
    assert off.host_offload == pytest.approx(shape.params * 16 / 8)
    assert off.optimizer == 0 and off.weights == base.weights
    assert off.total < base.total - 0.9 * base.optimizer
    params = memory_parts(shape, w.model_copy(update={"offload": "optimizer+params"}), None, 8, "zero3")
    assert params.weights == 0 and params.stage == 3
    assert params.host_offload == pytest.approx(shape.params * 18 / 8)


def test_adafactor_keeps_factored_second_moments() -> None:
    shape = resolve_model("llama-2-7b")
    ada = memory_parts(shape, _w(optimizer="adafactor", precision="bf16-true"), None, 1, "ddp")
    adam = memory_parts(shape, _w(precision="bf16-true"), None, 1, "ddp")
    assert ada.optimizer == adafactor_state_bytes(shape)
    assert ada.optimizer < 0.02 * adam.optimizer  # rows + columns instead of two full moments


def test_resnet50_fits_as_nvidia_runs_it() -> None:
    """DeepLearningExamples configs.yml: batch 256 AMP and 112 FP32 on a 16 GB V100."""
    shape = resolve_model("resnet50")
    amp = _w(model="resnet50", precision="fp16", optimizer="sgd", micro_batch_size=256)
    fp32 = _w(model="resnet50", precision="fp32", optimizer="sgd", micro_batch_size=112)
    v100 = gpu_spec("V100")
    assert memory_parts(shape, amp, v100, 1, "ddp").total / GB < 16
    assert memory_parts(shape, fp32, v100, 1, "ddp").total / GB < 16
    # ... and batch 512 AMP does not fit there.
    assert memory_parts(shape, amp.model_copy(update={"micro_batch_size": 512}), v100, 1, "ddp").total / GB > 16
